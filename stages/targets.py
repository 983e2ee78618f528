"""Where a stage's client runs: the only part of a stage that depends on the target.

Requests, AIPerf arguments, datasets and result parsing are the same for every target. What
differs is the submission, chosen by the stack outputs' `target`:

- `lab`: the smoke client and AIPerf run on this machine and reach the graph on loopback;
- `cluster`: they run as in-cluster Jobs in the stack's namespace (`stages.cluster`), because
  the workers must fetch the videos from inside the cluster and the frontend's URL is a cluster
  DNS name.

Cluster modules are imported only when a cluster is the target, so the lab never needs them.
"""

from __future__ import annotations

import ipaddress
import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from components.contract import StackOutputs

if TYPE_CHECKING:
    from stages.cluster import ClusterOptions
    from stages.results import ProfileResults
    from stages.workload import PerfWorkload


class TargetError(RuntimeError):
    """The stage cannot run against this target from here."""


def require_local_target(outputs: StackOutputs, stage: str) -> None:
    """Guard of the lab runners: a cluster's outputs go through `run_smoke`/`run_perf` below."""
    if outputs.target != "lab":
        raise TargetError(
            f"the local {stage} runner works for the lab only; against a cluster "
            f"({outputs.graph_name} in {outputs.namespace}) the {stage} stage runs as an "
            "in-cluster Job: use `python -m stages " + stage + "`"
        )


def require_cluster_reachable_frontend(outputs: StackOutputs, stage: str) -> None:
    """Refuse cluster outputs whose frontend URL is a loopback address before submitting a Job.

    Inside the pod, 127.0.0.1 or localhost is the pod itself, so the Job could never reach that
    frontend: such outputs are a lab file (or a port-forward) marked `target: cluster` by hand.
    """
    host = urlsplit(outputs.frontend_url).hostname or ""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if loopback:
        raise TargetError(
            f"the {stage} stage runs against a cluster as an in-cluster Job, which cannot reach "
            f"the frontend at {outputs.frontend_url} (a loopback address inside the pod is the pod "
            "itself): use the stack's outputs (`pulumi stack output --json`), or `target: lab`"
        )


def lab_aiperf_executable() -> Path:
    """AIPerf from the lab's own venv (installed by lab/setup.sh)."""
    from lab.environment import LabInstall  # the lab target only; clusters bring their own image

    return LabInstall().require().aiperf_executable


def lab_tokenizer() -> str:
    """The lab model's tokenizer directory, which AIPerf loads to build its dataset."""
    from lab.environment import LabInstall

    return str(LabInstall().require().model_dir)


def run_smoke(outputs: StackOutputs, wait_seconds: float, cluster: ClusterOptions) -> str:
    """The smoke test on the outputs' target; returns the answer or raises why it failed."""
    if outputs.target == "lab":
        from stages.smoke import run_smoke as run_local_smoke

        with tempfile.TemporaryDirectory(prefix="smoke-") as work_dir:
            return run_local_smoke(outputs, Path(work_dir), wait_seconds)
    from stages.cluster import run_cluster_smoke

    require_cluster_reachable_frontend(outputs, "smoke")
    return run_cluster_smoke(outputs, cluster, wait_seconds)


def run_perf(
    outputs: StackOutputs,
    workload: PerfWorkload,
    out_dir: Path,
    wait_seconds: float,
    cluster: ClusterOptions,
    aiperf: Path | None = None,
    tokenizer: str | None = None,
) -> ProfileResults:
    """The AIPerf sweep on the outputs' target; `aiperf`/`tokenizer` override the lab's."""
    if outputs.target == "lab":
        from stages.perf import LocalAIPerf
        from stages.perf import run_perf as run_local_perf

        return run_local_perf(outputs, workload, out_dir, LocalAIPerf.for_lab(aiperf, tokenizer))
    from stages.cluster import run_cluster_perf

    require_cluster_reachable_frontend(outputs, "perf")
    return run_cluster_perf(outputs, workload, out_dir, cluster, wait_seconds)


def smoke_dry_run(outputs: StackOutputs, wait_seconds: float, cluster: ClusterOptions) -> str:
    """What the smoke stage would send: the request body (lab) or the manifests (cluster)."""
    if outputs.target == "lab":
        from stages.smoke import smoke_request_body

        body = smoke_request_body(outputs.served_model, "<served video URL>")
        return json.dumps(body, indent=2)
    from stages.cluster import smoke_objects
    from stages.cluster_jobs import to_yaml

    return to_yaml(smoke_objects(outputs, cluster, wait_seconds))


def perf_dry_run(
    outputs: StackOutputs,
    workload: PerfWorkload,
    out_dir: Path,
    wait_seconds: float,
    cluster: ClusterOptions,
    tokenizer: str | None = None,
) -> str:
    """What the perf stage would run: AIPerf commands (lab) or the manifests (cluster)."""
    if outputs.target == "lab":
        from stages.aiperf import aiperf_profile_args

        lines = []
        for c in workload.concurrencies:
            level = out_dir / f"c{c}"
            argv = aiperf_profile_args(
                outputs, workload, c, level / "dataset.jsonl", level / "aiperf",
                tokenizer or "<tokenizer>",
            )  # fmt: skip
            lines.append("aiperf " + " ".join(argv))
        return "\n".join(lines)
    from stages.cluster import perf_objects
    from stages.cluster_jobs import to_yaml

    return to_yaml(perf_objects(outputs, workload, cluster, wait_seconds))
