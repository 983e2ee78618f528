"""Where a stage's client runs: the only part of a stage that depends on the target.

The pod programs, their config and plan, and the verdict are the same for every target. What
differs is where the program runs, chosen by the stack outputs' `target`:

- `cluster`: as an in-cluster Job in the stack's namespace (`stages.cluster`), because the
  workers must fetch the videos from inside the cluster and the frontend's URL is a cluster name;
- `lab`: as a local process against the graph on loopback (`stages.local`), with the tools the
  lab passes in (`LocalTools`); the stages never import the lab.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from components.contract import StackOutputs
from stages.cluster import manifests
from stages.cluster.run import ClusterOptions, perf_objects, run_cluster_perf, run_cluster_smoke
from stages.cluster.run import smoke_objects as cluster_smoke_objects
from stages.core.pod_plans import PlanSettings, PodPlace, perf_pod_plan, smoke_pod_config
from stages.core.results import ProfileResults
from stages.core.workload import RECIPE_WORKLOAD, PerfWorkload
from stages.local.run import (
    LocalTools,
    require_local_tools,
    run_local_perf,
    run_local_smoke,
)


def default_workload(outputs: StackOutputs, local: LocalTools | None) -> PerfWorkload:
    """The sweep when no size is given: the recipe's on a cluster, the local graph's own here."""
    if outputs.target == "cluster":
        return RECIPE_WORKLOAD
    return require_local_tools(local, outputs).default_workload


def recipe_workload(outputs: StackOutputs, local: LocalTools | None) -> PerfWorkload:
    """The recipe's sizes as the target runs them (`--recipe-sizes`)."""
    if outputs.target == "cluster":
        return RECIPE_WORKLOAD
    return require_local_tools(local, outputs).recipe_workload


def run_smoke(
    outputs: StackOutputs,
    wait_seconds: float,
    cluster: ClusterOptions,
    local: LocalTools | None = None,
) -> str:
    """The smoke test on the outputs' target; returns the answer or raises why it failed."""
    if outputs.target == "cluster":
        return run_cluster_smoke(outputs, cluster, wait_seconds)
    tools = require_local_tools(local, outputs)
    with tempfile.TemporaryDirectory(prefix="smoke-") as work_dir:
        return run_local_smoke(outputs, tools, Path(work_dir), wait_seconds)


def run_perf(
    outputs: StackOutputs,
    workload: PerfWorkload,
    out_dir: Path,
    wait_seconds: float,
    cluster: ClusterOptions,
    local: LocalTools | None = None,
) -> ProfileResults:
    """The AIPerf sweep on the outputs' target; `results.json` and artifacts under `out_dir`."""
    if outputs.target == "cluster":
        return run_cluster_perf(outputs, workload, out_dir, cluster, wait_seconds)
    tools = require_local_tools(local, outputs)
    return run_local_perf(outputs, workload, out_dir, tools, wait_seconds)


def smoke_dry_run(
    outputs: StackOutputs,
    wait_seconds: float,
    cluster: ClusterOptions,
    local: LocalTools | None = None,
) -> str:
    """What the smoke stage would run: the Job's objects (cluster) or the program's config (lab)."""
    if outputs.target == "cluster":
        return manifests.to_yaml(cluster_smoke_objects(outputs, cluster, wait_seconds))
    tools = require_local_tools(local, outputs)
    place = PodPlace(work_dir="<work>", listen_host="127.0.0.1", ffmpeg=tools.ffmpeg)
    config = smoke_pod_config(outputs, "http://127.0.0.1:<port>", place, wait_seconds)
    return json.dumps(config, indent=2)


def perf_dry_run(
    outputs: StackOutputs,
    workload: PerfWorkload,
    out_dir: Path,
    wait_seconds: float,
    cluster: ClusterOptions,
    local: LocalTools | None = None,
) -> str:
    """What the perf stage would run: the Job's objects (cluster) or the AIPerf commands (lab)."""
    if outputs.target == "cluster":
        return manifests.to_yaml(perf_objects(outputs, workload, cluster, wait_seconds))
    tools = require_local_tools(local, outputs)
    place = PodPlace(work_dir=str(out_dir), aiperf=str(tools.aiperf))
    settings = PlanSettings(tokenizer=tools.tokenizer, model_wait_seconds=wait_seconds)
    media = tools.media_for(workload)
    plan = perf_pod_plan(outputs, workload, media, "", place, settings, inline_datasets=False)
    return "\n".join(" ".join(["aiperf", *level["argv"]]) for level in plan["levels"])
