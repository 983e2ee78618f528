"""Where an archive lives: an S3 bucket, or a local directory (`--endpoint-url file:///dir`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from stages.archive.directory_store import DirectoryBucket, is_directory_location
from stages.archive.errors import ArchiveConflictError
from stages.archive.layout import ArchiveLocation
from stages.archive.store import NEW_RUN_ID_ADVICE, Bucket, StoredObject


class ArchiveStore(Protocol):
    """What the archive needs of a store: an S3 bucket (`Bucket`), or a local directory
    (`stages.archive.directory_store.DirectoryBucket`, for `--endpoint-url file:///dir`)."""

    location: ArchiveLocation
    endpoint: str

    def url(self, key: str) -> str: ...
    def put_new(self, key: str, body: bytes, advice: str = NEW_RUN_ID_ADVICE) -> None: ...
    def conflict(self, key: str, advice: str = NEW_RUN_ID_ADVICE) -> ArchiveConflictError: ...
    def exists(self, key: str) -> bool: ...
    def read(self, key: str, max_size: int | None = None) -> bytes: ...
    def sha256(self, key: str) -> str: ...
    def objects(self, prefix: str, limit: int | None = None) -> Iterator[StoredObject]: ...
    def keys(self, prefix: str) -> Iterator[str]: ...
    def delete(self, keys: Sequence[str]) -> None: ...


def open_bucket(location: ArchiveLocation) -> ArchiveStore:
    """The store `location` names: a local directory for a `file://` endpoint, else S3."""
    if is_directory_location(location):
        return DirectoryBucket(location)
    return Bucket(location)
