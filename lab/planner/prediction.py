"""`lab predict`: the recipe's table as the calibrated lab predicts it, beside a measured one.

Both profiles run the sweep on a lab graph tuned by a calibration (`lab.sweep`). A level's
requests/s is predicted by Little's law, concurrency over mean request latency: the steady state
of `c` sessions that always have a question in flight, which the recipe's 200 videos per level
approach and the lab's few waves of videos do not (their ramp and tail would bias the lab's own
requests/s low). Output tokens/s follow from it. TTFT and latency percentiles are the lab's.

Round robin's mean latency is corrected first for the lab's lockstep, which gives it more cache
hits than a real cluster's scatter (`lab.planner.service_times.scattered_latency_ms`; docs/lab-prediction.md,
effect 1): each extra hit is charged the calibration's cold extra.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from components.routing import RoutingProfile
from lab.planner.calibration import Calibration
from lab.planner.measured_table import AFF, METRICS, RR, LevelMetrics, MeasuredRow, MeasuredTable
from lab.planner.service_times import mean_latency_ms, scatter_cache_hits, scattered_latency_ms
from lab.sweep import LabSweep, Runner
from stages.core.results import LevelResult
from stages.core.typed_files import read_model


class PredictedRow(MeasuredRow):
    """A predicted level, with what the lab saw that explains it."""

    round_robin_cache_hits: float
    """Share of round robin's prompt tokens the lab's engines found cached."""
    scatter_cache_hits: float
    """Share of requests that find their video cached when they scatter over the workers at
    random, as on a real cluster."""
    round_robin_scatter_correction: float
    """How much the correction for the lab's lockstep changed round robin's requests/s."""
    lab: dict[str, LevelResult]
    """Each profile's level as measured (already in the deployment's time)."""


class Prediction(BaseModel):
    model_config = ConfigDict(frozen=True)

    created_at: datetime
    calibration_source: str
    sweep: LabSweep
    slowdown: float = Field(gt=0)
    rows: tuple[PredictedRow, ...]
    reused_concurrency: int | None = None
    """The level taken from the calibration's last check instead of being run again."""

    @classmethod
    def load(cls, path: Path) -> Prediction:
        return read_model(cls, path, "lab prediction", "run `lab predict` first")

    def reassembled(self, calibration: Calibration) -> Prediction:
        """The prediction derived again from the lab's levels it keeps (after a change to the
        model or the report); runs nothing."""
        results = {
            p: [LevelResult.model_validate(row.lab[p.value]) for row in self.rows]
            for p in (RR, AFF)
        }
        return assemble(calibration, self.sweep, self.slowdown, results, self.reused_concurrency)

    def table(self) -> MeasuredTable:
        return MeasuredTable(
            source=f"the lab, calibrated on {self.calibration_source}",
            workers=self.sweep.workers,
            questions=self.sweep.questions,
            output_tokens=self.sweep.output_tokens,
            rows=self.rows,
        )


def predict(
    calibration: Calibration,
    sweep: LabSweep,
    run: Runner,
    slowdown: float,
    say: Callable[[str], None] = print,
) -> Prediction:
    """Run the sweep for both profiles, except a level the calibration's last check already ran
    the same way (`Calibration.checked_levels`), and assemble the prediction."""
    checked = calibration.checked_levels(sweep, slowdown)
    reused = checked[RR].concurrency if checked else None
    if reused is not None:
        say(f"concurrency {reused}: the calibration's last check ran this very level; not again")
    rest = sweep.without(reused) if reused is not None else sweep
    results = {}
    for profile in (RR, AFF):
        ran = iter(run(profile, calibration.knobs, rest, slowdown) if rest else [])
        results[profile] = [
            checked[profile] if checked and c == reused else next(ran) for c in sweep.concurrencies
        ]
    return assemble(calibration, sweep, slowdown, results, reused)


def assemble(
    calibration: Calibration,
    sweep: LabSweep,
    slowdown: float,
    results: dict[RoutingProfile, list[LevelResult]],
    reused_concurrency: int | None = None,
) -> Prediction:
    """The prediction from the lab's levels of both profiles (already in the deployment's time)."""
    rows = [
        _row(calibration, sweep, {profile: results[profile][index] for profile in (RR, AFF)})
        for index in range(len(sweep.concurrencies))
    ]
    return Prediction(
        created_at=datetime.now(UTC),
        calibration_source=calibration.source,
        sweep=sweep,
        slowdown=slowdown,
        rows=tuple(rows),
        reused_concurrency=reused_concurrency,
    )


def _row(
    calibration: Calibration, sweep: LabSweep, levels: dict[RoutingProfile, LevelResult]
) -> PredictedRow:
    rr = levels[RR]
    metrics = {
        profile: level_metrics(calibration, sweep, profile, levels[profile]) for profile in levels
    }
    lab_rps = rr.concurrency * 1000 / mean_latency_ms(rr)
    return PredictedRow(
        concurrency=rr.concurrency,
        round_robin=metrics[RR],
        session_affinity=metrics[AFF],
        round_robin_cache_hits=rr.cache_hit_ratio,
        scatter_cache_hits=scatter_cache_hits(sweep.workers, sweep.questions, rr.concurrency),
        round_robin_scatter_correction=metrics[RR].requests_per_second / lab_rps - 1,
        lab={profile.value: level for profile, level in levels.items()},
    )


def level_metrics(
    calibration: Calibration, sweep: LabSweep, profile: RoutingProfile, level: LevelResult
) -> LevelMetrics:
    """One profile's predicted metrics from its lab level (round robin's corrected for lockstep)."""
    mean = mean_latency_ms(level)
    if profile is RR:
        cold_extra = calibration.targets.cold_extra_ms
        mean = scattered_latency_ms(level, sweep.workers, sweep.questions, cold_extra)
    rps = level.concurrency * 1000 / mean
    return LevelMetrics(
        requests_per_second=rps,
        ttft_p50_ms=level.ttft_p50_ms,
        ttft_p95_ms=level.ttft_p95_ms,
        request_latency_p50_ms=level.request_latency_p50_ms,
        output_tokens_per_second=rps * sweep.output_tokens,
    )


class CellDeviation(BaseModel):
    """How far one cell's prediction is from its measurement: predicted, measured, and the error
    (relative; points for the gain). Not an exception."""

    model_config = ConfigDict(frozen=True)

    concurrency: int
    column: str
    predicted: float
    measured: float
    error: float


def cell_deviations(predicted: MeasuredTable, measured: MeasuredTable) -> list[CellDeviation]:
    """Every cell both tables have, level by level, in the recipe's column order."""
    cells = []
    for row in predicted.rows:
        if row.concurrency not in measured.concurrencies:
            continue
        truth = measured.row(row.concurrency)
        for profile, metric in ((p, m) for p in (RR, AFF) for m in METRICS):
            value, actual = getattr(row.of(profile), metric), getattr(truth.of(profile), metric)
            if value is not None and actual is not None:
                column = f"{profile.value} {metric}"
                cells.append(_deviation(row.concurrency, column, value, actual, value / actual - 1))
        gain_error = row.gain - truth.gain
        cells.append(_deviation(row.concurrency, "gain", row.gain, truth.gain, gain_error))
    return cells


def _deviation(
    concurrency: int, column: str, predicted: float, measured: float, error: float
) -> CellDeviation:
    return CellDeviation(
        concurrency=concurrency, column=column, predicted=predicted, measured=measured, error=error
    )
