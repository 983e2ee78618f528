"""Reading runs back: the archive's catalogue, downloads, and the runs an interrupted push left.

The catalogue: the complete runs (those with a valid manifest), the newest one, or one named
run's manifest.

Downloading an archived run: its files written back under the names they were pushed with, each
checked against the manifest's size and sha256 before anything is written.

Interrupted pushes: runs with stored objects but no manifest. `list_incomplete_runs` finds them;
`clean_incomplete_run` deletes one, and refuses a run whose manifest exists (complete runs are
never deleted) or one written to so recently that its push may still be running.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import groupby
from pathlib import Path, PurePosixPath

from pydantic import ValidationError

from common.confined_paths import OutputFolderError, write_inside
from components.routing import RoutingProfile
from stages.archive.records import (
    ArchivedFile,
    ArchiveError,
    ArchiveLocation,
    CorruptManifestError,
    RunNotFoundError,
    RunPlace,
    RunRecord,
    Stage,
    UnusableStoredFile,
    describe,
    is_manifest_key,
    validation_summary,
)
from stages.archive.stores import ArchiveStore, StoredObject, open_bucket

MAX_MANIFEST_BYTES = 16 * 2**20  # a manifest of 10,000 files is about 1.5 MiB
DEFAULT_MIN_AGE = timedelta(minutes=10)

Warn = Callable[[str], None]


def warn_on_stderr(message: str) -> None:
    print(f"archive: warning: {message}", file=sys.stderr)


def list_runs(
    location: ArchiveLocation,
    stack: str | None = None,
    profile: RoutingProfile | str | None = None,
    stage: Stage | str | None = None,
    warn: Warn = warn_on_stderr,
) -> list[RunRecord]:
    """Complete runs, oldest first; optionally of one stack, profile and/or stage.

    An object at a manifest's key that is not that run's manifest (not JSON, not a RunRecord,
    another run's record, or gone while listing) is skipped with a warning naming its key and
    why: one bad object never hides the good runs.
    """
    bucket = open_bucket(location)
    search = location.search_prefix(stack, str(profile) if profile else None)
    wanted = [
        record
        for record in _readable_records(bucket, search, warn)
        if (profile is None or record.profile == profile)
        and (stage is None or record.stage == stage)
    ]
    return sorted(wanted, key=lambda record: (record.created_at, record.run_id, record.stage))


def latest_run(
    location: ArchiveLocation,
    stack: str | None = None,
    profile: RoutingProfile | str | None = None,
    stage: Stage | str = Stage.PERF,
    warn: Warn = warn_on_stderr,
) -> RunRecord:
    """The newest complete run of a stage (perf unless said), optionally of one stack/profile."""
    runs = list_runs(location, stack=stack, profile=profile, stage=stage, warn=warn)
    if not runs:
        which = " ".join(
            f"{name}={value}" for name, value in [("stack", stack), ("profile", profile)] if value
        )
        raise RunNotFoundError(
            f"no archived {stage} run ({which or 'any stack or profile'}) in "
            f"s3://{location.bucket}/{location.prefix}: push one with `archive push`"
        )
    return runs[-1]


def fetch_record(
    location: ArchiveLocation,
    stack: str,
    profile: RoutingProfile | str,
    run_id: str,
    stage: Stage | str = Stage.PERF,
) -> RunRecord:
    """The manifest of one archived run; a corrupt one is a CorruptManifestError naming it."""
    bucket = open_bucket(location)
    key = RunPlace.checked(stack, str(profile), run_id, str(stage)).manifest_key(location)
    try:
        return read_record(bucket, key)
    except RunNotFoundError:
        raise RunNotFoundError(
            f"no complete {stage} run {run_id!r} of {stack}/{profile} at {bucket.url(key)} "
            f"({bucket.endpoint}): `archive list` shows the archived runs"
        ) from None


def read_record(bucket: ArchiveStore, key: str) -> RunRecord:
    """The manifest at `key`, which must be a valid RunRecord of the run its key names."""
    try:
        data = bucket.read(key, max_size=MAX_MANIFEST_BYTES)
    except UnusableStoredFile as error:
        raise _corrupt(bucket, key, str(error)) from None
    if len(data) > MAX_MANIFEST_BYTES:
        raise _corrupt(bucket, key, f"larger than {MAX_MANIFEST_BYTES // 2**20} MiB")
    try:
        record = RunRecord.model_validate_json(data)
    except ValidationError as error:
        raise _corrupt(bucket, key, validation_summary(error)) from None
    if RunPlace.of(record).manifest_key(bucket.location) != key:
        raise _corrupt(bucket, key, f"it describes another run ({record.describe()})")
    return record


def _readable_records(bucket: ArchiveStore, search: str, warn: Warn) -> Iterator[RunRecord]:
    for key in bucket.keys(search):
        if not is_manifest_key(bucket.location, key):
            continue
        try:
            yield read_record(bucket, key)
        except (CorruptManifestError, RunNotFoundError) as error:
            warn(f"skipped {error}")


def _corrupt(bucket: ArchiveStore, key: str, reason: str) -> CorruptManifestError:
    return CorruptManifestError(f"{bucket.url(key)} is not a valid run manifest: {reason}")


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
    _must_lay_out(record)
    bucket = open_bucket(location)
    contents = [(entry, _verified_read(bucket, record, entry)) for entry in record.files]
    dest_dir.mkdir(parents=True, exist_ok=True)
    for entry, data in contents:
        try:  # each name checked again on the way: nothing through a link, nothing outside
            write_inside(dest_dir, entry.name, data)
        except OutputFolderError as error:
            raise ArchiveError(f"pull stopped: {error}") from None
    return dest_dir


def _must_lay_out(record: RunRecord) -> None:
    """The record's files fit in one folder: no name twice, none both a file and a folder."""
    names = Counter(entry.name for entry in record.files)
    folders = {str(parent) for name in names for parent in PurePosixPath(name).parents}
    clash = sorted({name for name, count in names.items() if count > 1} | (names.keys() & folders))
    if clash:
        raise CorruptManifestError(
            f"the manifest of {record.describe()} lists {clash[0]!r} twice, or as a file and a "
            "folder: nothing was downloaded"
        )


def _verified_read(bucket: ArchiveStore, record: RunRecord, entry: ArchivedFile) -> bytes:
    key = RunPlace.of(record).file_key(bucket.location, entry.name)
    data = bucket.read(key)
    if describe(entry.name, data) != entry:
        raise ArchiveError(
            f"{bucket.url(key)} does not match its manifest (size or sha256): the archive "
            "was changed behind its back"
        )
    return data


@dataclass(frozen=True)
class IncompleteRun:
    """A run's objects without its manifest: what an interrupted push leaves."""

    place: RunPlace
    objects: int
    size: int
    last_written: datetime


def list_incomplete_runs(
    location: ArchiveLocation, stack: str | None = None
) -> list[IncompleteRun]:
    """Every run (optionally of one stack) that has objects but no manifest, in key order."""
    bucket = open_bucket(location)
    incomplete = []
    for place, group in groupby(_objects_in_runs(bucket, stack), key=lambda item: item[0]):
        objects = [stored for _, stored in group]
        if all(stored.key != place.manifest_key(location) for stored in objects):
            incomplete.append(_summary(place, objects))
    return incomplete


def clean_incomplete_run(
    location: ArchiveLocation,
    stack: str,
    profile: str,
    run_id: str,
    stage: str,
    *,
    min_age: timedelta = DEFAULT_MIN_AGE,
    dry_run: bool = False,
) -> list[str]:
    """Delete the objects of one incomplete run (all of them, or none on a refusal); returns
    their keys. With `dry_run`, deletes nothing."""
    place = RunPlace.checked(stack, str(profile), run_id, str(stage))
    bucket = open_bucket(location)
    objects = list(bucket.objects(place.prefix(location)))
    manifest = place.manifest_key(location)
    if any(stored.key == manifest for stored in objects):
        raise ArchiveError(
            f"run {place.describe()} is complete ({bucket.url(manifest)} exists): `archive clean` "
            "deletes only incomplete runs, never an archived one"
        )
    if not objects:
        raise RunNotFoundError(
            f"nothing is stored under {bucket.url(place.prefix(location))} at {bucket.endpoint}: "
            "`archive incomplete` lists the incomplete runs"
        )
    _require_quiet_for(place, objects, min_age)
    keys = [stored.key for stored in objects]
    if not dry_run:
        bucket.delete(keys)
    return keys


def _objects_in_runs(
    bucket: ArchiveStore, stack: str | None
) -> Iterator[tuple[RunPlace, StoredObject]]:
    """Each object inside a run's folder, with its run. Keys are listed in order, so the
    objects of one run come one after another."""
    for stored in bucket.objects(bucket.location.search_prefix(stack)):
        place = RunPlace.of_key(bucket.location, stored.key)
        if place is not None:
            yield place, stored


def _summary(place: RunPlace, objects: list[StoredObject]) -> IncompleteRun:
    return IncompleteRun(
        place=place,
        objects=len(objects),
        size=sum(stored.size for stored in objects),
        last_written=max(stored.last_modified for stored in objects),
    )


def _require_quiet_for(place: RunPlace, objects: list[StoredObject], min_age: timedelta) -> None:
    """A push that is still running looks like an incomplete run: leave young runs alone."""
    age = datetime.now(UTC) - max(stored.last_modified for stored in objects)
    if age < min_age:
        raise ArchiveError(
            f"run {place.describe()} was written to {age.total_seconds() / 60:.1f} minutes ago, "
            f"less than {min_age.total_seconds() / 60:g}: its push may still be running. Wait, "
            "or pass --older-than 0 if it is not"
        )
