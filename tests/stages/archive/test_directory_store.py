"""The archive in a local directory (`--endpoint-url file:///dir`): the bucket's contract on disk."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from dataclasses import astuple
from datetime import timedelta
from pathlib import Path

import pytest

from components.routing import RoutingProfile
from stages import archive
from stages.archive import (
    ArchiveConflictError,
    ArchiveError,
    ArchiveLocation,
    RunNotFoundError,
    RunPlace,
    archive_run,
    clean_incomplete_run,
    list_incomplete_runs,
    list_runs,
    warn_on_stderr,
)
from stages.archive.stores import DirectoryBucket, open_bucket
from tests.stages.archive.helpers import make_results, record_for

RR = RoutingProfile.ROUND_ROBIN


def a_bucket(tmp_path: Path) -> DirectoryBucket:
    location = ArchiveLocation(bucket="results", endpoint_url=f"file://{tmp_path / 'archive'}")
    store = open_bucket(location)
    assert isinstance(store, DirectoryBucket)
    return store


def test_an_object_is_written_once_and_never_replaced(tmp_path: Path) -> None:
    bucket = a_bucket(tmp_path)
    bucket.put_new("p/run/manifest.json", b"first")

    with pytest.raises(ArchiveConflictError, match="never overwrites"):
        bucket.put_new("p/run/manifest.json", b"second")

    assert bucket.read("p/run/manifest.json") == b"first"
    assert (tmp_path / "archive" / "results" / "p" / "run" / "manifest.json").is_file()


def test_of_two_concurrent_writers_exactly_one_wins(tmp_path: Path) -> None:
    bucket = a_bucket(tmp_path)
    outcomes: list[str] = []

    def write(body: bytes) -> None:
        try:
            bucket.put_new("race/key", body)
            outcomes.append("stored")
        except ArchiveConflictError:
            outcomes.append("refused")

    threads = [threading.Thread(target=write, args=(b"x" * n,)) for n in range(1, 9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(outcomes) == ["refused"] * 7 + ["stored"]
    assert list((tmp_path / "archive" / ".results.incoming").iterdir()) == []  # none left


def test_listing_reading_hashing_and_deleting(tmp_path: Path) -> None:
    bucket = a_bucket(tmp_path)
    for key in ("a/1", "a/2", "b/1"):
        bucket.put_new(key, key.encode())

    assert list(bucket.keys("a/")) == ["a/1", "a/2"]
    assert [o.size for o in bucket.objects("")] == [3, 3, 3]
    assert bucket.sha256("b/1") == hashlib.sha256(b"b/1").hexdigest()
    bucket.delete(["a/1", "a/2"])
    assert list(bucket.keys("")) == ["b/1"]
    assert not (tmp_path / "archive" / "results" / "a").exists()  # empty folders go too
    with pytest.raises(RunNotFoundError):
        bucket.read("a/1")


def test_a_key_cannot_leave_the_archive(tmp_path: Path) -> None:
    with pytest.raises(ArchiveError, match="leaves the archive"):
        a_bucket(tmp_path).put_new("../../outside", b"x")


# --- found by a review (2026-12-07): each a run the archive must not lose or hide ----------------


def a_location(tmp_path: Path) -> ArchiveLocation:
    return ArchiveLocation(bucket="results", endpoint_url=f"file://{tmp_path / 'archive'}")


def test_clean_older_than_0_takes_a_run_the_stores_clock_dates_ahead(tmp_path: Path) -> None:
    location = a_location(tmp_path)
    place = RunPlace("round-robin", "round-robin", "run-1", "perf")
    key = place.file_key(location, "summary.json")
    open_bucket(location).put_new(key, b"{}")
    ahead = time.time() + 60  # the store's clock a minute ahead of this one
    os.utime(tmp_path / "archive" / "results" / key, (ahead, ahead))

    deleted = clean_incomplete_run(location, *astuple(place), min_age=timedelta(0))

    assert deleted == [key] and list(open_bucket(location).keys("")) == []


def test_a_manifest_dated_out_of_range_is_skipped_never_hiding_the_good_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    location = a_location(tmp_path)
    good = archive_run(make_results(tmp_path / "results"), record_for(RR, "good"), location)
    odd = json.loads(good.model_dump_json()) | {
        "run_id": "odd",
        "created_at": "0001-01-01T00:00:00+01:00",
    }
    odd_key = RunPlace("round-robin", "round-robin", "odd", "perf").manifest_key(location)
    open_bucket(location).put_new(odd_key, json.dumps(odd).encode())

    assert [record.run_id for record in list_runs(location, stack="round-robin")] == ["good"]
    assert "created_at is out of range" in capsys.readouterr().err


def test_a_file_name_that_is_not_utf8_is_refused_before_anything_is_stored(
    tmp_path: Path,
) -> None:
    location = a_location(tmp_path)
    results = make_results(tmp_path / "results")
    (results / os.fsdecode(b"caf\xe9.txt")).write_bytes(b"x")  # an ISO-8859-1 name

    with pytest.raises(ArchiveError, match=r"not printable UTF-8 \(caf\\udce9.txt\)"):
        archive_run(results, record_for(RR, "run-1"), location)
    assert list(open_bucket(location).keys("")) == []


def test_a_key_no_push_writes_is_no_run_and_never_reaches_the_terminal_raw(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    location = a_location(tmp_path)
    odd = f"{location.prefix}/x\x1b]0;pwned\x07/round-robin/run-1/perf/files/a.json"
    open_bucket(location).put_new(odd, b"{}")

    assert list_incomplete_runs(location) == []
    warn_on_stderr(f"skipped {odd}")
    assert "\x1b" not in capsys.readouterr().err


def test_a_manifest_no_reader_would_take_is_refused_before_any_upload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    location = a_location(tmp_path)
    results = make_results(tmp_path / "results")
    monkeypatch.setattr(archive, "MAX_MANIFEST_BYTES", 100)  # any manifest is larger

    with pytest.raises(ArchiveError, match="whose manifest would pass the"):
        archive_run(results, record_for(RR, "run-1"), location)
    assert list(open_bucket(location).keys("")) == []


def test_a_result_named_like_a_write_in_progress_is_stored_and_seen(tmp_path: Path) -> None:
    location = a_location(tmp_path)
    results = make_results(tmp_path / "results")
    (results / ".incoming-notes.txt").write_text("a name the store once kept for itself\n")

    record = archive_run(results, record_for(RR, "run-1"), location)

    assert ".incoming-notes.txt" in [entry.name for entry in record.files]
    place = RunPlace.of(record)
    assert len(list(open_bucket(location).objects(place.files_prefix(location)))) == 7


def test_a_link_at_a_manifests_key_is_skipped_never_hiding_the_good_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    location = a_location(tmp_path)
    archive_run(make_results(tmp_path / "results"), record_for(RR, "good"), location)
    odd = RunPlace("round-robin", "round-robin", "odd", "perf").manifest_key(location)
    link = tmp_path / "archive" / "results" / odd
    link.parent.mkdir(parents=True)
    (tmp_path / "elsewhere.json").write_text("{}")
    link.symlink_to(tmp_path / "elsewhere.json")

    assert [record.run_id for record in list_runs(location, stack="round-robin")] == ["good"]
    assert "skipped" in capsys.readouterr().err
