"""The smoke and perf stages against a real lab graph (marker `lab`), as a user runs them:
`python -m lab stage ...`, which passes the lab's tools to `python -m stages`."""

from __future__ import annotations

import dataclasses
import io
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from common import REPO_ROOT
from components.routing import SESSION_HEADER, RoutingProfile
from lab.environment import LabInstall
from lab.graph import LabGraph
from lab.stage_tools import LAB_WORKLOAD, lab_tools
from stages.core.ab_verdict import ABPair, mechanism_failure
from stages.core.pod_plans import PodPlace, smoke_pod_config
from stages.core.results import ProfileResults
from stages.core.routing_probe import RoutingProbe
from stages.incluster.smoke_pod import probe_routing
from stages.local.run import run_local_perf, run_local_smoke
from tests.stages.support import FIXTURES

pytestmark = pytest.mark.lab
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
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    last_line = result.stdout.strip().splitlines()[-1]
    assert last_line.startswith("Smoke test passed: ")
    assert last_line.removeprefix("Smoke test passed: ").strip()
    assert "routing probe: " in result.stdout  # the probe's summary, before the verdict line


def test_the_smoke_probe_keeps_each_video_on_one_worker_with_affinity(
    start_graph: StartGraph, lab_install: LabInstall, tmp_path: Path
) -> None:
    graph = start_graph(RoutingProfile.SESSION_AFFINITY, workers=4)

    result = run_local_smoke(graph.outputs, lab_tools(lab_install), tmp_path, 30, io.StringIO())

    probe = result.routing
    assert probe is not None and probe.observable, "Dynamo's frontend names each worker"
    assert probe.session_header == SESSION_HEADER
    assert probe.kept_share == 1.0, probe.workers
    assert len(probe.requests_per_worker()) > 1  # the sessions themselves spread over the workers


def test_the_smoke_probe_sees_round_robin_spread_each_video(
    start_graph: StartGraph, lab_install: LabInstall, tmp_path: Path
) -> None:
    graph = start_graph(RoutingProfile.ROUND_ROBIN, workers=4)

    probe = run_local_smoke(graph.outputs, lab_tools(lab_install), tmp_path, 30).routing

    assert probe is not None and probe.observable and probe.session_header is None
    assert probe.spread_videos > 0, probe.workers


def test_affinity_without_its_header_fails_the_mechanism_check(start_graph: StartGraph) -> None:
    graph = start_graph(RoutingProfile.SESSION_AFFINITY, workers=4)
    outputs = graph.outputs
    place = PodPlace(work_dir="/unused", listen_host="127.0.0.1")
    config = smoke_pod_config(outputs, "http://127.0.0.1:1", place, 30)["routing_probe"]

    # The header dropped before the router: the affinity graph's probe sent without it.
    sent = probe_routing(
        f"{outputs.frontend_url}/v1/chat/completions", config | {"session_header": None}, 30
    )

    probe = RoutingProbe.model_validate(sent | {"session_header": outputs.session_header})
    assert probe.observable and probe.spread_videos > 0, probe.workers
    results = ProfileResults.load(FIXTURES / "results-session-affinity.json")
    affinity = results.model_copy(update={"routing": probe})
    rr = ProfileResults.load(FIXTURES / "results-round-robin.json")
    failure = mechanism_failure(ABPair.of(rr, affinity))
    assert failure is not None and "the session header did not reach the router" in failure


def test_smoke_stage_reads_outputs_from_stdin(start_graph: StartGraph) -> None:
    graph = start_graph(RoutingProfile.SESSION_AFFINITY, workers=1)

    result = subprocess.run(
        [sys.executable, "-m", "lab", "stage", "smoke", "--outputs", "-"],
        input=graph.outputs_path.read_text(),
        cwd=REPO_ROOT,
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
        cwd=REPO_ROOT,
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

    pages = tuple(graph.worker_metrics_urls)
    tools = dataclasses.replace(lab_tools(lab_install), worker_metrics_pages=pages)

    results = run_local_perf(graph.outputs, TINY, tmp_path / "perf", tools, 30, stream=progress)

    (level,) = results.levels
    assert (level.concurrency, level.request_count, level.error_count) == (2, 6, 0)
    assert level.output_tokens_mean == 8
    assert level.requests_per_second > 0 and level.ttft_p50_ms > 0
    # With affinity, each video's second and third questions find its prefix cached.
    assert level.cached_prompt_tokens >= 2 * 2 * 192
    assert ProfileResults.load(tmp_path / "perf" / "results.json") == results
    assert (tmp_path / "perf" / "c2" / "aiperf" / "profile_export_aiperf.json").is_file()
    assert "concurrency 2 finished" in progress.getvalue()
    # The graph's own counters: both workers read, every request counted once. Which worker served
    # which turn is the router's: a session kept on one worker is proved by the smoke probe's test
    # above and by tests/lab/test_graph_integration.py, one request at a time. Under AIPerf on a
    # loaded host it is not certain: in one `make test` (2026-12-06) the frontend's log showed a
    # video's third turn routed afresh by round robin, so the workers served 4 and 2.
    counts = level.graph
    assert counts is not None and counts.unreachable == []
    assert len(counts.workers) == 2 and sum(counts.served()) == 6
    assert counts.frontend is not None and counts.frontend.requests == 6
    assert counts.frontend.input_tokens > 0 and counts.frontend.cached_tokens > 0
    assert "graph metrics: " in progress.getvalue()


def test_a_lab_graphs_outputs_need_the_lab(start_graph: StartGraph) -> None:
    graph = start_graph(RoutingProfile.ROUND_ROBIN, workers=1)

    result = subprocess.run(
        [sys.executable, "-m", "stages", "smoke", "--outputs", str(graph.outputs_path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert result.returncode == 2 and "python -m lab stage" in result.stderr
