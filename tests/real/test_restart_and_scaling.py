"""Restart and autoscaler-owned replicas on the real engine (issue 32, parts 1 and 5).

The real API server holds the DGD CRD's CEL rule (spec.restart refused on create): a first `up`
with `graphRestartId` set must still create the graph, without it, and the next `up` writes it.
With `workerAutoscaling`, a count another field manager set (the operator's scaling adapter, here
a server-side apply under another manager's name: the CRD has no scale subresource) must survive
`pulumi up`, and the preview after it must be clean."""

from __future__ import annotations

import json
from typing import Any

import pytest

from testenv import cluster as local
from testenv.local_stacks import SITE, LocalStacks
from tests.real.support import layer_up

NAMESPACE = "cosmos3-nano-reasoner"
GRAPH = "cosmos3-nano-reasoner-agg-h200-round-robin"
STACK = "round-robin"
AUTOSCALER = "dgdsa-stand-in"
"""The field manager of the count: on a cluster, the operator's adapter writes it."""


def live_graph(cluster: local.LocalCluster) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(
        cluster.kubectl("get", "dgd", GRAPH, "-n", NAMESPACE, "-o", "json")
    )
    return found


def worker(graph: dict[str, Any]) -> dict[str, Any]:
    (found,) = [c for c in graph["spec"]["components"] if c["name"] == "Worker"]
    component: dict[str, Any] = found
    return component


def test_the_crd_refuses_a_restart_on_create_and_the_program_writes_it_on_the_next_update(
    stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    layer_up(stacks)
    stacks.configure(STACK, SITE | {"graphRestartId": "r1"})

    created = stacks.run("up", "--yes", "--stack", STACK)

    output = created.stdout + created.stderr
    assert "graphRestartId='r1' takes effect on the next update" in output, output
    assert "restart" not in live_graph(local_cluster)["spec"]
    # The rule the first `up` stepped around is the API server's, not ours: a create with it fails.
    with_restart = live_graph(local_cluster)
    copy = {
        "apiVersion": with_restart["apiVersion"],
        "kind": with_restart["kind"],
        "metadata": {"name": "restart-on-create", "namespace": NAMESPACE},
        "spec": with_restart["spec"] | {"restart": {"id": "r1"}},
    }
    with pytest.raises(local.ClusterError) as refused:
        local_cluster.kubectl("create", "--dry-run=server", "-f", "-", stdin=json.dumps(copy))
    assert "spec.restart must be unset on create" in str(refused.value)

    stacks.run("config", "set", "graphRestartId", "r2", "--stack", STACK)
    stacks.run("up", "--yes", "--stack", STACK)

    graph = live_graph(local_cluster)
    assert graph["spec"]["restart"] == {"id": "r2", "strategy": {"type": "Sequential"}}
    # The wait returned once the stand-in operator reported the restart done for this id.
    assert graph["status"]["restart"] == {"observedID": "r2", "phase": "Completed"}
    stacks.run("preview", "--expect-no-changes", "--stack", STACK)


def test_a_count_the_autoscaler_set_survives_up_and_leaves_the_preview_clean(
    stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    layer_up(stacks)
    stacks.configure(
        STACK,
        SITE | {"workerAutoscaling": "true", "workerMinReplicas": "2", "workerMaxReplicas": "6"},
    )
    stacks.run("up", "--yes", "--stack", STACK)
    created = worker(live_graph(local_cluster))
    assert created["scalingAdapter"] == {} and "replicas" not in created

    scaled = {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": GRAPH, "namespace": NAMESPACE},
        "spec": {"components": [{"name": "Worker", "replicas": 3}]},
    }
    local_cluster.kubectl(
        "apply", "--server-side", f"--field-manager={AUTOSCALER}", "-f", "-",
        stdin=json.dumps(scaled),
    )  # fmt: skip
    assert worker(live_graph(local_cluster))["replicas"] == 3

    stacks.run("preview", "--expect-no-changes", "--stack", STACK)
    stacks.run("up", "--yes", "--stack", STACK)
    assert worker(live_graph(local_cluster))["replicas"] == 3

    # An update that changes the Worker applies it, and still leaves the count alone.
    stacks.run("config", "set", "--path", "workerExtraEnv[0]", "NIM_LOG_LEVEL=DEBUG",
               "--stack", STACK)  # fmt: skip
    stacks.run("up", "--yes", "--stack", STACK)
    after = worker(live_graph(local_cluster))
    assert after["replicas"] == 3
    env = after["podTemplate"]["spec"]["containers"][0]["env"]
    assert {"name": "NIM_LOG_LEVEL", "value": "DEBUG"} in env
    assert stacks.outputs(STACK)["workerAutoscaling"] is True


def test_a_running_graph_switched_to_autoscaling_keeps_its_count_until_the_autoscaler_sets_one(
    stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    layer_up(stacks)
    stacks.configure(STACK, SITE | {"workerReplicas": "4"})
    stacks.run("up", "--yes", "--stack", STACK)

    stacks.run("config", "set", "workerAutoscaling", "true", "--stack", STACK)
    stacks.run("up", "--yes", "--stack", STACK)
    switched = worker(live_graph(local_cluster))
    assert (switched["replicas"], switched["scalingAdapter"]) == (4, {})

    scaled = {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": GRAPH, "namespace": NAMESPACE},
        "spec": {"components": [{"name": "Worker", "replicas": 2}]},
    }
    local_cluster.kubectl(
        "apply", "--server-side", "--force-conflicts", f"--field-manager={AUTOSCALER}",
        "-f", "-", stdin=json.dumps(scaled),
    )  # fmt: skip

    # The count leaves the program's object once (the state still holds 4), changing nothing.
    stacks.run("up", "--yes", "--stack", STACK)
    assert worker(live_graph(local_cluster))["replicas"] == 2
    stacks.run("preview", "--expect-no-changes", "--stack", STACK)
