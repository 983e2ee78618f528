"""The smoke and perf stages against a real lab graph (marker `lab`), as a user runs them:
`python -m lab stage ...`, which passes the lab's tools to `python -m stages`."""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from components.routing import RoutingProfile
from lab.environment import LabInstall
from lab.graph import LabGraph
from lab.tools import LAB_WORKLOAD, lab_tools
from stages.core.results import ProfileResults
from stages.local.run import run_local_perf

pytestmark = pytest.mark.lab
REPO = Path(__file__).resolve().parents[3]
StartGraph = Callable[..., LabGraph]

TINY = LAB_WORKLOAD.model_copy(
    update={
        "videos": 2,
        "questions": 3,
        "output_tokens": 8,
        "concurrencies": (2,),
        "prefix_tokens": 256,
        "turn_jitter_ms": 0,
    }
)


def test_smoke_stage_passes_against_the_lab(start_graph: StartGraph) -> None:
    graph = start_graph(RoutingProfile.ROUND_ROBIN, workers=2)

    result = subprocess.run(
        [sys.executable, "-m", "lab", "stage", "smoke", "--outputs", str(graph.outputs_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    last_line = result.stdout.strip().splitlines()[-1]
    assert last_line.startswith("Smoke test passed: ")
    assert last_line.removeprefix("Smoke test passed: ").strip()


def test_smoke_stage_reads_outputs_from_stdin(start_graph: StartGraph) -> None:
    graph = start_graph(RoutingProfile.SESSION_AFFINITY, workers=1)

    result = subprocess.run(
        [sys.executable, "-m", "lab", "stage", "smoke", "--outputs", "-"],
        input=graph.outputs_path.read_text(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].startswith("Smoke test passed: ")


def test_smoke_stage_fails_with_a_reason_when_the_frontend_is_gone(start_graph: StartGraph) -> None:
    graph = start_graph(RoutingProfile.ROUND_ROBIN, workers=1)
    outputs_file = graph.outputs_path
    graph.stop()

    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "lab",
            "stage",
            "smoke",
            "--outputs",
            str(outputs_file),
            "--wait-seconds",
            "2",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )

    assert result.returncode == 3  # at once, not after the wait: nothing listens there any more
    assert "smoke test FAILED" in result.stderr and "nothing listens at" in result.stderr
    assert "is not running" in result.stderr
    assert "Smoke test passed" not in result.stdout


def test_perf_stage_parses_a_real_aiperf_sweep(
    start_graph: StartGraph, lab_install: LabInstall, tmp_path: Path
) -> None:
    graph = start_graph(RoutingProfile.SESSION_AFFINITY, workers=2)
    progress = io.StringIO()

    results = run_local_perf(
        graph.outputs, TINY, tmp_path / "perf", lab_tools(lab_install), 30, stream=progress
    )

    (level,) = results.levels
    assert (level.concurrency, level.request_count, level.error_count) == (2, 6, 0)
    assert level.output_tokens_mean == 8
    assert level.requests_per_second > 0 and level.ttft_p50_ms > 0
    # With affinity, each video's second and third questions find its prefix cached.
    assert level.cached_prompt_tokens >= 2 * 2 * 192
    assert ProfileResults.load(tmp_path / "perf" / "results.json") == results
    assert (tmp_path / "perf" / "c2" / "aiperf" / "profile_export_aiperf.json").is_file()
    assert "concurrency 2 finished" in progress.getvalue()


def test_a_lab_graphs_outputs_need_the_lab(start_graph: StartGraph) -> None:
    graph = start_graph(RoutingProfile.ROUND_ROBIN, workers=1)

    result = subprocess.run(
        [sys.executable, "-m", "stages", "smoke", "--outputs", str(graph.outputs_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 2 and "python -m lab stage" in result.stderr
