"""Calibration and prediction against a stand-in lab (`fake_lab.FakeLab`): the algebra, the
correction loop, and that only the reference row is read."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.routing import RoutingProfile
from lab.mocker_timing import prefill_ms
from lab.planner.calibration import Calibration, CalibrationError, calibrate, first_knobs
from lab.planner.measured_table import RECIPE_TABLE, LevelMetrics, MeasuredRow, MeasuredTable
from lab.planner.prediction import cell_deviations, predict
from lab.planner.prediction_report import render
from lab.planner.service_times import ModelMismatch, ServiceTimes
from lab.sweep import LabKnobs, LabSweep
from stages.core.results import LevelResult
from stages.core.typed_files import write_model
from tests.lab.planner.fake_lab import FakeLab

RR, AFF = RoutingProfile.ROUND_ROBIN, RoutingProfile.SESSION_AFFINITY


def latencies(
    warm: float, cold: float, workers: int = 8, questions: int = 20
) -> dict[RoutingProfile, float]:
    spread = min(workers, questions)
    return {
        RR: (spread * cold + (questions - spread) * warm) / questions,
        AFF: (cold + (questions - 1) * warm) / questions,
    }


def test_warm_and_cold_come_back_from_the_two_mean_latencies() -> None:
    times = ServiceTimes.solve(latencies(365.0, 762.0), 58.0, 8, 20, 128)

    assert times.warm_ms == pytest.approx(365.0)
    assert times.cold_ms == pytest.approx(762.0)
    assert times.itl_ms == pytest.approx((365.0 - 58.0) / 127)


def test_the_recipe_row_gives_the_times_its_requests_per_second_imply() -> None:
    times = ServiceTimes.of_row(RECIPE_TABLE.row(1), 8, 20, 128)
    again = latencies(times.warm_ms, times.cold_ms)

    assert 1000 / again[RR] == pytest.approx(1.91)
    assert 1000 / again[AFF] == pytest.approx(2.60)
    assert times.warm_ttft_ms == 58


def test_a_row_where_round_robin_wins_is_refused_with_the_reason() -> None:
    with pytest.raises(ModelMismatch, match="TTFT < warm < cold"):
        ServiceTimes.solve({RR: 300.0, AFF: 400.0}, 58.0, 8, 20, 128)


def test_a_published_row_where_round_robin_wins_is_refused_asking_about_the_row() -> None:
    row = RECIPE_TABLE.row(1)
    swapped = MeasuredRow(
        concurrency=1, round_robin=row.session_affinity, session_affinity=row.round_robin
    )

    with pytest.raises(ModelMismatch, match="slower than session affinity in this row"):
        ServiceTimes.of_row(swapped, 8, 20, 128)


def test_a_check_the_host_reordered_is_refused_naming_the_check_and_the_slowdown() -> None:
    lab = FakeLab()

    def reordered(
        profile: RoutingProfile, knobs: LabKnobs, sweep: LabSweep, slowdown: float
    ) -> list[LevelResult]:
        return lab(AFF if profile is RR else RR, knobs, sweep, slowdown)

    with pytest.raises(CalibrationError) as refused:
        calibrate(RECIPE_TABLE, 1, reordered, 4, say=lambda _: None)

    message = str(refused.value)
    assert "the lab's check at --slowdown 4 does not fit" in message
    assert "TTFT < warm < cold" in message and "larger --slowdown" in message
    assert "in this row" not in message  # the row solved; it is not the row's fault


def test_first_knobs_put_the_cold_extra_into_the_prefix_and_the_rest_before_the_engine() -> None:
    targets = ServiceTimes.of_row(RECIPE_TABLE.row(1), 8, 20, 128)

    knobs = first_knobs(targets, 40, warm_engine_ms=None)

    engine_extra = (
        prefill_ms(knobs.prefix_tokens + 40) - prefill_ms(40 + 32)
    ) / knobs.speed.speedup
    assert engine_extra == pytest.approx(targets.cold_extra_ms, rel=0.01)
    assert knobs.speed.speedup == pytest.approx(1.0)
    assert knobs.pre_engine_delay_ms == pytest.approx(targets.warm_ttft_ms - prefill_ms(72))


def test_a_slower_engine_needs_a_shorter_prefix_and_less_delay() -> None:
    targets = ServiceTimes.of_row(RECIPE_TABLE.row(1), 8, 20, 128)

    fast, slow = first_knobs(targets, 40, None), first_knobs(targets, 40, warm_engine_ms=50.0)

    assert slow.speed.speedup < fast.speed.speedup
    assert slow.prefix_tokens < fast.prefix_tokens
    assert slow.pre_engine_delay_ms == pytest.approx(8.0)


def test_calibration_corrects_what_the_formulas_do_not_know(tmp_path: Path) -> None:
    lab = FakeLab(overhead_ms=9.0)

    calibration = calibrate(RECIPE_TABLE, 1, lab, slowdown=4, say=lambda _: None)

    assert calibration.converged and len(calibration.checks) >= 2
    first = calibration.checks[0].errors["warm_ttft_ms"]
    assert first > 0.1  # the overhead made the first guess miss the first token
    assert all(abs(error) <= 0.02 for error in calibration.checks[-1].errors.values())
    assert Calibration.load(write_model(calibration, tmp_path / "c.json")) == calibration
    assert {call[3] for call in lab.calls} == {4}


def test_calibration_that_cannot_converge_says_so() -> None:
    calibration = calibrate(
        RECIPE_TABLE, 1, FakeLab(), 4, tolerance=1e-9, max_runs=2, say=lambda _: None
    )

    assert not calibration.converged and len(calibration.checks) == 2


def altered(table: MeasuredTable, keep: int) -> MeasuredTable:
    """Every row but `keep` changed in every number."""

    def scaled(metrics: LevelMetrics, by: float) -> LevelMetrics:
        values = metrics.model_dump()
        return LevelMetrics.model_validate(
            {k: v * by if v is not None else None for k, v in values.items()}
        )

    rows = tuple(
        row
        if row.concurrency == keep
        else MeasuredRow(
            concurrency=row.concurrency,
            round_robin=scaled(row.round_robin, 1.7),
            session_affinity=scaled(row.session_affinity, 0.6),
        )
        for row in table.rows
    )
    return table.model_copy(update={"rows": rows})


def test_calibration_and_prediction_read_only_the_reference_row() -> None:
    sweep = LabSweep(workers=8, questions=20, output_tokens=128, concurrencies=(1, 2, 4, 8, 16))
    changed = altered(RECIPE_TABLE, keep=1)
    assert changed.row(16) != RECIPE_TABLE.row(16) and changed.row(1) == RECIPE_TABLE.row(1)

    results = []
    for table in (RECIPE_TABLE, changed):
        calibration = calibrate(table, 1, FakeLab(), 4, say=lambda _: None)
        prediction = predict(calibration, sweep, FakeLab(), 4)
        results.append((calibration.knobs, calibration.targets, prediction.rows))

    assert results[0] == results[1]


def test_a_missing_reference_level_names_the_levels_there_are() -> None:
    with pytest.raises(KeyError, match="has no concurrency 3; it has 1, 2, 4, 8, 16"):
        calibrate(RECIPE_TABLE, 3, FakeLab(), 4, say=lambda _: None)


def test_prediction_uses_littles_law_and_every_cell_is_compared() -> None:
    calibration = calibrate(RECIPE_TABLE, 1, FakeLab(), 4, say=lambda _: None)
    sweep = LabSweep(workers=8, questions=20, output_tokens=128, concurrencies=(1, 16))

    prediction = predict(calibration, sweep, FakeLab(), 4)

    c16 = prediction.rows[1]
    lab_mean = c16.lab[RR.value].request_latency_mean_ms
    assert lab_mean is not None
    assert c16.round_robin.requests_per_second == pytest.approx(16 * 1000 / lab_mean)
    cells = cell_deviations(prediction.table(), RECIPE_TABLE)
    # c=1: req/s and TTFT p50 of each profile, and the gain; c=16: all five of each, and the gain
    assert len(cells) == 5 + 11
    rr_rps = next(
        c for c in cells if c.concurrency == 1 and c.column == "round-robin requests_per_second"
    )
    assert rr_rps.error == pytest.approx(rr_rps.predicted / 1.91 - 1)


def test_round_robin_in_lockstep_is_predicted_as_if_it_scattered() -> None:
    # The lab's round robin keeps a video on fewer workers than a real cluster's scatter; each
    # cache hit a scatter would not have had is charged one video's processing.
    calibration = calibrate(RECIPE_TABLE, 1, FakeLab(), 4, say=lambda _: None)
    sweep = LabSweep(workers=8, questions=20, output_tokens=128, concurrencies=(1, 2))

    scattered = predict(calibration, sweep, FakeLab(), 4).rows[1]
    lockstep = predict(calibration, sweep, FakeLab(lockstep_cold_workers=5.0), 4).rows[1]

    assert lockstep.round_robin_cache_hits == pytest.approx(1 - 5 / 20)
    assert lockstep.round_robin_cache_hits > lockstep.scatter_cache_hits
    assert lockstep.round_robin_scatter_correction < -0.03
    assert scattered.round_robin_scatter_correction == pytest.approx(0, abs=1e-6)
    # What is left is the fake's queueing, which grows the cold extra by 4% at concurrency 2.
    assert lockstep.round_robin.requests_per_second == pytest.approx(
        scattered.round_robin.requests_per_second, rel=0.01
    )
    assert lockstep.session_affinity == scattered.session_affinity


def test_prediction_takes_the_level_the_calibration_last_checked_instead_of_running_it() -> None:
    calibration = calibrate(RECIPE_TABLE, 1, FakeLab(), 4, say=lambda _: None)
    sweep = LabSweep(workers=8, questions=20, output_tokens=128, concurrencies=(1, 2))
    lab = FakeLab()
    said: list[str] = []

    prediction = predict(calibration, sweep, lab, 4, say=said.append)

    assert [call[2].concurrencies for call in lab.calls] == [(2,), (2,)]
    last = calibration.checks[-1]
    assert prediction.rows[0].lab == {RR.value: last.round_robin, AFF.value: last.session_affinity}
    assert [row.concurrency for row in prediction.rows] == [1, 2]
    assert prediction.reused_concurrency == 1 and "not again" in said[0]
    assert "Concurrency 1 is the calibration's last check" in render(prediction, calibration, None)
    only_checked = predict(
        calibration, sweep.model_copy(update={"concurrencies": (1,)}), lab, 4, say=said.append
    )
    assert len(lab.calls) == 2 and only_checked.rows[0] == prediction.rows[0]


@pytest.mark.parametrize(
    ("change", "slowdown"),
    [({"waves": 3.0}, 4), ({"workers": 4}, 4), ({"affinity_ttl_seconds": 60}, 4), ({}, 8)],
)
def test_a_level_run_any_other_way_than_the_check_runs_again(
    change: dict[str, object], slowdown: float
) -> None:
    calibration = calibrate(RECIPE_TABLE, 1, FakeLab(), 4, say=lambda _: None)
    sweep = LabSweep(workers=8, questions=20, output_tokens=128, concurrencies=(1, 2))
    lab = FakeLab()

    prediction = predict(
        calibration, sweep.model_copy(update=change), lab, slowdown, say=lambda _: None
    )

    assert [call[2].concurrencies for call in lab.calls] == [(1, 2), (1, 2)]
    assert prediction.reused_concurrency is None


def test_a_reference_above_1_is_checked_at_that_level_and_not_run_again_by_the_prediction() -> None:
    lab = FakeLab()
    calibration = calibrate(RECIPE_TABLE, 4, lab, 4, say=lambda _: None)

    assert calibration.converged
    assert {(call[2].concurrencies, call[2].videos(4)) for call in lab.calls} == {((4,), 8)}
    sweep = LabSweep(workers=8, questions=20, output_tokens=128, concurrencies=(1, 4, 16))
    again = FakeLab()
    prediction = predict(calibration, sweep, again, 4, say=lambda _: None)
    assert prediction.reused_concurrency == 4
    assert [call[2].concurrencies for call in again.calls] == [(1, 16), (1, 16)]


def test_the_labs_lockstep_at_a_reference_above_1_does_not_move_the_knobs() -> None:
    # Round robin in lockstep (5 workers per video, not a scatter's 7.4) looks like cheaper
    # videos; the checks correct it as a prediction does, so the prefix stays a video's cost.
    scattered = calibrate(RECIPE_TABLE, 4, FakeLab(), 4, say=lambda _: None)
    lockstep = calibrate(RECIPE_TABLE, 4, FakeLab(lockstep_cold_workers=5.0), 4, say=lambda _: None)

    assert lockstep.converged and scattered.converged
    assert lockstep.knobs.prefix_tokens == pytest.approx(scattered.knobs.prefix_tokens, rel=0.03)


def test_a_calibration_file_that_is_not_one_is_refused(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text("{}")

    with pytest.raises(CalibrationError, match="is not a lab calibration"):
        Calibration.load(tmp_path / "c.json")
    with pytest.raises(CalibrationError, match="run `lab calibrate` first"):
        Calibration.load(tmp_path / "missing.json")
