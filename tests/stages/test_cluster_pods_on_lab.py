"""The in-cluster pod program against the real lab graph (marker `lab`).

The smoke and perf pods run from the ConfigMap's files (see cluster_pods.py) with the lab's
frontend, a loopback media host, FFmpeg from imageio-ffmpeg, and for perf the lab's AIPerf and
tokenizer; the perf pod's log is decoded into the results the report reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import imageio_ffmpeg  # type: ignore[import-untyped]
import pytest

from components.contract import StackOutputs
from components.routing import RoutingProfile
from lab.environment import LabInstall
from lab.graph import LabGraph
from stages.cluster import results_from_log
from stages.cluster_jobs import (
    JobSettings,
    PodPlace,
    perf_manifests,
    perf_pod_plan,
    smoke_manifests,
    smoke_pod_config,
)
from stages.perf import PerfError
from stages.report import write_report
from stages.results import ProfileResults
from stages.workload import RECIPE_WORKLOAD
from tests.stages.cluster_pods import free_port, lay_out, run_pod
from tests.stages.conftest import FIXTURES

pytestmark = pytest.mark.lab
StartGraph = Callable[..., LabGraph]

TINY = RECIPE_WORKLOAD.model_copy(
    update={"videos": 2, "questions": 3, "output_tokens": 8, "concurrencies": (2,)}
)


def loopback_place(tmp_path: Path, venv: str = "/nonexistent") -> PodPlace:
    return PodPlace(
        work_dir=str(tmp_path / "work"),
        venv=venv,
        listen_host="127.0.0.1",
        listen_port=free_port(),
        ffmpeg=imageio_ffmpeg.get_ffmpeg_exe(),
    )


LAB_EMPTY_STREAM = "InvalidInferenceResultError"
"""Under CPU load the lab graph (Dynamo frontend + mock engine) now and then streams a response
without content (measured here: 1 request in 100 to 250 with both cores busy, with and without a
video part); AIPerf counts it as an error. A lab artefact, so this test tolerates exactly that."""


def lab_tolerant_results(outputs: StackOutputs, log: str, out_dir: Path) -> ProfileResults:
    """The stage's results from the pod's log; a lab empty stream is let through, nothing else."""
    try:
        return results_from_log(outputs, TINY, log, out_dir)
    except PerfError as error:
        export = json.loads((out_dir / "c2/aiperf/profile_export_aiperf.json").read_text())
        kinds = {item["error_details"]["type"] for item in export.get("error_summary") or []}
        if kinds != {LAB_EMPTY_STREAM}:
            raise AssertionError(f"{error}; AIPerf's errors: {export.get('error_summary')}")
        return ProfileResults.load(out_dir / "results.json")  # saved before the check failed


def test_the_smoke_pod_passes_against_the_lab(start_graph: StartGraph, tmp_path: Path) -> None:
    graph = start_graph(RoutingProfile.ROUND_ROBIN, workers=2)
    place = loopback_place(tmp_path)
    media = f"http://127.0.0.1:{place.listen_port}"
    config = smoke_pod_config(graph.outputs, media, place, model_wait_seconds=30)
    cluster_view = graph.outputs.model_copy(update={"target": "cluster"})
    config_map = smoke_manifests(cluster_view, JobSettings(run_id="r1"))[0]

    run = run_pod(
        "stages.incluster.smoke_pod", lay_out(config_map, tmp_path / "config", config),
        tmp_path / "home", timeout=120,
    )  # fmt: skip

    assert run.status == 0, run.log
    assert run.last_line.startswith("Smoke test passed: ")
    assert run.last_line.removeprefix("Smoke test passed: ").strip()
    assert f"{media}/smoke.mp4 serves" in run.log


def test_the_perf_pod_sweeps_the_lab_and_its_log_becomes_results(
    start_graph: StartGraph, lab_install: LabInstall, tmp_path: Path
) -> None:
    graph = start_graph(RoutingProfile.SESSION_AFFINITY, workers=2)
    place = loopback_place(tmp_path, venv=str(lab_install.aiperf_venv))
    settings = JobSettings(run_id="r1", tokenizer=str(lab_install.model_dir))
    media = f"http://127.0.0.1:{place.listen_port}"
    plan = perf_pod_plan(graph.outputs, TINY, media, place, settings)
    cluster_view = graph.outputs.model_copy(update={"target": "cluster"})
    config_map = perf_manifests(cluster_view, TINY, settings)[0]

    run = run_pod(
        "stages.incluster.perf_pod", lay_out(config_map, tmp_path / "config", plan),
        tmp_path / "home", timeout=300,
    )  # fmt: skip

    assert run.status == 0, run.log
    assert run.last_line == "Perf sweep finished: 1 levels"
    assert "2/2 videos made" in run.log and "concurrency 2 finished" in run.log
    results = lab_tolerant_results(graph.outputs, run.log, tmp_path / "perf")
    (level,) = results.levels
    assert level.concurrency == 2 and level.request_count + level.error_count == 6
    assert level.request_count >= 5 and level.output_tokens_mean == 8
    assert level.requests_per_second > 0
    assert ProfileResults.load(tmp_path / "perf" / "results.json") == results
    markdown = write_report(
        ProfileResults.load(FIXTURES / "results-round-robin.json"), results, tmp_path / "report"
    )
    assert "| 2 |" in markdown
