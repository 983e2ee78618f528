"""Where a stage's client runs: the only part of a stage that depends on the target.

The pod programs, their config and plan, and the verdict are the same for every target. What
differs is where the program runs, chosen once by `stage_target` from the stack outputs' `target`:

- `cluster` (`ClusterTarget`): as an in-cluster Job in the stack's namespace (`stages.cluster`),
  because the workers must fetch the videos from inside the cluster and the frontend's URL is a
  cluster name;
- `lab` (`LocalTarget`): as a local process against the graph on loopback (`stages.local`), with
  the tools the lab passes in (`LocalTools`); the stages never import the lab.

A caller chooses the target once, for one graph's outputs, and passes the `StageTarget` down;
nothing below it asks the outputs' `target` again.
"""

from __future__ import annotations

import json
import tempfile
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from components.contract import StackOutputs
from stages.cluster import manifests
from stages.cluster.run import ClusterOptions, perf_objects, run_cluster_perf, run_cluster_smoke
from stages.cluster.run import smoke_objects as cluster_smoke_objects
from stages.core.pod_plans import PlanSettings, PodPlace, perf_pod_plan, smoke_pod_config
from stages.core.results import ProfileResults
from stages.core.verdicts import SmokeResult
from stages.core.workload import RECIPE_WORKLOAD, PerfWorkload
from stages.local.run import (
    LocalTools,
    require_local_tools,
    run_local_perf,
    run_local_smoke,
)


class StageTarget(ABC):
    """What a stage asks of the place its program runs, for one graph's outputs."""

    outputs: StackOutputs
    """The graph the target runs the stages against (the outputs it was chosen from)."""

    @abstractmethod
    def default_workload(self) -> PerfWorkload:
        """The sweep when no size is given."""

    @abstractmethod
    def recipe_workload(self) -> PerfWorkload:
        """The recipe's sizes as the target runs them (`--recipe-sizes`)."""

    @abstractmethod
    def run_smoke(self, wait_seconds: float) -> SmokeResult:
        """The smoke test; returns the answer and the routing probe or raises why it failed."""

    @abstractmethod
    def run_perf(
        self, workload: PerfWorkload, out_dir: Path, wait_seconds: float
    ) -> ProfileResults:
        """The AIPerf sweep; `results.json` and artifacts under `out_dir`."""

    @abstractmethod
    def smoke_dry_run(self, wait_seconds: float) -> str:
        """What the smoke stage would run, as text; nothing is sent."""

    @abstractmethod
    def perf_dry_run(self, workload: PerfWorkload, out_dir: Path, wait_seconds: float) -> str:
        """What the perf stage would run, as text; nothing is run."""


@dataclass(frozen=True)
class ClusterTarget(StageTarget):
    """The stages as Jobs in the stack's namespace (`stages.cluster.run`)."""

    outputs: StackOutputs
    options: ClusterOptions

    def default_workload(self) -> PerfWorkload:
        return RECIPE_WORKLOAD

    def recipe_workload(self) -> PerfWorkload:
        return RECIPE_WORKLOAD

    def run_smoke(self, wait_seconds: float) -> SmokeResult:
        return run_cluster_smoke(self.outputs, self.options, wait_seconds)

    def run_perf(
        self, workload: PerfWorkload, out_dir: Path, wait_seconds: float
    ) -> ProfileResults:
        return run_cluster_perf(self.outputs, workload, out_dir, self.options, wait_seconds)

    def smoke_dry_run(self, wait_seconds: float) -> str:
        """The smoke Job's objects, as YAML."""
        return manifests.to_yaml(cluster_smoke_objects(self.outputs, self.options, wait_seconds))

    def perf_dry_run(self, workload: PerfWorkload, out_dir: Path, wait_seconds: float) -> str:
        """The perf Job's objects, as YAML."""
        objects = perf_objects(self.outputs, workload, self.options, wait_seconds)
        return manifests.to_yaml(objects)


@dataclass(frozen=True)
class LocalTarget(StageTarget):
    """The stages as local processes against a graph on loopback (`stages.local.run`)."""

    outputs: StackOutputs
    tools: LocalTools

    def default_workload(self) -> PerfWorkload:
        """The local graph's own (a reduced sweep that runs in minutes, in the lab)."""
        return self.tools.default_workload

    def recipe_workload(self) -> PerfWorkload:
        return self.tools.recipe_workload

    def run_smoke(self, wait_seconds: float) -> SmokeResult:
        with tempfile.TemporaryDirectory(prefix="smoke-") as work_dir:
            return run_local_smoke(self.outputs, self.tools, Path(work_dir), wait_seconds)

    def run_perf(
        self, workload: PerfWorkload, out_dir: Path, wait_seconds: float
    ) -> ProfileResults:
        return run_local_perf(self.outputs, workload, out_dir, self.tools, wait_seconds)

    def smoke_dry_run(self, wait_seconds: float) -> str:
        """The smoke program's config, as JSON."""
        place = PodPlace(work_dir="<work>", listen_host="127.0.0.1", ffmpeg=self.tools.ffmpeg)
        config = smoke_pod_config(self.outputs, "http://127.0.0.1:<port>", place, wait_seconds)
        return json.dumps(config, indent=2)

    def perf_dry_run(self, workload: PerfWorkload, out_dir: Path, wait_seconds: float) -> str:
        """The AIPerf commands, one a line."""
        place = PodPlace(work_dir=str(out_dir), aiperf=str(self.tools.aiperf))
        settings = PlanSettings(tokenizer=self.tools.tokenizer, model_wait_seconds=wait_seconds)
        media = self.tools.media_for(workload)
        plan = perf_pod_plan(
            self.outputs, workload, media, "", place, settings, inline_datasets=False
        )
        return "\n".join(" ".join(["aiperf", *level["argv"]]) for level in plan["levels"])


def stage_target(
    outputs: StackOutputs,
    cluster: ClusterOptions | None = None,
    local: LocalTools | None = None,
) -> StageTarget:
    """The target the outputs name, chosen once: a `ClusterTarget` with `cluster` for
    `target: cluster`, a `LocalTarget` with `local` for `target: lab`; a lab graph without the
    lab's tools is a `UsageError` (run it through the lab, which passes them in)."""
    if outputs.target == "cluster":
        return ClusterTarget(outputs, cluster or ClusterOptions())
    return LocalTarget(outputs, require_local_tools(local, outputs))
