"""The monitoring objects' queries against what the lab's real Dynamo 1.6.1 frontend and mockers
export (issue 31, marker `lab`): a rule or dashboard query that names a metric nobody exports, or
a label its series do not carry, fails here. `up` is Prometheus' own, written per target; the
target labels are the monitor's (namespace, and dynamo_graph and dynamo_component_type by its
relabeling), `le` every histogram's."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
import requests

from components.args import MonitoringArgs
from components.monitoring import queries
from components.routing import SESSION_HEADER, RoutingProfile
from lab.graph import LabGraph

pytestmark = pytest.mark.lab
StartGraph = Callable[..., LabGraph]
PROMETHEUS_OWN = {"up"}
TARGET_LABELS = {"namespace", "dynamo_graph", "dynamo_component_type", "le"}
NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"


def metric_names(query: str) -> set[str]:
    """The metrics a query selects: every name right before a `{` selector (the builders write
    one on every metric)."""
    return set(re.findall(rf"({NAME})\{{", query))


def label_names(query: str) -> set[str]:
    """The labels a query matches on or groups by."""
    selectors = re.findall(r"\{([^}]*)\}", query)
    matched = {name for s in selectors for name in re.findall(rf"({NAME})\s*!?[=~]", s)}
    grouped = {
        n.strip() for g in re.findall(r"(?:by|ignoring) \(([^)]*)\)", query) for n in g.split(",")
    }
    return (matched | grouped) - TARGET_LABELS


def exported(text: str) -> dict[str, set[str]]:
    """Each sample name of a /metrics text, with the label names its samples carry."""
    samples: dict[str, set[str]] = {}
    for line in text.splitlines():
        found = re.match(rf"({NAME})(\{{[^}}]*\}})?\s", line)
        if found and not line.startswith("#"):
            labels = set(re.findall(rf"({NAME})=\"", found.group(2) or ""))
            samples.setdefault(found.group(1), set()).update(labels)
    return samples


def test_the_name_parsers() -> None:
    query = 'sum by (worker_id) (rate(a_total{x="1",y=~"z"}[5m])) / max(b{}) or vector(0)'
    assert metric_names(query) == {"a_total", "b"}
    assert label_names(query) == {"worker_id", "x", "y"}
    assert exported('# HELP a x\na_total{x="1",y="2"} 3\nb 1\n') == {
        "a_total": {"x", "y"},
        "b": set(),
    }


def test_every_query_names_only_what_the_lab_graph_exports(start_graph: StartGraph) -> None:
    graph = start_graph(RoutingProfile.SESSION_AFFINITY, workers=2)
    outputs = graph.outputs
    for index in range(4):  # the request counters and the histograms exist after requests
        response = requests.post(
            f"{outputs.frontend_url}/v1/chat/completions",
            json={
                "model": outputs.served_model,
                "messages": [{"role": "user", "content": f"question {index}"}],
                "max_tokens": 4,
                "stream": index % 2 == 0,
            },
            headers={SESSION_HEADER: f"video-{index}"},
            timeout=30,
        )
        response.raise_for_status()
    samples: dict[str, set[str]] = {}
    for url in [f"{outputs.frontend_url}/metrics", *graph.worker_metrics_urls]:
        for name, labels in exported(requests.get(url, timeout=5).text).items():
            samples.setdefault(name, set()).update(labels)

    args = MonitoringArgs(
        graph="g",
        kind="PodMonitor",
        labels=(),
        worker_replicas=2,
        ttft_seconds_alert=10,
        dashboard=True,
    )
    problems = []
    for query in queries(args, "ns"):
        selected = metric_names(query)
        names = selected - PROMETHEUS_OWN
        unselected = re.findall(r"\b(dynamo_\w+)(?![\w{])", re.sub(r"\{[^}]*\}", "{}", query))
        assert selected and not unselected, f"a metric without a selector in {query}"
        problems += [f"{name} is not exported ({query})" for name in sorted(names - set(samples))]
        carried = set().union(*(samples.get(name, set()) for name in names))
        problems += [
            f"no series of {', '.join(sorted(names))} carries label {label} ({query})"
            for label in sorted(label_names(query) - carried)
        ]
    assert problems == []
