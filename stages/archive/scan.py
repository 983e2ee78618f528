"""The local result directory, read for archiving: every file described (size, sha256) and
scanned for obvious secrets. A hit names the file and the kind of secret, never the value."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from common.credentials import credential_kind_in_bytes
from common.output_folders import OWNERSHIP_FILES
from stages.archive.errors import ArchiveError
from stages.archive.records import ArchivedFile

_SECRET_VARIABLE = re.compile(r"(?:SECRET|TOKEN|PASSWORD|PASSPHRASE|API_KEY|ACCESS_KEY)$")
_MIN_SECRET_LENGTH = 8  # shorter values match too much ordinary text to mean anything

CheckedFile = tuple[ArchivedFile, Path]


def find_secret(data: bytes) -> str | None:
    """What kind of obvious secret `data` contains (never the secret itself), or None."""
    kind = credential_kind_in_bytes(data)  # by shape: common.credentials
    if kind:
        return kind
    for name, value in os.environ.items():
        secret_named = _SECRET_VARIABLE.search(name.upper())
        if secret_named and len(value) >= _MIN_SECRET_LENGTH and value.encode() in data:
            return f"the value of ${name}"
    return None


def describe(name: str, data: bytes) -> ArchivedFile:
    return ArchivedFile(name=name, size=len(data), sha256=hashlib.sha256(data).hexdigest())


def checked_files(directory: Path) -> list[CheckedFile]:
    """Every file below `directory`, described and free of secrets, sorted by name."""
    checked = []
    for name, path in _result_files(directory):
        data = path.read_bytes()
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
    data = path.read_bytes()
    if describe(entry.name, data) != entry:
        raise ArchiveError(f"{path} changed while it was being archived: archive it again")
    return data


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
