"""The smoke and perf stages on a cluster: build the Job's objects, run it, read its verdict.

`stages.cluster_jobs` builds the objects, `stages.job_runner` runs them through the `ClusterApi`
seam (`stages.kube`), and this module decides what the pod's log means:

- smoke passes when the Job completed AND the log's last line starts with `Smoke test passed`;
- perf passes when the Job completed and every level's AIPerf export decodes from the log; the
  exports land in `<out>/c<N>/aiperf/`, exactly where the lab's AIPerf writes them, so the same
  `read_level` and `finish_sweep` produce the same `results.json` for `report` and `archive`;
- a pod that says `Frontend not ready:` fails either stage with its own exit code.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from components.contract import StackOutputs
from stages import cluster_jobs
from stages.aiperf import ConnectionReuse
from stages.cluster_jobs import (
    CLUSTER_CONNECTION_REUSE,
    CLUSTER_TOKENIZER,
    PERF_JOB,
    POD_IMAGE,
    RUN_ID_LABEL,
    JobSettings,
    Manifest,
)
from stages.incluster import pod_common, smoke_pod
from stages.incluster.pod_common import ExportFormatError
from stages.job_runner import JobOutcome, JobRunner, Timer, WaitLimits
from stages.kube import ClusterApi, FrontendNotReadyError, JobFailedError, KubernetesApi
from stages.perf import PerfError, finish_sweep
from stages.results import AIPERF_EXPORT_FILE, ProfileResults, ResultsError, read_level
from stages.workload import PerfWorkload, VideoUrl, dataset_rows, write_dataset

SMOKE_TIMEOUT_SECONDS = 900.0
PERF_TIMEOUT_SECONDS = 4 * 3600.0
"""The recipe's sweep took about 70 minutes (round robin) on eight H200s, plus installing AIPerf
and making 1,000 videos; four hours leaves room for a slower cluster."""
DEADLINE_MARGIN_SECONDS = 300
"""The Job's activeDeadlineSeconds is the stage's timeout plus this: the stage normally gives up
first (and deletes the Job); the deadline stops the Job if the stage itself died."""
POD_LOG_FILE = "pod.log"
MANIFESTS_FILE = "manifests.yaml"


@dataclass(frozen=True)
class ClusterOptions:
    """How to reach the cluster and what the Jobs run; every field has a documented default."""

    kubeconfig: Path | None = None
    context: str | None = None
    """None: the stack outputs' kubeContext."""
    timeout_seconds: float | None = None
    """None: the stage's default (smoke 900 s, perf 4 h)."""
    start_timeout_seconds: float = 600.0
    poll_seconds: float = 5.0
    image: str = POD_IMAGE
    pip_index_url: str | None = None
    tokenizer: str = CLUSTER_TOKENIZER
    connection_reuse: ConnectionReuse = CLUSTER_CONNECTION_REUSE
    run_id: str | None = None

    def timeout(self, default_timeout: float) -> float:
        return default_timeout if self.timeout_seconds is None else self.timeout_seconds

    def limits(self, default_timeout: float) -> WaitLimits:
        return WaitLimits(
            timeout_seconds=self.timeout(default_timeout),
            start_timeout_seconds=self.start_timeout_seconds,
            poll_seconds=self.poll_seconds,
        )

    def job_settings(self, default_timeout: float, model_wait_seconds: float) -> JobSettings:
        timeout = self.timeout(default_timeout)
        return JobSettings(
            run_id=cluster_jobs.check_run_id(self.run_id or new_run_id()),
            image=self.image,
            model_wait_seconds=model_wait_seconds,
            deadline_seconds=int(timeout) + DEADLINE_MARGIN_SECONDS,
            pip_index_url=self.pip_index_url,
            tokenizer=self.tokenizer,
            connection_reuse=self.connection_reuse,
        )


def new_run_id() -> str:
    """`20261130T184200Z-3f9a1c`: sortable, unique, and a valid label value."""
    return f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


def connect(outputs: StackOutputs, options: ClusterOptions) -> ClusterApi:
    """The official client for the stack's namespace and kube context (or the overrides)."""
    return KubernetesApi.connect(
        outputs.namespace, options.kubeconfig, options.context or outputs.kube_context
    )


def _printer(stage: str, outputs: StackOutputs, stream: TextIO | None) -> Callable[[str], None]:
    target = stream or sys.stderr

    def say(message: str) -> None:
        print(f"[{stage} {outputs.namespace}] {message}", file=target, flush=True)

    return say


def _run_id_selector(manifests: list[Manifest]) -> str:
    job = next(m for m in manifests if m["kind"] == "Job")
    run_id = job["spec"]["template"]["metadata"]["labels"][RUN_ID_LABEL]
    return f"{RUN_ID_LABEL}={run_id}"


def frontend_not_ready(outcome: JobOutcome) -> str | None:
    """The pod's own `Frontend not ready: ...` line, if it printed one."""
    prefix = pod_common.FRONTEND_NOT_READY
    return next((line for line in outcome.lines if line.startswith(prefix)), None)


# --- smoke --------------------------------------------------------------------------------------


def smoke_objects(
    outputs: StackOutputs, options: ClusterOptions, model_wait_seconds: float
) -> list[Manifest]:
    settings = options.job_settings(SMOKE_TIMEOUT_SECONDS, model_wait_seconds)
    return cluster_jobs.smoke_manifests(outputs, settings)


def smoke_verdict(outcome: JobOutcome) -> str:
    """The answer if the smoke Job passed; otherwise the error that says why it did not."""
    not_ready = frontend_not_ready(outcome)
    if not_ready:
        raise FrontendNotReadyError(f"the smoke pod reports: {not_ready}")
    last = outcome.last_line
    if outcome.succeeded and last.startswith(smoke_pod.PASSED):
        return last.removeprefix(smoke_pod.PASSED).strip()
    if outcome.succeeded:
        raise JobFailedError(
            f"Job {outcome.job} completed, but its last log line is not "
            f"'{smoke_pod.PASSED} ...': {last!r}"
        )
    raise JobFailedError(
        f"Job {outcome.job} failed ({outcome.failure}); the end of its log:\n{outcome.tail()}"
    )


def run_cluster_smoke(
    outputs: StackOutputs,
    options: ClusterOptions,
    model_wait_seconds: float,
    api: ClusterApi | None = None,
    stream: TextIO | None = None,
    timer: Timer | None = None,
) -> str:
    """Run the smoke Job in the stack's namespace; returns the answer or raises why not.

    `api`, `stream` and `timer` default to the real cluster, stderr and the real clock."""
    manifests = smoke_objects(outputs, options, model_wait_seconds)
    runner = JobRunner(
        api or connect(outputs, options),
        options.limits(SMOKE_TIMEOUT_SECONDS),
        _printer("smoke", outputs, stream),
        timer,
    )
    return smoke_verdict(runner.run(manifests, _run_id_selector(manifests)))


# --- perf ---------------------------------------------------------------------------------------


def perf_objects(
    outputs: StackOutputs,
    workload: PerfWorkload,
    options: ClusterOptions,
    model_wait_seconds: float,
) -> list[Manifest]:
    settings = options.job_settings(PERF_TIMEOUT_SECONDS, model_wait_seconds)
    return cluster_jobs.perf_manifests(outputs, workload, settings)


def write_exports(log: str, workload: PerfWorkload, out_dir: Path) -> list[Path]:
    """Decode the AIPerf exports framed in a perf pod's log into `<out>/c<N>/aiperf/<file>`.

    Old exports of the same levels are removed first, so a level the log lacks cannot be read
    from an earlier run.
    """
    for concurrency in workload.concurrencies:
        (out_dir / f"c{concurrency}" / "aiperf" / AIPERF_EXPORT_FILE).unlink(missing_ok=True)
    try:
        exports = pod_common.decode_exports(log.splitlines())
    except ExportFormatError as error:
        raise PerfError(f"the perf pod's log is damaged: {error}") from error
    written = []
    for export in exports:
        path = out_dir / f"c{export.concurrency}" / "aiperf" / export.file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(export.data)
        written.append(path)
    return written


def results_from_log(
    outputs: StackOutputs, workload: PerfWorkload, log: str, out_dir: Path
) -> ProfileResults:
    """The sweep's results from the pod's log: the same files and `results.json` as the lab."""
    write_exports(log, workload, out_dir)
    try:
        levels = [read_level(out_dir / f"c{c}" / "aiperf") for c in workload.concurrencies]
    except ResultsError as error:
        raise PerfError(f"the perf pod's log lacks a level's export: {error}") from error
    return finish_sweep(outputs, workload, levels, out_dir)


def _keep_record(
    outputs: StackOutputs, workload: PerfWorkload, manifests: list[Manifest], out_dir: Path
) -> None:
    """What was submitted, and each level's dataset, beside the results (for the archive)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / MANIFESTS_FILE).write_text(cluster_jobs.to_yaml(manifests))
    media = VideoUrl(cluster_jobs.media_base_url(outputs, PERF_JOB))
    for concurrency in workload.concurrencies:
        rows = dataset_rows(workload, concurrency, media)
        write_dataset(rows, out_dir / f"c{concurrency}" / "dataset.jsonl")


def run_cluster_perf(
    outputs: StackOutputs,
    workload: PerfWorkload,
    out_dir: Path,
    options: ClusterOptions,
    model_wait_seconds: float,
    api: ClusterApi | None = None,
    stream: TextIO | None = None,
    timer: Timer | None = None,
) -> ProfileResults:
    """Run the perf Job; writes the pod's log, exports and `results.json` under `out_dir`."""
    manifests = perf_objects(outputs, workload, options, model_wait_seconds)
    _keep_record(outputs, workload, manifests, out_dir)
    runner = JobRunner(
        api or connect(outputs, options),
        options.limits(PERF_TIMEOUT_SECONDS),
        _printer("perf", outputs, stream),
        timer,
    )
    outcome = runner.run(manifests, _run_id_selector(manifests))
    (out_dir / POD_LOG_FILE).write_text(outcome.log)
    not_ready = frontend_not_ready(outcome)
    if not_ready:
        raise FrontendNotReadyError(f"the perf pod reports: {not_ready}")
    if not outcome.succeeded:
        raise JobFailedError(
            f"Job {outcome.job} failed ({outcome.failure}); the end of its log "
            f"(all of it in {out_dir / POD_LOG_FILE}):\n{outcome.tail()}"
        )
    return results_from_log(outputs, workload, outcome.log, out_dir)
