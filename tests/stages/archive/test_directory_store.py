"""The archive in a local directory (`--endpoint-url file:///dir`): the bucket's contract on disk."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest

from stages.archive import ArchiveConflictError, ArchiveError, ArchiveLocation, RunNotFoundError
from stages.archive.stores import DirectoryBucket, open_bucket


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
    assert not [p for p in (tmp_path / "archive").rglob(".incoming-*")]


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
