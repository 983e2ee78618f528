"""`python -m stages report --archive-bucket ...`: the A/B report from archived perf runs.

Against the S3 server of tests/s3.py (SeaweedFS on loopback), with a hermetic AWS environment,
as the other archive tests. The archived runs hold the real fixture
results, pushed the way a pipeline pushes a perf stage's output directory.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]
import pytest

from components.routing import RoutingProfile
from stages.archive import ArchiveLocation, RunRecord, Stage, archive_run
from stages.cli import main
from stages.core.results import ProfileResults
from tests.stages.cluster.fakes import cluster_outputs
from tests.stages.support import FIXTURES

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


def push_perf_run(
    location: ArchiveLocation,
    tmp_path: Path,
    profile: RoutingProfile,
    run_id: str,
    created_at: datetime,
    results: ProfileResults | None = None,
) -> RunRecord:
    """Archive a perf output directory (results.json + an AIPerf export) as the pipeline does."""
    directory = tmp_path / "runs" / f"{profile.value}-{run_id}"
    (directory / "c1" / "aiperf").mkdir(parents=True)
    results = results or ProfileResults.load(FIXTURES / f"results-{profile.value}.json")
    results.save(directory / "results.json")
    shutil.copy(
        FIXTURES / "aiperf-round-robin-c1.json",
        directory / "c1" / "aiperf" / "profile_export_aiperf.json",
    )
    record = RunRecord.create(
        stack=profile.value,
        stage=Stage.PERF,
        outputs=cluster_outputs(profile),
        run_id=run_id,
        commit="0" * 40,
        created_at=created_at,
    )
    return archive_run(directory, record, location)


def report_args(location: ArchiveLocation, out: Path, *extra: str) -> list[str]:
    return [
        "report",
        "--archive-bucket",
        location.bucket,
        "--archive-endpoint",
        str(location.endpoint_url),
        "--stacks",
        "round-robin",
        "session-affinity",
        "--out",
        str(out),
        *extra,
    ]


def with_rps(results: ProfileResults, rps: float) -> ProfileResults:
    levels = [level.model_copy(update={"requests_per_second": rps}) for level in results.levels]
    return results.model_copy(update={"levels": levels})


def test_the_report_compares_each_stacks_latest_perf_run(
    location: ArchiveLocation, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old_rr = with_rps(ProfileResults.load(FIXTURES / "results-round-robin.json"), 0.5)
    push_perf_run(location, tmp_path, RoutingProfile.ROUND_ROBIN, "run-old", T0, old_rr)
    push_perf_run(
        location, tmp_path, RoutingProfile.ROUND_ROBIN, "run-new", T0 + timedelta(hours=1)
    )
    push_perf_run(location, tmp_path, RoutingProfile.SESSION_AFFINITY, "run-aff", T0)

    status = main(report_args(location, tmp_path / "report"))

    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert "| Concurrency | Round-robin req/s" in captured.out
    assert "| 0.50 |" not in captured.out  # the newer round-robin run, not the old one
    assert "round-robin: run run-new" in captured.err
    assert (tmp_path / "report" / "report.md").read_text().strip() == captured.out.strip()
    assert (tmp_path / "report" / "ab-chart.png").is_file()
    sources = json.loads((tmp_path / "report" / "sources.json").read_text())
    assert [(s["stack"], s["runId"]) for s in sources] == [
        ("round-robin", "run-new"),
        ("session-affinity", "run-aff"),
    ]


def test_a_corrupt_manifest_is_a_warning_not_a_failure(
    location: ArchiveLocation, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    push_perf_run(location, tmp_path, RoutingProfile.ROUND_ROBIN, "run-1", T0)
    push_perf_run(location, tmp_path, RoutingProfile.SESSION_AFFINITY, "run-2", T0)
    corrupt = "cosmos3-nano-reasoner/round-robin/round-robin/run-9/perf/manifest.json"
    s3 = boto3.client("s3", endpoint_url=location.endpoint_url)
    s3.put_object(Bucket=location.bucket, Key=corrupt, Body=b"not json")

    status = main(report_args(location, tmp_path / "report"))

    err = capsys.readouterr().err
    assert status == 0, err
    assert f"archive: warning: skipped s3://{location.bucket}/{corrupt}" in err
    assert "round-robin: run run-1" in err


def test_named_runs_are_compared_instead_of_the_latest(
    location: ArchiveLocation, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old_rr = with_rps(ProfileResults.load(FIXTURES / "results-round-robin.json"), 0.5)
    push_perf_run(location, tmp_path, RoutingProfile.ROUND_ROBIN, "run-old", T0, old_rr)
    push_perf_run(
        location, tmp_path, RoutingProfile.ROUND_ROBIN, "run-new", T0 + timedelta(hours=1)
    )
    push_perf_run(location, tmp_path, RoutingProfile.SESSION_AFFINITY, "run-aff", T0)

    status = main(report_args(location, tmp_path / "report", "--run-ids", "run-old", "run-aff"))

    assert status == 0
    assert "| 0.50 |" in capsys.readouterr().out


def test_a_stack_without_runs_fails_with_the_reason(
    location: ArchiveLocation, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    push_perf_run(location, tmp_path, RoutingProfile.ROUND_ROBIN, "run-1", T0)

    status = main(report_args(location, tmp_path / "report"))

    assert status == 1
    err = capsys.readouterr().err
    assert "report FAILED" in err and "no archived perf run" in err and "session-affinity" in err


def test_an_unknown_run_id_names_the_runs_there_are(
    location: ArchiveLocation, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    push_perf_run(location, tmp_path, RoutingProfile.ROUND_ROBIN, "run-1", T0)
    push_perf_run(location, tmp_path, RoutingProfile.SESSION_AFFINITY, "run-2", T0)

    status = main(report_args(location, tmp_path / "report", "--run-ids", "run-9", "run-2"))

    assert status == 1
    assert "no complete perf run 'run-9'" in capsys.readouterr().err


def test_a_run_without_results_json_is_refused(
    location: ArchiveLocation, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "smoke-only"
    directory.mkdir()
    (directory / "answer.txt").write_text("a red box")
    for profile in RoutingProfile:
        record = RunRecord.create(
            stack=profile.value,
            stage=Stage.PERF,
            outputs=cluster_outputs(profile),
            run_id="run-1",
            commit="0" * 40,
            created_at=T0,
        )
        archive_run(directory, record, location)

    assert main(report_args(location, tmp_path / "report")) == 1
    assert "holds no usable results.json" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["report", "--archive-bucket", "b", "--out", "x"], "needs --stacks"),
        (["report", "--results", "a", "b", "--stacks", "s", "t", "--out", "x"], "--archive-bucket"),
        (["report", "--out", "x"], "one of the arguments --results --archive-bucket"),
    ],
)
def test_report_usage_errors_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_status:
        main(argv)

    assert exit_status.value.code == 2
    assert message in capsys.readouterr().err


def test_the_local_files_form_still_works(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args: list[Any] = [
        "report",
        "--results",
        FIXTURES / "results-round-robin.json",
        FIXTURES / "results-session-affinity.json",
        "--out",
        tmp_path / "r",
    ]

    assert main([str(a) for a in args]) == 0
    assert "| Concurrency |" in capsys.readouterr().out
