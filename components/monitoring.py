"""Monitoring component, opt in (`monitoring`): a PodMonitor or ServiceMonitor for the graph's
frontend and workers, a PrometheusRule with the alerts an operator of the graph needs, and a
Grafana dashboard as a ConfigMap. Pure builders, then the component; docs/configuration.md,
"Monitoring", says where each port, label and metric name comes from and what is UNCERTAIN.

The targets are found by the labels the Dynamo operator puts on the graph's pods
(its `graph.go` `generateLabels`) and scraped on the ports it gives them (`component_*.go`): the
frontend's `http` (8000) and each worker's `system` (9090), both at /metrics. Relabeling copies
the graph's name and the component type onto every target, so the queries below tell this graph's
frontend and workers from any other graph's in the namespace. Every metric they name is one the
lab's Dynamo 1.6.1 frontend and mockers export (tests/lab/test_monitoring_metrics.py), but `up`,
which Prometheus writes for each target itself.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from functools import partial

import pulumi

from components.args import MonitoringArgs
from components.drift import resource_of
from components.layer_manifests import Manifest, SharedLayer, kube_object
from components.live import Live, missing_crds
from components.names import COMPONENT_TYPE_LABEL, GRAPH_LABEL
from components.settings import config_key

API_VERSION = "monitoring.coreos.com/v1"
RULE_KIND = "PrometheusRule"
CRD_GROUP = "monitoring.coreos.com"
SCRAPED = (("frontend", "http"), ("worker", "system"))
"""Each component type and the port its /metrics is served on."""
DASHBOARD_LABEL = {"grafana_dashboard": "1"}
"""What Grafana's dashboard sidecar looks for by default (its `label` and `labelValue`)."""
ERROR_RATIO_ALERT = 0.05


def _target_label(pod_label: str) -> str:
    """The label Prometheus gives a pod label during discovery (invalid characters become `_`)."""
    return "__meta_kubernetes_pod_label_" + re.sub("[^a-zA-Z0-9_]", "_", pod_label)


RELABELINGS = [
    {"sourceLabels": [_target_label(GRAPH_LABEL)], "targetLabel": "dynamo_graph"},
    {"sourceLabels": [_target_label(COMPONENT_TYPE_LABEL)], "targetLabel": "dynamo_component_type"},
]


def _metadata_labels(args: MonitoringArgs, manifest: Manifest, extra: dict[str, str]) -> Manifest:
    user = dict(item.split("=", 1) for item in args.labels)
    manifest["metadata"]["labels"] |= user | extra
    return manifest


def monitor(args: MonitoringArgs, namespace: str) -> Manifest:
    """The PodMonitor (or ServiceMonitor) of the graph's frontend and workers."""
    selector = {
        "matchLabels": {GRAPH_LABEL: args.graph},
        "matchExpressions": [
            {"key": COMPONENT_TYPE_LABEL, "operator": "In", "values": [t for t, _ in SCRAPED]}
        ],
    }
    endpoints = [
        {"port": port, "path": "/metrics", "relabelings": RELABELINGS} for _, port in SCRAPED
    ]
    field = "podMetricsEndpoints" if args.kind == "PodMonitor" else "endpoints"
    spec = {"selector": selector, field: endpoints}
    manifest = kube_object(API_VERSION, args.kind, args.graph, namespace, "monitoring", spec=spec)
    return _metadata_labels(args, manifest, {})


def _selector(namespace: str, graph: str, component: str = "") -> str:
    where = f'namespace="{namespace}",dynamo_graph="{graph}"'
    return where + (f',dynamo_component_type="{component}"' if component else "")


def _quantile(q: float, histogram: str, frontend: str) -> str:
    return f"histogram_quantile({q}, sum by (le) (rate({histogram}_bucket{{{frontend}}}[5m])))"


def alerts(args: MonitoringArgs, namespace: str) -> list[Manifest]:
    """The rule's alerts: (name, expression, for, summary, what to look at) in a table."""
    frontend = _selector(namespace, args.graph, "frontend")
    worker = _selector(namespace, args.graph, "worker")
    requests = f"sum(rate(dynamo_frontend_requests_total{{{frontend}}}[5m]))"
    errors = f'sum(rate(dynamo_frontend_requests_total{{{frontend},status="error"}}[5m]))'
    ttft = _quantile(0.95, "dynamo_frontend_time_to_first_token_seconds", frontend)
    table = [
        (
            "Cosmos3GraphNotServing",
            # The graph's Ready condition is no metric: its frontend ready to route the model is.
            f"(max(dynamo_frontend_model_ready{{{frontend}}}) or vector(0)) < 1",
            "5m",
            "the frontend is down or cannot route the model",
            "is the frontend pod running, and does any worker serve the model?",
        ),
        (
            "Cosmos3WorkersMissing",
            f"(count(up{{{worker}}} == 1) or vector(0)) < {args.worker_replicas}",
            "10m",
            f"fewer than {args.worker_replicas} workers serving",
            "a worker crashed, restarts (loading the model again) or cannot be scheduled",
        ),
        (
            "Cosmos3FrontendErrors",
            f"{errors} / {requests} > {ERROR_RATIO_ALERT:g}",
            "10m",
            f"over {ERROR_RATIO_ALERT:.0%} of the frontend's requests fail",
            "clients get errors: read the frontend's and the workers' logs",
        ),
        (
            "Cosmos3SlowFirstToken",
            f"{ttft} > {args.ttft_seconds_alert}",
            "10m",
            f"p95 time to first token over {args.ttft_seconds_alert} s",
            "requests queue: too few workers for the load, or the prefix cache is not reused",
        ),
    ]
    return [
        {
            "alert": alert,
            "expr": expr,
            "for": duration,
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": f"{args.graph}: {summary}",
                "description": f"{what} (value {{{{ $value }}}})",
            },
        }
        for alert, expr, duration, summary, what in table
    ]


def rule(args: MonitoringArgs, namespace: str) -> Manifest:
    spec = {"groups": [{"name": args.graph, "rules": alerts(args, namespace)}]}
    manifest = kube_object(API_VERSION, RULE_KIND, args.graph, namespace, "monitoring", spec=spec)
    return _metadata_labels(args, manifest, {})


def panels(args: MonitoringArgs, namespace: str) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """The dashboard's panels: (title, unit, [(query, legend)])."""
    frontend = _selector(namespace, args.graph, "frontend")
    worker = _selector(namespace, args.graph, "worker")
    generate = f'{worker},dynamo_endpoint="generate"'
    per_worker = f"rate(dynamo_component_requests_total{{{generate}}}[5m])"
    share = f"sum by (worker_id) ({per_worker}) / ignoring (worker_id) group_left sum({per_worker})"
    ttft = "dynamo_frontend_time_to_first_token_seconds"
    duration = "dynamo_frontend_request_duration_seconds"
    return [
        (
            "Requests per second, by status",
            "reqps",
            [(f"sum by (status) (rate(dynamo_frontend_requests_total{{{frontend}}}[1m]))", "")],
        ),
        (
            "Time to first token",
            "s",
            [(_quantile(q, ttft, frontend), f"p{q * 100:.0f}") for q in (0.5, 0.95)],
        ),
        (
            "Request latency",
            "s",
            [(_quantile(q, duration, frontend), f"p{q * 100:.0f}") for q in (0.5, 0.95)],
        ),
        ("Each worker's share of requests", "percentunit", [(share, "worker {{worker_id}}")]),
        ("Workers serving", "short", [(f"count(up{{{worker}}} == 1)", "workers")]),
    ]


def queries(args: MonitoringArgs, namespace: str) -> list[str]:
    """Every PromQL expression of the rule and the dashboard."""
    dashboard = [query for _, _, targets in panels(args, namespace) for query, _ in targets]
    return [alert["expr"] for alert in alerts(args, namespace)] + dashboard


def dashboard(args: MonitoringArgs, namespace: str) -> Manifest:
    """Grafana's dashboard JSON in a ConfigMap, for its dashboard sidecar."""
    datasource = {"type": "prometheus", "uid": "${datasource}"}
    model = {
        "title": f"Cosmos3 Nano Reasoner: {namespace}/{args.graph}",
        # Grafana's uid is at most 40 characters; one per graph and namespace.
        "uid": "cosmos3-" + hashlib.sha256(f"{namespace}/{args.graph}".encode()).hexdigest()[:16],
        "schemaVersion": 39,
        "time": {"from": "now-1h", "to": "now"},
        "templating": {
            "list": [{"name": "datasource", "type": "datasource", "query": "prometheus"}]
        },
        "panels": [
            {
                "id": index + 1,
                "type": "timeseries",
                "title": title,
                "datasource": datasource,
                "gridPos": {"h": 8, "w": 12, "x": 12 * (index % 2), "y": 8 * (index // 2)},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "targets": [
                    {"refId": chr(ord("A") + n), "expr": query, "legendFormat": legend}
                    for n, (query, legend) in enumerate(targets)
                ],
            }
            for index, (title, unit, targets) in enumerate(panels(args, namespace))
        ],
    }
    data = {f"{args.graph}.json": json.dumps(model, indent=2, sort_keys=True)}
    name = f"{args.graph}-dashboard"
    manifest = kube_object("v1", "ConfigMap", name, namespace, "monitoring", data=data)
    return _metadata_labels(args, manifest, DASHBOARD_LABEL)


def require_crds(live: Live, kind: str) -> None:
    """Refuse, before anything is created, a cluster without the monitoring CRDs; a cluster that
    cannot be read is let through (`Live.attempt` says so)."""
    plurals = (f"{kind.lower()}s", "prometheusrules")
    missing = missing_crds(live, [f"{plural}.{CRD_GROUP}" for plural in plurals])
    if missing:
        raise pulumi.RunError(
            f"{config_key('monitoring')} is true but the cluster has no {', '.join(missing)} "
            "CRD: install prometheus-operator's CRDs (docs/configuration.md, Monitoring), or "
            f"`pulumi config set {config_key('monitoring')} false`"
        )


class Monitoring(pulumi.ComponentResource):
    """The graph's monitor, alert rule and (unless `dashboard` is off) dashboard ConfigMap."""

    def __init__(
        self,
        name: str,
        args: MonitoringArgs,
        layer: pulumi.Input[SharedLayer],
        live: Live,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("cosmos3:recipe:Monitoring", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        namespace = pulumi.Output.from_input(layer).apply(lambda plain: plain.namespace)
        builders: dict[str, Callable[[MonitoringArgs, str], Manifest]] = {
            "monitor": monitor,
            "rule": rule,
        }
        if args.dashboard:
            builders["dashboard"] = dashboard
        for suffix, build in builders.items():
            manifest = namespace.apply(partial(build, args))
            resource_of(f"{name}-{suffix}", build(args, ""), manifest, child, live)
        self.register_outputs({})
