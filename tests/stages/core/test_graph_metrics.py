"""The graph's own counters as a checked record and in the report (stages.core.graph_metrics)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.config_rules import MAX_WORKER_REPLICAS
from components.routing import SESSION_HEADER
from stages.core.ab_verdict import ABPair
from stages.core.graph_metrics import (
    MAX_UNREADABLE,
    GraphCounts,
    GraphMetricsError,
    read_graph_counts,
    worker_load_section,
)
from stages.core.report import render_markdown, write_report
from stages.core.results import ProfileResults
from stages.incluster.graph_metrics import GRAPH_METRICS_FILE
from tests.stages.core.support import AFFINITY, ROUND_ROBIN
from tests.stages.support import observed_probe

AFFINITY_LEVEL = GraphCounts.model_validate(
    {
        "workers": {"a": {"requests": 30}, "b": {"requests": 10}},
        "frontend": {"requests": 40, "cached_tokens": 800, "input_tokens": 1000},
    }
)


def test_a_record_reads_back_and_says_how_evenly_the_workers_served(tmp_path: Path) -> None:
    (tmp_path / GRAPH_METRICS_FILE).write_text(AFFINITY_LEVEL.model_dump_json())

    counts = read_graph_counts(tmp_path)

    assert counts == AFFINITY_LEVEL
    assert counts.served() == [30, 10]
    assert counts.busiest_share() == 0.75
    assert counts.frontend_cached_share() == 0.8
    assert counts.prefix_reuse() is None  # the engines did not report it


def test_prefix_reuse_needs_every_workers_engine() -> None:
    both = GraphCounts.model_validate(
        {
            "workers": {
                "a": {"requests": 1, "prefix_queries": 100, "prefix_hits": 90},
                "b": {"requests": 1, "prefix_queries": 100, "prefix_hits": 10},
            }
        }
    )
    one = GraphCounts.model_validate(
        {"workers": {"a": {"requests": 1, "prefix_queries": 100, "prefix_hits": 90}, "b": {}}}
    )

    assert both.prefix_reuse() == 0.5
    assert one.prefix_reuse() is None


def test_no_record_is_none_and_a_broken_one_is_named(tmp_path: Path) -> None:
    assert read_graph_counts(tmp_path) is None
    (tmp_path / GRAPH_METRICS_FILE).write_text(json.dumps({"workers": {"a": {"requests": -1}}}))

    with pytest.raises(GraphMetricsError, match=r"graph-metrics.json is not a graph metrics"):
        read_graph_counts(tmp_path)


@pytest.mark.parametrize(
    "record",
    [
        {"workers": {f"w{i}": {} for i in range(MAX_WORKER_REPLICAS + 1)}},
        {"workers": {"a": {"requests": 10**15 + 1}}},
        {"workers": {"a": {"requests": "12"}}},
        {"workers": {"x" * 65: {}}},
        {"unreachable": ["x"] * (MAX_UNREADABLE + 1)},
        {"frontend": {"requests": 1.5}},
    ],
)
def test_a_record_out_of_bounds_is_refused(tmp_path: Path, record: dict[str, object]) -> None:
    (tmp_path / GRAPH_METRICS_FILE).write_text(json.dumps(record))

    with pytest.raises(GraphMetricsError):
        read_graph_counts(tmp_path)


def test_the_section_shows_each_level_and_what_was_not_read() -> None:
    unread = AFFINITY_LEVEL.model_copy(update={"unreachable": ["http://10.0.0.9:9090/metrics: x"]})

    lines = worker_load_section(
        {"round robin": [(1, None)], "session affinity": [(16, unread)]}, "chart.png"
    )

    assert "| round robin | 1 | not read | | | | |" in lines
    assert "| session affinity | 16 | 2 of 2 | 30-10 | 75% | - | 80% |" in lines
    assert "- http://10.0.0.9:9090/metrics: x" in lines
    assert lines[-1] == "![Requests per worker](chart.png)"
    assert worker_load_section({"round robin": [(1, None)]}) == []


def _with_counts(results: ProfileResults, counts: GraphCounts) -> ProfileResults:
    levels = [level.model_copy(update={"graph": counts}) for level in results.levels]
    return results.model_copy(update={"levels": levels})


def test_the_report_has_the_section_and_draws_it(tmp_path: Path) -> None:
    round_robin = _with_counts(ROUND_ROBIN, AFFINITY_LEVEL)
    affinity = _with_counts(AFFINITY, AFFINITY_LEVEL)

    write_report(round_robin, affinity, tmp_path)

    report = (tmp_path / "report.md").read_text()
    assert "Requests per worker (the workers' and the frontend's own /metrics" in report
    assert "![Requests per worker](routing-chart.png)" in report  # no probe: the section links it
    assert (tmp_path / "routing-chart.png").stat().st_size > 0
    assert "Requests per worker" not in render_markdown(ABPair.of(ROUND_ROBIN, AFFINITY))


def test_the_chart_draws_the_probe_and_the_counts_together(tmp_path: Path) -> None:
    probe = observed_probe([["a", "a"], ["b", "b"]], SESSION_HEADER)
    affinity = _with_counts(AFFINITY, AFFINITY_LEVEL).model_copy(update={"routing": probe})

    write_report(ROUND_ROBIN, affinity, tmp_path)

    report = (tmp_path / "report.md").read_text()
    assert report.count("(routing-chart.png)") == 1  # linked once, by the probe's section
    assert "| session affinity | 1 | 2 of 2 | 30-10 |" in report
    assert "| round robin | 1 | not read |" in report
