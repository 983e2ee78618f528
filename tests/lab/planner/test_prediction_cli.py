"""`python -m lab calibrate | predict | capacity` with the stand-in lab in place of real graphs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from components.routing import SESSION_HEADER, RoutingProfile
from lab.__main__ import main
from lab.mocker_timing import EngineSpeed
from lab.planner import predict_cli
from lab.planner.calibration import Calibration, calibrate
from lab.planner.capacity import fleet_capacity, plan_capacity
from lab.planner.measured_table import RECIPE_TABLE
from lab.planner.prediction import Prediction
from lab.sweep import LabKnobs, LabSweep
from stages.core.results import ProfileResults
from stages.core.workload import PerfWorkload
from tests.lab.planner.fake_lab import FakeLab


@pytest.fixture
def fake_lab(monkeypatch: pytest.MonkeyPatch) -> FakeLab:
    lab = FakeLab()
    monkeypatch.setattr(predict_cli, "LabRunner", lambda *args, **kw: lab)
    return lab


def test_calibrate_then_predict_writes_the_table_against_the_recipes(
    fake_lab: FakeLab, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["calibrate", "--out", str(tmp_path)]) == 0
    assert main(["predict", "--out", str(tmp_path), "--check-slowdown", "16"]) == 0

    report = (tmp_path / "prediction.md").read_text()
    assert "## Against the recipe's measured table" in report
    assert "cells within 10%" in report
    assert "## Running 16x instead of 6x slower" in report
    assert "The factor does not change the answer beyond the lab's noise." in report
    assert {call[3] for call in fake_lab.calls} == {6, 16}
    prediction = json.loads((tmp_path / "prediction.json").read_text())
    assert [row["concurrency"] for row in prediction["rows"]] == [1, 2, 4, 8, 16]


def test_a_slowdown_check_shows_the_cells_the_labs_own_time_still_moves(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    lab = FakeLab(wall_clock_ms=200.0)  # 50 ms at 4x, 25 ms at 8x: TTFT cells move
    monkeypatch.setattr(predict_cli, "LabRunner", lambda *args, **kw: lab)

    assert main(["calibrate", "--out", str(tmp_path), "--slowdown", "4"]) == 0
    assert main(["predict", "--out", str(tmp_path), "--check-slowdown", "8"]) == 0

    report = (tmp_path / "prediction.md").read_text()
    assert "cells moved by more than 5%" in report
    assert "the slower run is the better estimate" in report


def test_a_what_if_is_not_compared_with_the_recipes_table(
    fake_lab: FakeLab, tmp_path: Path
) -> None:
    assert main(["calibrate", "--out", str(tmp_path)]) == 0
    assert main(["predict", "--out", str(tmp_path), "--workers", "16", "--concurrency", "32"]) == 0

    report = (tmp_path / "prediction.md").read_text()
    assert "## Against" not in report and "(16 workers, run 6x slower" in report
    assert fake_lab.calls[-1][2].workers == 16


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["predict", "--slowdown", "0"],
            "--slowdown must be a number above 0, at most 1000, got '0'",
        ),
        (["predict", "--concurrency", "1,1"], "--concurrency must be distinct positive integers"),
        (
            [
                "capacity",
                "--profile",
                "round-robin",
                "--target-rps",
                "-1",
                "--max-ttft-p95-ms",
                "1",
            ],
            "--target-rps must be a number above 0",
        ),
    ],
)
def test_bad_options_exit_2_naming_them(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)

    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_a_reference_level_the_table_lacks_exits_2_naming_the_option(
    fake_lab: FakeLab, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["calibrate", "--out", str(tmp_path), "--reference-concurrency", "3"]

    assert main(argv) == 2
    error = capsys.readouterr().err
    assert "--reference-concurrency 3: " in error and "choose one of 1, 2, 4, 8, 16" in error
    assert fake_lab.calls == []


@pytest.mark.parametrize("command", ["predict", "capacity"])
def test_a_ttl_the_lab_would_run_past_the_routers_range_exits_2_naming_it(
    command: str, fake_lab: FakeLab, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["calibrate", "--out", str(tmp_path)]) == 0
    calls = len(fake_lab.calls)

    argv = [command, "--out", str(tmp_path), "--affinity-ttl", "31536000", "--slowdown", "2"]
    if command == "capacity":
        argv += ["--profile", "session-affinity", "--target-rps", "10", "--max-ttft-p95-ms", "500"]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert "--affinity-ttl 31536000: the lab runs it as 63072000 s" in error
    assert len(fake_lab.calls) == calls  # no graph started


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (["predict", "--calibration", "{dir}"], "{dir} is a directory, not a lab calibration"),
        (["calibrate", "--results", "{dir}", "{dir}"], "{dir} is a directory, not a results file"),
        (["report", "--calibration", "{dir}"], "{dir} is a directory, not a lab calibration"),
        (["calibrate", "--out", "{file}/out"], "--out {file}/out: cannot write there"),
    ],
)
def test_a_folder_or_file_in_the_wrong_place_exits_2_naming_it(
    fake_lab: FakeLab,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    message: str,
) -> None:
    (tmp_path / "a-file").write_text("x")
    paths = {"dir": str(tmp_path), "file": str(tmp_path / "a-file")}
    argv = [part.format(**paths) for part in command]
    if "--out" not in argv:
        argv += ["--out", str(tmp_path / "out")]

    assert main(argv) == 2
    assert message.format(**paths) in capsys.readouterr().err
    assert fake_lab.calls == []


def test_predicting_without_a_calibration_says_how_to_make_one(
    fake_lab: FakeLab, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["predict", "--out", str(tmp_path)]) == 2
    assert "run `lab calibrate` first" in capsys.readouterr().err
    assert fake_lab.calls == []


def test_calibrating_on_results_that_do_not_exist_exits_2(
    fake_lab: FakeLab, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "rr.json")

    assert main(["calibrate", "--out", str(tmp_path), "--results", missing, missing]) == 2
    assert "rr.json does not exist" in capsys.readouterr().err
    assert fake_lab.calls == []


def calibration() -> Calibration:
    return calibrate(RECIPE_TABLE, 1, FakeLab(), 4, say=lambda _: None)


def test_capacity_finds_the_smallest_fleet_that_makes_the_target() -> None:
    lab = FakeLab(queueing=0.0)
    base = LabSweep(workers=8, questions=20, output_tokens=128, concurrencies=(1,))
    args: dict[str, Any] = {
        "sessions_per_worker": (1, 2),
        "max_ttft_p95_ms": 10_000.0,
        "run": lab,
        "slowdown": 4.0,
    }
    cal = calibration()

    plan = plan_capacity(
        cal, RoutingProfile.SESSION_AFFINITY, base, 30.0, max_workers=32, say=lambda _: None, **args
    )

    assert plan.workers is not None
    at = {
        w: fleet_capacity(cal, RoutingProfile.SESSION_AFFINITY, base, w, **args).capacity
        for w in (plan.workers - 1, plan.workers)
    }
    assert at[plan.workers] >= 30.0 > at[plan.workers - 1]


def test_capacity_beyond_the_largest_fleet_says_none_does() -> None:
    base = LabSweep(workers=8, questions=20, output_tokens=128, concurrencies=(1,))

    plan = plan_capacity(
        calibration(),
        RoutingProfile.ROUND_ROBIN,
        base,
        10_000.0,
        10_000.0,
        (1,),
        4,
        FakeLab(),
        4.0,
        say=lambda _: None,
    )

    assert plan.workers is None and max(f.workers for f in plan.tried) == 4


def test_a_ttft_bound_no_level_meets_is_refused() -> None:
    base = LabSweep(workers=8, questions=20, output_tokens=128, concurrencies=(1,))

    with pytest.raises(ValueError, match="raise the bound or lower the sessions"):
        plan_capacity(
            calibration(),
            RoutingProfile.ROUND_ROBIN,
            base,
            10.0,
            1.0,
            (1,),
            32,
            FakeLab(),
            4.0,
            say=lambda _: None,
        )


def cluster_results(tmp_path: Path, knobs: LabKnobs, sweep: LabSweep) -> list[str]:
    """Both profiles' results.json as a cluster's perf stage would write them, its engine being a
    stand-in with the given knobs."""
    cluster, paths = FakeLab(), []
    workload = PerfWorkload(
        videos=sweep.videos(max(sweep.concurrencies)),
        questions=sweep.questions,
        output_tokens=sweep.output_tokens,
        concurrencies=sweep.concurrencies,
        prefix_tokens=1,
        turn_jitter_ms=0,
    )
    for profile in RoutingProfile:
        results = ProfileResults(
            profile=profile,
            target="cluster",
            graph_name="g",
            workers=sweep.workers,
            session_header=SESSION_HEADER if profile is RoutingProfile.SESSION_AFFINITY else None,
            workload=workload,
            levels=cluster(profile, knobs, sweep, 1.0),
        )
        paths.append(str(results.save(tmp_path / profile.value / "results.json")))
    return paths


def test_a_clusters_own_results_calibrate_the_lab_and_are_the_table_it_predicts(
    fake_lab: FakeLab, tmp_path: Path
) -> None:
    truth = LabKnobs(
        speed=EngineSpeed(speedup=1.0, decode_speedup=2.0),
        prefix_tokens=12_000,
        pre_engine_delay_ms=20.0,
    )
    sweep = LabSweep(workers=4, questions=10, output_tokens=64, concurrencies=(1, 4))
    results = cluster_results(tmp_path / "cluster", truth, sweep)

    assert main(["calibrate", "--out", str(tmp_path / "out"), "--results", *results]) == 0
    assert main(["predict", "--out", str(tmp_path / "out"), "--results", *results]) == 0

    tmp_path = tmp_path / "out"  # the lab's files, beside the cluster's results it read
    calibration = Calibration.load(tmp_path / "calibration.json")
    assert (calibration.workers, calibration.questions, calibration.output_tokens) == (4, 10, 64)
    assert calibration.knobs.prefix_tokens == pytest.approx(truth.prefix_tokens, rel=0.05)
    report = (tmp_path / "prediction.md").read_text()
    assert f"## Against {results[0]} and {results[1]}" in report
    prediction = Prediction.load(tmp_path / "prediction.json")
    assert [row.concurrency for row in prediction.rows] == [1, 4]
    assert prediction.reused_concurrency == 1  # the calibration's last check ran it
    assert fake_lab.calls[-1][2].concurrencies == (4,)


def test_results_of_different_workloads_are_not_one_table(
    fake_lab: FakeLab, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    knobs = LabKnobs(
        speed=EngineSpeed(speedup=1.0, decode_speedup=2.0),
        prefix_tokens=9_000,
        pre_engine_delay_ms=20.0,
    )
    first = cluster_results(
        tmp_path / "a",
        knobs,
        LabSweep(workers=4, questions=10, output_tokens=64, concurrencies=(1,)),
    )
    second = cluster_results(
        tmp_path / "b",
        knobs,
        LabSweep(workers=8, questions=10, output_tokens=64, concurrencies=(1,)),
    )

    argv = ["calibrate", "--out", str(tmp_path / "out"), "--results", first[0], second[1]]
    assert main(argv) == 2
    assert "ran different workloads or fleets" in capsys.readouterr().err
    assert fake_lab.calls == []


def test_report_derives_a_saved_prediction_again_without_running_the_lab(
    fake_lab: FakeLab, tmp_path: Path
) -> None:
    assert main(["calibrate", "--out", str(tmp_path)]) == 0
    assert main(["predict", "--out", str(tmp_path), "--check-slowdown", "8"]) == 0
    written = (tmp_path / "prediction.md").read_text()
    (tmp_path / "prediction.md").unlink()
    runs = len(fake_lab.calls)

    assert main(["report", "--out", str(tmp_path)]) == 0

    assert (tmp_path / "prediction.md").read_text() == written
    assert len(fake_lab.calls) == runs


def test_report_without_a_prediction_says_how_to_make_one(
    fake_lab: FakeLab, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["calibrate", "--out", str(tmp_path)]) == 0

    assert main(["report", "--out", str(tmp_path)]) == 2
    assert "run `lab predict` first" in capsys.readouterr().err
