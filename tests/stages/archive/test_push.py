"""Pushing: the key layout, the manifest written last, never an overwrite; and resuming a push
that was interrupted (the store failing after N uploads) with the same objects kept."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from components.routing import RoutingProfile
from stages.archive import (
    ArchiveConflictError,
    ArchiveError,
    ArchiveLocation,
    RunNotFoundError,
    archive_plan,
    archive_run,
    fetch_record,
    list_runs,
    resume_run,
)
from tests.s3 import ACCESS_KEY_ID, SECRET_ACCESS_KEY
from tests.stages.archive.helpers import (
    RESULT_FILES,
    bucket_keys,
    make_results,
    pull,
    record_for,
    recorded_puts,
    stored_files,
    tree,
)

RUN = "round-robin/round-robin/run-1/perf"
BASE = f"cosmos3-nano-reasoner/{RUN}"
FIRST_THREE = [  # the files an interrupted push stores first: in name order
    "aiperf/concurrency-1/profile_export_aiperf.json",
    "aiperf/concurrency-16/profile_export.jsonl",
    "chart.png",
]


def test_keys_follow_the_documented_layout(
    tmp_path: Path, location: ArchiveLocation, s3: Any
) -> None:
    results = make_results(tmp_path / "results")
    record = record_for(RoutingProfile.ROUND_ROBIN, "run-1")
    archive_run(results, record, location)

    expected = [f"{BASE}/files/{name}" for name in tree(results)] + [f"{BASE}/manifest.json"]
    assert bucket_keys(s3, location) == sorted(expected)
    assert archive_plan(results, record, location) == expected


def test_manifest_records_run_and_holds_no_environment(
    tmp_path: Path, location: ArchiveLocation, s3: Any
) -> None:
    results = make_results(tmp_path / "results")
    archive_run(results, record_for(RoutingProfile.SESSION_AFFINITY, "run-1"), location)

    key = "cosmos3-nano-reasoner/session-affinity/session-affinity/run-1/perf/manifest.json"
    raw = s3.get_object(Bucket=location.bucket, Key=key)["Body"].read()
    manifest = json.loads(raw)
    assert set(manifest) == {
        "manifest_version",
        "stack",
        "profile",
        "run_id",
        "stage",
        "created_at",
        "commit",
        "outputs",
        "files",
    }
    assert manifest["outputs"] == record_for(RoutingProfile.SESSION_AFFINITY, "x").outputs
    assert manifest["created_at"] == "2026-11-30T12:00:00Z"
    assert SECRET_ACCESS_KEY.encode() not in raw
    assert ACCESS_KEY_ID.encode() not in raw


# --- no overwrite, manifest last ------------------------------------------------------


def test_second_push_of_same_run_is_refused_and_first_kept(
    tmp_path: Path, location: ArchiveLocation
) -> None:
    record = record_for(RoutingProfile.ROUND_ROBIN, "run-1")
    first = make_results(tmp_path / "first", marker="first")
    second = make_results(tmp_path / "second", marker="second")
    archive_run(first, record, location)

    with pytest.raises(ArchiveConflictError) as refused:
        archive_run(second, record, location)

    message = str(refused.value)
    assert f"{RUN}/manifest.json" in message
    assert location.bucket in message
    assert "new run id" in message
    pulled = pull(location, "run-1", tmp_path / "p")
    assert tree(pulled) == tree(first)


def test_store_refuses_to_replace_any_file(
    tmp_path: Path, location: ArchiveLocation, s3: Any
) -> None:
    """A key taken mid-run (another writer, an interrupted push) is refused by the store itself;
    the run then has no manifest, so it is never listed as complete."""
    results = make_results(tmp_path / "results")
    record = record_for(RoutingProfile.ROUND_ROBIN, "run-1")
    taken = f"{BASE}/files/summary.json"
    s3.put_object(Bucket=location.bucket, Key=taken, Body=b"someone else's")

    with pytest.raises(ArchiveConflictError, match=re.escape(taken)) as refused:
        archive_run(results, record, location)

    assert "--resume" in str(refused.value) and "archive clean" in str(refused.value)
    kept = s3.get_object(Bucket=location.bucket, Key=taken)["Body"].read()
    assert kept == b"someone else's"
    keys = bucket_keys(s3, location)
    assert f"{BASE}/files/chart.png" in keys  # uploaded before the refused key
    assert f"{BASE}/manifest.json" not in keys
    assert list_runs(location) == []
    with pytest.raises(RunNotFoundError, match="archive list"):
        fetch_record(location, "round-robin", "round-robin", "run-1")


# --- resuming an interrupted push -----------------------------------------------------


def interrupted_push(results: Path, location: ArchiveLocation, after: int = 3) -> None:
    """A push whose store stops answering after `after` uploads: files stored, no manifest."""
    with recorded_puts(fail_after=after) as stored, pytest.raises(ArchiveError):
        archive_run(results, record_for(RoutingProfile.ROUND_ROBIN, "run-1"), location)
    assert len(stored) == after


def test_an_interrupted_push_is_resumed_keeping_what_was_stored(
    tmp_path: Path, location: ArchiveLocation, s3: Any
) -> None:
    results = make_results(tmp_path / "results")
    interrupted_push(results, location)
    before = stored_files(s3, location, RUN)
    assert sorted(before) == FIRST_THREE
    assert list_runs(location) == []

    with recorded_puts() as uploaded:
        outcome = resume_run(results, record_for(RoutingProfile.ROUND_ROBIN, "run-1"), location)

    assert (outcome.kept, outcome.uploaded, outcome.already_complete) == (3, 3, False)
    assert uploaded[-1] == f"{BASE}/manifest.json"  # still last
    assert not {f"{BASE}/files/{name}" for name in FIRST_THREE} & set(uploaded)
    assert len(uploaded) == RESULT_FILES - 3 + 1
    assert stored_files(s3, location, RUN) == tree(results)
    assert {name: stored_files(s3, location, RUN)[name] for name in before} == before
    [listed] = list_runs(location)
    assert listed == outcome.record
    pulled = pull(location, "run-1", tmp_path / "p")
    assert tree(pulled) == tree(results)


def test_a_plain_push_over_an_interrupted_one_points_at_resume_and_clean(
    tmp_path: Path, location: ArchiveLocation
) -> None:
    results = make_results(tmp_path / "results")
    interrupted_push(results, location)

    with pytest.raises(ArchiveConflictError) as refused:
        archive_run(results, record_for(RoutingProfile.ROUND_ROBIN, "run-1"), location)

    assert "archive push --resume" in str(refused.value)
    assert "archive clean" in str(refused.value)


def test_a_resumed_push_whose_file_changed_is_a_conflict(
    tmp_path: Path, location: ArchiveLocation, s3: Any
) -> None:
    results = make_results(tmp_path / "results")
    interrupted_push(results, location)
    keys = bucket_keys(s3, location)
    stored = stored_files(s3, location, RUN)
    (results / "chart.png").write_bytes(bytes(reversed(range(256))) * 40)  # same size

    with recorded_puts() as uploaded, pytest.raises(ArchiveConflictError) as refused:
        resume_run(results, record_for(RoutingProfile.ROUND_ROBIN, "run-1"), location)

    assert f"{BASE}/files/chart.png differs from" in str(refused.value)
    assert "never overwrites" in str(refused.value)
    assert uploaded == []  # the conflict is found before anything is uploaded
    assert bucket_keys(s3, location) == keys
    assert stored_files(s3, location, RUN) == stored


def test_a_resumed_push_missing_a_stored_file_is_a_conflict(
    tmp_path: Path, location: ArchiveLocation
) -> None:
    results = make_results(tmp_path / "results")
    interrupted_push(results, location)
    (results / "chart.png").unlink()

    with pytest.raises(ArchiveConflictError, match=r"files/chart.png .* not in"):
        resume_run(results, record_for(RoutingProfile.ROUND_ROBIN, "run-1"), location)


@pytest.mark.parametrize(("body", "kept"), [(b"hello", True), (b"HELLO", False)])
def test_stored_files_without_a_checksum_are_compared_by_their_bytes(
    tmp_path: Path, location: ArchiveLocation, s3: Any, body: bytes, kept: bool
) -> None:
    """An object stored without a sha256 checksum (an older push, another tool): its bytes."""
    results = tmp_path / "results"
    results.mkdir()
    (results / "a.txt").write_bytes(b"hello")
    s3.put_object(Bucket=location.bucket, Key=f"{BASE}/files/a.txt", Body=body)
    record = record_for(RoutingProfile.ROUND_ROBIN, "run-1")

    if kept:
        assert resume_run(results, record, location).kept == 1
        assert [run.run_id for run in list_runs(location)] == ["run-1"]
    else:
        with pytest.raises(ArchiveConflictError, match="differs from"):
            resume_run(results, record, location)


def test_resuming_a_complete_run_changes_nothing(
    tmp_path: Path, location: ArchiveLocation, s3: Any
) -> None:
    results = make_results(tmp_path / "results")
    record = record_for(RoutingProfile.ROUND_ROBIN, "run-1")
    archive_run(results, record, location)
    keys = bucket_keys(s3, location)

    with recorded_puts() as uploaded:
        outcome = resume_run(results, record, location)
    (results / "summary.json").write_text("{}")
    with pytest.raises(ArchiveConflictError, match="other files"):
        resume_run(results, record, location)

    assert outcome.already_complete and uploaded == []
    assert bucket_keys(s3, location) == keys


def test_resuming_nothing_is_a_plain_push(tmp_path: Path, location: ArchiveLocation) -> None:
    results = make_results(tmp_path / "results")

    outcome = resume_run(results, record_for(RoutingProfile.ROUND_ROBIN, "run-1"), location)

    assert (outcome.kept, outcome.uploaded) == (0, RESULT_FILES)
    assert [run.run_id for run in list_runs(location)] == ["run-1"]
