"""`lab capacity`: how many workers for a request rate at a TTFT p95 bound, per profile.

For a fleet of `w` workers the calibrated lab runs the profile at `w x m` sessions for each `m`
in `sessions_per_worker`, and the fleet's capacity is the best requests/s among the levels whose
TTFT p95 stays within the bound. A first fleet (the calibration's) gives a per-worker rate; the
search then tries the fleet that rate says is enough and moves one worker at a time until the
smallest fleet that makes it is found (capacity grows with workers). Each fleet tried is a lab
run: minutes, not seconds.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from components.routing import RoutingProfile
from lab.planner.calibration import Calibration
from lab.planner.prediction import level_metrics
from lab.sweep import LabSweep, Runner


class CapacityError(ValueError):
    """A target the search cannot reach within its limits."""


class FleetResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    workers: int
    levels: dict[int, tuple[float, float]]
    """Per concurrency: (requests/s, TTFT p95 ms)."""
    capacity: float
    """The best requests/s within the TTFT bound (0 when no level meets it)."""


class CapacityPlan(BaseModel):
    model_config = ConfigDict(frozen=True)

    profile: RoutingProfile
    target_rps: float
    max_ttft_p95_ms: float
    workers: int | None
    """The smallest fleet that makes it, None when none up to the limit does."""
    tried: tuple[FleetResult, ...]


def fleet_capacity(
    calibration: Calibration,
    profile: RoutingProfile,
    base: LabSweep,
    workers: int,
    sessions_per_worker: tuple[int, ...],
    max_ttft_p95_ms: float,
    run: Runner,
    slowdown: float,
) -> FleetResult:
    levels = tuple(workers * m for m in sessions_per_worker)
    sweep = base.model_copy(update={"workers": workers, "concurrencies": levels})
    results = run(profile, calibration.knobs, sweep, slowdown)
    seen = {}
    for concurrency, level in zip(levels, results, strict=True):
        metrics = level_metrics(calibration, sweep, profile, level)
        seen[concurrency] = (metrics.requests_per_second, level.ttft_p95_ms)
    within = [rps for rps, ttft in seen.values() if ttft <= max_ttft_p95_ms]
    return FleetResult(workers=workers, levels=seen, capacity=max(within, default=0.0))


def plan_capacity(
    calibration: Calibration,
    profile: RoutingProfile,
    base: LabSweep,
    target_rps: float,
    max_ttft_p95_ms: float,
    sessions_per_worker: tuple[int, ...],
    max_workers: int,
    run: Runner,
    slowdown: float,
    say: Callable[[str], None] = print,
) -> CapacityPlan:
    tried: dict[int, FleetResult] = {}

    def capacity(workers: int) -> float:
        if workers not in tried:
            result = fleet_capacity(
                calibration,
                profile,
                base,
                workers,
                sessions_per_worker,
                max_ttft_p95_ms,
                run,
                slowdown,
            )
            tried[workers] = result
            say(
                f"{profile.value}: {workers} workers serve {result.capacity:.2f} req/s within "
                f"TTFT p95 {max_ttft_p95_ms:g} ms"
            )
        return tried[workers].capacity

    first = min(calibration.workers, max_workers)
    per_worker = capacity(first) / first
    if per_worker == 0:
        raise CapacityError(
            f"{first} workers meet TTFT p95 <= {max_ttft_p95_ms:g} ms at none of "
            f"{sessions_per_worker} sessions per worker: raise the bound or lower the sessions"
        )
    workers = max(1, min(max_workers, math.ceil(target_rps / per_worker)))
    while capacity(workers) < target_rps and workers < max_workers:
        workers += 1
    found = capacity(workers) >= target_rps
    while found and workers > 1 and capacity(workers - 1) >= target_rps:
        workers -= 1
    return CapacityPlan(
        profile=profile,
        target_rps=target_rps,
        max_ttft_p95_ms=max_ttft_p95_ms,
        workers=workers if found else None,
        tried=tuple(tried[w] for w in sorted(tried)),
    )
