"""What an archived run is: the `RunRecord` stored as its `manifest.json`, and its files."""

from __future__ import annotations

import re
import subprocess
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from common.credentials import mask_values
from components.contract import StackOutputs
from components.routing import RoutingProfile

UNKNOWN_COMMIT = "unknown"
from common import REPO_ROOT

SEGMENT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"

Segment = Annotated[str, StringConstraints(pattern=SEGMENT_PATTERN)]
"""One key segment: a stack name, run id or prefix part (no `/`, no leading dot)."""


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
            outputs=mask_values(outputs.to_json_dict()),  # a URL's credentials never archived
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
