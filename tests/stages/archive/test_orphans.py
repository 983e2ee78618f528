"""Interrupted pushes: `list_incomplete_runs` finds runs with objects but no manifest, and
`clean_incomplete_run` deletes exactly one of them, never a complete run."""

from __future__ import annotations

from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

import pytest

from components.routing import RoutingProfile
from stages.archive import (
    ArchiveError,
    ArchiveLocation,
    RunNotFoundError,
    RunPlace,
    archive_run,
    clean_incomplete_run,
    list_incomplete_runs,
    list_runs,
)
from tests.stages.archive.helpers import (
    bucket_keys,
    make_results,
    pull,
    record_for,
    recorded_puts,
    tree,
)

RR, SA = RoutingProfile.ROUND_ROBIN, RoutingProfile.SESSION_AFFINITY
NOW = timedelta(0)


def interrupted_push(
    results: Path, location: ArchiveLocation, profile: RoutingProfile, run_id: str, after: int
) -> None:
    with recorded_puts(fail_after=after), pytest.raises(ArchiveError):
        archive_run(results, record_for(profile, run_id), location)


@pytest.fixture
def results(tmp_path: Path) -> Path:
    return make_results(tmp_path / "results")


def test_incomplete_runs_are_listed_and_complete_ones_are_not(
    results: Path, location: ArchiveLocation
) -> None:
    archive_run(results, record_for(RR, "run-10"), location)
    interrupted_push(results, location, RR, "run-1", after=2)
    interrupted_push(results, location, SA, "sa-1", after=3)

    incomplete = list_incomplete_runs(location)
    only_affinity = list_incomplete_runs(location, stack="session-affinity")

    assert [(run.place, run.objects) for run in incomplete] == [
        (RunPlace("round-robin", "round-robin", "run-1", "perf"), 2),
        (RunPlace("session-affinity", "session-affinity", "sa-1", "perf"), 3),
    ]
    assert incomplete[0].size == len(b'{"ttft": {"p50": 120.5}}') + len(b'{"request": 1}\n' * 500)
    assert incomplete[0].last_written.tzinfo is UTC
    assert [run.place.run_id for run in only_affinity] == ["sa-1"]


def test_clean_deletes_only_the_incomplete_run(
    tmp_path: Path, results: Path, location: ArchiveLocation, s3: Any
) -> None:
    archive_run(results, record_for(RR, "run-10"), location)  # `run-1` is a prefix of its id
    complete = bucket_keys(s3, location)
    interrupted_push(results, location, RR, "run-1", after=2)

    deleted = clean_incomplete_run(
        location, "round-robin", "round-robin", "run-1", "perf", min_age=NOW
    )

    assert len(deleted) == 2 and all("/run-1/perf/files/" in key for key in deleted)
    mark = "cosmos3-nano-reasoner/round-robin/round-robin/run-1/perf/manifest.json"
    assert bucket_keys(s3, location) == sorted([*complete, mark])  # the run id stays taken
    assert list_incomplete_runs(location) == []
    assert [run.run_id for run in list_runs(location)] == ["run-10"]
    pulled = pull(location, "run-10", tmp_path / "p")
    assert tree(pulled) == tree(results)


def test_clean_refuses_a_complete_run(results: Path, location: ArchiveLocation, s3: Any) -> None:
    archive_run(results, record_for(RR, "run-1"), location)
    keys = bucket_keys(s3, location)

    with pytest.raises(ArchiveError, match="is complete .* never an archived one"):
        clean_incomplete_run(location, "round-robin", "round-robin", "run-1", "perf", min_age=NOW)

    assert bucket_keys(s3, location) == keys


def test_clean_refuses_a_run_with_a_corrupt_manifest(
    results: Path, location: ArchiveLocation, s3: Any
) -> None:
    """Not listed, but not incomplete either: its manifest is for a person to look at."""
    interrupted_push(results, location, RR, "run-1", after=2)
    manifest = "cosmos3-nano-reasoner/round-robin/round-robin/run-1/perf/manifest.json"
    s3.put_object(Bucket=location.bucket, Key=manifest, Body=b"garbage")

    assert list_incomplete_runs(location) == []
    with pytest.raises(ArchiveError, match="is complete"):
        clean_incomplete_run(location, "round-robin", "round-robin", "run-1", "perf", min_age=NOW)


def test_clean_leaves_a_run_whose_push_may_still_be_running(
    results: Path, location: ArchiveLocation, s3: Any
) -> None:
    interrupted_push(results, location, RR, "run-1", after=2)
    keys = bucket_keys(s3, location)

    with pytest.raises(ArchiveError, match="may still be running.*--older-than 0"):
        clean_incomplete_run(location, "round-robin", "round-robin", "run-1", "perf")

    assert bucket_keys(s3, location) == keys


def test_clean_dry_run_deletes_nothing(results: Path, location: ArchiveLocation, s3: Any) -> None:
    interrupted_push(results, location, RR, "run-1", after=2)
    keys = bucket_keys(s3, location)

    listed = clean_incomplete_run(
        location, "round-robin", "round-robin", "run-1", "perf", min_age=NOW, dry_run=True
    )

    assert sorted(listed) == keys == bucket_keys(s3, location)


def test_clean_of_nothing_and_of_a_path_are_refused(location: ArchiveLocation) -> None:
    with pytest.raises(RunNotFoundError, match="nothing is stored.*archive incomplete"):
        clean_incomplete_run(location, "round-robin", "round-robin", "run-9", "perf")
    with pytest.raises(ArchiveError, match="'run-1/..' is not a key segment"):
        clean_incomplete_run(location, "round-robin", "round-robin", "run-1/..", "perf")
