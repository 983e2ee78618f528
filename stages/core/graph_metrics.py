"""What the graph itself counted during each perf level, as a checked record, and the report's view
of it.

The perf program reads the frontend's and the workers' `/metrics` around every level
(`stages.incluster.graph_metrics`) and returns `graph-metrics.json` beside AIPerf's export.
`GraphCounts` is that file, bounded and checked when read (it travels in the pod's log, then in
`results.json`): the requests each worker served, the frontend's request and token counters, the
engines' prefix-cache queries and hits where they report them, and the pages it could not read.
The report's "requests per worker" table (`worker_load_section`) shows, per profile and level,
how many workers served and how evenly; the chart beside the routing probe's shows each worker's
share (`stages.core.charts.render_routing_chart`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, Field

from components.config_rules import MAX_WORKER_REPLICAS
from stages.core.markdown import markdown_text
from stages.core.typed_files import CHECKED, read_model
from stages.errors import StageFailed
from stages.incluster.graph_metrics import GRAPH_METRICS_FILE

MAX_COUNT = 10**15
"""As a level's counts (`stages.core.results.MAX_MEASURE`): far above any run."""
MAX_UNREADABLE = 2 * MAX_WORKER_REPLICAS + 2
"""Every worker's page and the frontend's, before and after: no more pages than that are read."""
Counter = Annotated[int, Field(ge=0, le=MAX_COUNT, strict=True)]


class GraphMetricsError(StageFailed):
    """A `graph-metrics.json` that is not the record the perf program writes."""


class WorkerCounts(BaseModel):
    """One worker's counters during a level; the prefix cache's only where its engine reports it."""

    model_config = CHECKED

    requests: Counter = 0
    prefix_queries: Counter | None = None
    prefix_hits: Counter | None = None


class FrontendCounts(BaseModel):
    model_config = CHECKED

    requests: Counter = 0
    cached_tokens: Counter = 0
    input_tokens: Counter = 0


class GraphCounts(BaseModel):
    """What the graph counted during one level: by worker id, the frontend's, what was unread."""

    model_config = CHECKED

    workers: dict[Annotated[str, Field(max_length=64)], WorkerCounts] = Field(
        default={}, max_length=MAX_WORKER_REPLICAS
    )
    frontend: FrontendCounts | None = None
    unreachable: list[Annotated[str, Field(max_length=1024)]] = Field(
        default=[], max_length=MAX_UNREADABLE
    )

    def served(self) -> list[int]:
        """Requests per worker, the busiest first."""
        return sorted((counts.requests for counts in self.workers.values()), reverse=True)

    def busiest_share(self) -> float | None:
        served = self.served()
        return served[0] / sum(served) if served and sum(served) else None

    def prefix_reuse(self) -> float | None:
        """The engines' prefix-cache hits over queries, where every worker reports them."""
        queries = [c.prefix_queries for c in self.workers.values()]
        hits = [c.prefix_hits for c in self.workers.values()]
        if not queries or None in queries or None in hits:
            return None
        total = sum(q for q in queries if q is not None)
        return sum(h for h in hits if h is not None) / total if total else None

    def frontend_cached_share(self) -> float | None:
        front = self.frontend
        return front.cached_tokens / front.input_tokens if front and front.input_tokens else None


def read_graph_counts(artifact_dir: Path) -> GraphCounts | None:
    """A level's record, None where the program read no metrics (no file)."""
    path = artifact_dir / GRAPH_METRICS_FILE
    if not os.path.lexists(path):
        return None
    return read_model(GraphCounts, path, "graph metrics record", "", GraphMetricsError)


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def worker_load_section(
    levels: dict[str, list[tuple[int, GraphCounts | None]]], chart_name: str | None = None
) -> list[str]:
    """The report's table of requests per worker, by profile name and level (none when no level
    of either profile has a record), with a link to `chart_name` when given."""
    if not any(counts for rows in levels.values() for _, counts in rows):
        return []
    header = "| Profile | Concurrency | Workers serving | Requests per worker (busiest-least) "
    header += "| Busiest worker's share | Prefix reuse (engines) | Cached tokens (frontend) |"
    lines = [
        "Requests per worker (the workers' and the frontend's own /metrics, read around each level):",
        "",
        header,
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, rows in levels.items():
        for concurrency, counts in rows:
            if counts is None:
                lines.append(f"| {name} | {concurrency} | not read | | | | |")
                continue
            served = counts.served()
            spread = f"{served[0]}-{served[-1]}" if served else "-"
            lines.append(
                f"| {name} | {concurrency} | {sum(1 for n in served if n)} of {len(served)} "
                f"| {spread} | {_share(counts.busiest_share())} "
                f"| {_share(counts.prefix_reuse())} | {_share(counts.frontend_cached_share())} |"
            )
    unread = sorted({u for rows in levels.values() for _, c in rows if c for u in c.unreachable})
    if unread:
        lines += ["", "Pages that could not be read (their workers are missing above):"]
        lines += [f"- {markdown_text(page)}" for page in unread[:MAX_UNREADABLE]]
    return lines + (["", f"![Requests per worker]({chart_name})"] if chart_name else [])
