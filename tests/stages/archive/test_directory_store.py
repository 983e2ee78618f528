"""The archive in a local directory (`--endpoint-url file:///dir`): the bucket's contract on disk."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import astuple
from datetime import timedelta
from pathlib import Path
from unittest import mock

import pytest

from common.output_folders import OWNERSHIP_FILES, claimed_folder
from components.routing import RoutingProfile
from stages import archive
from stages.archive import (
    ArchiveConflictError,
    ArchiveError,
    ArchiveLocation,
    CorruptManifestError,
    RunCleanedError,
    RunNotFoundError,
    RunPlace,
    RunRecord,
    archive_run,
    clean_incomplete_run,
    download_record,
    list_incomplete_runs,
    list_runs,
    resume_run,
    warn_on_stderr,
)
from stages.archive.cli import main as archive_cli
from stages.archive.stores import DirectoryBucket, open_bucket
from tests.stages.archive.helpers import (
    make_results,
    one_line_error,
    outputs_for,
    record_for,
    store_args,
)

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

    assert deleted == [key]
    assert list(open_bucket(location).keys("")) == [place.manifest_key(location)]  # its mark


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


def test_a_pull_holds_its_dest_so_a_second_pull_there_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    location = a_location(tmp_path)
    results = make_results(tmp_path / "results")
    archive_run(results, record_for(RR, "run-1"), location)
    dest = tmp_path / "pulled"
    pull = ["pull", "--stack", "round-robin", "--profile", "round-robin", "--latest"]
    pull += ["--dest", str(dest), *store_args(location)]

    with claimed_folder(dest, "python -m stages archive pull", option="--dest"):  # one running
        assert archive_cli(pull) == 2
        assert "--dest" in one_line_error(capsys.readouterr().err, "pull")
        assert [path.name for path in dest.iterdir() if path.name not in OWNERSHIP_FILES] == []

    assert archive_cli(pull) == 0
    pulled = {path.name for path in dest.rglob("*") if path.is_file()} - OWNERSHIP_FILES
    assert pulled == {path.name for path in results.rglob("*") if path.is_file()}
    capsys.readouterr()
    assert archive_cli(pull) == 2  # a run pulled there already: not empty, as a user's folder
    assert "--dest" in one_line_error(capsys.readouterr().err, "pull")


def test_a_folder_a_stage_still_writes_is_not_pushed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    location = a_location(tmp_path)
    results = tmp_path / "results"
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(outputs_for(RR).to_json_dict()))
    push = ["push", "--stack", "round-robin", "--outputs", str(outputs), "--stage", "perf"]
    push += ["--dir", str(results), "--run-id", "run-1", *store_args(location)]

    with claimed_folder(results, "python -m stages perf"):  # the stage runs
        make_results(results)
        assert archive_cli(push) == 1
        error = one_line_error(capsys.readouterr().err, "push")
        assert f"PID {os.getpid()} (python -m stages perf" in error
        assert list(open_bucket(location).keys("")) == []

    assert archive_cli(push) == 0  # it ended


def stopped_before_its_manifest(
    tmp_path: Path, location: ArchiveLocation
) -> tuple[Path, RunRecord]:
    """A push stopped just before its manifest, its files stored: what `clean` and `--resume`
    both act on."""
    results = make_results(tmp_path / "results")
    record = record_for(RR, "run-1")
    manifest = RunPlace.of(record).manifest_key(location)
    put_new = DirectoryBucket.put_new

    def dropped(self: DirectoryBucket, key: str, body: bytes, advice: str = "") -> None:
        if key == manifest:
            raise ArchiveError("simulated: the connection dropped")
        put_new(self, key, body)

    with mock.patch.object(DirectoryBucket, "put_new", dropped), pytest.raises(ArchiveError):
        archive_run(results, record, location)
    return results, record


def test_a_resume_during_a_clean_is_refused_and_the_run_id_stays_taken(tmp_path: Path) -> None:
    location = a_location(tmp_path)
    results, record = stopped_before_its_manifest(tmp_path, location)
    resumed: list[BaseException] = []
    delete = DirectoryBucket.delete

    def resume_first(self: DirectoryBucket, keys: Sequence[str]) -> None:
        if not resumed:  # a second operator's resume, between clean's mark and its deletes
            with pytest.raises(RunCleanedError, match="`archive clean` deleted") as error:
                resume_run(results, record, location)
            resumed.append(error.value)
        delete(self, keys)

    with mock.patch.object(DirectoryBucket, "delete", resume_first):
        clean_incomplete_run(location, *astuple(RunPlace.of(record)), min_age=timedelta(0))

    assert resumed and list_runs(location) == [] and list_incomplete_runs(location) == []
    with pytest.raises(RunCleanedError, match="new run id"):
        resume_run(results, record, location)
    with pytest.raises(RunCleanedError, match="new run id"):
        archive_run(results, record, location)
    archive_run(results, record_for(RR, "run-2"), location)
    assert [run.run_id for run in list_runs(location)] == ["run-2"]


def test_a_resume_that_listed_before_the_clean_cannot_complete_the_run_after_it(
    tmp_path: Path,
) -> None:
    location = a_location(tmp_path)
    results = make_results(tmp_path / "results")
    record = record_for(RR, "run-1")
    manifest = RunPlace.of(record).manifest_key(location)
    put_new = DirectoryBucket.put_new
    stored: list[str] = []

    def half(self: DirectoryBucket, key: str, body: bytes, advice: str = "") -> None:
        if key == manifest or len(stored) == 3:
            raise ArchiveError("simulated: the connection dropped")
        stored.append(key)
        put_new(self, key, body)

    with mock.patch.object(DirectoryBucket, "put_new", half), pytest.raises(ArchiveError):
        archive_run(results, record, location)  # 3 of 6 files stored

    def clean_meanwhile(self: DirectoryBucket, key: str, body: bytes, advice: str = "") -> None:
        if not stored[3:]:  # the resume's first upload: a clean runs to its end meanwhile
            stored.append(key)
            clean_incomplete_run(location, *astuple(RunPlace.of(record)), min_age=timedelta(0))
        put_new(self, key, body, advice)

    with (
        mock.patch.object(DirectoryBucket, "put_new", clean_meanwhile),
        pytest.raises(ArchiveConflictError, match="already exists"),
    ):
        resume_run(results, record, location)

    assert list_runs(location) == []


def test_a_run_a_resume_completed_before_clean_marked_it_is_kept_whole(tmp_path: Path) -> None:
    location = a_location(tmp_path)
    results, record = stopped_before_its_manifest(tmp_path, location)
    put_new = DirectoryBucket.put_new

    def resume_first(self: DirectoryBucket, key: str, body: bytes, advice: str = "") -> None:
        if body == archive.CLEANED:  # the resume wins the race to the manifest's key
            resume_run(results, record, location)
        put_new(self, key, body, advice)

    with (
        mock.patch.object(DirectoryBucket, "put_new", resume_first),
        pytest.raises(ArchiveConflictError, match="nothing was deleted"),
    ):
        clean_incomplete_run(location, *astuple(RunPlace.of(record)), min_age=timedelta(0))

    [listed] = list_runs(location)
    assert download_record(location, listed, tmp_path / "pulled").is_dir()


def test_a_clean_that_stopped_halfway_is_listed_and_finished_by_the_next(tmp_path: Path) -> None:
    location = a_location(tmp_path)
    _, record = stopped_before_its_manifest(tmp_path, location)
    place = RunPlace.of(record)
    with (
        mock.patch.object(DirectoryBucket, "delete", side_effect=ArchiveError("killed")),
        pytest.raises(ArchiveError, match="killed"),
    ):
        clean_incomplete_run(location, *astuple(place), min_age=timedelta(0))

    assert list_runs(location) == []
    assert [run.place for run in list_incomplete_runs(location)] == [place]
    assert len(clean_incomplete_run(location, *astuple(place))) == 6  # young, but a clean's
    assert list(open_bucket(location).keys("")) == [place.manifest_key(location)]  # the mark
    assert list_incomplete_runs(location) == []
    with pytest.raises(RunNotFoundError, match="deleted by `archive clean` already"):
        clean_incomplete_run(location, *astuple(place))


def test_a_manifest_naming_a_folders_own_file_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    location = a_location(tmp_path)
    results = make_results(tmp_path / "results")
    (results / "x").mkdir()
    (results / "x" / "lock").write_text("planted")
    record = archive_run(results, record_for(RR, "run-1"), location)
    renamed = [
        entry.model_copy(update={"name": ".run.lock"}) if entry.name == "x/lock" else entry
        for entry in record.files
    ]
    hand_made = record.model_copy(update={"files": tuple(renamed)})

    with pytest.raises(CorruptManifestError, match="'.run.lock', an output folder's own file"):
        download_record(location, hand_made, tmp_path / "pulled")
    assert not (tmp_path / "pulled").exists()


def test_a_folder_below_one_a_run_still_writes_is_not_pushed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    location = a_location(tmp_path)
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(outputs_for(RR).to_json_dict()))
    with claimed_folder(tmp_path / "ab", "python -m stages ab"):  # the A/B locks its --out only
        results = make_results(tmp_path / "ab" / "run-1" / "round-robin" / "perf")
        push = ["push", "--stack", "round-robin", "--outputs", str(outputs), "--stage", "perf"]
        push += ["--dir", str(results), "--run-id", "run-1", *store_args(location)]
        assert archive_cli(push) == 1
        error = one_line_error(capsys.readouterr().err, "push")
        assert "python -m stages ab" in error and f"holds {(tmp_path / 'ab').resolve()}" in error
    assert list(open_bucket(location).keys("")) == []


@pytest.mark.parametrize("planted", ["folder", "fifo"])
def test_something_not_a_file_at_a_manifests_key_is_named_and_nothing_is_deleted(
    tmp_path: Path, planted: str
) -> None:
    location = a_location(tmp_path)
    _, record = stopped_before_its_manifest(tmp_path, location)
    place = RunPlace.of(record)
    manifest = a_bucket(tmp_path).root / place.manifest_key(location)
    if planted == "folder":
        manifest.mkdir()
    else:
        os.mkfifo(manifest)
    stored = sorted(path for path in manifest.parent.rglob("*") if path.is_file())

    with pytest.raises(ArchiveError, match="not a regular file") as refused:
        clean_incomplete_run(location, *astuple(place), min_age=timedelta(0))

    assert "completed the run" not in str(refused.value)
    assert sorted(path for path in manifest.parent.rglob("*") if path.is_file()) == stored
