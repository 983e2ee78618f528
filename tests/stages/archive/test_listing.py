"""Listing: complete runs by stack, profile and stage, oldest first; a corrupt or foreign object
at a manifest's key is skipped with a warning that names it, and never hides the good runs."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from components.routing import RoutingProfile
from stages.archive import (
    ArchiveLocation,
    CorruptManifestError,
    RunNotFoundError,
    RunRecord,
    Stage,
    archive_run,
    fetch_record,
    latest_run,
    list_runs,
)
from tests.stages.archive.helpers import (
    FOREIGN,
    MANIFEST,
    NOT_JSON,
    T0,
    make_results,
    put_bad_manifests,
    record_for,
)


def test_lists_runs_per_stack_profile_and_stage_oldest_first(
    tmp_path: Path, location: ArchiveLocation
) -> None:
    results = make_results(tmp_path / "results")
    rr, sa = RoutingProfile.ROUND_ROBIN, RoutingProfile.SESSION_AFFINITY
    pushes = [
        record_for(rr, "rr-2", T0 + timedelta(hours=2)),
        record_for(rr, "rr-1", T0),
        record_for(rr, "rr-1", T0, stage=Stage.SMOKE),
        record_for(sa, "sa-1", T0 + timedelta(hours=1)),
        record_for(sa, "dev-1", T0 + timedelta(hours=3), stack="dev"),
    ]
    for record in pushes:
        archive_run(results, record, location)

    def ids(runs: list[RunRecord]) -> list[str]:
        return [f"{r.stack}:{r.run_id}:{r.stage}" for r in runs]

    assert ids(list_runs(location, stack="round-robin")) == [
        "round-robin:rr-1:perf",
        "round-robin:rr-1:smoke",
        "round-robin:rr-2:perf",
    ]
    assert ids(list_runs(location, profile=sa)) == [
        "session-affinity:sa-1:perf",
        "dev:dev-1:perf",
    ]
    assert ids(list_runs(location, stack="session-affinity", profile=sa)) == [
        "session-affinity:sa-1:perf"
    ]
    assert ids(list_runs(location, stage=Stage.SMOKE)) == ["round-robin:rr-1:smoke"]
    assert latest_run(location, profile=rr).run_id == "rr-2"
    assert latest_run(location, profile=sa).run_id == "dev-1"
    assert latest_run(location, stack="session-affinity").run_id == "sa-1"
    assert latest_run(location, stack="round-robin", stage="smoke").run_id == "rr-1"


def test_latest_run_of_nothing_says_so(location: ArchiveLocation) -> None:
    with pytest.raises(RunNotFoundError, match="no archived perf run.*archive push"):
        latest_run(location, stack="round-robin")


def test_corrupt_and_foreign_manifests_are_skipped_with_a_warning_each(
    tmp_path: Path, location: ArchiveLocation, s3: Any
) -> None:
    results = make_results(tmp_path / "results")
    archive_run(results, record_for(RoutingProfile.ROUND_ROBIN, "good-1", T0), location)
    archive_run(
        results, record_for(RoutingProfile.ROUND_ROBIN, "good-2", T0 + timedelta(1)), location
    )
    put_bad_manifests(s3, location)
    warnings: list[str] = []

    runs = list_runs(location, warn=warnings.append)
    latest = latest_run(location, stack="round-robin", warn=lambda _: None)

    assert [run.run_id for run in runs] == ["good-1", "good-2"]
    assert latest.run_id == "good-2"
    assert len(warnings) == 2
    broken, foreign = sorted(warnings)  # "broken" sorts before "foreign"
    assert NOT_JSON in broken and "Invalid JSON" in broken
    assert FOREIGN in foreign and "stack: Field required" in foreign
    assert all("\n" not in warning for warning in warnings)
    assert "foreign-value-never-echoed" not in foreign


def test_warnings_go_to_stderr(
    location: ArchiveLocation, s3: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    put_bad_manifests(s3, location)

    assert list_runs(location) == []

    err = capsys.readouterr().err.splitlines()
    assert [line.split(" s3://")[0] for line in err] == ["archive: warning: skipped"] * 2


def test_another_runs_manifest_is_skipped(
    tmp_path: Path, location: ArchiveLocation, s3: Any
) -> None:
    """A valid manifest copied to another run's key describes a run that is not there."""
    archive_run(
        make_results(tmp_path / "r"), record_for(RoutingProfile.ROUND_ROBIN, "r1"), location
    )
    original = s3.get_object(
        Bucket=location.bucket, Key=MANIFEST.format("round-robin/round-robin/r1/perf")
    )
    copy = MANIFEST.format("round-robin/round-robin/r2/perf")
    s3.put_object(Bucket=location.bucket, Key=copy, Body=original["Body"].read())
    warnings: list[str] = []

    assert [run.run_id for run in list_runs(location, warn=warnings.append)] == ["r1"]
    reason = "it describes another run (round-robin/round-robin/r1/perf)"
    assert warnings == [
        f"skipped s3://{location.bucket}/{copy} is not a valid run manifest: {reason}"
    ]


def test_a_named_corrupt_run_fails_with_the_reason(location: ArchiveLocation, s3: Any) -> None:
    put_bad_manifests(s3, location)

    with pytest.raises(CorruptManifestError) as refused:
        fetch_record(location, "round-robin", "round-robin", "broken")

    assert str(refused.value).startswith(f"s3://{location.bucket}/{NOT_JSON} is not a valid")
