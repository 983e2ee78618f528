"""The workers' disruption budget on the real engine (issue 32, part 2): `pulumi up` of a profile
creates the PodDisruptionBudget; kwok pods carrying the labels the Dynamo operator gives a graph's
workers are counted by it, and the Eviction API refuses (HTTP 429) an eviction past the budget
and allows one within it; the profile's destroy removes the budget.

The stand-in workers belong to a ReplicaSet, as the operator's do (a Deployment's): for
`maxUnavailable` the disruption controller needs the pods' controller and its scale to know how
many pods to expect; it counts bare pods as none and allows no eviction at all."""

from __future__ import annotations

import json
from typing import Any

import pytest

from testenv import cluster as local
from testenv.local_stacks import SITE, LocalStacks
from tests.real.support import layer_up, paused_kwok, wait_until

NAMESPACE = "cosmos3-nano-reasoner"
GRAPH = "cosmos3-nano-reasoner-agg-h200-round-robin"
BUDGET = f"{GRAPH}-worker"
WORKERS = 3
OPERATOR_LABELS = {
    "nvidia.com/dynamo-graph-deployment-name": GRAPH,
    "nvidia.com/dynamo-component-type": "worker",
}


def stand_in_workers() -> dict[str, Any]:
    """Three pods with the operator's worker labels, on a kwok node (kwok marks them Ready)."""
    labels = OPERATOR_LABELS | {"app": "stand-in-workers"}
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "stand-in-workers", "namespace": NAMESPACE},
        "spec": {
            "replicas": WORKERS,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeName": "kwok-h200-0",
                    "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
                },
            },
        },
    }


def budget_status(cluster: local.LocalCluster) -> dict[str, Any]:
    found = json.loads(cluster.kubectl("get", "pdb", BUDGET, "-n", NAMESPACE, "-o", "json"))
    status: dict[str, Any] = found.get("status") or {}
    return status


def budget_allows(cluster: local.LocalCluster, healthy: int, allowed: int) -> bool:
    status = budget_status(cluster)
    return (status.get("currentHealthy"), status.get("disruptionsAllowed")) == (healthy, allowed)


def ready_pods(cluster: local.LocalCluster) -> list[str]:
    pods = json.loads(
        cluster.kubectl("get", "pods", "-n", NAMESPACE, "-l", "app=stand-in-workers", "-o", "json")
    )["items"]
    return sorted(
        pod["metadata"]["name"]
        for pod in pods
        if not pod["metadata"].get("deletionTimestamp")
        and any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (pod.get("status") or {}).get("conditions") or []
        )
    )


def evict(cluster: local.LocalCluster, pod: str) -> None:
    """POST the pod's eviction subresource, as `kubectl drain` does; a refusal raises
    ClusterError with the API server's answer."""
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod, "namespace": NAMESPACE},
    }
    path = f"/api/v1/namespaces/{NAMESPACE}/pods/{pod}/eviction"
    cluster.kubectl("create", "--raw", path, "-f", "-", stdin=json.dumps(eviction))


def test_the_budget_refuses_an_eviction_past_it_and_allows_one_within_it(
    stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    layer_up(stacks)
    stacks.configure("round-robin", SITE)
    stacks.deploy("round-robin")

    spec = json.loads(local_cluster.kubectl("get", "pdb", BUDGET, "-n", NAMESPACE, "-o", "json"))
    assert spec["spec"]["maxUnavailable"] == 1
    assert spec["spec"]["selector"] == {"matchLabels": OPERATOR_LABELS}

    local_cluster.kubectl("apply", "-f", "-", stdin=json.dumps(stand_in_workers()))
    wait_until(
        lambda: budget_allows(local_cluster, healthy=WORKERS, allowed=1),
        f"the budget counts {WORKERS} healthy workers and allows one eviction",
        seconds=90,
    )
    first, second, _ = ready_pods(local_cluster)

    # kwok paused: the evicted worker stays terminating and its replacement never gets Ready, as
    # a real worker loading the model for minutes would.
    with paused_kwok(local_cluster):
        evict(local_cluster, first)
        with pytest.raises(local.ClusterError) as refused:
            evict(local_cluster, second)
    assert "TooManyRequests" in str(refused.value), str(refused.value)
    assert "disruption budget" in str(refused.value)

    wait_until(
        lambda: budget_allows(local_cluster, healthy=WORKERS, allowed=1),
        "the replacement is Ready and the budget allows one eviction again",
        seconds=90,
    )
    evict(local_cluster, second)  # within the budget again: allowed

    stacks.run("destroy", "--yes", "--stack", "round-robin")
    gone = local_cluster.kubectl("get", "pdb", "-n", NAMESPACE, "-o", "name")
    assert gone.strip() == ""
