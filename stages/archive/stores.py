"""Where an archive lives: an S3 bucket (`Bucket`) or a local directory (`DirectoryBucket`, for
`--endpoint-url file:///dir`), one interface (`Store`); `open_bucket` chooses.

`Bucket`: one boto3 client, writes that never overwrite (If-None-Match), server-side sha256
checksums, and every failure an `ArchiveError` naming the key and the fix; credentials only from
the standard AWS chain, messages show the endpoint without its user-info, never a credential.
`DirectoryBucket` keeps the same contract on disk at `/dir/<bucket>/<key>` for the lab: a write
goes to a temporary file hard-linked into place, which fails if the name exists, so two writers
cannot both win and a reader never sees half an object.

Over 300 lines: the S3 bucket and the local directory implement one interface and share its
stored-object type, advice and defaults; the choice between them is a few lines.
"""

from __future__ import annotations

import base64
import hashlib
import os
import stat
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
    ConfigParseError,
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


@dataclass(frozen=True)
class StoredObject:
    key: str
    size: int
    last_modified: datetime


class Store(Protocol):
    """What the archive needs of a store; the two kinds inherit what they share from here."""

    location: ArchiveLocation
    endpoint: str
    where: str = ""
    """How a conflict names the store besides its key (an S3 key's url does not)."""

    def url(self, key: str) -> str: ...
    def put_new(self, key: str, body: bytes, advice: str = NEW_RUN_ID_ADVICE) -> None: ...
    def exists(self, key: str) -> bool: ...
    def read(self, key: str, max_size: int | None = None) -> bytes: ...
    def objects(self, prefix: str) -> Iterator[StoredObject]: ...
    def delete(self, keys: Sequence[str]) -> None: ...

    def conflict(self, key: str, advice: str = NEW_RUN_ID_ADVICE) -> ArchiveConflictError:
        return ArchiveConflictError(
            f"{self.url(key)} already exists{self.where}: the archive never overwrites a result. "
            f"{advice}"
        )

    def sha256(self, key: str) -> str:
        return hashlib.sha256(self.read(key)).hexdigest()

    def keys(self, prefix: str) -> Iterator[str]:
        return (stored.key for stored in self.objects(prefix))


class Bucket(Store):
    """The archive bucket through one boto3 client; every failure becomes an ArchiveError."""

    def __init__(self, location: ArchiveLocation) -> None:
        self.location = location
        self.client = _s3_client(location)
        self.endpoint = without_userinfo(str(self.client.meta.endpoint_url))
        self.where = f" at {self.endpoint}"

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
        return super().sha256(key)

    def objects(self, prefix: str, limit: int | None = None) -> Iterator[StoredObject]:
        """Every object whose key starts with `prefix`, in key order (the first `limit` of them)."""
        paginator = self.client.get_paginator("list_objects_v2")
        pages = {"MaxItems": limit} if limit else {}
        with self._translated_errors("listing", prefix):
            for page in paginator.paginate(
                Bucket=self.location.bucket, Prefix=prefix, PaginationConfig=pages
            ):
                for item in page.get("Contents", []):
                    written = item["LastModified"].astimezone(UTC)  # botocore gives local time
                    yield StoredObject(str(item["Key"]), int(item["Size"]), written)

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
    except ConfigParseError as error:  # named by its path, never what it holds
        raise ArchiveError(
            f"the AWS config file {error.kwargs.get('path')} does not parse: fix it, or point "
            "AWS_CONFIG_FILE / AWS_SHARED_CREDENTIALS_FILE at another"
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


class DirectoryBucket(Store):
    """The bucket `location.bucket` as a directory under the `file://` endpoint."""

    def __init__(self, location: ArchiveLocation) -> None:
        self.location = location
        self.root = Path(urlsplit(location.endpoint_url or "").path).resolve() / location.bucket
        self.endpoint = f"file://{self.root.parent}"
        self.root.mkdir(parents=True, exist_ok=True)
        # Beside the bucket, on its file system (a link needs one): a result file may have any
        # name, `.incoming-...` too, and the writes in progress are no keys.
        self.incoming = self.root.parent / f".{location.bucket}.incoming"

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
        self.incoming.mkdir(exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=self.incoming, delete=False) as tmp:
            tmp.write(body)
        try:
            os.link(tmp.name, path)  # fails if the name exists: never an overwrite
        except FileExistsError:
            if not stat.S_ISREG(path.lstat().st_mode):  # no key lists it: never another writer's
                raise UnusableStoredFile(
                    f"{self.url(key)} is not a regular file (a folder, a FIFO or a device someone "
                    "left in the archive directory): move it away, then try again"
                ) from None
            raise self.conflict(key, advice) from None
        finally:
            os.unlink(tmp.name)

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def read(self, key: str, max_size: int | None = None) -> bytes:
        """The stored file's bytes: a regular file of at most `max_size` (else MAX_INPUT_BYTES,
        the most a push stores), never a device or a FIFO someone left in the directory."""
        try:
            path = self._path(key)
        except ArchiveError as error:  # a link at the key: never a push's, so no run's
            raise UnusableStoredFile(str(error)) from None
        try:
            return read_bytes(path, "archived file", max_size or MAX_INPUT_BYTES)
        except InputFileMissing:
            raise RunNotFoundError(f"{self.url(key)} does not exist") from None
        except InputFileError as error:
            raise UnusableStoredFile(f"{self.url(key)}: {error}") from None

    def objects(self, prefix: str) -> Iterator[StoredObject]:
        """Every object whose key starts with `prefix`, in key order."""
        for path in sorted(p for p in self.root.rglob("*") if p.is_file()):
            key = path.relative_to(self.root).as_posix()
            if key.startswith(prefix):
                stat = path.stat()
                yield StoredObject(key, stat.st_size, datetime.fromtimestamp(stat.st_mtime, UTC))

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


def open_bucket(location: ArchiveLocation) -> Store:
    """The store `location` names: a local directory for a `file://` endpoint, else S3."""
    try:
        directory = urlsplit(location.endpoint_url or "").scheme == "file"
    except ValueError:  # not a URL at all: the S3 client says so, without showing it
        directory = False
    return DirectoryBucket(location) if directory else Bucket(location)
