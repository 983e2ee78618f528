"""The report's inputs from the S3 archive: the latest (or named) perf run of each stack.

`python -m stages report --archive-bucket B --stacks round-robin session-affinity` reads what a
pipeline archived with `archive push --stage perf`: each run is downloaded through
`stages.archive` (checked against its manifest's sizes and digests) and its `results.json` read
as the `ProfileResults` the local form of `report` reads from files.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from common.confined_paths import write_file
from common.credentials import mask_values
from common.terminal import visible
from stages.archive import (
    ArchiveError,
    ArchiveLocation,
    RunNotFoundError,
    RunRecord,
    Stage,
    download_record,
    latest_run,
    list_runs,
)
from stages.core.results import ProfileResults, ResultsError

RESULTS_FILE = "results.json"
SOURCES_FILE = "sources.json"


@dataclass(frozen=True)
class ArchivedResults:
    """One stack's perf results and the archived run they came from."""

    record: RunRecord
    results: ProfileResults

    def describe(self) -> str:
        return (
            f"{self.record.stack}: run {self.record.run_id} ({self.record.profile}, "
            f"{self.record.created_at:%Y-%m-%d %H:%M} UTC, commit {visible(self.record.commit[:12])})"
        )

    def source(self) -> dict[str, str]:
        return {
            "stack": self.record.stack,
            "profile": self.record.profile.value,
            "runId": self.record.run_id,
            "commit": self.record.commit,
            "createdAt": self.record.created_at.isoformat(),
        }


def pick_run(location: ArchiveLocation, stack: str, run_id: str | None) -> RunRecord:
    """The stack's newest complete perf run, or the named one."""
    if run_id is None:
        return latest_run(location, stack=stack, stage=Stage.PERF)
    runs = list_runs(location, stack=stack, stage=Stage.PERF)
    for record in runs:
        if record.run_id == run_id:
            return record
    known = ", ".join(record.run_id for record in runs[-5:]) or "none"
    raise RunNotFoundError(
        f"no complete perf run {run_id!r} of stack {stack} in s3://{location.bucket}/"
        f"{location.prefix} (latest runs: {known})"
    )


def fetch_pair(
    location: ArchiveLocation,
    stacks: Sequence[str],
    run_ids: Sequence[str] | None,
    work_dir: Path,
) -> list[ArchivedResults]:
    """Both stacks' results, in the order the stacks were given: each run downloaded into
    `work_dir` and its `results.json` read."""
    if len(stacks) != 2 or (run_ids is not None and len(run_ids) != len(stacks)):
        raise ValueError("give two stacks, and either no run ids or one per stack")
    wanted: Sequence[str | None] = run_ids or [None, None]
    pair = []
    for stack, run_id in zip(stacks, wanted, strict=True):
        record = pick_run(location, stack, run_id)
        directory = download_record(location, record, work_dir / stack / record.run_id)
        try:
            results = ProfileResults.load(directory / RESULTS_FILE)
        except ResultsError as error:
            raise ArchiveError(
                f"archived run {record.describe()} holds no usable {RESULTS_FILE}: {error} "
                "(push the perf stage's output directory)"
            ) from error
        pair.append(ArchivedResults(record, results))
    return pair


def write_sources(pair: Sequence[ArchivedResults], out_dir: Path) -> Path:
    """`sources.json` beside the report: which archived runs it compares."""
    out_dir.mkdir(parents=True, exist_ok=True)
    sources = mask_values([item.source() for item in pair])  # a manifest's commit is anything
    return write_file(out_dir / SOURCES_FILE, json.dumps(sources, indent=2) + "\n")
