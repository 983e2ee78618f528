"""Monitoring, opt in (issue 31): the monitor, rule and dashboard builders, the config that turns
them on and what it refuses, the program's objects with it on (under Pulumi mocks) and off, and
the refusal at preview of a cluster without the monitoring CRDs."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pulumi import RunError

from components import monitoring
from components.args import MonitoringArgs
from components.config_parser import ConfigError, parse_stack_config
from components.live import LiveReadError, ObjectRef
from components.settings import PROJECT
from tests.support import stack_settings
from tools.offline import MockCluster, ProgramRun
from tools.stack_files import cli_config, example_site_for

RunStack = Callable[..., ProgramRun]
GRAPH = "cosmos3-nano-reasoner-agg-h200-round-robin"
NAMESPACE = "cosmos3-nano-reasoner"
MONITOR = "kubernetes:monitoring.coreos.com/v1:PodMonitor"
SERVICE_MONITOR = "kubernetes:monitoring.coreos.com/v1:ServiceMonitor"
RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
ON = {"monitoring": True, "monitoringLabels": ["release=prometheus"]}


def args(**fields: Any) -> MonitoringArgs:
    defaults: dict[str, Any] = {
        "graph": GRAPH,
        "kind": "PodMonitor",
        "labels": ("release=prometheus",),
        "worker_replicas": 8,
        "ttft_seconds_alert": 10,
        "dashboard": True,
    }
    return MonitoringArgs(**(defaults | fields))


# --- the builders ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "field"), [("PodMonitor", "podMetricsEndpoints"), ("ServiceMonitor", "endpoints")]
)
def test_the_monitor_selects_the_graphs_frontend_and_workers_on_their_ports(
    kind: str, field: str
) -> None:
    manifest = monitoring.monitor(args(kind=kind), NAMESPACE)
    assert (manifest["apiVersion"], manifest["kind"]) == ("monitoring.coreos.com/v1", kind)
    assert manifest["metadata"]["namespace"] == NAMESPACE
    assert manifest["metadata"]["labels"]["release"] == "prometheus"
    selector = manifest["spec"]["selector"]
    assert selector["matchLabels"] == {"nvidia.com/dynamo-graph-deployment-name": GRAPH}
    (types,) = selector["matchExpressions"]
    assert types == {
        "key": "nvidia.com/dynamo-component-type",
        "operator": "In",
        "values": ["frontend", "worker"],
    }
    endpoints = manifest["spec"][field]
    assert [(e["port"], e["path"]) for e in endpoints] == [
        ("http", "/metrics"),
        ("system", "/metrics"),
    ]
    targets = {r["targetLabel"]: r["sourceLabels"] for r in endpoints[0]["relabelings"]}
    assert targets == {
        "dynamo_graph": ["__meta_kubernetes_pod_label_nvidia_com_dynamo_graph_deployment_name"],
        "dynamo_component_type": ["__meta_kubernetes_pod_label_nvidia_com_dynamo_component_type"],
    }


def test_the_rule_holds_the_four_alerts_with_the_configured_numbers() -> None:
    manifest = monitoring.rule(args(worker_replicas=3, ttft_seconds_alert=7), NAMESPACE)
    assert manifest["kind"] == "PrometheusRule"
    assert manifest["metadata"]["labels"]["release"] == "prometheus"
    (group,) = manifest["spec"]["groups"]
    alerts = {alert["alert"]: alert for alert in group["rules"]}
    assert sorted(alerts) == [
        "Cosmos3FrontendErrors",
        "Cosmos3GraphNotServing",
        "Cosmos3SlowFirstToken",
        "Cosmos3WorkersMissing",
    ]
    assert alerts["Cosmos3WorkersMissing"]["expr"].endswith(") < 3")
    assert alerts["Cosmos3SlowFirstToken"]["expr"].endswith("> 7")
    assert 'status="error"' in alerts["Cosmos3FrontendErrors"]["expr"]
    for alert in alerts.values():
        assert f'namespace="{NAMESPACE}",dynamo_graph="{GRAPH}"' in alert["expr"]
        assert alert["for"] and alert["annotations"]["summary"].startswith(GRAPH)


def test_the_dashboard_is_a_configmap_for_grafanas_sidecar() -> None:
    manifest = monitoring.dashboard(args(), NAMESPACE)
    assert manifest["kind"] == "ConfigMap"
    assert manifest["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert manifest["metadata"]["name"] == f"{GRAPH}-dashboard"
    model = json.loads(manifest["data"][f"{GRAPH}.json"])
    assert len(model["uid"]) <= 40  # Grafana's limit
    titles = [panel["title"] for panel in model["panels"]]
    assert "Each worker's share of requests" in titles
    exprs = [target["expr"] for panel in model["panels"] for target in panel["targets"]]
    assert any("dynamo_component_requests_total" in e and "worker_id" in e for e in exprs)
    assert set(exprs) <= set(monitoring.queries(args(), NAMESPACE))


def test_another_namespace_gets_another_dashboard_uid() -> None:
    uids = {
        json.loads(monitoring.dashboard(args(), ns)["data"][f"{GRAPH}.json"])["uid"]
        for ns in ("a", "b")
    }
    assert len(uids) == 2


def test_the_crd_is_read_cluster_wide() -> None:
    ref = ObjectRef("apiextensions.k8s.io/v1", "CustomResourceDefinition", "x.example.com")
    assert ref.path() == "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x.example.com"


# --- config -------------------------------------------------------------------------------------


def refusal(**overrides: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        stack_settings("round-robin", **overrides)
    return str(caught.value)


def test_monitoring_is_off_by_default() -> None:
    settings = stack_settings("round-robin")
    assert not settings.monitoring
    assert settings.monitoring_kind == "PodMonitor" and settings.monitoring_dashboard


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            {"monitoringKind": "Prometheus"},
            f"{PROJECT}:monitoringKind: Input should be 'PodMonitor' or 'ServiceMonitor'",
        ),
        ({"monitoringLabels": ["release"]}, f"{PROJECT}:monitoringLabels[0]: must be key=value"),
        ({"monitoringLabels": ["bad key=x"]}, f"{PROJECT}:monitoringLabels[0]: key "),
        ({"monitoringLabels": ["a=" + "v" * 64]}, f"{PROJECT}:monitoringLabels[0]: value "),
        (
            {"monitoringLabels": ["app.kubernetes.io/name=x"]},
            "app.kubernetes.io/name is the recipe's own label on every object; choose another key",
        ),
        ({"monitoringLabels": ["a=1", "a=2"]}, "each label key at most once; set twice: 'a'"),
        ({"monitoringTtftSecondsAlert": 0}, f"{PROJECT}:monitoringTtftSecondsAlert"),
        ({"monitoringTtftSecondsAlert": 3601}, f"{PROJECT}:monitoringTtftSecondsAlert"),
    ],
)
def test_monitoring_config_is_refused_naming_the_key(
    overrides: dict[str, Any], expected: str
) -> None:
    assert expected in refusal(**overrides)


def test_monitoring_on_a_stack_without_a_graph_is_refused() -> None:
    raw = cli_config("shared", example_site_for("shared") | {"monitoring": True})
    with pytest.raises(
        ConfigError, match=f"{PROJECT}:monitoring is true and {PROJECT}:deployGraph is false"
    ):
        parse_stack_config(raw, secret_keys={f"{PROJECT}:ngcApiKey"})


# --- the program ----------------------------------------------------------------------------------


def monitoring_objects(run: ProgramRun) -> list[Any]:
    return [r for r in run.kubernetes_objects() if "Monitoring" in r.parent]


@pytest.mark.parametrize("stack", ["dev", "round-robin", "session-affinity"])
def test_off_by_default_no_monitoring_object(run_stack: RunStack, stack: str) -> None:
    run = run_stack(stack)
    assert run.of_type("cosmos3:recipe:Monitoring") == []
    assert monitoring_objects(run) == []


def test_monitoring_on_creates_the_three_objects_in_the_profiles_namespace(
    run_stack: RunStack,
) -> None:
    run = run_stack("round-robin", ON)
    component = run.one("cosmos3:recipe:Monitoring")
    assert component.parent == run.one("cosmos3:recipe:Recipe").urn
    objects = {r.type: r for r in monitoring_objects(run)}
    assert sorted(objects) == sorted([MONITOR, RULE, CONFIG_MAP])
    namespace = run.one("kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment").inputs["metadata"][
        "namespace"
    ]
    for obj in objects.values():
        assert obj.parent == component.urn
        assert obj.inputs["metadata"]["namespace"] == namespace
        assert obj.inputs["metadata"]["labels"]["release"] == "prometheus"


def test_service_monitor_and_no_dashboard(run_stack: RunStack) -> None:
    run = run_stack(
        "session-affinity", ON | {"monitoringKind": "ServiceMonitor", "monitoringDashboard": False}
    )
    assert sorted(r.type for r in monitoring_objects(run)) == sorted([SERVICE_MONITOR, RULE])


@pytest.mark.parametrize(
    ("kind", "crd"),
    [
        ("PodMonitor", "podmonitors.monitoring.coreos.com"),
        ("ServiceMonitor", "servicemonitors.monitoring.coreos.com"),
        ("PodMonitor", "prometheusrules.monitoring.coreos.com"),
    ],
)
def test_missing_crds_are_refused_at_preview_naming_the_key_and_the_fix(
    run_stack: RunStack, kind: str, crd: str
) -> None:
    cluster = MockCluster({("CustomResourceDefinition", crd): None})
    with pytest.raises(RunError) as caught:
        run_stack("round-robin", ON | {"monitoringKind": kind}, cluster=cluster, preview=True)
    message = str(caught.value)
    assert f"{PROJECT}:monitoring is true but the cluster has no {crd} CRD" in message
    assert "install prometheus-operator's CRDs" in message
    assert f"`pulumi config set {PROJECT}:monitoring false`" in message
    assert "\n" not in message


def test_a_cluster_that_cannot_be_read_is_not_refused(run_stack: RunStack) -> None:
    class Unreadable(MockCluster):
        def metadata(self, ref: Any) -> dict[str, Any] | None:
            raise LiveReadError("no credentials")

    run = run_stack("round-robin", ON, cluster=Unreadable(), preview=True)
    assert len(monitoring_objects(run)) == 3
