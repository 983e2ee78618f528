"""The graph's own counters around each perf level: the perf program reads the frontend's and each
worker's `/metrics` before and after a level and writes what changed (`graph-metrics.json`, beside
AIPerf's export, returned in the log the same way).

What is read (names as Dynamo 1.6.1's frontend and workers export them, checked against the lab's
real ones in tests/stages/local/test_local_on_lab.py):

- each worker: `dynamo_component_requests_total{dynamo_endpoint="generate"}`, by `worker_id` (the
  requests it served), and vLLM's `vllm:prefix_cache_queries_total` / `vllm:prefix_cache_hits_total`
  where the engine reports them (a NIM's vLLM does; Dynamo's mock engine does not);
- the frontend: `dynamo_frontend_requests_total` and the sums of `dynamo_frontend_cached_tokens`
  and `dynamo_frontend_input_sequence_tokens` (the prompt tokens it saw, and those the engines
  reported cached).

A source that cannot be read is recorded by its URL and reason, never a failure: the sweep's
numbers stand without it, and the report says what is missing. A counter that went down (its
process restarted during the level) counts from zero, as Prometheus' `increase` does.

Standard library only: the pod runs this with the image's bare Python (see the package docstring).
"""

from __future__ import annotations

import http.client
import json
import re
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

GRAPH_METRICS_FILE = "graph-metrics.json"
SCRAPE_TIMEOUT_SECONDS = 5.0
MAX_METRICS_BYTES = 8 * 2**20
"""A /metrics page larger than this is not a Dynamo component's (its pages are tens of KiB)."""

WORKER_REQUESTS = "dynamo_component_requests_total"
WORKER_ENDPOINT = "generate"
PREFIX_QUERIES = "vllm:prefix_cache_queries_total"
PREFIX_HITS = "vllm:prefix_cache_hits_total"
FRONTEND_COUNTERS = {
    "requests": "dynamo_frontend_requests_total",
    "cached_tokens": "dynamo_frontend_cached_tokens_sum",
    "input_tokens": "dynamo_frontend_input_sequence_tokens_sum",
}
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')

Samples = list[tuple[str, dict[str, str], float]]
_UNREADABLE = (OSError, ValueError, http.client.HTTPException)
"""What reading a page may raise: refused, timed out, HTTP errors (urllib's are OSErrors), cut off."""


def parse_samples(text: str, names: Iterable[str]) -> Samples:
    """The samples of the named metrics in a Prometheus text page: (name, labels, value)."""
    wanted = set(names)
    samples: Samples = []
    for line in text.splitlines():
        found = _SAMPLE.match(line)
        if found is None or found.group(1) not in wanted:
            continue
        try:
            value = float(found.group(3))
        except ValueError:
            continue
        samples.append((found.group(1), dict(_LABEL.findall(found.group(2) or "")), value))
    return samples


def read_page(url: str, timeout: float = SCRAPE_TIMEOUT_SECONDS) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        body: bytes = response.read(MAX_METRICS_BYTES + 1)
    if len(body) > MAX_METRICS_BYTES:
        raise ValueError(f"more than {MAX_METRICS_BYTES} bytes")
    return body.decode("utf-8", errors="replace")


def worker_counters(text: str) -> dict[str, dict[str, float]]:
    """Per worker id on a worker's page: its served requests and, where reported, its engine's
    prefix-cache queries and hits (summed over the engine's labels)."""
    counters: dict[str, dict[str, float]] = {}
    samples = parse_samples(text, (WORKER_REQUESTS, PREFIX_QUERIES, PREFIX_HITS))
    for name, labels, value in samples:
        if name == WORKER_REQUESTS and labels.get("dynamo_endpoint") == WORKER_ENDPOINT:
            counters.setdefault(labels.get("worker_id", ""), {})["requests"] = value
    engine = {PREFIX_QUERIES: "prefix_queries", PREFIX_HITS: "prefix_hits"}
    for name, _, value in samples:
        if name in engine and len(counters) == 1:  # one engine per worker process
            entry = next(iter(counters.values()))
            entry[engine[name]] = entry.get(engine[name], 0.0) + value
    return counters


def frontend_counters(text: str) -> dict[str, float]:
    """The frontend's request and token counters (summed over models)."""
    by_metric = {metric: key for key, metric in FRONTEND_COUNTERS.items()}
    totals: dict[str, float] = {}
    for name, _, value in parse_samples(text, by_metric):
        totals[by_metric[name]] = totals.get(by_metric[name], 0.0) + value
    return totals


def snapshot(sources: Mapping[str, Any]) -> dict[str, Any]:
    """The counters of every source now: `{"workers": {id: counters}, "frontend": counters,
    "unreachable": [why]}`; `sources` is the plan's `graph_metrics` entry."""
    taken: dict[str, Any] = {"workers": {}, "frontend": None, "unreachable": []}
    timeout = float(sources.get("timeout_seconds", SCRAPE_TIMEOUT_SECONDS))
    for url in sources.get("workers", []):
        try:
            taken["workers"].update(worker_counters(read_page(url, timeout)))
        except _UNREADABLE as error:
            taken["unreachable"].append(f"{url}: {error}")
    if sources.get("frontend"):
        try:
            taken["frontend"] = frontend_counters(read_page(sources["frontend"], timeout))
        except _UNREADABLE as error:
            taken["unreachable"].append(f"{sources['frontend']}: {error}")
    return taken


def _increase(before: Mapping[str, float] | None, after: Mapping[str, float]) -> dict[str, int]:
    """What each counter added; one that went down restarted, and counts from zero."""
    earlier = before or {}
    added = {key: value - earlier.get(key, 0.0) for key, value in after.items() if value >= 0}
    return {key: round(after[key] if gain < 0 else gain) for key, gain in added.items()}


def level_record(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """What the graph counted during one level, from the snapshots around it."""
    workers = {
        worker: _increase(before["workers"].get(worker), counters)
        for worker, counters in after["workers"].items()
    }
    frontend = after["frontend"]
    return {
        "workers": dict(sorted(workers.items())),
        "frontend": None if frontend is None else _increase(before["frontend"], frontend),
        "unreachable": sorted(set(before["unreachable"]) | set(after["unreachable"])),
    }


def write_level_record(record: Mapping[str, Any], artifact_dir: Path) -> Path:
    path = artifact_dir / GRAPH_METRICS_FILE
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def summary(record: Mapping[str, Any]) -> str:
    """The level's record in one log line (worker ids are not in it)."""
    served = sorted((c.get("requests", 0) for c in record["workers"].values()), reverse=True)
    workers = (
        f"{sum(1 for n in served if n)} of {len(served)} workers served {sum(served)} requests "
        f"(busiest {served[0]}, least {served[-1]})"
        if served
        else "no worker read"
    )
    frontend = record["frontend"]
    seen = f"; the frontend counted {frontend.get('requests', 0)}" if frontend else ""
    unread = len(record["unreachable"])
    missing = f"; {unread} page{'' if unread == 1 else 's'} unreadable" if unread else ""
    return f"  graph metrics: {workers}{seen}{missing}"
