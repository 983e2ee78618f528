"""The report's charts: the A/B's headline numbers per level (`ab-chart.png`), and where the
requests went (`routing-chart.png`: the smoke probe's workers per video, and each level's requests
per worker from the graph's own counters). Drawn with matplotlib's Agg backend, imported only when
a chart is drawn; every file replaced whole, never written through a link."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.confined_paths import write_file
from stages.core.ab_verdict import ABPair
from stages.core.graph_metrics import GraphCounts
from stages.core.routing_probe import RoutingProbe, observed_probes

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def graph_counts(pair: ABPair) -> dict[str, list[tuple[int, GraphCounts | None]]]:
    """Each profile's levels with what the graph counted during them."""
    profiles = {"round robin": pair.round_robin, "session affinity": pair.affinity}
    return {
        name: [(level.concurrency, level.graph) for level in results.levels]
        for name, results in profiles.items()
    }


def render_routing_chart(pair: ABPair, path: Path) -> Path | None:
    """Per profile, the workers each video of the probe reached (a dot per video and worker, its
    size the questions it answered), and below, each level's requests per worker from the
    workers' own counters; None when there is neither."""
    observed = observed_probes(pair.round_robin.routing, pair.affinity.routing)
    counted = {
        name: [(c, counts) for c, counts in rows if counts is not None and counts.workers]
        for name, rows in graph_counts(pair).items()
    }
    counted = {name: rows for name, rows in counted.items() if rows}
    if not observed and not counted:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [row for row in (observed, counted) if row]
    columns = max(len(row) for row in rows)
    figure, axes = plt.subplots(
        len(rows), columns, figsize=(6 * columns, 4 * len(rows)), squeeze=False
    )
    for axis in axes.flat:  # each panel drawn shows itself; a row's spare ones stay hidden
        axis.set_visible(False)
    if observed:
        _probe_panels(axes[0], observed)
    if counted:
        _load_panels(axes[len(rows) - 1], counted)
    return _saved(figure, path)


def _load_panels(axes: Any, counted: dict[str, list[tuple[int, GraphCounts]]]) -> None:
    """A stacked bar per level: each worker's requests, the busiest at the bottom."""
    for axis, (name, levels) in zip(axes, counted.items(), strict=False):
        axis.set_visible(True)
        labels = [str(concurrency) for concurrency, _ in levels]
        served = [counts.served() for _, counts in levels]
        for rank in range(max(len(s) for s in served)):
            heights = [s[rank] if rank < len(s) else 0 for s in served]
            bottoms = [sum(s[:rank]) for s in served]
            axis.bar(labels, heights, bottom=bottoms, edgecolor="white", linewidth=0.5)
        axis.set_title(f"{name}: requests per worker (workers' /metrics)")
        axis.set_xlabel("concurrency")
        axis.set_ylabel("requests (one segment per worker)")
        axis.grid(True, axis="y", alpha=0.3)


def _probe_panels(axes: Any, observed: dict[str, RoutingProbe]) -> None:
    for axis, (name, probe) in zip(axes, observed.items(), strict=False):
        axis.set_visible(True)
        index = {worker: i for i, worker in enumerate(sorted(probe.requests_per_worker()))}
        for video, asked in enumerate(probe.workers):
            answered = [str(worker) for worker in asked]
            for worker in set(answered):
                size = 40 * answered.count(worker)
                axis.scatter([video], [index[worker]], s=size, color="tab:blue")
        axis.set_title(f"{name}: {probe.kept_share:.0%} of videos on one worker")
        axis.set_xlabel("video (one session each)")
        axis.set_ylabel("worker")
        axis.set_yticks(range(len(index)), [str(i) for i in range(len(index))])
        axis.grid(True, alpha=0.3)


def render_chart(pair: ABPair, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    concurrencies = pair.concurrencies
    pairs = [pair.levels(c) for c in concurrencies]
    series = {"round robin": [rr for rr, _ in pairs], "session affinity": [aff for _, aff in pairs]}
    figure, (throughput, ttft, cache) = plt.subplots(1, 3, figsize=(15, 4.5))
    for label, levels in series.items():
        throughput.plot(
            concurrencies, [lvl.requests_per_second for lvl in levels], marker="o", label=label
        )
        line = ttft.plot(
            concurrencies, [lvl.ttft_p50_ms for lvl in levels], marker="o", label=f"{label} p50"
        )
        ttft.plot(
            concurrencies,
            [lvl.ttft_p95_ms for lvl in levels],
            linestyle="--",
            color=line[0].get_color(),
            label=f"{label} p95",
        )
        cache.plot(
            concurrencies, [100 * lvl.cache_hit_ratio for lvl in levels], marker="o", label=label
        )
    cache.axhline(
        100 * pair.affinity.workload.affinity_hit_limit,
        color="grey",
        linestyle=":",
        label="affinity limit",
    )
    for axis, title, unit in (
        (throughput, "Throughput", "requests/s"),
        (ttft, "Time to first token", "ms"),
        (cache, "Prefix-cache hits", "% of prompt tokens"),
    ):
        axis.set_title(title)
        axis.set_xlabel("concurrency")
        axis.set_ylabel(unit)
        axis.set_xscale("log", base=2)
        axis.set_xticks(concurrencies, [str(c) for c in concurrencies])
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize="small")
    target = pair.round_robin.target
    engine = "Dynamo mock engine, not GPUs" if target == "lab" else "cluster"
    figure.suptitle(f"Round robin vs session affinity ({target}: {engine})")
    return _saved(figure, path)


def _saved(figure: Figure, path: Path) -> Path:
    import matplotlib.pyplot as plt

    figure.tight_layout()
    image = io.BytesIO()
    figure.savefig(image, format="png", dpi=100)
    plt.close(figure)
    return write_file(path, image.getvalue())  # replaced whole, never through a link
