"""The real runner (`lab.sweep.LabRunner`): a lab graph with the calibrated knobs, the perf stage
per level, and the results back in the deployment's time; the pre-engine delay really delays; and
`lab calibrate --results` on the results.json files a real perf stage wrote."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.routing import RoutingProfile
from lab.__main__ import main
from lab.mocker_timing import EngineSpeed
from lab.planner.calibration import Calibration
from lab.planner.measured_table import MeasuredTable
from lab.planner.service_times import ServiceTimes
from lab.sweep import LabKnobs, LabRunner, LabSweep

pytestmark = pytest.mark.lab

SWEEP = LabSweep(workers=2, questions=3, output_tokens=8, concurrencies=(1,), waves=1)
SLOWDOWN = 3.0
"""How much slower than the deployment the calibration test's lab runs (see that test)."""


def knobs(delay_ms: float) -> LabKnobs:
    return LabKnobs(
        speed=EngineSpeed(speedup=1.0, decode_speedup=1.0),
        prefix_tokens=200,
        pre_engine_delay_ms=delay_ms,
    )


def test_the_delay_reaches_the_first_token_in_the_deployments_time(tmp_path: Path) -> None:
    runner = LabRunner(tmp_path, say=lambda _: None)
    profile = RoutingProfile.SESSION_AFFINITY

    plain = runner(profile, knobs(0.0), SWEEP, 2.0)[0]
    delayed = runner(profile, knobs(150.0), SWEEP, 2.0)[0]

    assert plain.request_count == delayed.request_count == 2 * 3
    # Run 2x slower, the proxy held each request 300 ms on the wall clock: 150 ms rescaled.
    assert delayed.ttft_p50_ms - plain.ttft_p50_ms == pytest.approx(150, abs=40)
    assert plain.request_latency_mean_ms is not None
    assert plain.request_latency_mean_ms < 1000  # 8 tokens at ~6 ms each, rescaled
    assert (tmp_path / "02-session-affinity" / "graph" / "logs" / "pass-through.log").exists()


def test_the_results_a_real_perf_stage_wrote_calibrate_the_lab(tmp_path: Path) -> None:
    # The "cluster" is the lab with knobs the calibration is not told; its perf stage writes each
    # profile's results.json as it would on a cluster. One check: at this size (8 requests per
    # profile, on two busy cores) the lab's noise is too large to show convergence. A video of 24k
    # tokens: a cold prefill of 495 ms in the engine's time against a warm one's 17 ms puts round
    # robin's mean latency (4 cold requests of 8) about 120 ms above affinity's (2 of 8). The
    # "cluster" and the check both run 3x slower and rescale, so that a busy host's delays shrink
    # 3x against that gap: CI saw the check reverse the two twice at 1x (2026-12-07; 387 against
    # 409 ms, then 597 against 739), and `lab calibrate` refuse it, as it should.
    truth = LabKnobs(
        speed=EngineSpeed(speedup=1.0, decode_speedup=1.5),
        prefix_tokens=24_000,
        pre_engine_delay_ms=30.0,
    )
    sweep = LabSweep(workers=2, questions=4, output_tokens=16, concurrencies=(1,))
    cluster = LabRunner(tmp_path / "cluster", say=lambda _: None)
    for profile in RoutingProfile:
        cluster(profile, truth, sweep, SLOWDOWN)
    results = [
        tmp_path / "cluster" / f"0{n}-{p.value}" / "c1" / "results.json"
        for n, p in enumerate(RoutingProfile, start=1)
    ]

    argv = [
        "calibrate",
        "--out",
        str(tmp_path / "lab"),
        "--results",
        *map(str, results),
        "--slowdown",
        str(SLOWDOWN),
        "--max-runs",
        "1",
    ]
    assert main(argv) == 0

    calibration = Calibration.load(tmp_path / "lab" / "calibration.json")
    row = MeasuredTable.from_results(*results).row(1)
    assert calibration.reference == row
    assert calibration.targets == ServiceTimes.of_row(row, workers=2, questions=4, output_tokens=16)
    (check,) = calibration.checks
    for level in (check.round_robin, check.session_affinity):
        assert (level.request_count, level.error_count, level.output_tokens_mean) == (8, 0, 16)
