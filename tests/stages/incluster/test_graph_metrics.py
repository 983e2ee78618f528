"""The perf program's reading of the graph's /metrics around a level (stages.incluster.graph_metrics):
the pages parsed as Dynamo 1.6.1 writes them, what a level added, and pages that cannot be read.
The names themselves are checked against the lab's real frontend and workers in
tests/stages/local/test_local_on_lab.py."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from stages.incluster import graph_metrics
from stages.incluster.graph_metrics import (
    frontend_counters,
    level_record,
    parse_samples,
    snapshot,
    summary,
    worker_counters,
    write_level_record,
)

WORKER_PAGE = """\
# HELP dynamo_component_requests_total Total requests
# TYPE dynamo_component_requests_total counter
dynamo_component_requests_total{dynamo_component="backend",dynamo_endpoint="generate",worker_id="7a"} 12
dynamo_component_requests_total{dynamo_component="backend",dynamo_endpoint="worker_kv_query_source_1",worker_id="7a"} 4
dynamo_component_request_bytes_total{dynamo_endpoint="generate",worker_id="7a"} 4206
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1000
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 750
"""
FRONTEND_PAGE = """\
dynamo_frontend_requests_total{model="m",endpoint="chat_completions",status="success"} 30
dynamo_frontend_requests_total{model="m",endpoint="chat_completions",status="error"} 2
dynamo_frontend_cached_tokens_sum{model="m"} 400
dynamo_frontend_cached_tokens_count{model="m"} 32
dynamo_frontend_input_sequence_tokens_sum{model="m"} 1000
dynamo_frontend_worker_last_time_to_first_token_seconds{worker_id="1"} 0.02
"""


def test_samples_are_read_by_name_with_their_labels() -> None:
    samples = parse_samples(WORKER_PAGE, ["dynamo_component_requests_total"])

    assert samples == [
        (
            "dynamo_component_requests_total",
            {"dynamo_component": "backend", "dynamo_endpoint": "generate", "worker_id": "7a"},
            12.0,
        ),
        (
            "dynamo_component_requests_total",
            {
                "dynamo_component": "backend",
                "dynamo_endpoint": "worker_kv_query_source_1",
                "worker_id": "7a",
            },
            4.0,
        ),
    ]
    assert parse_samples('x_total{a="1"} not-a-number\n', ["x_total"]) == []


def test_a_worker_counts_its_generate_requests_and_its_engines_prefix_cache() -> None:
    assert worker_counters(WORKER_PAGE) == {
        "7a": {"requests": 12.0, "prefix_queries": 1000.0, "prefix_hits": 750.0}
    }
    without_engine = "\n".join(WORKER_PAGE.splitlines()[:4])
    assert worker_counters(without_engine) == {"7a": {"requests": 12.0}}


def test_the_frontend_sums_its_counters_over_labels() -> None:
    assert frontend_counters(FRONTEND_PAGE) == {
        "requests": 32.0,
        "cached_tokens": 400.0,
        "input_tokens": 1000.0,
    }


def test_a_level_records_what_each_counter_added() -> None:
    before = {
        "workers": {"7a": {"requests": 10.0}, "8b": {"requests": 5.0}},
        "frontend": {"requests": 15.0},
        "unreachable": [],
    }
    after = {
        "workers": {"7a": {"requests": 18.0}, "8b": {"requests": 3.0}, "9c": {"requests": 4.0}},
        "frontend": {"requests": 30.0, "cached_tokens": 100.0},
        "unreachable": ["http://x/metrics: refused"],
    }

    record = level_record(before, after)

    # 8b restarted (its counter went down): it counts from zero; 9c and cached_tokens are new.
    assert record["workers"] == {
        "7a": {"requests": 8},
        "8b": {"requests": 3},
        "9c": {"requests": 4},
    }
    assert record["frontend"] == {"requests": 15, "cached_tokens": 100}
    assert record["unreachable"] == ["http://x/metrics: refused"]
    assert summary(record) == (
        "  graph metrics: 3 of 3 workers served 15 requests (busiest 8, least 3); "
        "the frontend counted 15; 1 page unreadable"
    )


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_page_that_cannot_be_read_is_recorded_not_raised() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/metrics"

    taken = snapshot({"workers": [url], "frontend": url, "timeout_seconds": 2})

    assert taken["workers"] == {} and taken["frontend"] is None
    assert len(taken["unreachable"]) == 2 and all(u.startswith(url) for u in taken["unreachable"])
    # One URL, one line however often it failed.
    assert summary(level_record(taken, taken)).endswith("no worker read; 1 page unreadable")


def test_the_record_is_written_where_the_exports_are(tmp_path: Path) -> None:
    record: dict[str, object] = {"workers": {}, "frontend": None, "unreachable": []}

    path = write_level_record(record, tmp_path)

    assert path == tmp_path / graph_metrics.GRAPH_METRICS_FILE
    assert json.loads(path.read_text()) == record
