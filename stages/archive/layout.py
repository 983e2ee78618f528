"""Where the archive is (bucket, prefix, endpoint) and where each run lives inside it:

    <prefix>/<stack>/<profile>/<run-id>/<stage>/files/<relative path>
    <prefix>/<stack>/<profile>/<run-id>/<stage>/manifest.json

Every part below the prefix is one key segment (`RunPlace.checked` enforces it for user input).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, field_validator

from stages.archive.errors import ArchiveError
from stages.archive.records import SEGMENT_PATTERN, RunRecord

DEFAULT_PREFIX = "cosmos3-nano-reasoner"
MANIFEST_NAME = "manifest.json"
FILES_FOLDER = "files"


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
        for what, value in [
            ("stack", stack),
            ("profile", profile),
            ("run id", run_id),
            ("stage", stage),
        ]:
            if not re.fullmatch(SEGMENT_PATTERN, value):
                raise ArchiveError(
                    f"{what} {value!r} is not a key segment (letters, digits, `.`, `_`, `-`)"
                )
        return cls(stack, profile, run_id, stage)

    @classmethod
    def of_key(cls, location: ArchiveLocation, key: str) -> RunPlace | None:
        """The run a key under `<prefix>/<stack>/<profile>/<run-id>/<stage>/` belongs to."""
        if not key.startswith(f"{location.prefix}/"):
            return None
        segments = key.removeprefix(f"{location.prefix}/").split("/")
        return cls(*segments[:4]) if len(segments) >= 5 else None

    def describe(self) -> str:
        return f"{self.stack}/{self.profile}/{self.run_id}/{self.stage}"

    def prefix(self, location: ArchiveLocation) -> str:
        """`<prefix>/<stack>/<profile>/<run-id>/<stage>/`, with the slash that keeps `run-1`
        from matching `run-10`."""
        return f"{location.prefix}/{self.describe()}/"

    def manifest_key(self, location: ArchiveLocation) -> str:
        return f"{self.prefix(location)}{MANIFEST_NAME}"

    def files_prefix(self, location: ArchiveLocation) -> str:
        return f"{self.prefix(location)}{FILES_FOLDER}/"

    def file_key(self, location: ArchiveLocation, name: str) -> str:
        return f"{self.files_prefix(location)}{name}"


def is_manifest_key(location: ArchiveLocation, key: str) -> bool:
    """True for `<prefix>/<stack>/<profile>/<run-id>/<stage>/manifest.json`, not a stored file."""
    place = RunPlace.of_key(location, key)
    return place is not None and key == place.manifest_key(location)
