"""The prediction report: which known effect it names for a missed cell, and that the committed
report and docs/lab-prediction.md's table are what the saved lab levels give."""

from __future__ import annotations

from pathlib import Path

import pytest

from common import REPO_ROOT
from lab.planner.calibration import Calibration
from lab.planner.measured_table import RECIPE_TABLE
from lab.planner.prediction import CellDeviation, Prediction, cell_deviations
from lab.planner.prediction_report import (
    LAB_OVERHEAD,
    QUEUE_BEFORE_ENGINE,
    SHARED_WORKER,
    reason,
    render,
    summary,
)


def cell(concurrency: int, column: str, error: float) -> CellDeviation:
    return CellDeviation(
        concurrency=concurrency, column=column, predicted=1, measured=1, error=error
    )


@pytest.mark.parametrize(
    ("missed", "why"),
    [
        # Round robin's first tokens wait in the GPU's video queue: the lab predicts them low.
        (cell(16, "round-robin ttft_p50_ms", -0.69), QUEUE_BEFORE_ENGINE),
        (cell(16, "round-robin request_latency_p50_ms", -0.19), QUEUE_BEFORE_ENGINE),
        # The lab's own overhead makes first tokens high while every session has its worker...
        (cell(4, "session-affinity ttft_p50_ms", 0.11), LAB_OVERHEAD),
        (cell(4, "round-robin ttft_p50_ms", 0.14), LAB_OVERHEAD),
        # ... and sessions sharing a worker wait behind each other's cold prefill.
        (cell(16, "session-affinity ttft_p50_ms", 0.44), SHARED_WORKER),
        (cell(16, "session-affinity ttft_p95_ms", 2.26), SHARED_WORKER),
        (cell(16, "session-affinity requests_per_second", -0.13), SHARED_WORKER),
        # Effects that would push the other way explain nothing.
        (cell(16, "session-affinity requests_per_second", 0.13), ""),
        (cell(4, "session-affinity ttft_p50_ms", -0.12), ""),
        (cell(8, "round-robin requests_per_second", 0.12), ""),
        (cell(16, "gain", -0.16), "it follows the two requests/s cells"),
    ],
)
def test_a_missed_cell_names_the_effect_that_pushes_it_that_way(
    missed: CellDeviation, why: str
) -> None:
    assert reason(missed, workers=8) == why


DOCS = REPO_ROOT / "docs" / "lab-prediction"
PAGE = DOCS.parent / "lab-prediction.md"
SUMMARY_START = "<!-- prediction summary:"
SUMMARY_END = "<!-- end of prediction summary -->"


def committed(folder: Path) -> tuple[Calibration, Prediction, Prediction | None]:
    calibration = Calibration.load(folder / "calibration.json")
    prediction = Prediction.load(folder / "prediction.json").reassembled(calibration)
    check = folder / "prediction-check.json"
    second = Prediction.load(check).reassembled(calibration) if check.exists() else None
    return calibration, prediction, second


@pytest.mark.parametrize(
    "folder", [DOCS, DOCS / "slowdown-8x", DOCS / "slowdown-4x-8x"], ids=lambda f: f.name
)
def test_a_committed_report_is_what_its_saved_lab_levels_give(folder: Path) -> None:
    calibration, prediction, second = committed(folder)

    expected = render(prediction, calibration, RECIPE_TABLE, second)
    assert (folder / "prediction.md").read_text() == expected, (
        f"{folder}/prediction.md is stale: `python -m lab report --out {folder}`"
    )


def test_the_prediction_page_shows_the_committed_prediction() -> None:
    _, prediction, _ = committed(DOCS)
    text = PAGE.read_text()
    start = text.index("\n", text.index(SUMMARY_START)) + 1
    shown = text[start : text.index(SUMMARY_END)]

    expected = "\n".join(summary(cell_deviations(prediction.table(), RECIPE_TABLE))) + "\n"
    assert shown == expected, (
        f"docs/lab-prediction.md's table is stale; it should read:\n{expected}"
    )
