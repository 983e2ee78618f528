"""Where an archive lives: an S3 bucket, or a local directory (`--endpoint-url file:///dir`),
behind one interface (`ArchiveStore`); `open_bucket` chooses between them.

The S3 bucket (`Bucket`): one boto3 client, writes that never overwrite, server-side sha256
checksums, and every failure turned into an `ArchiveError` that names the key and the fix. Only
the standard AWS chain supplies credentials; messages show the endpoint without any user-info
part, and never a credential.

The local directory (`DirectoryBucket`): the bucket's contract on a file system, for the lab.
`--endpoint-url file:///some/dir` puts the archive at `/some/dir/<bucket>/<key>`, with the same
guarantees as the S3 bucket: a write never replaces an object (the bytes go to a temporary file
that is then hard-linked into place, which fails if the name exists, so two writers cannot both
win) and a reader never sees half an object. The lab's A/B keeps its runs here, so it resumes,
skips and reports exactly as a cluster's run does against S3.

Over 300 lines: the S3 bucket and the local directory implement one interface (`ArchiveStore`)
and share its stored-object type and advice, and the choice between them is a few lines; apart,
they were three modules, two of them importing the S3 bucket's module for what they share.
"""

from __future__ import annotations

import base64
import hashlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import boto3  # type: ignore[import-untyped]
from botocore.config import Config  # type: ignore[import-untyped]
from botocore.exceptions import (  # type: ignore[import-untyped]
    BotoCoreError,
    ClientError,
    HTTPClientError,
    NoCredentialsError,
    ProfileNotFound,
)
from botocore.exceptions import ConnectionError as BotoConnectionError

from common.confined_paths import OutputFolderError, inside, remove_inside
from common.credentials import mask
from common.input_files import MAX_INPUT_BYTES, InputFileError, InputFileMissing, read_bytes
from stages.archive.records import (
    ArchiveConflictError,
    ArchiveError,
    ArchiveLocation,
    RunNotFoundError,
    UnusableStoredFile,
)

NEW_RUN_ID_ADVICE = "Push again with a new run id (--run-id, or leave it out for a fresh one)."
DELETE_BATCH = 1000  # the most keys one DeleteObjects request takes

_CREDENTIAL_CODES = frozenset(
    {
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "AccessDenied",
        "InvalidToken",
        "ExpiredToken",
        "TokenRefreshRequired",
        "403",
    }
)
_CONFLICT_CODES = frozenset({"PreconditionFailed", "ConditionalRequestConflict"})
FILE_SCHEME = "file"  # `--endpoint-url file:///dir`: the directory store


@dataclass(frozen=True)
class StoredObject:
    key: str
    size: int
    last_modified: datetime


class ArchiveStore(Protocol):
    """What the archive needs of a store: an S3 bucket (`Bucket`), or a local directory
    (`DirectoryBucket`, for `--endpoint-url file:///dir`)."""

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


class Bucket:
    """The archive bucket through one boto3 client; every failure becomes an ArchiveError."""

    def __init__(self, location: ArchiveLocation) -> None:
        self.location = location
        self.client = _s3_client(location)
        self.endpoint = without_userinfo(str(self.client.meta.endpoint_url))

    def url(self, key: str) -> str:
        return f"s3://{self.location.bucket}/{key}"

    def put_new(self, key: str, body: bytes, advice: str = NEW_RUN_ID_ADVICE) -> None:
        """Store `body` at `key` only if no object is there yet (If-None-Match: *), with a
        sha256 checksum that the store verifies and keeps (what `sha256` reads back)."""
        with self._translated_errors("uploading", key):
            try:
                self.client.put_object(
                    Bucket=self.location.bucket,
                    Key=key,
                    Body=body,
                    IfNoneMatch="*",
                    ChecksumAlgorithm="SHA256",
                )
            except ClientError as error:
                if _error_code(error) in _CONFLICT_CODES:
                    raise self.conflict(key, advice) from None
                raise

    def conflict(self, key: str, advice: str = NEW_RUN_ID_ADVICE) -> ArchiveConflictError:
        return ArchiveConflictError(
            f"{self.url(key)} already exists at {self.endpoint}: the archive never overwrites a "
            f"result. {advice}"
        )

    def exists(self, key: str) -> bool:
        return any(stored.key == key for stored in self.objects(key, limit=1))

    def read(self, key: str, max_size: int | None = None) -> bytes:
        """The object's bytes; with `max_size`, at most `max_size + 1` of them (so a caller can
        tell a too-large object without downloading all of it)."""
        with self._translated_errors("downloading", key):
            body = self.client.get_object(Bucket=self.location.bucket, Key=key)["Body"]
            try:
                data: bytes = body.read() if max_size is None else body.read(max_size + 1)
            finally:
                body.close()
        return data

    def sha256(self, key: str) -> str:
        """The stored object's sha256 (hex): the checksum the store verified on upload when it
        kept one, else computed from the downloaded bytes."""
        with self._translated_errors("checking", key):
            head = self.client.head_object(
                Bucket=self.location.bucket, Key=key, ChecksumMode="ENABLED"
            )
        checksum = str(head.get("ChecksumSHA256", ""))
        if checksum and "-" not in checksum:  # `-<parts>`: a multipart upload's composite
            return base64.b64decode(checksum).hex()
        return hashlib.sha256(self.read(key)).hexdigest()

    def objects(self, prefix: str, limit: int | None = None) -> Iterator[StoredObject]:
        """Every object whose key starts with `prefix`, in key order."""
        paginator = self.client.get_paginator("list_objects_v2")
        pages = {"MaxItems": limit} if limit else {}
        with self._translated_errors("listing", prefix):
            for page in paginator.paginate(
                Bucket=self.location.bucket, Prefix=prefix, PaginationConfig=pages
            ):
                for item in page.get("Contents", []):
                    written = item["LastModified"].astimezone(UTC)  # botocore gives local time
                    yield StoredObject(str(item["Key"]), int(item["Size"]), written)

    def keys(self, prefix: str) -> Iterator[str]:
        return (stored.key for stored in self.objects(prefix))

    def delete(self, keys: Sequence[str]) -> None:
        """Delete the objects at `keys`; any key the store refuses is an ArchiveError."""
        for start in range(0, len(keys), DELETE_BATCH):
            batch = keys[start : start + DELETE_BATCH]
            with self._translated_errors("deleting", batch[0]):
                response = self.client.delete_objects(
                    Bucket=self.location.bucket,
                    Delete={"Objects": [{"Key": key} for key in batch], "Quiet": True},
                )
            refused = response.get("Errors", [])
            if refused:
                first = refused[0]
                raise ArchiveError(
                    f"{self.endpoint} refused to delete {len(refused)} objects, e.g. "
                    f"{self.url(first.get('Key', '?'))} ({first.get('Code', '?')}): check that "
                    "the credentials may delete in this bucket, then run the command again"
                )

    @contextmanager
    def _translated_errors(self, action: str, key: str) -> Iterator[None]:
        try:
            yield
        except ClientError as error:
            raise self._explain(error, action, key) from error
        except NoCredentialsError as error:
            raise ArchiveError(
                f"no AWS credentials found for {self.url(key)}: set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE (--aws-profile) naming a configured profile"
            ) from error
        except (BotoConnectionError, HTTPClientError) as error:
            raise ArchiveError(
                f"cannot reach the S3 endpoint {self.endpoint} while {action} {self.url(key)} "
                f"({type(error).__name__}): check --endpoint-url, AWS_ENDPOINT_URL_S3 or "
                "AWS_ENDPOINT_URL, and that the store is running"
            ) from error
        except BotoCoreError as error:
            raise ArchiveError(
                f"{action} {self.url(key)} at {self.endpoint} failed: {error}"
            ) from error

    def _explain(self, error: ClientError, action: str, key: str) -> ArchiveError:
        code = _error_code(error)
        bucket = self.location.bucket
        if code == "NoSuchBucket":
            return ArchiveError(
                f"bucket {bucket!r} does not exist at {self.endpoint}: create it (e.g. `aws s3 mb "
                f"s3://{bucket} --endpoint-url {self.endpoint}`) or point --bucket / "
                "--endpoint-url (AWS_ENDPOINT_URL_S3) at the right store"
            )
        if code in _CREDENTIAL_CODES:
            return ArchiveError(
                f"{self.endpoint} refused the credentials while {action} {self.url(key)} ({code}): "
                "check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN or the "
                "profile (AWS_PROFILE, --aws-profile), and that they may read and write this bucket"
            )
        if code in {"NoSuchKey", "404"}:
            return RunNotFoundError(f"{self.url(key)} does not exist at {self.endpoint}")
        message = error.response.get("Error", {}).get("Message", "")
        return ArchiveError(f"{action} {self.url(key)} at {self.endpoint} failed: {code} {message}")


def _error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _s3_client(location: ArchiveLocation) -> Any:
    try:
        session = boto3.session.Session(
            profile_name=location.aws_profile, region_name=location.region
        )
    except ProfileNotFound:
        raise ArchiveError(
            f"AWS profile {location.aws_profile!r} is not in the AWS config files "
            "(AWS_CONFIG_FILE, AWS_SHARED_CREDENTIALS_FILE): add it or choose another profile"
        ) from None
    addressing = {"addressing_style": "path"} if location.path_style else None
    try:
        return session.client(
            "s3",
            endpoint_url=location.endpoint_url,
            config=Config(connect_timeout=10, s3=addressing),
        )
    except ValueError:
        # botocore's message repeats the URL, user-info and all: name it without that part.
        shown = without_userinfo(str(location.endpoint_url))
        raise ArchiveError(
            f"endpoint URL {shown!r} is not usable: give scheme://host[:port]"
        ) from None


def without_userinfo(url: str) -> str:
    """The URL with its user-info, credential parameters and any other credential masked, so no
    message shows them."""
    try:
        urlsplit(url)
    except ValueError:
        return "<an unparseable URL>"
    return mask(url)


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
        """The file of `key`: a plain path below the archive directory, through no link."""
        try:
            return inside(self.root, key)
        except OutputFolderError as error:
            raise ArchiveError(
                f"key {key!r} leaves the archive directory {self.root}, or passes through a "
                f"link there: {error}"
            ) from None

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
        """The stored file's bytes: a regular file of at most `max_size` (else MAX_INPUT_BYTES,
        the most a push stores), never a device or a FIFO someone left in the directory."""
        try:
            return read_bytes(self._path(key), "archived file", max_size or MAX_INPUT_BYTES)
        except InputFileMissing:
            raise RunNotFoundError(f"{self.url(key)} does not exist") from None
        except InputFileError as error:
            raise UnusableStoredFile(f"{self.url(key)}: {error}") from None

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
            try:
                remove_inside(self.root, key)  # a regular file only, never a link or a folder
            except OutputFolderError as error:
                raise ArchiveError(f"key {key!r} was not deleted: {error}") from None
            for parent in path.parents:  # empty folders go with their last object
                if parent == self.root or any(parent.iterdir()):
                    break
                parent.rmdir()


def open_bucket(location: ArchiveLocation) -> ArchiveStore:
    """The store `location` names: a local directory for a `file://` endpoint, else S3."""
    if is_directory_location(location):
        return DirectoryBucket(location)
    return Bucket(location)
