"""An archive in a local directory: the bucket's contract on a file system, for the lab.

`--endpoint-url file:///some/dir` puts the archive at `/some/dir/<bucket>/<key>`, with the same
guarantees as the S3 bucket (`stages.archive.store`): a write never replaces an object (the bytes go
to a temporary file that is then hard-linked into place, which fails if the name exists, so two
writers cannot both win) and a reader never sees half an object. The lab's A/B keeps its runs
here, so it resumes, skips and reports exactly as a cluster's run does against S3.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

from stages.archive.errors import ArchiveConflictError, ArchiveError, RunNotFoundError
from stages.archive.layout import ArchiveLocation
from stages.archive.store import NEW_RUN_ID_ADVICE, StoredObject

FILE_SCHEME = "file"


def is_directory_location(location: ArchiveLocation) -> bool:
    try:
        return urlsplit(location.endpoint_url or "").scheme == FILE_SCHEME
    except ValueError:  # not a URL at all: the S3 client says so, without showing it
        return False


class DirectoryBucket:
    """The bucket `location.bucket` as a directory under the `file://` endpoint."""

    def __init__(self, location: ArchiveLocation) -> None:
        self.location = location
        self.root = Path(urlsplit(location.endpoint_url or "").path).resolve() / location.bucket
        self.endpoint = f"file://{self.root.parent}"
        self.root.mkdir(parents=True, exist_ok=True)

    def url(self, key: str) -> str:
        return f"file://{self.root}/{key}"

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if self.root not in path.parents:
            raise ArchiveError(f"key {key!r} leaves the archive directory {self.root}")
        return path

    def put_new(self, key: str, body: bytes, advice: str = NEW_RUN_ID_ADVICE) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".incoming-", delete=False) as tmp:
            tmp.write(body)
        try:
            os.link(tmp.name, path)  # fails if the name exists: never an overwrite
        except FileExistsError:
            raise self.conflict(key, advice) from None
        finally:
            os.unlink(tmp.name)

    def conflict(self, key: str, advice: str = NEW_RUN_ID_ADVICE) -> ArchiveConflictError:
        return ArchiveConflictError(
            f"{self.url(key)} already exists: the archive never overwrites a result. {advice}"
        )

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def read(self, key: str, max_size: int | None = None) -> bytes:
        try:
            with self._path(key).open("rb") as stored:
                return stored.read() if max_size is None else stored.read(max_size + 1)
        except FileNotFoundError:
            raise RunNotFoundError(f"{self.url(key)} does not exist") from None

    def sha256(self, key: str) -> str:
        return hashlib.sha256(self.read(key)).hexdigest()

    def objects(self, prefix: str, limit: int | None = None) -> Iterator[StoredObject]:
        """Every object whose key starts with `prefix`, in key order (temporary files skipped)."""
        found = 0
        for path in sorted(p for p in self.root.rglob("*") if p.is_file()):
            key = path.relative_to(self.root).as_posix()
            if path.name.startswith(".incoming-") or not key.startswith(prefix):
                continue
            stat = path.stat()
            yield StoredObject(key, stat.st_size, datetime.fromtimestamp(stat.st_mtime, UTC))
            found += 1
            if limit is not None and found >= limit:
                return

    def keys(self, prefix: str) -> Iterator[str]:
        return (stored.key for stored in self.objects(prefix))

    def delete(self, keys: Sequence[str]) -> None:
        for key in keys:
            path = self._path(key)
            path.unlink(missing_ok=True)
            for parent in path.parents:  # empty folders go with their last object
                if parent == self.root or any(parent.iterdir()):
                    break
                parent.rmdir()
