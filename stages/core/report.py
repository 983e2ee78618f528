"""Report stage: the two routing profiles side by side, as Markdown and as charts
(`stages.core.charts`).

The first table has the shape of the recipe's "Measured performance" table; a second one adds
TTFT p95, request latency, output tokens/s and the prefix-cache hit ratio per level. The cache
section compares each profile's hit ratio with two reference values: the physical limit with
affinity (every question but a video's first finds it cached) and what round robin would get if
it scattered a video's questions at random over the workers (the real-GPU behaviour). The routing
section shows, per profile, where the smoke stage's routing probe went (videos on one worker,
workers per video, requests per worker), and what the workers' own counters saw at each level
(`stages.core.graph_metrics`), with a chart of both (`routing-chart.png`); when session affinity's videos did not stay on one worker the report is
written, verdict saying so, and `write_report` fails (`ab_verdict.mechanism_failure`).

The results are checked when read (`stages.core.results`); every value in them that is text (a
graph name, a session header, why a sweep stopped) is written through `markdown_text`, so it
renders as itself and cannot add HTML, a link or a table column to the report.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from common.confined_paths import write_file
from common.credentials import mask
from stages.core.ab_verdict import (
    ABPair,
    ReportError,
    conditions_lines,
    measurable_gain,
    mechanism_failure,
    verdict_line,
)
from stages.core.charts import graph_counts, render_chart, render_routing_chart
from stages.core.graph_metrics import worker_load_section
from stages.core.markdown import markdown_text
from stages.core.results import LevelResult, ProfileResults
from stages.core.routing_probe import observed_probes, routing_section

REPORT_FILE = "report.md"
CHART_FILE = "ab-chart.png"
ROUTING_CHART_FILE = "routing-chart.png"


def format_gain(baseline: float, candidate: float) -> str:
    """'+36%' / '-4%', as in the recipe's table, or `n/a` when round robin served too little to
    compare with (0 req/s)."""
    gain = measurable_gain(baseline, candidate)
    return "n/a" if gain is None else f"{gain:+.0f}%"


def random_scatter_hit_ratio(workers: int, questions: int) -> float:
    """Expected share of a video's questions that find it cached if each one lands on a worker
    chosen at random: all questions minus the expected number of distinct workers it visits."""
    distinct_workers = workers * (1 - (1 - 1 / workers) ** questions)
    return (questions - distinct_workers) / questions


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    align = ["---:"] * len(header)
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def headline_table(pair: ABPair) -> list[str]:
    """Shaped like the recipe's table: req/s both ways, the gain, TTFT p50 both ways."""
    rows = []
    for c in pair.concurrencies:
        rr, aff = pair.levels(c)
        rates = [f"{level.requests_per_second:,.2f}" for level in (rr, aff)]
        gain = format_gain(rr.requests_per_second, aff.requests_per_second)
        rows.append([str(c), *rates, gain, *(f"{lvl.ttft_p50_ms:,.0f} ms" for lvl in (rr, aff))])
    rate, ttft = "req/s", "TTFT p50"
    header = ["Concurrency", f"Round-robin {rate}", f"Affinity {rate}", "Throughput gain"]
    return _table([*header, f"Round-robin {ttft}", f"Affinity {ttft}"], rows)


_DETAILS: tuple[tuple[str, Callable[[LevelResult], str]], ...] = (
    ("TTFT p95", lambda level: f"{level.ttft_p95_ms:,.0f} ms"),
    ("latency p50", lambda level: f"{level.request_latency_p50_ms:,.0f} ms"),
    ("output tok/s", lambda level: f"{level.output_tokens_per_second:,.0f}"),
    ("cache hits", lambda level: f"{level.cache_hit_ratio:.1%}"),
    ("requests/errors", lambda level: f"{level.request_count}/{level.error_count}"),
)
"""The second table's columns, each one round robin's then affinity's."""


def detail_table(pair: ABPair) -> list[str]:
    header = [f"{who} {name}" for name, _ in _DETAILS for who in ("RR", "Aff.")]
    rows = [
        [str(c), *(cell(level) for _, cell in _DETAILS for level in pair.levels(c))]
        for c in pair.concurrencies
    ]
    return _table(["Concurrency", *header], rows)


def cache_section(pair: ABPair) -> list[str]:
    workload = pair.affinity.workload
    workers = pair.round_robin.workers  # the reference is round robin's graph
    limit = workload.affinity_hit_limit
    scatter = random_scatter_hit_ratio(workers, workload.questions)
    round_robin = (
        f"- round robin: {pair.round_robin.cache_hit_ratio:.1%} (if it scattered each "
        f"video's {workload.questions} questions at random over {workers} workers: "
        f"{scatter:.1%})"
    )
    affinity = (
        f"- session affinity: {pair.affinity.cache_hit_ratio:.1%} "
        f"(physical limit (questions-1)/questions = {limit:.1%})"
    )
    note = (
        "The measured ratios count whole 64-token KV blocks and include the question tokens, so "
        "they sit slightly below the per-request references. Round robin above its random-scatter "
        "reference means the round-robin counter kept sending a video's questions to the same few "
        "workers, which flatters round robin and shrinks the measured gain."
    )
    heading = "Prefix-cache hit ratio (cached prompt tokens / prompt tokens, all levels):"
    return [heading, "", round_robin, affinity, "", note]


def workload_lines(pair: ABPair) -> list[str]:
    rr, workload = pair.round_robin, pair.round_robin.workload
    graphs = f"{markdown_text(rr.graph_name)} vs {markdown_text(pair.affinity.graph_name)}"
    aff = pair.affinity
    workers = (
        f"{rr.workers} workers each"
        if rr.workers == aff.workers
        else f"round robin {rr.workers} workers, session affinity {aff.workers}"
    )
    target = f"- Target: {markdown_text(rr.target)} ({graphs}), {workers}."
    sizes = (
        f"- Workload per concurrency level: {workload.videos} videos x {workload.questions} "
        f"questions = {workload.requests_per_level} requests, exactly {workload.output_tokens} "
        "output tokens each; every level uses its own videos, so it starts with a cold cache."
    )
    headers = (
        f"- Session header: round robin {markdown_text(rr.session_header or 'none')}, session "
        f"affinity {markdown_text(pair.affinity.session_header or 'none')} (one session per video)."
    )
    lines = [target, sizes, headers]
    if rr.target == "lab":
        lines.append(
            "- Lab: the engine is Dynamo's mock engine (`dynamo.mocker`), not GPUs. Each video is "
            f"stood in for by a {workload.prefix_tokens}-token text prefix; follow-up questions "
            f"wait a random 0-{workload.turn_jitter_ms} ms to interleave the sessions."
        )
    if pair.round_robin.workload != pair.affinity.workload:
        lines.append(
            "- WARNING: the two profiles ran different workloads; the comparison is unfair."
        )
    return lines


def incomplete_lines(pair: ABPair) -> list[str]:
    """A warning for each profile whose sweep stopped part-way, or that counted failed requests."""
    lines = []
    for results in (pair.round_robin, pair.affinity):
        name = results.profile.value
        if not results.complete:
            done = ", ".join(str(level.concurrency) for level in results.levels)
            why = markdown_text(results.failure)
            lines.append(f"> **{name}: incomplete sweep** (levels {done} only): {why}")
        errors = sum(level.error_count for level in results.levels)
        if errors:
            lines.append(
                f"> **{name}: {errors} requests failed**; their levels' numbers count "
                "only the requests that completed"
            )
    return [*lines, ""] if lines else []


def render_markdown(pair: ABPair, chart_name: str | None = CHART_FILE) -> str:
    lines = ["# A/B: round robin vs session affinity", "", verdict_line(pair), ""]
    lines += incomplete_lines(pair)
    lines += workload_lines(pair) + conditions_lines(pair) + [""]
    lines += headline_table(pair) + [""]
    lines += detail_table(pair) + [""]
    lines += cache_section(pair) + [""]
    probes = (pair.round_robin.routing, pair.affinity.routing)
    routing = routing_section(*probes, ROUTING_CHART_FILE if chart_name else None)
    lines += routing + [""] if routing else []
    charted = bool(chart_name) and not observed_probes(*probes)  # else the probe's links it
    load = worker_load_section(graph_counts(pair), ROUTING_CHART_FILE if charted else None)
    lines += load + [""] if load else []
    if chart_name:
        lines += [f"![A/B chart]({chart_name})", ""]
    return "\n".join(lines)


def write_report(first: ProfileResults, second: ProfileResults, out_dir: Path) -> str:
    """Write report.md and the charts into out_dir; returns the Markdown (masked: a results
    file's failure or graph name may hold a credential). Fails, after writing them, when session
    affinity's run did not keep its videos on one worker."""
    pair = ABPair.of(first, second)
    if not pair.concurrencies:
        raise ReportError("the two results share no concurrency level")
    render_chart(pair, out_dir / CHART_FILE)
    render_routing_chart(pair, out_dir / ROUTING_CHART_FILE)
    markdown = mask(render_markdown(pair))
    write_file(out_dir / REPORT_FILE, markdown)
    broken = mechanism_failure(pair)
    if broken:
        raise ReportError(f"{broken} (the report: {out_dir / REPORT_FILE})", out_dir / REPORT_FILE)
    return markdown
