"""The recipe's A/B as one command: each profile deployed, smoked, swept, archived and taken down,
then the report of both, archived too. The same orchestration for the lab and for a cluster.

Resumable: every run has an id, and a profile whose perf results for that id are archived is not
run again, so a second run after a failure continues where the first stopped (an interrupted
archive push is finished, never overwritten); a second run with another workload is refused before
anything is deployed. On a failure or Ctrl-C the current profile's graph is taken down unless
`keep`; the later profiles are not run, nor are they when a graph could not be taken down and
holds the GPUs the next would use. The command ends with one line per profile: passed, failed
(why), skipped (already archived) or not run.

What a run id already holds in the archive, and how a resume finishes what it began:
`stages/ab/run_archive.py`.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from common.confined_paths import write_file
from common.credentials import mask, mask_values
from components.routing import RoutingProfile
from stages.ab.plan import PROFILES, AbRun, Budget, Outcome, ProfileOutcome, decide_budget
from stages.ab.run_archive import (
    OUTPUTS_FILE,
    archived,
    finish_interrupted_pushes,
    own_name,
    push,
    refuse_cleaned_stages,
    resumed_results,
)
from stages.ab.target import AbTarget, Say
from stages.archive import Stage, download_record
from stages.archive.report_inputs import fetch_pair, write_sources
from stages.core.ab_verdict import ReportError
from stages.core.report import REPORT_FILE, write_report
from stages.errors import AbandonRun, StageError, UsageError
from stages.targets import StageTarget

ANSWER_FILE = "answer.txt"
REHEARSAL_FILE = "rehearsal.txt"
ROUTING_FILE = "routing.json"


@dataclass
class AbResult:
    outcomes: dict[RoutingProfile, ProfileOutcome] = field(default_factory=dict)
    report: Path | None = None
    report_failure: str | None = None
    refused_report: Path | None = None
    """A report written, and not archived, because it says the A/B failed."""
    interrupted: bool = False
    rehearsal: bool = False

    @property
    def passed(self) -> bool:
        reported = self.report is not None or (self.rehearsal and not self.interrupted)
        return reported and self.profiles_done

    @property
    def profiles_done(self) -> bool:
        return all(o.outcome in (Outcome.PASSED, Outcome.SKIPPED) for o in self.outcomes.values())

    def lines(self) -> list[str]:
        return [self.outcomes[profile].line() for profile in PROFILES]


def run_ab(target: AbTarget, run: AbRun, say: Say) -> AbResult:
    """Run what the archive does not hold yet for `run.run_id`; never raises a StageError for a
    profile (it becomes that profile's outcome) and returns with every graph it deployed down."""
    result = AbResult(rehearsal=run.rehearse)
    per_graph = {profile: target.graph_gpus(profile, say) for profile in PROFILES}
    budget = decide_budget(target.available_gpus(say), per_graph)
    say(f"run {run.run_id} on the {target.name}: {budget.reason}")
    pending = []
    if not run.rehearse:  # every profile's, before the archive is written to
        for profile in PROFILES:
            refuse_cleaned_stages(run, target, profile)
    for profile in PROFILES:
        if not run.rehearse:
            finish_interrupted_pushes(run, target, profile, say)
        record = None if run.rehearse else archived(run, target, profile, Stage.PERF)
        if record:
            results = resumed_results(run, record)  # before anything is deployed
            if results is not None:
                target.continue_from(results, say)
            detail = f"perf results of run {run.run_id} already archived"
            result.outcomes[profile] = ProfileOutcome(profile, Outcome.SKIPPED, detail)
        else:
            pending.append(profile)
    deployed: list[RoutingProfile] = []
    try:
        _run_pending(target, run, budget, pending, deployed, result, say)
    except AbandonRun:
        raise  # a second Ctrl-C: nothing more runs, not even the take-down
    except BaseException:
        _teardown_all(target, run, deployed, result, say)
        raise
    _teardown_all(target, run, deployed, result, say)
    for profile in PROFILES:
        result.outcomes.setdefault(profile, ProfileOutcome(profile, Outcome.NOT_RUN))
    if not result.interrupted and not run.rehearse and result.profiles_done:
        try:
            result.report = _report(target, run, say)
        except StageError as error:
            result.report_failure = _first_line(error)
            result.refused_report = error.written if isinstance(error, ReportError) else None
            say(f"report FAILED: {error}")
    return result


def _run_pending(
    target: AbTarget,
    run: AbRun,
    budget: Budget,
    pending: list[RoutingProfile],
    deployed: list[RoutingProfile],
    result: AbResult,
    say: Say,
) -> None:
    if not pending:
        return
    current: RoutingProfile | None = None  # None while the layer is prepared: it fails pending[0]
    try:
        target.prepare(say)
        for current in pending:
            _run_profile(target, run, current, deployed, say)
            result.outcomes[current] = ProfileOutcome(current, Outcome.PASSED)
            if not budget.side_by_side:  # the next graph needs its GPUs, `keep` or not
                taken_down = _teardown(target, current, result, say)
                deployed.remove(current)
                if result.interrupted or not taken_down:  # as asked; or its GPUs are not free
                    return
    except StageError as error:
        failed = current or pending[0]
        result.outcomes[failed] = ProfileOutcome(failed, Outcome.FAILED, _first_line(error))
        say(f"{failed.value} FAILED: {error}")
    except KeyboardInterrupt:
        result.interrupted = True
        failed = current or pending[0]
        if failed not in result.outcomes:  # a profile that passed keeps its outcome
            result.outcomes[failed] = ProfileOutcome(failed, Outcome.FAILED, "interrupted")
        say("interrupted: taking down what this run deployed")


def _run_profile(
    target: AbTarget,
    run: AbRun,
    profile: RoutingProfile,
    deployed: list[RoutingProfile],
    say: Say,
) -> None:
    say(f"{profile.value}: deploying its graph ({target.stack(profile)})")
    started = time.monotonic()
    deployed.append(profile)
    outputs = target.deploy(profile, say)
    say(f"{profile.value}: graph ready after {time.monotonic() - started:.0f} s")
    directory = run.profile_dir(profile)
    directory.mkdir(parents=True, exist_ok=True)
    write_file(directory / OUTPUTS_FILE, json.dumps(outputs.to_json_dict(), indent=2) + "\n")
    stages = target.stage_target(outputs)
    if run.rehearse:
        _rehearse_stages(stages, run, directory, say)
        return
    smoke_dir = directory / "smoke"
    smoke = stages.run_smoke(run.smoke_wait_seconds)
    say(f"{profile.value}: Smoke test passed: {smoke.answer}")
    smoke_dir.mkdir(parents=True, exist_ok=True)
    write_file(smoke_dir / ANSWER_FILE, mask(smoke.answer) + "\n")  # the model's words, the pod's
    if smoke.routing is not None:
        say(f"{profile.value}: {smoke.routing.summary()}")
        smoke.routing.save(smoke_dir / ROUTING_FILE)
    stack = own_name(target.stack(profile))
    if not archived(run, target, profile, Stage.SMOKE):  # an earlier attempt's smoke counts
        push(run, stack, Stage.SMOKE, outputs, smoke_dir, say)
    say(f"{profile.value}: AIPerf sweep at concurrency {list(run.workload.concurrencies)}")
    started = time.monotonic()
    perf_dir = directory / "perf"
    results = stages.run_perf(run.workload, perf_dir, run.perf_wait_seconds)
    say(f"{profile.value}: sweep done in {time.monotonic() - started:.0f} s")
    if smoke.routing is not None:  # the report reads one file per profile: the probe joins it
        results.model_copy(update={"routing": smoke.routing}).save(perf_dir / "results.json")
    push(run, stack, Stage.PERF, outputs, perf_dir, say)


def _teardown_all(
    target: AbTarget, run: AbRun, deployed: list[RoutingProfile], result: AbResult, say: Say
) -> None:
    for profile in [p for p in deployed if not run.keep]:
        _teardown(target, profile, result, say)


def _rehearse_stages(stages: StageTarget, run: AbRun, directory: Path, say: Say) -> None:
    """What smoke and perf would run against this graph, written where their results would go."""
    outputs = stages.outputs
    rendered = {
        "smoke": stages.smoke_dry_run(run.smoke_wait_seconds),
        "perf": stages.perf_dry_run(run.workload, directory / "perf", run.perf_wait_seconds),
    }
    for stage, text in rendered.items():
        path = directory / stage / REHEARSAL_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        write_file(path, mask(text if text.endswith("\n") else text + "\n"))
        say(f"{outputs.profile.value}: {stage} rehearsed (not run): {path}")


def _teardown(target: AbTarget, profile: RoutingProfile, result: AbResult, say: Say) -> bool:
    """Take a profile's graph down, True when it is; an interrupt meanwhile does not stop it (it
    is noted, and the take-down is run again in case it had not started), a second one abandons
    the run. A failed take-down fails the profile, after the reason it had already failed."""
    say(f"{profile.value}: taking its graph down")
    interrupted_before = False
    while True:
        try:
            target.teardown(profile, say)
            return True
        except StageError as error:
            detail = f"its graph could not be taken down: {_first_line(error)}"
            say(f"{profile.value}: {detail}")
            earlier = result.outcomes.get(profile)
            if earlier is not None and earlier.outcome is Outcome.FAILED:
                detail = f"{earlier.detail}; then {detail}"
            result.outcomes[profile] = ProfileOutcome(profile, Outcome.FAILED, detail)
            return False
        except KeyboardInterrupt:
            result.interrupted = True
            if interrupted_before:
                raise AbandonRun(
                    f"`pulumi destroy --yes --stack {target.stack(profile)}` takes its graph down"
                ) from None
            interrupted_before = True
            say(
                f"{profile.value}: interrupted; taking its graph down all the same "
                "(Ctrl-C again exits at once)"
            )


def _report(target: AbTarget, run: AbRun, say: Say) -> Path:
    """Both profiles' archived perf results side by side, written and archived once per run."""
    candidate = PROFILES[-1]
    stack = own_name(target.stack(candidate))
    report_dir = run.out_dir / run.run_id / "report"
    report = report_dir / REPORT_FILE
    if record := archived(run, target, candidate, Stage.REPORT):
        if not report.is_file():
            download_record(run.archive, record, report_dir)
        say(f"report of run {run.run_id} already archived: {report}")
        return report
    stacks = [own_name(target.stack(profile)) for profile in PROFILES]
    with tempfile.TemporaryDirectory(prefix="ab-report-") as work_dir:
        pair = fetch_pair(run.archive, stacks, [run.run_id, run.run_id], Path(work_dir))
    if pair[0].results.workload != pair[1].results.workload:
        raise UsageError(
            f"the two profiles of run {run.run_id} ran different workloads: resume a run with the "
            "workload options it started with, or start a new run"
        )
    report_dir.mkdir(parents=True, exist_ok=True)
    write_report(pair[0].results, pair[1].results, report_dir)
    write_sources(pair, report_dir)
    outputs = pair[-1].record.stack_outputs()
    push(run, stack, Stage.REPORT, outputs, report_dir, say)
    latest = mask_values({"runId": run.run_id})
    write_file(run.out_dir / "latest-run.json", json.dumps(latest) + "\n")
    return report


def _first_line(error: BaseException) -> str:
    """The gist of an error for the closing line: its first line, with the first reason after it
    when that line only introduces a list (`...:`)."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    return f"{lines[0]} {lines[1]}" if lines[0].endswith(":") and len(lines) > 1 else lines[0]
