"""Archive: stage results in S3 (or a local directory), keyed by run, never overwritten.

docs/archive.md holds the contract: the key layout, the manifest, conditional writes, the secret
scan, resume / incomplete / clean, where the store is and who you are. This package is the
archive's one entry point: push a result directory (`archive_run`, `resume_run`), read runs back
(`list_runs`, `latest_run`, `fetch_record`, `download_record`) and find or delete what an
interrupted push left (`list_incomplete_runs`, `clean_incomplete_run`). Beside it: records (the
run, its errors and keys), stores (S3, a local directory), report_inputs (a report from archived
runs) and cli (`python -m stages archive`).

Before anything is pushed, every file is described (size, sha256) and scanned for obvious secrets:
a hit names the file and the kind of secret, never the value, and refuses the whole run. Files go
first and the manifest last, so a run is listed only once it is whole; a pull writes nothing
until every file matches the manifest's sizes and digests.

Over 300 lines: one run's way into the store and back out, the writer and the readers sharing
the manifest's reading, the secret scan and the keys of `RunPlace`.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import ValidationError

from common.confined_paths import OutputFolderError, write_inside
from common.credentials import (
    credential_kind,
    credential_kind_in_bytes,
    is_secret_env_name,
    masked_document,
)
from common.input_files import MAX_INPUT_BYTES, InputFileError, read_bytes
from common.output_folders import OWNERSHIP_FILES
from common.terminal import visible
from components.routing import RoutingProfile
from stages.archive.records import DEFAULT_PREFIX as DEFAULT_PREFIX
from stages.archive.records import ArchiveConflictError as ArchiveConflictError
from stages.archive.records import ArchivedFile as ArchivedFile
from stages.archive.records import ArchiveError as ArchiveError
from stages.archive.records import ArchiveLocation as ArchiveLocation
from stages.archive.records import CorruptManifestError as CorruptManifestError
from stages.archive.records import DestinationNotEmptyError as DestinationNotEmptyError
from stages.archive.records import RunCleanedError as RunCleanedError
from stages.archive.records import RunNotFoundError as RunNotFoundError
from stages.archive.records import RunPlace as RunPlace
from stages.archive.records import RunRecord as RunRecord
from stages.archive.records import Stage as Stage
from stages.archive.records import UnusableStoredFile, describe, validation_summary
from stages.archive.records import current_commit as current_commit
from stages.archive.records import new_run_id as new_run_id
from stages.archive.stores import Store, StoredObject, open_bucket

_MIN_SECRET_LENGTH = 8  # shorter values match too much ordinary text to mean anything
MAX_MANIFEST_BYTES = 16 * 2**20  # a manifest of 10,000 files is about 1.5 MiB
DEFAULT_MIN_AGE = timedelta(minutes=10)
INTERRUPTED_ADVICE = (
    "If an earlier push of this run was interrupted, finish it with `archive push --resume` "
    "(same arguments and run id) or delete it with `archive clean`; otherwise push with a new "
    "run id."
)
CHANGED_ADVICE = (
    "Push with a new run id, or delete the incomplete run with `archive clean` and push again."
)
CLEANED = b'{"archive clean": "this run was deleted; its run id stays taken"}\n'
"""What `archive clean` stores at an incomplete run's manifest key before it deletes the run's
files, and leaves there: the store writes only new keys, so no push of the run, however late,
can write its manifest over deleted files. A clean that stopped halfway is finished by the
next one; a pipeline pushes again under a new run id."""
COMPLETED_MEANWHILE = "A push completed the run while `archive clean` ran: nothing was deleted."

ManifestState = Literal["complete", "cleaned", "none"]
"""What a run's manifest key holds: its manifest (or anything else), `CLEANED`, or nothing."""
CheckedFile = tuple[ArchivedFile, Path]
Warn = Callable[[str], None]


def warn_on_stderr(message: str) -> None:
    """One line; a key or manifest from the store is anyone's text, its controls escaped."""
    print(f"archive: warning: {visible(message)}", file=sys.stderr)


def find_secret(data: bytes) -> str | None:
    """What kind of obvious secret `data` contains (never the secret itself), or None."""
    kind = credential_kind_in_bytes(data)  # by shape: common.credentials
    if kind:
        return kind
    for name, value in os.environ.items():
        secret_named = is_secret_env_name(name)  # the masker's rule: PGPASSWORD, DB_PASS, NGC_KEY
        if secret_named and len(value) >= _MIN_SECRET_LENGTH and value.encode() in data:
            return f"the value of ${name}"
    return None


def checked_files(directory: Path) -> list[CheckedFile]:
    """Every regular file below `directory`, described and free of secrets, sorted by name."""
    if not directory.is_dir():
        what = "is not a directory" if directory.exists() else "does not exist"
        raise ArchiveError(f"result directory {directory} {what}")
    files = sorted(
        (path.relative_to(directory).as_posix(), path)
        for path in directory.rglob("*")
        if path.is_file() and path.name not in OWNERSHIP_FILES
    )
    if not files:
        raise ArchiveError(f"result directory {directory} holds no files: nothing to archive")
    checked = []
    for name, path in files:
        if not name.isprintable():  # a key and a manifest entry: no control character, and
            # no undecodable byte (Python holds it as a surrogate, which UTF-8 cannot encode)
            raise ArchiveError(
                f"a file name below {directory} is not printable UTF-8 ({visible(name)}): "
                "refusing to archive the run; rename it"
            )
        if credential_kind(name):  # a file's name becomes part of its key
            raise ArchiveError(
                f"a file name below {directory} holds {credential_kind(name)}: refusing to "
                "archive the run; rename it (secrets belong in the environment or Pulumi config)"
            )
        data = _result_bytes(path)
        secret = find_secret(data)
        if secret:
            raise ArchiveError(
                f"{path} contains {secret}: refusing to archive the run; remove it from the "
                "results (secrets belong in the environment or Pulumi config, never in results)"
            )
        checked.append((describe(name, data), path))
    return checked


def _result_bytes(path: Path) -> bytes:
    """A result file, at most MAX_INPUT_BYTES of it (one swapped for a FIFO since it was listed
    is refused, not waited on)."""
    try:
        return read_bytes(path, "result file", MAX_INPUT_BYTES)
    except InputFileError as error:
        raise ArchiveError(f"{error}: refusing to archive the run") from None


@dataclass(frozen=True)
class PushOutcome:
    """What a push did: the stored record, files uploaded now and files kept."""

    record: RunRecord
    uploaded: int
    kept: int
    already_complete: bool = False


def archive_plan(directory: Path, record: RunRecord, location: ArchiveLocation) -> list[str]:
    """The keys `archive_run` would write, manifest last, after the same secret scan; touches
    no store (`archive push --dry-run`)."""
    place = RunPlace.of(record)
    files = [place.file_key(location, entry.name) for entry, _ in checked_files(directory)]
    return [*files, place.manifest_key(location)]


def archive_run(directory: Path, record: RunRecord, location: ArchiveLocation) -> RunRecord:
    """Upload every file below `directory` as one stage of one run, then its manifest; returns
    the record as stored (with the file list). Any key of the run that exists already is an
    ArchiveConflictError; secrets in the files or an unusable store, an ArchiveError."""
    return _push(directory, record, location, resume=False).record


def resume_run(directory: Path, record: RunRecord, location: ArchiveLocation) -> PushOutcome:
    """Finish an interrupted push of the same run from the same directory: stored files that
    are exactly the local ones kept, the rest uploaded, then the manifest; any other stored file
    is a conflict found before any upload. A complete run with the same files stays as it is."""
    return _push(directory, record, location, resume=True)


def _push(
    directory: Path, record: RunRecord, location: ArchiveLocation, resume: bool
) -> PushOutcome:
    checked = checked_files(directory)
    stored = record.model_copy(update={"files": tuple(entry for entry, _ in checked)})
    manifest = masked_document(stored.model_dump_json(indent=2).encode())
    if len(manifest) > MAX_MANIFEST_BYTES:  # no reader would take it: refused before any upload
        raise ArchiveError(
            f"{directory} holds {len(checked)} files, whose manifest would pass the "
            f"{MAX_MANIFEST_BYTES // 2**20} MiB every reader takes: archive fewer files"
        )
    bucket = open_bucket(location)
    place = RunPlace.of(stored)
    manifest_key = place.manifest_key(location)
    if bucket.exists(manifest_key):
        if not resume:
            raise _cleaned_error(bucket, manifest_key) or bucket.conflict(manifest_key)
        complete = read_record(bucket, manifest_key)
        if complete.files != stored.files:
            advice = f"The run is complete, with other files than {directory}: use a new run id."
            raise bucket.conflict(manifest_key, advice)
        return PushOutcome(complete, uploaded=0, kept=len(checked), already_complete=True)
    missing = _not_yet_stored(bucket, place, checked, directory) if resume else checked
    for entry, path in missing:
        data = _result_bytes(path)
        if describe(entry.name, data) != entry:
            raise ArchiveError(f"{path} changed while it was being archived: archive it again")
        bucket.put_new(place.file_key(location, entry.name), data, INTERRUPTED_ADVICE)
    # The manifest last: listing looks only at manifests, so no run is seen before its files.
    bucket.put_new(manifest_key, manifest)
    return PushOutcome(stored, uploaded=len(missing), kept=len(checked) - len(missing))


def _not_yet_stored(
    bucket: Store, place: RunPlace, checked: list[CheckedFile], directory: Path
) -> list[CheckedFile]:
    """The local files no earlier push stored; every stored one must be exactly a local file."""
    location = bucket.location
    stored_sizes = {item.key: item.size for item in bucket.objects(place.files_prefix(location))}
    local_keys = {place.file_key(location, entry.name) for entry, _ in checked}
    strangers = sorted(stored_sizes.keys() - local_keys)
    if strangers:
        more = f" (and {len(strangers) - 1} more)" if len(strangers) > 1 else ""
        raise ArchiveConflictError(
            f"{bucket.url(strangers[0])}{more} is stored for this run but not in {directory}: "
            f"the directory changed since the interrupted push. {CHANGED_ADVICE}"
        )
    missing = []
    for entry, path in checked:
        key = place.file_key(location, entry.name)
        if key not in stored_sizes:
            missing.append((entry, path))
        elif stored_sizes[key] != entry.size or bucket.sha256(key) != entry.sha256:
            raise ArchiveConflictError(
                f"{bucket.url(key)} differs from {path} (size or sha256): the archive never "
                f"overwrites a result. {CHANGED_ADVICE}"
            )
    return missing


def list_runs(
    location: ArchiveLocation,
    stack: str | None = None,
    profile: RoutingProfile | str | None = None,
    stage: Stage | str | None = None,
    warn: Warn = warn_on_stderr,
) -> list[RunRecord]:
    """Complete runs, oldest first; optionally of one stack, profile and/or stage. An object at
    a manifest's key that is not that run's manifest (not JSON, not a RunRecord, another run's
    record, gone while listing) is skipped, warning why: it never hides the good runs."""
    bucket = open_bucket(location)
    runs = []
    for key in bucket.keys(location.search_prefix(stack, str(profile) if profile else None)):
        place = RunPlace.of_key(location, key)
        if place is None or key != place.manifest_key(location):
            continue  # a stored file, not a manifest
        try:
            record = read_record(bucket, key)
        except RunCleanedError:
            continue  # no run: `archive clean` deleted it
        except (CorruptManifestError, RunNotFoundError) as error:
            warn(f"skipped {error}")
            continue
        if (profile is None or record.profile == profile) and stage in (None, record.stage):
            runs.append(record)
    return sorted(runs, key=lambda record: (record.created_at, record.run_id, record.stage))


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
    except RunCleanedError:
        raise
    except RunNotFoundError:
        raise RunNotFoundError(
            f"no complete {stage} run {run_id!r} of {stack}/{profile} at {bucket.url(key)} "
            f"({bucket.endpoint}): `archive list` shows the archived runs"
        ) from None


def read_record(bucket: Store, key: str) -> RunRecord:
    """The manifest at `key`, which must be a valid RunRecord of the run its key names."""

    def corrupt(reason: str) -> CorruptManifestError:
        return CorruptManifestError(f"{bucket.url(key)} is not a valid run manifest: {reason}")

    try:
        data = bucket.read(key, max_size=MAX_MANIFEST_BYTES)
    except UnusableStoredFile as error:
        raise corrupt(str(error)) from None
    if len(data) > MAX_MANIFEST_BYTES:
        raise corrupt(f"larger than {MAX_MANIFEST_BYTES // 2**20} MiB")
    if data == CLEANED:
        raise _cleaned(bucket, key)
    try:
        record = RunRecord.model_validate_json(data)
    except ValidationError as error:
        raise corrupt(validation_summary(error)) from None
    if RunPlace.of(record).manifest_key(bucket.location) != key:
        raise corrupt(f"it describes another run ({record.describe()})")
    return record


def download_record(location: ArchiveLocation, record: RunRecord, dest_dir: Path) -> Path:
    """Download the files a record lists into `dest_dir` (new or empty), written only once every
    file matches the record's size and sha256: a failed download leaves it as it was. A claim's
    own files (`archive pull` claims its --dest) do not count."""
    if dest_dir.exists() and any(p.name not in OWNERSHIP_FILES for p in dest_dir.iterdir()):
        raise DestinationNotEmptyError(
            f"{dest_dir} is not empty: download a run into a new or empty directory"
        )
    # The record's files fit in one folder: no name twice, none both a file and a folder.
    names = Counter(entry.name for entry in record.files)
    folders = {str(parent) for name in names for parent in PurePosixPath(name).parents}
    claims = {name for name in names if PurePosixPath(name).name in OWNERSHIP_FILES}
    clash = sorted({name for name, count in names.items() if count > 1} | (names.keys() & folders))
    if claims:  # no push stores one: a hand-made manifest, which would take over the folder
        raise CorruptManifestError(
            f"the manifest of {record.describe()} lists {min(claims)!r}, an output "
            "folder's own file: nothing was downloaded"
        )
    if clash:
        raise CorruptManifestError(
            f"the manifest of {record.describe()} lists {clash[0]!r} twice, or as a file and a "
            "folder: nothing was downloaded"
        )
    bucket, place = open_bucket(location), RunPlace.of(record)
    contents = []
    for entry in record.files:
        key = place.file_key(location, entry.name)
        data = bucket.read(key)
        if describe(entry.name, data) != entry:
            raise ArchiveError(
                f"{bucket.url(key)} does not match its manifest (size or sha256): the archive "
                "was changed behind its back"
            )
        contents.append((entry.name, data))
    dest_dir.mkdir(parents=True, exist_ok=True)
    for name, data in contents:
        try:  # each name checked again on the way: nothing through a link, nothing outside
            write_inside(dest_dir, name, data)
        except OutputFolderError as error:
            raise ArchiveError(f"pull stopped: {error}") from None
    return dest_dir


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
    runs: dict[RunPlace, list[StoredObject]] = {}
    for stored in open_bucket(location).objects(location.search_prefix(stack)):
        place = RunPlace.of_key(location, stored.key)
        if place is not None:
            runs.setdefault(place, []).append(stored)
    bucket = open_bucket(location)
    return [
        IncompleteRun(place, len(objects), sum(o.size for o in objects), _last_written(objects))
        for place, objects in runs.items()
        if _incomplete(_manifest_state(bucket, place, objects), objects)
    ]


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
    """Delete the files of one incomplete run (all of them, or none on a refusal), leaving
    `CLEANED` at its manifest key; returns their keys. With `dry_run`, deletes nothing."""
    place = RunPlace.checked(stack, str(profile), run_id, str(stage))
    bucket = open_bucket(location)
    objects = list(bucket.objects(place.prefix(location)))
    manifest = place.manifest_key(location)
    state = _manifest_state(bucket, place, objects)
    if state == "complete":
        raise ArchiveError(
            f"run {place.describe()} is complete ({bucket.url(manifest)} exists): `archive clean` "
            "deletes only incomplete runs, never an archived one"
        )
    if not objects:
        raise RunNotFoundError(
            f"nothing is stored under {bucket.url(place.prefix(location))} at {bucket.endpoint}: "
            "`archive incomplete` lists the incomplete runs"
        )
    files = [stored.key for stored in objects if stored.key != manifest]
    if state == "cleaned" and not files:
        raise RunNotFoundError(f"run {place.describe()} was deleted by `archive clean` already")
    # A push that is still running looks like an incomplete run: leave young runs alone. A clean
    # that stopped halfway is finished whatever its age.
    age = datetime.now(UTC) - _last_written(objects)
    if state != "cleaned" and min_age > timedelta(0) and age < min_age:  # 0: any clock
        raise ArchiveError(
            f"run {place.describe()} was written to {age.total_seconds() / 60:.1f} minutes ago, "
            f"less than {min_age.total_seconds() / 60:g}: its push may still be running. Wait, "
            "or pass --older-than 0 if it is not"
        )
    if not dry_run:
        if state != "cleaned":  # a push that completes the run first makes this a conflict
            bucket.put_new(manifest, CLEANED, COMPLETED_MEANWHILE)
        bucket.delete(files)
    return files


def _manifest_state(bucket: Store, place: RunPlace, objects: list[StoredObject]) -> ManifestState:
    """'complete' (an object at the run's manifest key), 'cleaned' (`CLEANED` there) or 'none'."""
    manifest = place.manifest_key(bucket.location)
    found = next((stored for stored in objects if stored.key == manifest), None)
    if found is None:
        return "none"
    return "cleaned" if _is_mark(bucket, found) else "complete"


def _incomplete(state: ManifestState, objects: list[StoredObject]) -> bool:
    """No manifest, or a clean's mark beside files it has yet to delete."""
    return state == "none" or (state == "cleaned" and len(objects) > 1)


def _cleaned_error(bucket: Store, key: str) -> RunCleanedError | None:
    """The refusal for a push to a run `archive clean` deleted, or None: not such a run."""
    found = next((stored for stored in bucket.objects(key) if stored.key == key), None)
    return _cleaned(bucket, key) if found is not None and _is_mark(bucket, found) else None


def _cleaned(bucket: Store, key: str) -> RunCleanedError:
    return RunCleanedError(
        f"{bucket.url(key)} marks a run `archive clean` deleted: its run id stays taken, push "
        "the results again with a new run id"
    )


def _is_mark(bucket: Store, stored: StoredObject) -> bool:
    """Whether `stored` is `archive clean`'s mark; only an object of its size is read."""
    if stored.size != len(CLEANED):
        return False
    try:
        return bucket.read(stored.key, max_size=len(CLEANED)) == CLEANED
    except ArchiveError:
        return False  # gone or unusable: no mark of a clean


def _last_written(objects: list[StoredObject]) -> datetime:
    return max(stored.last_modified for stored in objects)
