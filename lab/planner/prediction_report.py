"""The prediction as Markdown: the recipe's table predicted, every cell against the measured one,
what the lab missed and why, and whether running slower changed the answer."""

from __future__ import annotations

from lab.planner.calibration import Calibration
from lab.planner.measured_table import AFF, METRICS, RR, LevelMetrics, MeasuredTable
from lab.planner.prediction import CellDeviation, Prediction, cell_deviations

GOAL = 0.10
"""A cell within 10% of the measured one (the gain: within 10 points) meets the goal."""
SAME = 0.05
"""Two runs of the lab agree on a cell within 5% (the gain: 5 points): about its run-to-run noise."""
LABELS = {
    "requests_per_second": ("req/s", "{:.2f}"),
    "ttft_p50_ms": ("TTFT p50 ms", "{:.0f}"),
    "ttft_p95_ms": ("TTFT p95 ms", "{:.0f}"),
    "request_latency_p50_ms": ("latency p50 ms", "{:.0f}"),
    "output_tokens_per_second": ("output tok/s", "{:.0f}"),
    "gain": ("gain", "{:+.0%}"),
}
SHORT = {RR.value: "RR", AFF.value: "affinity"}
QUEUE_BEFORE_ENGINE = (
    "on a GPU worker the video is processed before the engine and requests queue there; the "
    "lab processes it inside the engine as prefill, so round robin's first tokens wait less"
)
LAB_OVERHEAD = (
    "the lab's own time outside the engine (its frontend tokenizes every long prompt on two "
    "shared cores) grows with concurrency and was calibrated only at concurrency 1"
)
SHARED_WORKER = (
    "sessions share a worker: the lab's cold prefill of one video holds the engine, and the "
    "other sessions' warm requests on that worker wait behind it"
)


def reason(cell: CellDeviation, workers: int) -> str:
    """The known effect that pushes this cell the way it missed, or "" (docs/lab-prediction.md)."""
    if cell.column == "gain":
        return "it follows the two requests/s cells"
    profile, metric = cell.column.split(" ")
    high = cell.error > 0
    if metric == "ttft_p50_ms":
        if profile == RR.value and not high:
            return QUEUE_BEFORE_ENGINE
        if high:
            return SHARED_WORKER if cell.concurrency > workers else LAB_OVERHEAD
        return ""
    if profile == RR.value:
        return QUEUE_BEFORE_ENGINE if metric == "request_latency_p50_ms" and not high else ""
    slower = high if metric in ("ttft_p95_ms", "request_latency_p50_ms") else not high
    return SHARED_WORKER if slower and cell.concurrency > 1 else ""


def render(
    prediction: Prediction,
    calibration: Calibration,
    measured: MeasuredTable | None,
    second: Prediction | None = None,
) -> str:
    title = (
        f"# The lab's prediction ({prediction.sweep.workers} workers, run "
        f"{prediction.slowdown:g}x slower than real time)"
    )
    lines = [title, ""]
    lines += _calibration_section(calibration)
    if prediction.reused_concurrency is not None:
        reused = (
            f"Concurrency {prediction.reused_concurrency} is the calibration's last "
            "check: the same level, knobs, videos and slowdown, not run again."
        )
        lines += [reused, ""]
    lines += _predicted_table(prediction.table())
    if measured is not None:
        cells = cell_deviations(prediction.table(), measured)
        lines += _comparison(cells, measured.source, prediction.sweep.workers)
    lines += _cache_hits(prediction)
    if second is not None:
        lines += _slowdown_check(prediction, second)
    return "\n".join(lines) + "\n"


def _calibration_section(calibration: Calibration) -> list[str]:
    targets, knobs, row = calibration.targets, calibration.knobs, calibration.reference
    checks = calibration.checks[-1].errors
    return [
        (
            f"Calibrated on one level of {calibration.source}: concurrency {row.concurrency}, "
            f"round robin {row.round_robin.requests_per_second} req/s, session affinity "
            f"{row.session_affinity.requests_per_second} req/s, affinity TTFT p50 "
            f"{row.session_affinity.ttft_p50_ms:g} ms."
        ),
        "",
        (
            f"- From it: a warm request {targets.warm_ms:.0f} ms, a cold one {targets.cold_ms:.0f} ms, "
            f"a warm first token {targets.warm_ttft_ms:.0f} ms, {targets.itl_ms:.2f} ms per token."
        ),
        (
            f"- The lab: engine speed {knobs.speed.speedup:.3g} (decode x{knobs.speed.decode_speedup:.3g}), "
            f"a {knobs.prefix_tokens}-token prefix per video, {knobs.pre_engine_delay_ms:.1f} ms "
            f"before the engine; calibrated {calibration.slowdown:g}x slower than real time."
        ),
        "- Its last check of the reference level: "
        + ", ".join(f"{name} {error:+.1%}" for name, error in checks.items())
        + ("" if calibration.converged else " (did not converge within its runs)"),
        "",
    ]


def _cell(metrics: LevelMetrics, metric: str) -> str:
    value = getattr(metrics, metric)
    return "–" if value is None else LABELS[metric][1].format(value)


def _predicted_table(table: MeasuredTable) -> list[str]:
    header = ["Concurrency", "Gain"]
    header += [f"{who} {LABELS[m][0]}" for m in METRICS for who in ("RR", "Affinity")]
    rows = [
        [str(row.concurrency), f"{row.gain:+.0%}"]
        + [_cell(row.of(profile), m) for m in METRICS for profile in (RR, AFF)]
        for row in table.rows
    ]
    return ["## Predicted", "", *_wide(header, rows), ""]


def _cell_table(
    cells: list[CellDeviation], values: tuple[str, str], headings: tuple[str, str, str]
) -> list[str]:
    """A row a cell: its level, its label (left-aligned), its two `values` (attribute names) and
    its error, under `headings`."""
    rows = [
        [str(c.concurrency), _label(c.column), *(_number(c, getattr(c, v)) for v in values)]
        + [_error(c)]
        for c in cells
    ]
    return _wide(["Concurrency", "Cell", *headings], rows, "|---:|---|---:|---:|---:|")


def _comparison(cells: list[CellDeviation], source: str, workers: int) -> list[str]:
    table = _cell_table(cells, ("predicted", "measured"), ("Predicted", "Measured", "Error"))
    lines = [f"## Against {source}", "", *table, "", _within_goal(cells)]
    for cell in [cell for cell in cells if abs(cell.error) > GOAL]:
        why = reason(cell, workers) or "no known effect explains it"
        lines.append(f"- c={cell.concurrency} {_label(cell.column)}: {_error(cell)}; {why}")
    return [*lines, ""]


def _within_goal(cells: list[CellDeviation]) -> str:
    met = sum(abs(cell.error) <= GOAL for cell in cells)
    return f"{met} of {len(cells)} cells within 10% (the gain: within 10 points)."


def _label(column: str) -> str:
    """`<profile> <metric>`, or `gain`: shortly."""
    profile, _, metric = column.rpartition(" ")
    return f"{SHORT[profile]} {LABELS[metric][0]}" if profile else LABELS[metric][0]


def _number(cell: CellDeviation, value: float) -> str:
    return LABELS[cell.column.rpartition(" ")[2]][1].format(value)


def _error(cell: CellDeviation) -> str:
    if cell.column == "gain":
        return f"{cell.error * 100:+.0f} pts"
    return f"{cell.error:+.1%}"


def _cache_hits(prediction: Prediction) -> list[str]:
    lines = [
        "## Round robin's cache hits",
        "",
        (
            "Share of prompt tokens read from the cache in the lab, the share a random "
            "scatter over the workers gives (a real cluster's round robin is not in lockstep), "
            "and how much the prediction corrected round robin's requests/s for the difference."
        ),
        "",
    ]
    header = ["Concurrency", "Lab", "Random scatter", "RR req/s corrected by"]
    rows = [
        [
            str(row.concurrency),
            f"{row.round_robin_cache_hits:.1%}",
            f"{row.scatter_cache_hits:.1%}",
            f"{row.round_robin_scatter_correction:+.1%}",
        ]
        for row in prediction.rows
    ]
    return [*lines, *_wide(header, rows), ""]


def _slowdown_check(first: Prediction, second: Prediction) -> list[str]:
    cells = cell_deviations(second.table(), first.table())  # `first` as the "measured"
    worst = max(cells, key=lambda cell: abs(cell.error))
    moved = [cell for cell in cells if abs(cell.error) > SAME]
    verdict = (
        "The factor does not change the answer beyond the lab's noise."
        if not moved
        else f"{len(moved)} of {len(cells)} cells moved by more than 5% (the gain: 5 points): "
        f"at {first.slowdown:g}x the lab's own time (which does not slow down) still counts in "
        f"them; the slower run is the better estimate."
    )
    lines = [
        f"## Running {second.slowdown:g}x instead of {first.slowdown:g}x slower",
        "",
        (
            f"The largest change of any cell: {_label(worst.column)} at concurrency "
            f"{worst.concurrency}, {_error(worst)}. {verdict}"
        ),
        "",
    ]
    headings = (f"At {first.slowdown:g}x", f"At {second.slowdown:g}x", "Change")
    return [*lines, *_cell_table(cells, ("measured", "predicted"), headings), ""]


def summary(cells: list[CellDeviation]) -> list[str]:
    """Every cell as "predicted vs measured (error)", compactly (docs/lab-prediction.md's table): the columns
    every level has, then the cells only some levels have."""
    levels = sorted({cell.concurrency for cell in cells})
    by_place = {(cell.concurrency, cell.column): cell for cell in cells}
    columns = [
        c
        for c in dict.fromkeys(cell.column for cell in cells)
        if all((level, c) in by_place for level in levels)
    ]
    lines = _wide(
        ["Concurrency", *(_heading(column) for column in columns)],
        [[str(level), *(_versus(by_place[level, c]) for c in columns)] for level in levels],
    )
    extra = [cell for cell in cells if cell.column not in columns]
    metrics = list(dict.fromkeys(cell.column.split(" ")[1] for cell in extra))
    places = list(dict.fromkeys((cell.concurrency, cell.column.split(" ")[0]) for cell in extra))
    if places:
        rows = [
            [
                f"{level}, {SHORT[profile]}",
                *(
                    _versus(by_place[level, f"{profile} {m}"])
                    if (level, f"{profile} {m}") in by_place
                    else "–"
                    for m in metrics
                ),
            ]
            for level, profile in places
        ]
        lines += ["", *_wide(["Concurrency, profile", *(LABELS[m][0] for m in metrics)], rows)]
    return [*lines, "", _within_goal(cells)]


def _heading(column: str) -> str:
    label = _label(column)
    return label[0].upper() + label[1:]


def _versus(cell: CellDeviation) -> str:
    return f"{_number(cell, cell.predicted)} vs {_number(cell, cell.measured)} ({_error(cell)})"


def _wide(header: list[str], rows: list[list[str]], align: str | None = None) -> list[str]:
    """A Markdown table, its columns right-aligned unless `align` gives its separator line."""
    return [
        "| " + " | ".join(header) + " |",
        align or "|" + "---:|" * len(header),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]
