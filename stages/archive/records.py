"""What an archived run is, its errors, and where it lives in a bucket (docs/archive.md).

The run: the `RunRecord` stored as its `manifest.json`, and its files (`ArchivedFile`). The
archive: a bucket, a prefix and optionally an endpoint (`ArchiveLocation`); each run lives in it
at a `RunPlace`, `<prefix>/<stack>/<profile>/<run-id>/<stage>/` then `files/<relative path>` and
`manifest.json`, every part below the prefix one key segment. Each error says where (bucket, key,
endpoint) and how to fix it.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from common import REPO_ROOT
from common.confined_paths import name_problem
from common.credentials import mask, mask_values
from components.contract import StackOutputs
from components.routing import RoutingProfile
from components.settings import PROJECT
from stages.errors import StageFailed

UNKNOWN_COMMIT = "unknown"
DEFAULT_PREFIX = PROJECT
SEGMENT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"

Segment = Annotated[str, StringConstraints(pattern=SEGMENT_PATTERN)]
"""One key segment: a stack name, run id or prefix part (no `/`, no leading dot)."""


class ArchiveError(StageFailed):
    """The archive cannot do what was asked; the message says where and how to fix it (a stage
    failure to `python -m stages`: exit status 1)."""


class ArchiveConflictError(ArchiveError):
    """A key that would be written already exists: the archive never overwrites."""


class RunNotFoundError(ArchiveError):
    """No archived run matches the request."""


class RunCleanedError(RunNotFoundError):
    """The run was deleted by `archive clean`, whose mark keeps its run id taken."""


class CorruptManifestError(ArchiveError):
    """An object at a manifest's key is not the manifest of the run its key names."""


class DestinationNotEmptyError(ArchiveError):
    """A download's folder holds files already: nothing was downloaded."""


class UnusableStoredFile(ArchiveError):
    """A directory store's file that is no regular file within its limit (a FIFO, a device, a
    file grown past what a push stores): refused, never read."""


def validation_summary(error: ValidationError, limit: int = 3) -> str:
    """`field: problem; ...` on one line, without the offending values (they may be anything)."""
    problems = [
        f"{'.'.join(str(part) for part in problem['loc']) or 'value'}: {problem['msg']}"
        for problem in error.errors()
    ]
    more = f" (+{len(problems) - limit} more)" if len(problems) > limit else ""
    return "; ".join(problems[:limit]) + more


class Stage(StrEnum):
    SMOKE = "smoke"
    PERF = "perf"
    REPORT = "report"
    """The A/B report of a run, kept with the run of the profile it evaluates (session affinity)."""


class ArchivedFile(BaseModel):
    """One stored file: its path relative to the result directory, size and sha256."""

    model_config = ConfigDict(frozen=True)

    name: str
    size: int = Field(ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")

    @field_validator("name")
    @classmethod
    def _stays_inside_the_run(cls, name: str) -> str:
        problem = name_problem(name) or (
            "not in its plain form" if name != str(PurePosixPath(name)) else None
        )
        if problem:
            raise ValueError(f"{name!r} is not a plain relative path inside the run ({problem})")
        return name


def describe(name: str, data: bytes) -> ArchivedFile:
    """`data` as the file it is once stored as `name`: what a push records and a pull checks."""
    return ArchivedFile(name=name, size=len(data), sha256=hashlib.sha256(data).hexdigest())


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

    @field_validator("commit")
    @classmethod
    def _masked_commit(cls, commit: str) -> str:
        # A manifest anyone wrote may hold any text: masked whole, before a run id or a listing
        # shortens it (`abc1234`) to a part that no longer looks like a credential.
        return mask(commit)

    @field_validator("created_at")
    @classmethod
    def _in_utc(cls, created_at: datetime) -> datetime:
        if created_at.tzinfo is None:
            raise ValueError("created_at needs a time zone (UTC)")
        try:
            return created_at.astimezone(UTC)
        except OverflowError:  # 0001-01-01T00:00+01:00: a ValueError is what pydantic reports
            raise ValueError("created_at is out of range in UTC") from None

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
        created_at, commit = created_at or datetime.now(UTC), mask(commit or current_commit())
        return cls(
            stack=stack,
            profile=outputs.profile,
            run_id=run_id or new_run_id(created_at, commit),
            stage=Stage(stage),
            created_at=created_at,
            commit=commit,
            outputs=mask_values(outputs.to_json_dict()),  # a URL's credentials never archived
        )

    def stack_outputs(self) -> StackOutputs:
        """The outputs the stage ran against, read back through the contract."""
        return StackOutputs.model_validate(self.outputs)

    def describe(self) -> str:
        return f"{self.stack}/{self.profile}/{self.run_id}/{self.stage}"


def new_run_id(created_at: datetime, commit: str) -> str:
    """A run id that sorts by time: `20261130T184200Z-0518aea` (no suffix for an unknown commit or
    one that is no git hash: its first letters could be a secret's)."""
    stamp = created_at.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{commit[:7]}" if re.fullmatch(r"[0-9a-f]{7,64}", commit) else stamp


def current_commit(repo_dir: Path = REPO_ROOT) -> str:
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


class ArchiveLocation(BaseModel):
    """Bucket, key prefix and (optionally) endpoint, region and AWS profile; never credentials."""

    model_config = ConfigDict(frozen=True)

    bucket: str = Field(min_length=3, max_length=63)  # S3's rules: cli.archive_location
    prefix: str = DEFAULT_PREFIX
    endpoint_url: str | None = None  # None: boto3 reads AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL
    region: str | None = None
    aws_profile: str | None = None
    path_style: bool = False  # path-style addressing, for stores without bucket DNS names

    @field_validator("prefix")
    @classmethod
    def _plain_segments(cls, prefix: str) -> str:
        prefix = prefix.strip("/")
        pattern = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
        if not all(pattern.fullmatch(part) for part in prefix.split("/")):
            raise ValueError(f"prefix {prefix!r} must be `/`-separated names like {DEFAULT_PREFIX}")
        return prefix

    def search_prefix(self, stack: str | None = None, profile: str | None = None) -> str:
        """The key prefix of every run, of one stack's runs, or of one stack and profile's."""
        if stack and profile:
            return f"{self.prefix}/{stack}/{profile}/"
        return f"{self.prefix}/{stack}/" if stack else f"{self.prefix}/"


@dataclass(frozen=True, order=True)
class RunPlace:
    """Where one stage of one run lives: the four key segments below the prefix."""

    stack: str
    profile: str
    run_id: str
    stage: str

    @classmethod
    def of(cls, record: RunRecord) -> RunPlace:
        return cls(record.stack, record.profile.value, record.run_id, record.stage.value)

    @classmethod
    def checked(cls, stack: str, profile: str, run_id: str, stage: str) -> RunPlace:
        """A place from user input: each part must be one key segment, so that no prefix built
        from it reaches into another run."""
        for what, value in zip(
            ("stack", "profile", "run id", "stage"), (stack, profile, run_id, stage)
        ):
            if not re.fullmatch(SEGMENT_PATTERN, value):
                raise ArchiveError(
                    f"{what} {value!r} is not a key segment (letters, digits, `.`, `_`, `-`)"
                )
        return cls(stack, profile, run_id, stage)

    @classmethod
    def of_key(cls, location: ArchiveLocation, key: str) -> RunPlace | None:
        """The run a key under `<prefix>/<stack>/<profile>/<run-id>/<stage>/` belongs to; None
        for a key no push writes (a segment that is not one, a control character in it)."""
        if not key.startswith(f"{location.prefix}/"):
            return None
        segments = key.removeprefix(f"{location.prefix}/").split("/")
        if len(segments) < 5 or not all(re.fullmatch(SEGMENT_PATTERN, s) for s in segments[:4]):
            return None
        return cls(*segments[:4])

    def describe(self) -> str:
        return f"{self.stack}/{self.profile}/{self.run_id}/{self.stage}"

    def prefix(self, location: ArchiveLocation) -> str:
        """`<prefix>/<stack>/<profile>/<run-id>/<stage>/`, with the slash that keeps `run-1`
        from matching `run-10`."""
        return f"{location.prefix}/{self.describe()}/"

    def manifest_key(self, location: ArchiveLocation) -> str:
        return f"{self.prefix(location)}manifest.json"

    def files_prefix(self, location: ArchiveLocation) -> str:
        return f"{self.prefix(location)}files/"

    def file_key(self, location: ArchiveLocation, name: str) -> str:
        return f"{self.files_prefix(location)}{name}"
