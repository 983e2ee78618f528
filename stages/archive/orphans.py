"""Interrupted pushes: runs with stored objects but no manifest. `list_incomplete_runs` finds
them; `clean_incomplete_run` deletes one, and refuses a run whose manifest exists (complete
runs are never deleted) or one written to so recently that its push may still be running."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import groupby

from stages.archive.errors import ArchiveError, RunNotFoundError
from stages.archive.layout import ArchiveLocation, RunPlace
from stages.archive.store import StoredObject
from stages.archive.stores import ArchiveStore, open_bucket

DEFAULT_MIN_AGE = timedelta(minutes=10)


@dataclass(frozen=True)
class IncompleteRun:
    """A run's objects without its manifest: what an interrupted push leaves."""

    place: RunPlace
    objects: int
    size: int
    last_written: datetime


def list_incomplete_runs(
    location: ArchiveLocation, stack: str | None = None
) -> list[IncompleteRun]:
    """Every run (optionally of one stack) that has objects but no manifest, in key order."""
    bucket = open_bucket(location)
    incomplete = []
    for place, group in groupby(_objects_in_runs(bucket, stack), key=lambda item: item[0]):
        objects = [stored for _, stored in group]
        if all(stored.key != place.manifest_key(location) for stored in objects):
            incomplete.append(_summary(place, objects))
    return incomplete


def clean_incomplete_run(
    location: ArchiveLocation,
    stack: str,
    profile: str,
    run_id: str,
    stage: str,
    *,
    min_age: timedelta = DEFAULT_MIN_AGE,
    dry_run: bool = False,
) -> list[str]:
    """Delete the objects of one incomplete run (all of them, or none on a refusal); returns
    their keys. With `dry_run`, deletes nothing."""
    place = RunPlace.checked(stack, str(profile), run_id, str(stage))
    bucket = open_bucket(location)
    objects = list(bucket.objects(place.prefix(location)))
    manifest = place.manifest_key(location)
    if any(stored.key == manifest for stored in objects):
        raise ArchiveError(
            f"run {place.describe()} is complete ({bucket.url(manifest)} exists): `archive clean` "
            "deletes only incomplete runs, never an archived one"
        )
    if not objects:
        raise RunNotFoundError(
            f"nothing is stored under {bucket.url(place.prefix(location))} at {bucket.endpoint}: "
            "`archive incomplete` lists the incomplete runs"
        )
    _require_quiet_for(place, objects, min_age)
    keys = [stored.key for stored in objects]
    if not dry_run:
        bucket.delete(keys)
    return keys


def _objects_in_runs(
    bucket: ArchiveStore, stack: str | None
) -> Iterator[tuple[RunPlace, StoredObject]]:
    """Each object inside a run's folder, with its run. Keys are listed in order, so the
    objects of one run come one after another."""
    for stored in bucket.objects(bucket.location.search_prefix(stack)):
        place = RunPlace.of_key(bucket.location, stored.key)
        if place is not None:
            yield place, stored


def _summary(place: RunPlace, objects: list[StoredObject]) -> IncompleteRun:
    return IncompleteRun(
        place=place,
        objects=len(objects),
        size=sum(stored.size for stored in objects),
        last_written=max(stored.last_modified for stored in objects),
    )


def _require_quiet_for(place: RunPlace, objects: list[StoredObject], min_age: timedelta) -> None:
    """A push that is still running looks like an incomplete run: leave young runs alone."""
    age = datetime.now(UTC) - max(stored.last_modified for stored in objects)
    if age < min_age:
        raise ArchiveError(
            f"run {place.describe()} was written to {age.total_seconds() / 60:.1f} minutes ago, "
            f"less than {min_age.total_seconds() / 60:g}: its push may still be running. Wait, "
            "or pass --older-than 0 if it is not"
        )
