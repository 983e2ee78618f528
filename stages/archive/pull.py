"""Downloading an archived run: its files written back under the names they were pushed with,
each checked against the manifest's size and sha256 before anything is written."""

from __future__ import annotations

from pathlib import Path

from components.routing import RoutingProfile
from stages.archive.errors import ArchiveError
from stages.archive.layout import ArchiveLocation, RunPlace
from stages.archive.listing import fetch_record
from stages.archive.records import ArchivedFile, RunRecord, Stage
from stages.archive.scan import describe
from stages.archive.stores import ArchiveStore, open_bucket


def download_run(
    location: ArchiveLocation,
    stack: str,
    profile: RoutingProfile | str,
    run_id: str,
    dest_dir: Path,
    stage: Stage | str = Stage.PERF,
) -> Path:
    """Download one archived run into `dest_dir` (new or empty), under its pushed file names."""
    return download_record(
        location, fetch_record(location, stack, profile, run_id, stage), dest_dir
    )


def download_record(location: ArchiveLocation, record: RunRecord, dest_dir: Path) -> Path:
    """Download the files a record lists, checked against its sizes and sha256 digests.

    Nothing is written unless every file matches, so a failed download leaves `dest_dir` as it
    was (it must be new or empty).
    """
    if dest_dir.exists() and any(dest_dir.iterdir()):
        raise ArchiveError(f"{dest_dir} is not empty: download a run into a new or empty directory")
    bucket = open_bucket(location)
    contents = [(entry, _verified_read(bucket, record, entry)) for entry in record.files]
    dest_dir.mkdir(parents=True, exist_ok=True)
    for entry, data in contents:
        target = dest_dir / entry.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return dest_dir


def _verified_read(bucket: ArchiveStore, record: RunRecord, entry: ArchivedFile) -> bytes:
    key = RunPlace.of(record).file_key(bucket.location, entry.name)
    data = bucket.read(key)
    if describe(entry.name, data) != entry:
        raise ArchiveError(
            f"{bucket.url(key)} does not match its manifest (size or sha256): the archive "
            "was changed behind its back"
        )
    return data
