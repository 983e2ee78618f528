"""Archive: stage results in S3 (or any S3-compatible store), keyed by run, never overwritten.

Key layout (one stage of one run; every name is a single path segment):

    <prefix>/<stack>/<profile>/<run-id>/<stage>/files/<relative path>   each file of the result dir
    <prefix>/<stack>/<profile>/<run-id>/<stage>/manifest.json            the RunRecord, written last

- prefix: `cosmos3-nano-reasoner` unless set (may itself contain `/`);
- stack: the Pulumi stack's short name (`round-robin`, `session-affinity`, `dev`, ...);
- profile: the routing profile of the stack outputs the stage ran against;
- run id: sortable, `YYYYMMDDTHHMMSSZ-<short commit>` unless given, so one pipeline run can store
  its smoke and its perf stage under the same id;
- stage: `smoke` or `perf`.

`manifest.json` (a `RunRecord`) names the stack, profile, run id, stage, UTC time, git commit, the
stack outputs the stage ran against and every stored file with its size and sha256. It is written
after all files: listing only looks at manifests, so an interrupted upload never looks like a run.
Downloading writes the files back under the names they were uploaded with, checked against the
manifest's sizes and digests, so the report reads an archived run exactly like a local result.

No overwrite: every object is written with `If-None-Match: *` (an S3 conditional write). The store
itself refuses to replace an existing key (412 PreconditionFailed), so two concurrent pushes cannot
both win; the conflict becomes an `ArchiveConflictError` naming the key and asking for a new run
id. A run whose manifest already exists is refused before anything is uploaded. (The guarantee
needs a store that honours conditional writes: AWS S3, MinIO and moto do.)

Where the store is and who you are: the bucket and prefix are arguments. The endpoint is the
argument or, as boto3 does on its own, `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL` / the profile's
config; the region and the credentials come only from the standard AWS chain (environment, shared
config and credentials files, `AWS_PROFILE`, instance roles). No credential is ever a parameter
here, and none appears in a message.

Secrets: the manifest holds the stack outputs (secret-free by contract) and nothing from the
environment. Before uploading, every file is scanned for obvious secrets (private keys, AWS access
key ids, NGC API keys, the value of any secret-named environment variable); a hit refuses the whole
run, naming the file and the kind of secret, never the value.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit, urlunsplit

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
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from components.contract import StackOutputs
from components.routing import RoutingProfile

DEFAULT_PREFIX = "cosmos3-nano-reasoner"
MANIFEST_NAME = "manifest.json"
FILES_FOLDER = "files"
UNKNOWN_COMMIT = "unknown"
PROJECT_ROOT = Path(__file__).resolve().parent.parent

Segment = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")]
"""One key segment: a stack name, run id or prefix part (no `/`, no leading dot)."""


class Stage(StrEnum):
    SMOKE = "smoke"
    PERF = "perf"


class ArchiveError(Exception):
    """The archive cannot do what was asked; the message says where and how to fix it."""


class ArchiveConflictError(ArchiveError):
    """A key that would be written already exists: the archive never overwrites."""


class RunNotFoundError(ArchiveError):
    """No archived run matches the request."""


# --- the records ----------------------------------------------------------------------


class ArchivedFile(BaseModel):
    """One stored file: its path relative to the result directory, size and sha256."""

    model_config = ConfigDict(frozen=True)

    name: str
    size: int = Field(ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")

    @field_validator("name")
    @classmethod
    def _stays_inside_the_run(cls, name: str) -> str:
        path = PurePosixPath(name)
        if not name or path.is_absolute() or ".." in path.parts or name != str(path):
            raise ValueError(f"{name!r} is not a plain relative path inside the run")
        return name


class RunRecord(BaseModel):
    """What one archived stage of one run is: stored as its `manifest.json`."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    manifest_version: Literal[1] = 1
    stack: Segment
    profile: RoutingProfile
    run_id: Segment
    stage: Stage
    created_at: datetime
    commit: str
    outputs: dict[str, Any] = Field(description="The StackOutputs JSON the stage ran against.")
    files: tuple[ArchivedFile, ...] = ()

    @field_validator("created_at")
    @classmethod
    def _in_utc(cls, created_at: datetime) -> datetime:
        if created_at.tzinfo is None:
            raise ValueError("created_at needs a time zone (UTC)")
        return created_at.astimezone(UTC)

    @model_validator(mode="after")
    def _profile_matches_outputs(self) -> RunRecord:
        if self.outputs.get("profile") != self.profile.value:
            raise ValueError(
                f"profile {self.profile} differs from the outputs' {self.outputs.get('profile')!r}"
            )
        return self

    @classmethod
    def create(
        cls,
        *,
        stack: str,
        stage: Stage | str,
        outputs: StackOutputs,
        run_id: str | None = None,
        commit: str | None = None,
        created_at: datetime | None = None,
    ) -> RunRecord:
        """A record for a new run; time, commit and run id are filled in when not given."""
        created_at = created_at or datetime.now(UTC)
        commit = commit or current_commit()
        return cls(
            stack=stack,
            profile=outputs.profile,
            run_id=run_id or new_run_id(created_at, commit),
            stage=Stage(stage),
            created_at=created_at,
            commit=commit,
            outputs=outputs.to_json_dict(),
        )

    def stack_outputs(self) -> StackOutputs:
        """The outputs the stage ran against, read back through the contract."""
        return StackOutputs.model_validate(self.outputs)

    def describe(self) -> str:
        return f"{self.stack}/{self.profile}/{self.run_id}/{self.stage}"


def new_run_id(created_at: datetime, commit: str) -> str:
    """A run id that sorts by time: `20261130T184200Z-0518aea` (no suffix for an unknown commit)."""
    stamp = created_at.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    return stamp if commit == UNKNOWN_COMMIT else f"{stamp}-{commit[:7]}"


def current_commit(repo_dir: Path = PROJECT_ROOT) -> str:
    """`git rev-parse HEAD` of the project, or `unknown` outside a git checkout."""
    try:
        result = subprocess.run(
            ["git", "-C", str(repo_dir), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return UNKNOWN_COMMIT
    commit = result.stdout.strip()
    is_commit = result.returncode == 0 and re.fullmatch(r"[0-9a-f]{40,64}", commit)
    return commit if is_commit else UNKNOWN_COMMIT


# --- where the archive is -------------------------------------------------------------


class ArchiveLocation(BaseModel):
    """Bucket, key prefix and (optionally) endpoint, region and AWS profile; never credentials."""

    model_config = ConfigDict(frozen=True)

    bucket: str = Field(min_length=3, max_length=63)
    prefix: str = DEFAULT_PREFIX
    endpoint_url: str | None = Field(
        default=None,
        description="None: boto3 reads AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL.",
    )
    region: str | None = None
    aws_profile: str | None = None
    path_style: bool = Field(
        default=False,
        description="Path-style addressing, for stores without bucket DNS names.",
    )

    @field_validator("prefix")
    @classmethod
    def _plain_segments(cls, prefix: str) -> str:
        prefix = prefix.strip("/")
        pattern = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
        if not all(pattern.fullmatch(part) for part in prefix.split("/")):
            raise ValueError(f"prefix {prefix!r} must be `/`-separated names like {DEFAULT_PREFIX}")
        return prefix


def run_key_prefix(
    location: ArchiveLocation,
    stack: str,
    profile: RoutingProfile | str,
    run_id: str,
    stage: str,
) -> str:
    """`<prefix>/<stack>/<profile>/<run-id>/<stage>`: where one stage of one run lives."""
    return "/".join([location.prefix, stack, str(profile), run_id, str(stage)])


def _record_prefix(location: ArchiveLocation, record: RunRecord) -> str:
    return run_key_prefix(location, record.stack, record.profile, record.run_id, record.stage)


def _manifest_key(location: ArchiveLocation, record: RunRecord) -> str:
    return f"{_record_prefix(location, record)}/{MANIFEST_NAME}"


def _file_key(location: ArchiveLocation, record: RunRecord, entry: ArchivedFile) -> str:
    return f"{_record_prefix(location, record)}/{FILES_FOLDER}/{entry.name}"


def _is_manifest_key(location: ArchiveLocation, key: str) -> bool:
    """True for `<prefix>/<stack>/<profile>/<run-id>/<stage>/manifest.json`, not a stored file."""
    if not key.startswith(f"{location.prefix}/"):
        return False
    segments = key.removeprefix(f"{location.prefix}/").split("/")
    return len(segments) == 5 and segments[-1] == MANIFEST_NAME


# --- talking to the store -------------------------------------------------------------

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


class _Bucket:
    """The archive bucket through one boto3 client; every failure becomes an ArchiveError."""

    def __init__(self, location: ArchiveLocation) -> None:
        self.location = location
        self.client = _s3_client(location)
        self.endpoint = _without_userinfo(str(self.client.meta.endpoint_url))

    def url(self, key: str) -> str:
        return f"s3://{self.location.bucket}/{key}"

    def put_new(self, key: str, body: bytes) -> None:
        """Store `body` at `key` only if no object is there yet (If-None-Match: *)."""
        with self._translated_errors("uploading", key):
            try:
                self.client.put_object(
                    Bucket=self.location.bucket, Key=key, Body=body, IfNoneMatch="*"
                )
            except ClientError as error:
                if _error_code(error) in _CONFLICT_CODES:
                    raise self.conflict(key) from None
                raise

    def conflict(self, key: str) -> ArchiveConflictError:
        return ArchiveConflictError(
            f"{self.url(key)} already exists at {self.endpoint}: the archive never overwrites a "
            "result. Push again with a new run id (--run-id, or leave it out for a fresh one)."
        )

    def exists(self, key: str) -> bool:
        with self._translated_errors("checking", key):
            page = self.client.list_objects_v2(Bucket=self.location.bucket, Prefix=key, MaxKeys=1)
        return any(item["Key"] == key for item in page.get("Contents", []))

    def read(self, key: str) -> bytes:
        with self._translated_errors("downloading", key):
            body: bytes = self.client.get_object(Bucket=self.location.bucket, Key=key)[
                "Body"
            ].read()
        return body

    def keys(self, prefix: str) -> Iterator[str]:
        paginator = self.client.get_paginator("list_objects_v2")
        with self._translated_errors("listing", prefix):
            for page in paginator.paginate(Bucket=self.location.bucket, Prefix=prefix):
                for item in page.get("Contents", []):
                    yield str(item["Key"])

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
    except ValueError as error:
        raise ArchiveError(
            f"endpoint URL {location.endpoint_url!r} is not usable: {error}"
        ) from None


def _without_userinfo(url: str) -> str:
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=host))


# --- local files ----------------------------------------------------------------------

_SECRET_PATTERNS = {
    "a private key": re.compile(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    "an AWS access key id": re.compile(rb"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "an NGC API key": re.compile(rb"\bnvapi-[A-Za-z0-9_-]{20,}"),
}
_SECRET_VARIABLE = re.compile(r"(?:SECRET|TOKEN|PASSWORD|PASSPHRASE|API_KEY|ACCESS_KEY)$")
_MIN_SECRET_LENGTH = 8


def _result_files(directory: Path) -> list[tuple[str, Path]]:
    """Every regular file below `directory`, as (posix relative name, path), sorted by name."""
    if not directory.is_dir():
        raise ArchiveError(f"result directory {directory} does not exist")
    files = sorted(
        (path.relative_to(directory).as_posix(), path)
        for path in directory.rglob("*")
        if path.is_file()
    )
    if not files:
        raise ArchiveError(f"result directory {directory} holds no files: nothing to archive")
    return files


def _describe(name: str, data: bytes) -> ArchivedFile:
    return ArchivedFile(name=name, size=len(data), sha256=hashlib.sha256(data).hexdigest())


def find_secret(data: bytes) -> str | None:
    """What kind of obvious secret `data` contains (never the secret itself), or None."""
    for kind, pattern in _SECRET_PATTERNS.items():
        if pattern.search(data):
            return kind
    for name, value in os.environ.items():
        secret_named = _SECRET_VARIABLE.search(name.upper())
        if secret_named and len(value) >= _MIN_SECRET_LENGTH and value.encode() in data:
            return f"the value of ${name}"
    return None


def _checked_files(directory: Path) -> list[tuple[ArchivedFile, Path]]:
    checked = []
    for name, path in _result_files(directory):
        data = path.read_bytes()
        secret = find_secret(data)
        if secret:
            raise ArchiveError(
                f"{path} contains {secret}: refusing to archive the run; remove it from the "
                "results (secrets belong in the environment or Pulumi config, never in results)"
            )
        checked.append((_describe(name, data), path))
    return checked


def _unchanged_bytes(entry: ArchivedFile, path: Path) -> bytes:
    data = path.read_bytes()
    if _describe(entry.name, data) != entry:
        raise ArchiveError(f"{path} changed while it was being archived: archive it again")
    return data


# --- the stage's functions ------------------------------------------------------------


def archive_plan(directory: Path, record: RunRecord, location: ArchiveLocation) -> list[str]:
    """The keys `archive_run` would write, manifest last, after the same secret scan; touches
    no store (`archive push --dry-run`)."""
    checked = _checked_files(directory)
    stored = record.model_copy(update={"files": tuple(entry for entry, _ in checked)})
    return [_file_key(location, stored, entry) for entry, _ in checked] + [
        _manifest_key(location, stored)
    ]


def archive_run(directory: Path, record: RunRecord, location: ArchiveLocation) -> RunRecord:
    """Upload every file below `directory` as one stage of one run, then its manifest.

    Returns the record as stored (with the file list). Raises ArchiveConflictError if any key of
    the run already exists, ArchiveError for secrets in the files or a store that cannot be used.
    """
    checked = _checked_files(directory)
    stored = record.model_copy(update={"files": tuple(entry for entry, _ in checked)})
    bucket = _Bucket(location)
    manifest_key = _manifest_key(location, stored)
    if bucket.exists(manifest_key):
        raise bucket.conflict(manifest_key)
    for entry, path in checked:
        bucket.put_new(_file_key(location, stored, entry), _unchanged_bytes(entry, path))
    bucket.put_new(manifest_key, stored.model_dump_json(indent=2).encode())
    return stored


def list_runs(
    location: ArchiveLocation,
    stack: str | None = None,
    profile: RoutingProfile | str | None = None,
    stage: Stage | str | None = None,
) -> list[RunRecord]:
    """Complete runs (those with a manifest), oldest first; optionally one stack/profile/stage."""
    bucket = _Bucket(location)
    search = f"{location.prefix}/" + (f"{stack}/" if stack else "")
    if stack and profile:
        search += f"{profile}/"
    records = [
        _read_record(bucket, key) for key in bucket.keys(search) if _is_manifest_key(location, key)
    ]
    wanted = [
        record
        for record in records
        if (profile is None or record.profile == profile)
        and (stage is None or record.stage == stage)
    ]
    return sorted(wanted, key=lambda record: (record.created_at, record.run_id, record.stage))


def latest_run(
    location: ArchiveLocation,
    stack: str | None = None,
    profile: RoutingProfile | str | None = None,
    stage: Stage | str = Stage.PERF,
) -> RunRecord:
    """The newest complete run of a stage (perf unless said), optionally of one stack/profile."""
    runs = list_runs(location, stack=stack, profile=profile, stage=stage)
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
    """The manifest of one archived run."""
    bucket = _Bucket(location)
    key = f"{run_key_prefix(location, stack, profile, run_id, stage)}/{MANIFEST_NAME}"
    try:
        return _read_record(bucket, key)
    except RunNotFoundError:
        raise RunNotFoundError(
            f"no complete {stage} run {run_id!r} of {stack}/{profile} at {bucket.url(key)} "
            f"({bucket.endpoint}): `archive list` shows the archived runs"
        ) from None


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
    bucket = _Bucket(location)
    contents = [(entry, _verified_read(bucket, record, entry)) for entry in record.files]
    dest_dir.mkdir(parents=True, exist_ok=True)
    for entry, data in contents:
        target = dest_dir / entry.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return dest_dir


def _verified_read(bucket: _Bucket, record: RunRecord, entry: ArchivedFile) -> bytes:
    key = _file_key(bucket.location, record, entry)
    data = bucket.read(key)
    if _describe(entry.name, data) != entry:
        raise ArchiveError(
            f"{bucket.url(key)} does not match its manifest (size or sha256): the archive "
            "was changed behind its back"
        )
    return data


def _read_record(bucket: _Bucket, key: str) -> RunRecord:
    text = bucket.read(key)
    try:
        record = RunRecord.model_validate_json(text)
    except ValueError as error:
        raise ArchiveError(f"{bucket.url(key)} is not a valid run manifest:\n{error}") from None
    if _manifest_key(bucket.location, record) != key:
        raise ArchiveError(f"{bucket.url(key)} describes another run ({record.describe()})")
    return record
