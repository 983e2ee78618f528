"""The smoke and perf stages on a cluster: build the Job's objects, run the Job, read its verdict.

`stages.cluster.manifests` builds the objects, `stages.cluster.job_runner` runs them through the
`ClusterApi` seam, and `stages.core.verdicts` decides what the pod's log means, exactly as it
does for the lab's local runs. The perf exports land in `<out>/c<N>/aiperf/`, so the same
`results.json` comes out of both targets for `report` and `archive`.
"""

from __future__ import annotations

import ipaddress
import uuid
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO
from urllib.parse import urlsplit

from common.confined_paths import write_file
from common.credentials import mask
from common.output_folders import os_error_reason
from components import names
from components.contract import StackOutputs
from stages.cluster import manifests
from stages.cluster.api import ClusterApi, Manifest
from stages.cluster.job_runner import JobRunner, JobTimedOut, Timer, WaitLimits
from stages.cluster.kubernetes_api import KubernetesApi, stage_context
from stages.cluster.manifests import PERF_JOB, POD_IMAGE, JobSettings
from stages.core.pod_plans import DISTINCT_VIDEOS, NEW_CONNECTIONS, ConnectionReuse, PlanSettings
from stages.core.results import ProfileResults
from stages.core.verdicts import PodRun, SmokeResult, printer, smoke_verdict, sweep_results
from stages.core.workload import PerfWorkload, VideoUrl, dataset_rows, write_dataset
from stages.errors import StageError, UsageError

SMOKE_TIMEOUT_SECONDS = 900.0
PERF_TIMEOUT_SECONDS = 4 * 3600.0
"""The recipe's sweep took about 70 minutes (round robin) on eight H200s, plus installing AIPerf
and making 1,000 videos; four hours leaves room for a slower cluster."""
DEADLINE_MARGIN_SECONDS = 300
"""The Job's activeDeadlineSeconds is the stage's timeout plus this: the stage normally gives up
first (and deletes the Job); the deadline stops the Job if the stage itself died."""
POD_LOG_FILE = "pod.log"
MANIFESTS_FILE = "manifests.yaml"
MAX_PLAN_REQUESTS = 400_000
"""More requests than this never fit the perf ConfigMap: a request's dataset line takes more than
3 bytes gzipped (3.2 at best, measured), so such a plan is refused before it is built (building
one of millions of lines would take minutes and gigabytes before the size check could say no)."""

CLUSTER_TOKENIZER = "builtin"
"""AIPerf's tiktoken tokenizer (o200k_base). The served model id would make AIPerf look the
Cosmos3 tokenizer up on the Hugging Face Hub, where a NIM model need not be. With
`--use-server-token-count` the metrics use the server's token counts, and the dataset fixes every
output length, so the tokenizer only has to load. `builtin` is not offline, despite AIPerf's help:
tiktoken downloads o200k_base.tiktoken from openaipublic.blob.core.windows.net on first use
(checked here: without that host it fails). The pod checks it loads before the sweep."""
CLUSTER_CONNECTION_REUSE: ConnectionReuse = NEW_CONNECTIONS
"""A new connection per request, as in the lab: the A/B numbers come from the same client
behaviour on both targets; the keep-alive stall the lab measured (TTFT p50 44 ms pooled vs 26 ms)
is a TCP interaction not specific to loopback; an in-cluster plain-HTTP connect costs well under a
millisecond against TTFTs of ~60 ms; and with one frontend per graph, connections cannot change
routing (affinity follows the session header). Unverified on a cluster: `--connection-reuse
pooled` switches it."""


@dataclass(frozen=True)
class ClusterOptions:
    """How to reach the cluster and what the Jobs run; every field has a documented default."""

    kubeconfig: Path | None = None
    context: str | None = None
    """None: the stack outputs' kubeContext (`stage_context`: never the current context)."""
    timeout_seconds: float | None = None
    """None: the stage's default (smoke 900 s, perf 4 h)."""
    start_timeout_seconds: float = 600.0
    poll_seconds: float = 5.0
    image: str = POD_IMAGE
    pip_index_url: str | None = field(default=None, repr=False)  # may carry a password
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
        plan = PlanSettings(
            tokenizer=self.tokenizer,
            model_wait_seconds=model_wait_seconds,
            connection_reuse=self.connection_reuse,
            tokenizer_check=True,
        )
        try:
            run_id = manifests.check_run_id(self.run_id or new_job_run_id())
        except ValueError as error:
            raise UsageError(f"--run-id: {error}") from None
        return JobSettings(
            run_id=run_id,
            plan=plan,
            image=self.image,
            deadline_seconds=int(self.timeout(default_timeout)) + DEADLINE_MARGIN_SECONDS,
            pip_index_url=self.pip_index_url,
        )


def new_job_run_id() -> str:
    """`20261130T184200Z-3f9a1c`: sortable, unique, and a valid label value."""
    return f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"


def require_cluster_reachable_frontend(outputs: StackOutputs, stage: str) -> None:
    """Refuse cluster outputs whose frontend or models URL is the pod itself before submitting
    a Job: a loopback or unspecified address (127.0.0.1, ::1, 0.0.0.0, ::), or localhost. Such
    outputs are a lab file (or a port-forward) marked `target: cluster` by hand."""
    for key, url in (("frontendUrl", outputs.frontend_url), ("modelsUrl", outputs.models_url)):
        try:
            host = (urlsplit(url).hostname or "").rstrip(".")
        except ValueError as error:  # e.g. an unclosed IPv6 bracket
            raise UsageError(f"the outputs' {key} is not a URL ({error})") from None
        try:
            address = ipaddress.ip_address(host)
            itself = address.is_loopback or address.is_unspecified
        except ValueError:
            itself = host == "localhost" or host.endswith(".localhost")
        if itself:
            raise UsageError(
                f"the {stage} stage runs against a cluster as an in-cluster Job, which cannot "
                f"reach the {key} {url} (a loopback address inside the pod is the pod itself): "
                "use the stack's outputs (`pulumi stack output --json`), or `target: lab`"
            )


def connect(outputs: StackOutputs, options: ClusterOptions) -> ClusterApi:
    """The official client for the stack's namespace and kube context (or the overrides)."""
    return KubernetesApi.connect(
        outputs.namespace, options.kubeconfig, stage_context(outputs.kube_context, options.context)
    )


# --- smoke --------------------------------------------------------------------------------------


def smoke_objects(
    outputs: StackOutputs, options: ClusterOptions, model_wait_seconds: float
) -> list[Manifest]:
    settings = options.job_settings(SMOKE_TIMEOUT_SECONDS, model_wait_seconds)
    return manifests.smoke_manifests(outputs, settings)


def run_cluster_smoke(
    outputs: StackOutputs,
    options: ClusterOptions,
    model_wait_seconds: float,
    api: ClusterApi | None = None,
    stream: TextIO | None = None,
    timer: Timer | None = None,
) -> SmokeResult:
    """Run the smoke Job in the stack's namespace; returns the answer and the routing probe or
    raises why not."""
    require_cluster_reachable_frontend(outputs, "smoke")
    stage_context(outputs.kube_context, options.context)  # refused before anything is built
    objects = smoke_objects(outputs, options, model_wait_seconds)
    say = printer(f"smoke {outputs.namespace}", stream)
    limits = options.limits(SMOKE_TIMEOUT_SECONDS)
    runner = JobRunner(api or connect(outputs, options), limits, say, timer or Timer())
    return smoke_verdict(runner.run(objects))


# --- perf ---------------------------------------------------------------------------------------


def perf_objects(
    outputs: StackOutputs,
    workload: PerfWorkload,
    options: ClusterOptions,
    model_wait_seconds: float,
    worker_metrics_pages: tuple[str, ...] = (),
) -> list[Manifest]:
    check_cluster_workload(workload)
    settings = options.job_settings(PERF_TIMEOUT_SECONDS, model_wait_seconds)
    plan = replace(settings.plan, worker_metrics_pages=worker_metrics_pages)
    return manifests.perf_manifests(outputs, workload, replace(settings, plan=plan))


def worker_metrics_pages(
    api: ClusterApi, outputs: StackOutputs, say: Callable[[str], None]
) -> tuple[str, ...]:
    """The /metrics URL of each running worker pod of the graph, by its pod IP and `system` port:
    the perf Job reads them from inside the cluster around each level. Listing pods is what the
    stage's RBAC already allows; a refusal leaves them unread, said, never a failure."""
    selector = f"{names.GRAPH_LABEL}={outputs.graph_name},{names.COMPONENT_TYPE_LABEL}=worker"
    try:
        pods = api.pods(selector)
    except StageError as error:
        say(f"the workers' /metrics will not be read (listing their pods failed): {error}")
        return ()
    pages = []
    for pod in pods:
        if pod.ip and pod.phase == "Running":
            host = f"[{pod.ip}]" if ":" in pod.ip else pod.ip
            pages.append(f"http://{host}:{pod.port('system') or names.WORKER_SYSTEM_PORT}/metrics")
    say(f"the perf Job reads {len(pages)} workers' /metrics around each level")
    return tuple(sorted(pages))


def check_cluster_workload(workload: PerfWorkload) -> None:
    """Refuse, before anything is built, a sweep the cluster's Job cannot run: more videos than
    the synthetic video generator makes distinct, or more requests than its ConfigMap holds."""
    levels = len(workload.concurrencies)
    sizes = f"--videos {workload.videos} x {levels} --concurrency levels"
    videos, limit = workload.videos * levels, DISTINCT_VIDEOS
    if videos > limit:
        raise UsageError(
            f"the sweep needs {videos} distinct videos ({sizes}: each level has its own), but "
            f"the synthetic video generator makes at most {limit}: reduce --videos or the levels"
        )
    requests = workload.requests_per_level * levels
    if requests > MAX_PLAN_REQUESTS:
        raise UsageError(
            f"the sweep's {requests} requests ({sizes} x --questions {workload.questions}) "
            f"cannot fit the perf ConfigMap ({MAX_PLAN_REQUESTS} at most, fewer with "
            "--turn-jitter-ms): reduce --videos, --questions or the levels"
        )


def _keep_record(
    outputs: StackOutputs, workload: PerfWorkload, objects: list[Manifest], out_dir: Path
) -> None:
    """What was submitted (Secret values masked), and each level's dataset, beside the results
    (for the archive); an `out_dir` that cannot be written is refused before anything is sent."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        write_file(out_dir / MANIFESTS_FILE, manifests.to_yaml(objects))
        media = VideoUrl(manifests.media_base_url(outputs, PERF_JOB))
        for concurrency in workload.concurrencies:
            rows = dataset_rows(workload, concurrency, media)
            write_dataset(rows, out_dir / f"c{concurrency}" / "dataset.jsonl")
    except OSError as error:
        raise UsageError(
            f"--out {out_dir}: cannot write there ({os_error_reason(error)})"
        ) from None


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
    require_cluster_reachable_frontend(outputs, "perf")
    stage_context(outputs.kube_context, options.context)  # refused before anything is built
    perf_objects(outputs, workload, options, model_wait_seconds)  # refused before connecting
    api = api or connect(outputs, options)
    say = printer(f"perf {outputs.namespace}", stream)
    pages = worker_metrics_pages(api, outputs, say)
    objects = perf_objects(outputs, workload, options, model_wait_seconds, pages)
    _keep_record(outputs, workload, objects, out_dir)
    runner = JobRunner(api, options.limits(PERF_TIMEOUT_SECONDS), say, timer or Timer())
    log_path = out_dir / POD_LOG_FILE
    try:
        run = runner.run(objects)
    except JobTimedOut as timed_out:  # the levels it finished are kept, as for a failed run
        unfinished = PodRun(f"Job {PERF_JOB}", False, timed_out.log, str(timed_out))
        write_file(log_path, mask(timed_out.log))
        with suppress(StageError):  # the failure it names is the timeout
            sweep_results(outputs, workload, unfinished, out_dir, log_path)
        raise
    write_file(log_path, mask(run.log))  # the pod printed it; a credential in it stays off disk
    return sweep_results(outputs, workload, run, out_dir, log_path)
