"""Pushing a result directory as one stage of one run: files first, the manifest last, nothing
ever overwritten; and resuming a push that was interrupted before its manifest.

Before anything is pushed, the local result directory is read for archiving: every file described
(size, sha256) and scanned for obvious secrets. A hit names the file and the kind of secret, never
the value, and refuses the whole run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from common.credentials import (
    credential_kind,
    credential_kind_in_bytes,
    is_secret_env_name,
    masked_document,
)
from common.input_files import MAX_INPUT_BYTES, InputFileError, read_bytes
from common.output_folders import OWNERSHIP_FILES
from stages.archive.records import (
    ArchiveConflictError,
    ArchivedFile,
    ArchiveError,
    ArchiveLocation,
    RunPlace,
    RunRecord,
    describe,
)
from stages.archive.runs import read_record
from stages.archive.stores import ArchiveStore, open_bucket

_MIN_SECRET_LENGTH = 8  # shorter values match too much ordinary text to mean anything

CheckedFile = tuple[ArchivedFile, Path]

INTERRUPTED_ADVICE = (
    "If an earlier push of this run was interrupted, finish it with `archive push --resume` "
    "(same arguments and run id) or delete it with `archive clean`; otherwise push with a new "
    "run id."
)
CHANGED_ADVICE = (
    "Push with a new run id, or delete the incomplete run with `archive clean` and push again."
)


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
    """Every file below `directory`, described and free of secrets, sorted by name."""
    checked = []
    for name, path in _result_files(directory):
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


def unchanged_bytes(entry: ArchivedFile, path: Path) -> bytes:
    """The file's bytes, provided they are still the ones scanned and described."""
    data = _result_bytes(path)
    if describe(entry.name, data) != entry:
        raise ArchiveError(f"{path} changed while it was being archived: archive it again")
    return data


def _result_bytes(path: Path) -> bytes:
    """A result file, at most MAX_INPUT_BYTES of it (one swapped for a FIFO since it was listed
    is refused, not waited on)."""
    try:
        return read_bytes(path, "result file", MAX_INPUT_BYTES)
    except InputFileError as error:
        raise ArchiveError(f"{error}: refusing to archive the run") from None


def _result_files(directory: Path) -> list[tuple[str, Path]]:
    """Every regular file below `directory`, as (posix relative name, path), sorted by name."""
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
    return files


@dataclass(frozen=True)
class PushOutcome:
    """What a resumed push did: the stored record, files uploaded now and files kept."""

    record: RunRecord
    uploaded: int
    kept: int
    already_complete: bool = False


def archive_plan(directory: Path, record: RunRecord, location: ArchiveLocation) -> list[str]:
    """The keys `archive_run` would write, manifest last, after the same secret scan; touches
    no store (`archive push --dry-run`)."""
    checked, stored = _prepared(directory, record)
    place = RunPlace.of(stored)
    files = [place.file_key(location, entry.name) for entry, _ in checked]
    return [*files, place.manifest_key(location)]


def archive_run(directory: Path, record: RunRecord, location: ArchiveLocation) -> RunRecord:
    """Upload every file below `directory` as one stage of one run, then its manifest.

    Returns the record as stored (with the file list). Raises ArchiveConflictError if any key of
    the run already exists, ArchiveError for secrets in the files or a store that cannot be used.
    """
    checked, stored = _prepared(directory, record)
    bucket = open_bucket(location)
    manifest_key = RunPlace.of(stored).manifest_key(location)
    if bucket.exists(manifest_key):
        raise bucket.conflict(manifest_key)
    _upload(bucket, stored, checked)
    return stored


def resume_run(directory: Path, record: RunRecord, location: ArchiveLocation) -> PushOutcome:
    """Finish an interrupted push of the same run from the same directory.

    Files already stored are kept if they are exactly the local ones (size and sha256) and the
    missing ones uploaded, still with If-None-Match; any stored file that differs, or that the
    directory no longer has, is a conflict found before anything is uploaded. The manifest is
    written last. A run that is already complete with the same files is left as it is.
    """
    checked, stored = _prepared(directory, record)
    bucket = open_bucket(location)
    place = RunPlace.of(stored)
    manifest_key = place.manifest_key(location)
    if bucket.exists(manifest_key):
        complete = read_record(bucket, manifest_key)
        if complete.files != stored.files:
            advice = f"The run is complete, with other files than {directory}: use a new run id."
            raise bucket.conflict(manifest_key, advice)
        return PushOutcome(complete, uploaded=0, kept=len(checked), already_complete=True)
    missing = _not_yet_stored(bucket, place, checked, directory)
    _upload(bucket, stored, missing)
    return PushOutcome(stored, uploaded=len(missing), kept=len(checked) - len(missing))


def _prepared(directory: Path, record: RunRecord) -> tuple[list[CheckedFile], RunRecord]:
    """The directory's files, scanned, and the record that will list them."""
    checked = checked_files(directory)
    return checked, record.model_copy(update={"files": tuple(entry for entry, _ in checked)})


def _upload(bucket: ArchiveStore, stored: RunRecord, files: list[CheckedFile]) -> None:
    """The files, then the manifest: listing looks only at manifests, so a run is never seen
    before all its files are stored."""
    place = RunPlace.of(stored)
    for entry, path in files:
        key = place.file_key(bucket.location, entry.name)
        bucket.put_new(key, unchanged_bytes(entry, path), INTERRUPTED_ADVICE)
    manifest = stored.model_dump_json(indent=2).encode()
    bucket.put_new(place.manifest_key(bucket.location), masked_document(manifest))


def _not_yet_stored(
    bucket: ArchiveStore, place: RunPlace, checked: list[CheckedFile], directory: Path
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
