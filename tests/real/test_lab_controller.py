"""The lab controller on the real tier: the graphs `pulumi up` deploys, run for real.

A cluster of its own for this module, started without kwok's stand-in status for graphs (the
session's cluster has it), the lab controller watching it with two mock workers per graph, and the
real `pulumi` deploying the project's stacks. What the controller runs is read from the processes
themselves (/proc/<pid>/cmdline), never from the controller's own records.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from components.contract import StackOutputs
from components.names import SERVED_MODEL
from lab.controller import GraphController
from lab.deployed_graph import WorkerMapping
from lab.environment import LabInstall, LabNotInstalled
from lab.frontend_service import FRONTEND_URL_ANNOTATION, published_frontend_url, reached_at
from lab.graph import LabGraph
from stages.incluster.processes import group_members
from testenv import cluster as local
from testenv.cluster import objects
from testenv.engine import Engine
from testenv.local_stacks import SITE, LocalStacks
from tests.real.support import (
    LAYER_SECRETS,
    MIN_FREE_VOLUMES,
    delete_namespaces,
    layer_up,
    wait_until,
)

# `make real` shares tests out one by one (--dist loadgroup); this module's tests stay together:
# its cluster and controller are set up once, on one worker.
pytestmark = pytest.mark.xdist_group("test_lab_controller")

NAMESPACE = "cosmos3-nano-reasoner"
GRAPH = "cosmos3-nano-reasoner-agg-h200-session-affinity"
FRONTEND_ARGS = "/spec/components/0/podTemplate/spec/containers/0/args"
WORKERS = 2


@pytest.fixture(scope="module")
def lab_cluster(
    engine: Engine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[local.LocalCluster]:
    running = local.up(
        tmp_path_factory.mktemp("lab-cluster"), engine, die_with_parent=True, graph_stage=False
    )
    yield running
    running.down()


@pytest.fixture(scope="module")
def controller(
    lab_cluster: local.LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GraphController]:
    try:
        install = LabInstall().require()
    except LabNotInstalled as error:
        pytest.fail(f"the lab controller's tests need the lab: {error}")
    mapping = WorkerMapping(install=install, mocker_args=("--speedup-ratio", "10"))
    runs = tmp_path_factory.mktemp("lab-runs")
    with GraphController(
        lab_cluster.kubeconfig, mapping, runs, say=print, context=objects.CONTEXT
    ) as running:
        yield running
    assert running.error is None, running.error


@pytest.fixture
def lab_stacks(
    lab_cluster: local.LocalCluster, controller: GraphController, tmp_path: Path
) -> Iterator[LocalStacks]:
    if lab_cluster.free_volumes() < MIN_FREE_VOLUMES:  # each test's claim binds one for good
        lab_cluster.add_volumes(MIN_FREE_VOLUMES)
    stacks = LocalStacks.create(tmp_path, lab_cluster)
    layer_up(stacks)
    stacks.configure("session-affinity", SITE | {"workerReplicas": str(WORKERS)})
    yield stacks
    delete_namespaces(lab_cluster)
    wait_until(lambda: not controller.managed, "the controller lets the deleted graphs go")


def frontend_cmdline(graph: LabGraph) -> list[str]:
    """The frontend's own command line, as the kernel has it (its guard leads the group)."""
    for pid in group_members(graph.processes[0].pgid):
        words = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]
        if "dynamo.frontend" in words and "-S" not in words:
            return words
    raise AssertionError("no frontend process runs")


def condition(cluster: local.LocalCluster) -> dict[str, Any]:
    graph = json.loads(cluster.kubectl("get", "dgd", GRAPH, "-n", NAMESPACE, "-o", "json"))
    (ready,) = [c for c in graph["status"]["conditions"] if c["type"] == "Ready"]
    return {**ready, "generation": graph["metadata"]["generation"]}


def serving(controller: GraphController) -> LabGraph:
    graph = controller.running(NAMESPACE, GRAPH)
    assert graph is not None, "the controller runs the deployed graph"
    return graph


def test_pulumi_up_ends_once_the_graph_serves_and_the_outputs_lead_to_it(
    lab_stacks: LocalStacks, lab_cluster: local.LocalCluster, controller: GraphController
) -> None:
    lab_stacks.run("up", "--yes", "--stack", "session-affinity")

    outputs = StackOutputs.model_validate(lab_stacks.outputs("session-affinity"))
    url = published_frontend_url(outputs, lab_cluster.kubeconfig)
    models = requests.get(reached_at(outputs, url).models_url, timeout=10).json()
    assert SERVED_MODEL in {model["id"] for model in models["data"]}
    ready = condition(lab_cluster)
    assert (ready["status"], ready["reason"]) == ("True", "Ready")
    assert ready["observedGeneration"] == ready["generation"]
    assert frontend_cmdline(serving(controller))[:2] == ["python3", "-m"]
    assert len(serving(controller).processes) == 1 + WORKERS


def test_a_ttl_changed_in_stack_config_restarts_the_frontend_with_the_new_argument(
    lab_stacks: LocalStacks, controller: GraphController
) -> None:
    lab_stacks.deploy("session-affinity")
    before = frontend_cmdline(serving(controller))
    assert before[before.index("--router-session-affinity-ttl-secs") + 1] == "300"

    lab_stacks.run(
        "config", "set", "sessionAffinityTtlSeconds", "45", "--stack", "session-affinity"
    )
    lab_stacks.run("up", "--yes", "--stack", "session-affinity")

    after = frontend_cmdline(serving(controller))
    assert after[after.index("--router-session-affinity-ttl-secs") + 1] == "45"
    assert after[:3] == ["python3", "-m", "dynamo.frontend"]


def test_the_process_follows_frontend_args_changed_with_kubectl(
    lab_stacks: LocalStacks, lab_cluster: local.LocalCluster, controller: GraphController
) -> None:
    lab_stacks.deploy("session-affinity")
    patch = [
        {"op": "test", "path": f"{FRONTEND_ARGS}/5", "value": "300"},
        {"op": "replace", "path": f"{FRONTEND_ARGS}/5", "value": "77"},
        {"op": "add", "path": f"{FRONTEND_ARGS}/-", "value": "--migration-limit"},
        {"op": "add", "path": f"{FRONTEND_ARGS}/-", "value": "2"},
    ]
    lab_cluster.kubectl(
        "patch", "dgd", GRAPH, "-n", NAMESPACE, "--type=json", "-p", json.dumps(patch)
    )

    def follows() -> bool:
        graph = controller.running(NAMESPACE, GRAPH)
        try:
            words = frontend_cmdline(graph) if graph is not None else []
        except AssertionError:  # the old graph, being stopped
            return False
        return words[-4:] == ["--router-session-affinity-ttl-secs", "77", "--migration-limit", "2"]

    wait_until(follows, "the frontend restarted with the object's new arguments", 120)
    wait_until(
        lambda: (
            condition(lab_cluster)["status"] == "True"
            and condition(lab_cluster)["observedGeneration"] == condition(lab_cluster)["generation"]
        ),
        "Ready again, for the object's new generation",
        120,
    )


def test_an_argument_the_frontend_refuses_leaves_the_graph_not_ready_with_why(
    lab_stacks: LocalStacks, lab_cluster: local.LocalCluster, controller: GraphController
) -> None:
    lab_stacks.deploy("session-affinity")
    patch = [{"op": "add", "path": f"{FRONTEND_ARGS}/-", "value": "--no-such-option"}]
    lab_cluster.kubectl(
        "patch", "dgd", GRAPH, "-n", NAMESPACE, "--type=json", "-p", json.dumps(patch)
    )

    wait_until(
        lambda: condition(lab_cluster)["reason"] == "StartFailed", "the start fails, said", 120
    )
    ready = condition(lab_cluster)
    assert ready["status"] == "False"
    assert "frontend (exit status" in ready["message"], ready["message"]
    assert "--no-such-option" in ready["message"], "the frontend's own words, from its log"
    assert ready["observedGeneration"] == ready["generation"]
    assert controller.running(NAMESPACE, GRAPH) is None


def test_a_killed_worker_takes_the_graph_out_of_ready_with_the_reason(
    lab_stacks: LocalStacks, lab_cluster: local.LocalCluster, controller: GraphController
) -> None:
    lab_stacks.deploy("session-affinity")
    worker = serving(controller).processes[1]

    os.killpg(worker.pgid, signal.SIGKILL)

    wait_until(lambda: condition(lab_cluster)["status"] == "False", "the graph leaves Ready", 30)
    ready = condition(lab_cluster)
    assert ready["reason"] == "ProcessExited"
    assert worker.name in ready["message"] and "SIGKILL" in ready["message"], ready["message"]
    state = lab_cluster.kubectl("get", "dgd", GRAPH, "-n", NAMESPACE, "-o=jsonpath={.status.state}")
    assert state == "failed"


def test_a_destroyed_graph_stops_its_processes_and_its_service_goes_with_it(
    lab_stacks: LocalStacks, lab_cluster: local.LocalCluster, controller: GraphController
) -> None:
    lab_stacks.deploy("session-affinity")
    pgids = [process.pgid for process in serving(controller).processes]
    service = f"service/{GRAPH}-frontend"
    annotation = lab_cluster.kubectl("get", service, "-n", NAMESPACE, "-o", "json")
    assert FRONTEND_URL_ANNOTATION in json.loads(annotation)["metadata"]["annotations"]

    lab_stacks.run("destroy", "--yes", "--stack", "session-affinity")

    wait_until(lambda: controller.running(NAMESPACE, GRAPH) is None, "the graph is let go", 30)
    assert all(not group_members(pgid) for pgid in pgids), "it is let go once all are stopped"
    wait_until(
        lambda: not lab_cluster.kubectl("get", service, "-n", NAMESPACE, check=False).strip(),
        "the garbage collector removes the Service with its graph",
        60,
    )


# --- day two through `pulumi up`, with what runs read from the processes -------------------------


def test_a_replica_change_is_applied_and_awaited_with_that_many_workers_and_frontends(
    lab_stacks: LocalStacks, lab_cluster: local.LocalCluster, controller: GraphController
) -> None:
    lab_stacks.deploy("session-affinity")
    assert len(serving(controller).processes) == 1 + WORKERS

    for replicas in (3, 1):
        lab_stacks.run(
            "config", "set", "workerReplicas", str(replicas), "--stack", "session-affinity"
        )
        preview = lab_stacks.run("preview", "--diff", "--stack", "session-affinity").stdout
        assert re.search(
            rf"replicas\s*:\s*{WORKERS if replicas == 3 else 3}\s*=>\s*{replicas}", preview
        ), preview
        lab_stacks.run("up", "--yes", "--stack", "session-affinity")

        # `up` returned: the graph already runs the new count, Ready for the new generation.
        assert len(serving(controller).processes) == 1 + replicas
        ready = condition(lab_cluster)
        assert ready["status"] == "True" and ready["observedGeneration"] == ready["generation"]
        assert lab_stacks.outputs("session-affinity")["workerReplicas"] == replicas

    # Two frontends, as the operator's Service reaches them: the outputs' URL still serves.
    lab_stacks.run(
        "config", "set-all", "--plaintext", "frontendReplicas=2",
        "--plaintext", "frontendSessionHashing=dynamo-sync", "--stack", "session-affinity",
    )  # fmt: skip
    lab_stacks.run("up", "--yes", "--stack", "session-affinity")
    graph = serving(controller)
    assert (graph.spec.frontends, len(graph.processes)) == (2, 2 + 1)
    outputs = StackOutputs.model_validate(lab_stacks.outputs("session-affinity"))
    url = published_frontend_url(outputs, lab_cluster.kubeconfig)
    models = requests.get(reached_at(outputs, url).models_url, timeout=10).json()
    assert SERVED_MODEL in {model["id"] for model in models["data"]}


def test_a_rotated_key_restarts_every_worker_and_shows_no_key(
    lab_stacks: LocalStacks, controller: GraphController
) -> None:
    lab_stacks.deploy("session-affinity")
    before = {process.name: process.pgid for process in serving(controller).processes[1:]}
    rotated = "nvapi-" + "rotated-key-9876543210abcdefQRS"

    lab_stacks.run("config", "set", "--secret", "ngcApiKey", rotated, "--stack", "shared")
    layer = lab_stacks.run("up", "--yes", "--stack", "shared").stdout
    assert re.search(r"~ 1 updated", layer), "the Secret is updated in place"
    preview = lab_stacks.run("preview", "--diff", "--stack", "session-affinity").stdout
    assert re.search(r"credentials-digest:\s*\"[0-9a-f]{16}\"\s*=>\s*\"[0-9a-f]{16}\"", preview)
    lab_stacks.run("up", "--yes", "--stack", "session-affinity")

    after = {process.name: process.pgid for process in serving(controller).processes[1:]}
    assert len(after) == WORKERS and not set(after.values()) & set(before.values())
    for stack in ("shared", "session-affinity"):
        exported = lab_stacks.run("stack", "export", "--stack", stack).stdout
        assert rotated not in exported and LAYER_SECRETS["ngcApiKey"] not in exported
    assert rotated not in layer + preview


def test_a_graph_that_cannot_start_fails_the_up_early_with_its_reason(
    lab_stacks: LocalStacks, lab_cluster: local.LocalCluster, controller: GraphController
) -> None:
    lab_stacks.deploy("session-affinity")
    lab_stacks.run("config", "set", "workerReplicas", "200", "--stack", "session-affinity")

    began = time.monotonic()
    failed = lab_stacks.run("up", "--yes", "--stack", "session-affinity", check=False)
    took = time.monotonic() - began

    assert failed.returncode != 0
    text = " ".join((failed.stdout + failed.stderr).split())
    assert "cannot start: its status says so for 30 s" in text, text
    assert "Ready=False (Unrunnable)" in text and "the lab runs 1 to 128 mock workers" in text
    assert "kubectl describe dynamographdeployment" in text
    assert took < 300, f"{took:.0f} s: not the whole {1200} s graphReadyTimeoutSeconds"
    assert "workerReplicas" not in lab_stacks.outputs("session-affinity") or (
        lab_stacks.outputs("session-affinity")["workerReplicas"] == WORKERS
    ), "the outputs still describe the graph that last became Ready"

    lab_stacks.run("config", "set", "workerReplicas", str(WORKERS), "--stack", "session-affinity")
    lab_stacks.run("up", "--yes", "--stack", "session-affinity")
    assert len(serving(controller).processes) == 1 + WORKERS
