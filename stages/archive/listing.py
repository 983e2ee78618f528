"""Reading the archive's catalogue: the complete runs (those with a valid manifest), the newest
one, or one named run's manifest."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator

from pydantic import ValidationError

from components.routing import RoutingProfile
from stages.archive.errors import CorruptManifestError, RunNotFoundError, validation_summary
from stages.archive.layout import ArchiveLocation, RunPlace, is_manifest_key
from stages.archive.records import RunRecord, Stage
from stages.archive.stores import ArchiveStore, open_bucket

MAX_MANIFEST_BYTES = 16 * 2**20  # a manifest of 10,000 files is about 1.5 MiB

Warn = Callable[[str], None]


def warn_on_stderr(message: str) -> None:
    print(f"archive: warning: {message}", file=sys.stderr)


def list_runs(
    location: ArchiveLocation,
    stack: str | None = None,
    profile: RoutingProfile | str | None = None,
    stage: Stage | str | None = None,
    warn: Warn = warn_on_stderr,
) -> list[RunRecord]:
    """Complete runs, oldest first; optionally of one stack, profile and/or stage.

    An object at a manifest's key that is not that run's manifest (not JSON, not a RunRecord,
    another run's record, or gone while listing) is skipped with a warning naming its key and
    why: one bad object never hides the good runs.
    """
    bucket = open_bucket(location)
    search = location.search_prefix(stack, str(profile) if profile else None)
    wanted = [
        record
        for record in _readable_records(bucket, search, warn)
        if (profile is None or record.profile == profile)
        and (stage is None or record.stage == stage)
    ]
    return sorted(wanted, key=lambda record: (record.created_at, record.run_id, record.stage))


def latest_run(
    location: ArchiveLocation,
    stack: str | None = None,
    profile: RoutingProfile | str | None = None,
    stage: Stage | str = Stage.PERF,
    warn: Warn = warn_on_stderr,
) -> RunRecord:
    """The newest complete run of a stage (perf unless said), optionally of one stack/profile."""
    runs = list_runs(location, stack=stack, profile=profile, stage=stage, warn=warn)
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
    """The manifest of one archived run; a corrupt one is a CorruptManifestError naming it."""
    bucket = open_bucket(location)
    key = RunPlace.checked(stack, str(profile), run_id, str(stage)).manifest_key(location)
    try:
        return read_record(bucket, key)
    except RunNotFoundError:
        raise RunNotFoundError(
            f"no complete {stage} run {run_id!r} of {stack}/{profile} at {bucket.url(key)} "
            f"({bucket.endpoint}): `archive list` shows the archived runs"
        ) from None


def read_record(bucket: ArchiveStore, key: str) -> RunRecord:
    """The manifest at `key`, which must be a valid RunRecord of the run its key names."""
    data = bucket.read(key, max_size=MAX_MANIFEST_BYTES)
    if len(data) > MAX_MANIFEST_BYTES:
        raise _corrupt(bucket, key, f"larger than {MAX_MANIFEST_BYTES // 2**20} MiB")
    try:
        record = RunRecord.model_validate_json(data)
    except ValidationError as error:
        raise _corrupt(bucket, key, validation_summary(error)) from None
    if RunPlace.of(record).manifest_key(bucket.location) != key:
        raise _corrupt(bucket, key, f"it describes another run ({record.describe()})")
    return record


def _readable_records(bucket: ArchiveStore, search: str, warn: Warn) -> Iterator[RunRecord]:
    for key in bucket.keys(search):
        if not is_manifest_key(bucket.location, key):
            continue
        try:
            yield read_record(bucket, key)
        except (CorruptManifestError, RunNotFoundError) as error:
            warn(f"skipped {error}")


def _corrupt(bucket: ArchiveStore, key: str, reason: str) -> CorruptManifestError:
    return CorruptManifestError(f"{bucket.url(key)} is not a valid run manifest: {reason}")
