"""Monitoring on the real engine (issue 31): with prometheus-operator's CRDs installed
(`make pinned-crds`, testenv.engine.pins), `pulumi up` creates the graph's monitor, alert rule
and dashboard, the API server judging them against the CRDs' schemas; without the CRDs, the
preview refuses in one line naming the key, before anything is created."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from testenv import cluster as local
from testenv.engine.pins import MONITORING_CRDS
from testenv.local_stacks import SITE, LocalStacks
from tests.real.support import layer_up, pinned_crds_installed

NAMESPACE = "cosmos3-nano-reasoner"
GRAPH = "cosmos3-nano-reasoner-agg-h200-round-robin"


def monitoring_on(stacks: LocalStacks) -> None:
    stacks.configure("round-robin", SITE | {"monitoring": "true"})
    stacks.run("config", "set", "--path", "monitoringLabels[0]", "release=kube-prometheus",
               "--stack", "round-robin")  # fmt: skip


@pytest.fixture
def monitoring_crds(local_cluster: local.LocalCluster) -> Iterator[None]:
    """prometheus-operator's CRDs on this worker's cluster for one test, then gone again."""
    with pinned_crds_installed(local_cluster, MONITORING_CRDS):
        yield


def names(cluster: local.LocalCluster, kinds: str) -> list[str]:
    found = cluster.kubectl("get", kinds, "-n", NAMESPACE, "-o", "name")
    return sorted(found.split())


def test_up_creates_the_monitor_rule_and_dashboard_and_a_kind_change_replaces_the_monitor(
    stacks: LocalStacks, local_cluster: local.LocalCluster, monitoring_crds: None
) -> None:
    layer_up(stacks)
    monitoring_on(stacks)
    stacks.run("up", "--yes", "--stack", "round-robin")

    assert names(local_cluster, "podmonitors.monitoring.coreos.com") == [
        f"podmonitor.monitoring.coreos.com/{GRAPH}"
    ]
    assert len(names(local_cluster, "prometheusrules.monitoring.coreos.com")) == 1
    monitor = json.loads(
        local_cluster.kubectl("get", "podmonitor", GRAPH, "-n", NAMESPACE, "-o", "json")
    )
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus"
    dashboards = local_cluster.kubectl(
        "get", "configmaps", "-n", NAMESPACE, "-l", "grafana_dashboard=1", "-o", "name"
    )
    assert len(dashboards.split()) == 1

    stacks.run("config", "set", "monitoringKind", "ServiceMonitor", "--stack", "round-robin")
    stacks.run("up", "--yes", "--stack", "round-robin")

    assert names(local_cluster, "podmonitors.monitoring.coreos.com") == []
    assert names(local_cluster, "servicemonitors.monitoring.coreos.com") == [
        f"servicemonitor.monitoring.coreos.com/{GRAPH}"
    ]
    stacks.run("destroy", "--yes", "--stack", "round-robin")
    assert names(local_cluster, "prometheusrules.monitoring.coreos.com") == []


def test_monitoring_on_a_cluster_without_the_crds_is_refused_at_preview_naming_the_key(
    stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    layer_up(stacks)
    monitoring_on(stacks)

    refused = stacks.run("preview", "--stack", "round-robin", check=False)

    assert refused.returncode != 0
    output = refused.stdout + refused.stderr
    assert "cosmos3-nano-reasoner:monitoring is true but the cluster has no" in output, output
    assert "podmonitors.monitoring.coreos.com" in output
    assert "Traceback" not in output
    graphs = local_cluster.kubectl("get", "dgd", "-n", NAMESPACE, "-o", "name", check=False)
    assert graphs.strip() == ""
