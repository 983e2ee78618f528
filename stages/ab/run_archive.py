"""The A/B's runs in the archive: what a run id already holds, its pushes, and what a resume
checks and finishes before anything is deployed.

The archive keys a profile's runs by its stack's own name, the last part of a qualified
`<org>/<project>/<stack>` (`own_name`): a key segment holds no `/`. A resume with another workload
than an archived profile's is refused (the report could never compare the two), and a push an
earlier attempt began is finished from the files it was pushing (the archive never overwrites, and
a new measurement would differ from them).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from components.contract import StackOutputs
from components.routing import RoutingProfile
from stages.ab.plan import AbRun
from stages.ab.target import AbTarget, Say
from stages.archive import (
    RunCleanedError,
    RunNotFoundError,
    RunPlace,
    RunRecord,
    Stage,
    download_record,
    fetch_record,
    resume_run,
)
from stages.archive.report_inputs import RESULTS_FILE
from stages.archive.stores import open_bucket
from stages.core.results import ProfileResults, ResultsError
from stages.errors import UsageError

OUTPUTS_FILE = "outputs.json"
"""The graph's stack outputs, beside its stages' files: what finishes an interrupted push."""


def own_name(stack: str) -> str:
    """A stack's own name, what the archive keys its runs by: `round-robin` of
    `acme/cosmos3-nano-reasoner/round-robin`, or of itself."""
    return stack.rsplit("/", 1)[-1]


def archived(
    run: AbRun, target: AbTarget, profile: RoutingProfile, stage: Stage
) -> RunRecord | None:
    stack = own_name(target.stack(profile))
    try:
        return fetch_record(run.archive, stack, profile, run.run_id, stage)
    except RunCleanedError as error:  # its push could never be stored: refused, not re-measured
        raise UsageError(f"{error}: start a new run (another --run-id)") from None
    except RunNotFoundError:
        return None


def refuse_cleaned_stages(run: AbRun, target: AbTarget, profile: RoutingProfile) -> None:
    """A stage of this run that `archive clean` deleted keeps the run id taken: refused before
    anything is deployed (`archived` raises), not after a sweep whose push would fail."""
    for stage in (Stage.SMOKE, Stage.PERF):
        archived(run, target, profile, stage)


def finish_interrupted_pushes(
    run: AbRun, target: AbTarget, profile: RoutingProfile, say: Say
) -> None:
    """An earlier attempt's push that stopped part-way (some files stored, no manifest) is
    finished from the files it was pushing, still in the run's folder, before anything is
    deployed: a new measurement would differ from them, and the archive never overwrites. Only
    a sweep that passed is ever pushed, so a perf push found part-way is one of a passed sweep."""
    directory = run.profile_dir(profile)
    if not (directory / OUTPUTS_FILE).is_file():  # no attempt of this run deployed it here
        return
    stack = own_name(target.stack(profile))
    bucket = open_bucket(run.archive)
    for stage in (Stage.SMOKE, Stage.PERF):
        place = RunPlace(stack, profile.value, run.run_id, stage.value)
        began = next(iter(bucket.objects(place.files_prefix(run.archive))), None) is not None
        if began and not bucket.exists(place.manifest_key(run.archive)):
            say(f"{profile.value}: finishing the {stage.value} push an earlier attempt began")
            outputs = StackOutputs.load(directory / OUTPUTS_FILE)
            push(run, stack, stage, outputs, directory / stage.value, say)


def resumed_results(run: AbRun, archived: RunRecord) -> ProfileResults | None:
    """The archived profile's results, or None when unusable (the report says so, naming the
    file). A resumed run measures what it started measuring: their workload is the run's, or
    nothing is deployed (the report could never compare the two)."""
    with tempfile.TemporaryDirectory(prefix="ab-resume-") as work_dir:
        directory = download_record(run.archive, archived, Path(work_dir))
        try:
            results = ProfileResults.load(directory / RESULTS_FILE)
        except ResultsError:
            return None
    then, now = results.workload, run.workload
    changed = [
        f"{name} {getattr(then, name)} then, {getattr(now, name)} now"
        for name in type(now).model_fields
        if getattr(then, name) != getattr(now, name)
    ]
    if changed:
        raise UsageError(
            f"run {run.run_id} archived {archived.profile.value}'s results of another workload "
            f"({'; '.join(changed)}): resume it with the workload options it started with, or "
            "start a new run (another --run-id)"
        )
    return results


def push(
    run: AbRun, stack: str, stage: Stage, outputs: StackOutputs, directory: Path, say: Say
) -> None:
    record = RunRecord.create(
        stack=stack, stage=stage, outputs=outputs, run_id=run.run_id, commit=run.commit
    )
    outcome = resume_run(directory, record, run.archive)
    say(f"{outputs.profile.value}: {stage.value} archived as {outcome.record.describe()}")
