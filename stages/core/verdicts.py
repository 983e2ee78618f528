"""A pod program's run, its log, and what it means: the smoke answer, or the sweep's results. The
same wherever it ran (a Job's pod on a cluster, or a local process).

The pod programs (`stages.incluster`) print progress lines, and for perf the AIPerf exports framed
in the log (`log_exports.export_lines`). `LogEcho` shows the log as it grows, each export as one
line; `PodRun` is how the run ended. Then:

- smoke passes when the program succeeded AND its last line starts with `Smoke test passed`; its
  `Routing probe: <json>` line, when there is one, is read as a `RoutingProbe`;
- perf passes when the program succeeded and every level's AIPerf export decodes from the log;
  the exports land in `<out>/c<N>/aiperf/`, and `sweep_results` writes `results.json` from them;
- a program that says `Frontend not ready:` fails either stage with that error's own status;
- a sweep that stopped part-way (the frontend died, AIPerf failed at a level) still leaves
  `results.json`, with the levels it finished and `complete: false`, before the stage fails.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from pydantic import ValidationError

from common.confined_paths import remove_file, write_file
from common.credentials import masked_document
from components.contract import StackOutputs
from stages.core.aiperf_export import AIPERF_EXPORT_FILE, read_level
from stages.core.graph_metrics import GraphMetricsError, read_graph_counts
from stages.core.results import LevelResult, ProfileResults, ResultsError, RunConditions
from stages.core.routing_probe import RoutingProbe
from stages.core.typed_files import refusal
from stages.core.workload import PerfWorkload
from stages.errors import FrontendNotReady, StageFailed
from stages.incluster import pod_common, smoke_pod
from stages.incluster.graph_metrics import GRAPH_METRICS_FILE
from stages.incluster.log_exports import EXPORT_BEGIN, EXPORT_END, ExportFormatError, decode_exports

LOG_TAIL_LINES = 25


@dataclass(frozen=True)
class PodRun:
    """How a pod program's run ended and what it printed."""

    what: str
    """Where it ran, for messages: `Job cosmos3-nano-reasoner-smoke`, `the local perf program`."""
    succeeded: bool
    log: str
    failure: str | None = None

    @property
    def lines(self) -> list[str]:
        return [line for line in self.log.splitlines() if line.strip()]

    @property
    def last_line(self) -> str:
        return self.lines[-1] if self.lines else ""

    def tail(self, count: int = LOG_TAIL_LINES) -> str:
        """The last log lines, without the exports' base64 bodies."""
        readable = without_export_bodies(self.lines)
        return "\n".join(readable[-count:]) or "(the program printed nothing)"


def without_export_bodies(lines: list[str]) -> list[str]:
    """The lines a reader wants: each framed export's BEGIN line stands for its whole block."""
    kept, in_export = [], False
    for line in lines:
        if line.startswith(EXPORT_BEGIN):
            kept.append(line)
            in_export = True
        elif line.rstrip("\r") == EXPORT_END:
            in_export = False
        elif not in_export:
            kept.append(line)
    return kept


def printer(prefix: str, stream: TextIO | None = None) -> Callable[[str], None]:
    """A stage's `say`: each line `[prefix] ...` on `stream` (stderr when None), flushed."""
    target = stream or sys.stderr

    def say(message: str) -> None:
        print(f"[{prefix}] {message}", file=target, flush=True)

    return say


class LogEcho:
    """Prints a growing log's new complete lines; an export shows as one line, not its base64."""

    def __init__(self, write: Callable[[str], None]) -> None:
        self.write = write
        self.printed = 0

    def update(self, log: str, final: bool = False) -> None:
        lines = log.split("\n")
        complete = lines if final else lines[:-1]  # the last piece may still be growing
        if final and complete and complete[-1] == "":
            complete = complete[:-1]
        readable = without_export_bodies(complete)  # grows only at its end as the log does
        for line in readable[self.printed :]:
            if line.startswith(EXPORT_BEGIN):
                line = "(export " + line.removeprefix(EXPORT_BEGIN).strip(" =") + ")"
            self.write(f"  pod| {line}")
        self.printed = max(self.printed, len(readable))


def frontend_not_ready(run: PodRun) -> str | None:
    """The program's own `Frontend not ready: ...` line, if it printed one."""
    prefix = pod_common.FRONTEND_NOT_READY
    return next((line for line in run.lines if line.startswith(prefix)), None)


def _fail_unless_succeeded(run: PodRun, stage: str, log_path: Path | None = None) -> None:
    not_ready = frontend_not_ready(run)
    if not_ready:
        raise FrontendNotReady(f"the {stage} program reports: {not_ready}")
    if not run.succeeded:
        where = f" (all of it in {log_path})" if log_path else ""
        raise StageFailed(
            f"{run.what} failed ({run.failure}); the end of its log{where}:\n{run.tail()}"
        )


@dataclass(frozen=True)
class SmokeResult:
    answer: str
    routing: RoutingProbe | None = None
    """Where the routing probe's requests went (None: the program ran no probe)."""

    def lines(self) -> list[str]:
        """What the smoke stage prints: the probe's summary, then the verdict line last."""
        summary = [self.routing.summary()] if self.routing else []
        return [*summary, f"{smoke_pod.PASSED} {self.answer}"]


def smoke_verdict(run: PodRun) -> SmokeResult:
    """The answer and the routing probe if the smoke program passed; otherwise the error that
    says why it did not."""
    _fail_unless_succeeded(run, "smoke")
    last = run.last_line
    if not last.startswith(smoke_pod.PASSED):
        raise StageFailed(
            f"{run.what} completed, but its last log line is not '{smoke_pod.PASSED} ...': {last!r}"
        )
    answer = last.removeprefix(smoke_pod.PASSED).strip()
    return SmokeResult(answer, routing_probe(run))


def routing_probe(run: PodRun) -> RoutingProbe | None:
    """The program's `Routing probe:` line as a checked probe (the last one, if several)."""
    lines = [line for line in run.lines if line.startswith(smoke_pod.ROUTING_PROBE)]
    if not lines:
        return None
    try:
        return RoutingProbe.model_validate_json(lines[-1].removeprefix(smoke_pod.ROUTING_PROBE))
    except ValidationError as error:
        raise StageFailed(
            f"{run.what}: its '{smoke_pod.ROUTING_PROBE}' line is not a routing probe: "
            f"{refusal(error)}"
        ) from None


def write_exports(log: str, workload: PerfWorkload, out_dir: Path) -> None:
    """Decode the AIPerf exports framed in a perf program's log into `<out>/c<N>/aiperf/<file>`,
    masked (AIPerf echoes its endpoint and headers). Old exports of the same levels are removed
    first, so a level the log lacks cannot be read from an earlier run."""
    for concurrency in workload.concurrencies:
        for name in (AIPERF_EXPORT_FILE, GRAPH_METRICS_FILE):
            remove_file(out_dir / f"c{concurrency}" / "aiperf" / name)
    try:
        exports = decode_exports(log.splitlines())
    except ExportFormatError as error:
        raise StageFailed(f"the perf program's log is damaged: {error}") from error
    for export in exports:
        path = out_dir / f"c{export.concurrency}" / "aiperf" / export.file
        write_file(path, masked_document(export.data))


def sweep_results(
    outputs: StackOutputs,
    workload: PerfWorkload,
    run: PodRun,
    out_dir: Path,
    log_path: Path,
    conditions: RunConditions | None = None,
) -> ProfileResults:
    """The sweep's results from a perf program's run: the same files and `results.json` on every
    target. A run that failed saves the levels it finished (in order, marked incomplete; nothing
    when none did or the log cannot be read), then fails; a level missing from a finished run's
    log, or no result, saves nothing (an earlier run's `results.json` in `out_dir` is removed
    first). `results.json` is saved before a level that broke the
    workload's promises fails the stage (for inspection). `conditions`: a local graph's time
    scale (its levels are rescaled to real time) and host."""
    failed = not run.succeeded or frontend_not_ready(run) is not None
    remove_file(out_dir / "results.json")  # an earlier run's, never taken for this one's
    try:
        write_exports(run.log, workload, out_dir)
    except StageFailed:
        if not failed:
            raise
    levels: list[LevelResult] = []
    unread = None
    for concurrency in workload.concurrencies:
        artifact_dir = out_dir / f"c{concurrency}" / "aiperf"
        try:
            level = read_level(artifact_dir)
            levels.append(level.model_copy(update={"graph": read_graph_counts(artifact_dir)}))
        except (ResultsError, GraphMetricsError) as error:  # missing, or not a result
            unread = error
            break
    if failed:
        why = frontend_not_ready(run) or f"{run.what} failed ({run.failure})"
        try:  # a level that is not a result did not finish; the run's failure is what counts
            _results(outputs, workload, levels, conditions, why).save(out_dir / "results.json")
        except ResultsError:
            pass
        _fail_unless_succeeded(run, "perf", log_path)
    if unread is not None:
        raise ResultsError(
            f"the perf program's log lacks a level's export, or holds an unusable one: {unread}"
        ) from None
    try:
        results = _results(outputs, workload, levels, conditions)
    except ResultsError as error:
        raise ResultsError(
            f"{error} (each level's AIPerf export: {out_dir}/c<N>/aiperf/)"
        ) from None
    results.save(out_dir / "results.json")
    problems = [p for level in levels for p in check_level(level, workload)]
    if problems:
        raise StageFailed("the sweep broke its promises:\n" + "\n".join(problems))
    return results


def check_level(level: LevelResult, workload: PerfWorkload) -> list[str]:
    """Broken promises of one level: errors, missing requests, output length not exact."""
    problems = []
    if level.error_count:
        problems.append(f"concurrency {level.concurrency}: {level.error_count} requests failed")
        problems += [f"  {kind}" for kind in level.error_kinds]
    if level.request_count != workload.requests_per_level:
        problems.append(
            f"concurrency {level.concurrency}: {level.request_count} requests completed, "
            f"{workload.requests_per_level} expected"
        )
    if abs(level.output_tokens_mean - workload.output_tokens) > 1e-6:
        problems.append(
            f"concurrency {level.concurrency}: {level.output_tokens_mean:g} output tokens on "
            f"average, exactly {workload.output_tokens} expected"
        )
    return problems


def _results(
    outputs: StackOutputs,
    workload: PerfWorkload,
    levels: list[LevelResult],
    conditions: RunConditions | None = None,
    failure: str | None = None,
) -> ProfileResults:
    """The sweep's results, checked as `report` will read them (a level that counts more
    requests than the workload sends is refused here, naming it); `failure`: why an incomplete
    sweep stopped."""
    if conditions is not None and conditions.time_scale != 1:
        levels = [level.rescaled(conditions.time_scale) for level in levels]
    try:  # a rescaled level is checked here too (a huge rate times the scale is no number)
        return ProfileResults(
            profile=outputs.profile,
            target=outputs.target,
            graph_name=outputs.graph_name,
            workers=outputs.worker_replicas,
            session_header=outputs.session_header,
            workload=workload,
            levels=levels,
            complete=failure is None,
            failure=failure,
            conditions=conditions,
        )
    except ValidationError as error:
        raise ResultsError(f"the sweep's levels are not a result: {refusal(error)}") from None
