"""The lab A/B's graph source through `pulumi up`: it measures the graphs the program deploys.

`python -m lab ab` (and so `make lab`) runs the recipe's A/B as on a cluster, on this machine
(docs/lab.md, "Through `pulumi up`", says each step and why): the local cluster
(`testenv.cluster`, without kwok's stand-in status for graphs; or, with `$COSMOS3_CLUSTER` naming
a kubeconfig, a control plane that was already running: `lab_cluster`); the lab controller
(`lab.controller`), which runs each DynamoGraphDeployment on it for real; a copy of the project
with a file backend of its own (`testenv.local_stacks.local_project`), its stacks made and set
through the Automation API (the lab's worker count, the affinity TTL at the run's time scale);
the orchestrator's cluster target (`stages.ab.cluster_target`) for `pulumi up` and `pulumi
destroy`; the stages as local processes against the frontend the stack's Service names, whose
annotation the controller wrote (`lab.frontend_service`): `kubectl port-forward` needs a kubelet
that forwards, which kwok emulates only for ports fixed when it starts.

Everything is stopped on the way out, a failure and Ctrl-C included: the controller's graphs, then
the cluster (by PID; on one that was running, what the lab added to it). Its folders are under `--out`: `cluster/`, `pulumi/` (the project copy and its
backend, made afresh each run, as the cluster is), `runs/<namespace>/<graph>/` (each graph's logs).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import testenv
from common.confined_paths import remove_tree_inside
from components.contract import StackOutputs
from components.names import graph_name
from components.routing import RECIPE_AFFINITY_TTL_SECONDS, RoutingProfile
from lab.ab import LabAbTarget
from lab.controller import GraphController
from lab.deployed_graph import WorkerMapping
from lab.environment import LabNotInstalled
from lab.frontend_service import published_frontend_url, reached_at
from lab.graph import LabGraph, LabGraphError
from lab.mocker_timing import REAL_SPEED
from stages.ab.cluster_target import LAYER_STACK, PROFILE_STACKS, ClusterAbTarget
from stages.ab.pulumi_stacks import DeployError, PulumiStacks
from stages.ab.target import Say
from stages.cluster.run import ClusterOptions
from stages.errors import StageError
from testenv import cluster as local_cluster
from testenv.cluster import objects
from testenv.cluster.existing import attach_existing
from testenv.crd import CrdError
from testenv.engine import Engine, EngineError, cache_home, located
from testenv.local_stacks import LAYER_SITE, SITE, local_project

GRAPH_READY_TIMEOUT_SECONDS = 300
"""How long `pulumi up` waits for a lab graph to be Ready: it serves within seconds, or it failed
(the recipe's 1200 s are for a NIM loading its model)."""
LAB_NGC_KEY = "lab-no-ngc-key"
"""The layer's `ngcApiKey` (a secret in its config): nothing is downloaded in the lab."""


def profile_config(profile: RoutingProfile, workers: int, scale: float) -> dict[str, str]:
    """A profile stack's config in the lab: the local cluster, the lab's worker count, and the
    recipe's TTL at the run's time scale."""
    config = SITE | {
        "workerReplicas": str(workers),
        "graphReadyTimeoutSeconds": str(GRAPH_READY_TIMEOUT_SECONDS),
    }
    if profile is RoutingProfile.SESSION_AFFINITY:
        config["sessionAffinityTtlSeconds"] = str(round(RECIPE_AFFINITY_TTL_SECONDS * scale))
    return config


def lab_cluster(folder: Path, engine: Engine, say: Say) -> local_cluster.LocalCluster:
    """A new local cluster in `folder`, or the control plane of the kubeconfig `$COSMOS3_CLUSTER`
    names (testenv/cluster/existing.py); either way without kwok's graph Stage, since the lab
    controller reports the graphs' status. A folder it names is refused: that cluster's kwok
    would report it too."""
    if existing := testenv.named_kubeconfig():
        kubeconfig, context = existing
        say(f"lab: on the cluster of context {context or '(current)'} of {kubeconfig}")
        return attach_existing(kubeconfig, context, folder, engine, True, graph_stage=False)
    if os.environ.get(testenv.ENV_CLUSTER):
        raise local_cluster.ClusterError(
            f"${testenv.ENV_CLUSTER} names a folder of `testenv.cluster up`, whose kwok reports "
            "the graphs' status in the lab controller's place: unset it, or name the kubeconfig "
            "of a control plane without nodes (docs/contributing.md)"
        )
    return local_cluster.up(folder, engine, die_with_parent=True, say=say, graph_stage=False)


@dataclass
class ClusterGraphs:
    """The graph source that deploys with `pulumi up` on the local cluster (the module
    docstring); `close` stops the controller's graphs, then the cluster."""

    name: str = "lab (local cluster, pulumi up)"
    cluster: local_cluster.LocalCluster | None = None
    controller: GraphController | None = None
    inner: ClusterAbTarget | None = None

    def stack(self, profile: RoutingProfile) -> str:
        return PROFILE_STACKS[profile]

    def prepare(self, target: LabAbTarget, say: Say) -> None:
        """The engine, the cluster and the controller running, the time scale chosen, the
        stacks set, the layer up."""
        try:
            engine = located(cache_home())
        except EngineError as error:
            raise LabNotInstalled(
                f"the lab deploys with the real `pulumi` on a local cluster: {error} (`make lab` "
                "builds it; `python -m lab ab --direct` runs the graphs without it)"
            ) from None
        started = time.monotonic()
        try:
            self._start(target, engine, say)
        except (local_cluster.ClusterError, CrdError) as error:
            raise LabGraphError(f"the lab's local cluster: {error}") from None
        target.timings["setup"] = {"seconds": round(time.monotonic() - started, 1)}

    def _start(self, target: LabAbTarget, engine: Engine, say: Say) -> None:
        self.cluster = lab_cluster(target.out / "cluster", engine, say)
        target.choose_conditions(say)
        mocker_args = REAL_SPEED.mocker_args(target.conditions.time_scale)
        self.controller = GraphController(
            self.cluster.kubeconfig,
            WorkerMapping(install=target.install, mocker_args=mocker_args),
            target.out / "runs",
            say=say,
            context=objects.CONTEXT,
        ).__enter__()
        pulumi = self._configured_stacks(target, engine, say)
        options = ClusterOptions(kubeconfig=self.cluster.kubeconfig, context=objects.CONTEXT)
        self.inner = ClusterAbTarget(pulumi, options)
        self.inner.prepare(say)

    def _configured_stacks(self, target: LabAbTarget, engine: Engine, say: Say) -> PulumiStacks:
        assert self.cluster is not None
        remove_tree_inside(target.out, "pulumi")  # its state described the last run's cluster
        folder = target.out / "pulumi"
        folder.mkdir(parents=True)
        project, env = local_project(folder, self.cluster)
        stacks = PulumiStacks(
            project, say, pulumi_root=engine.root, layer_stack=LAYER_STACK, env=env
        )
        stacks.create(LAYER_STACK, LAYER_SITE, {"ngcApiKey": LAB_NGC_KEY})
        scale = target.conditions.time_scale
        for profile, stack in PROFILE_STACKS.items():
            stacks.create(stack, profile_config(profile, target.workers, scale))
        return stacks

    def start(
        self, target: LabAbTarget, profile: RoutingProfile, say: Say
    ) -> tuple[StackOutputs, LabGraph]:
        assert self.inner is not None and self.controller is not None
        try:
            outputs = self.inner.deploy(profile, say)
        except StageError as error:
            reason = self.controller.reason(graph_name(profile))
            if reason is None:
                raise
            raise DeployError(f"{error}\nthe lab controller: {reason}") from None
        graph = self.controller.running(outputs.namespace, outputs.graph_name)
        if graph is None:
            raise LabGraphError(
                f"`pulumi up` of {self.stack(profile)} ended, but the lab controller runs no graph "
                f"{outputs.namespace}/{outputs.graph_name}"
            )
        return outputs, graph  # the outputs as the stack has them

    def reached(self, outputs: StackOutputs) -> StackOutputs:
        """The outputs leading to the frontend the stack's Service names."""
        kubeconfig = self.cluster.kubeconfig if self.cluster else None
        return reached_at(outputs, published_frontend_url(outputs, kubeconfig))

    def stop(self, profile: RoutingProfile, graph: LabGraph | None, say: Say) -> None:
        assert self.inner is not None
        self.inner.teardown(profile, say)  # `pulumi destroy`: the controller stops the graph

    def close(self) -> None:
        try:
            if self.controller is not None:
                self.controller.stop()
                self.controller = None
        finally:  # the cluster goes down whatever stopping the graphs met
            if self.cluster is not None:
                self.cluster.down()
                self.cluster = None
