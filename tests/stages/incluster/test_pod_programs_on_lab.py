"""The pod programs with the cluster's plan (real video files) against the real lab graph (`lab`).

The local target runs the lab's own plan (text stand-ins, nothing to make or serve); this runs the
plan a cluster Job gets, with videos made by FFmpeg and served on loopback, so the cluster's video
path runs end to end before any cluster: the lab's frontend accepts the `video_url` parts.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path

import imageio_ffmpeg  # type: ignore[import-untyped]
import pytest

from components.contract import StackOutputs
from components.routing import RoutingProfile
from lab.environment import LabInstall
from lab.graph import LabGraph
from stages.core.pod_log import PodRun
from stages.core.pod_plans import PERF_PLAN, PlanSettings, PodPlace, perf_pod_plan
from stages.core.report import write_report
from stages.core.results import ProfileResults
from stages.core.verdicts import sweep_results
from stages.core.workload import RECIPE_WORKLOAD, VideoUrl
from stages.errors import StageFailed
from stages.local.run import PROGRAM_LOG, free_port, run_program
from tests.stages.conftest import FIXTURES

pytestmark = pytest.mark.lab
StartGraph = Callable[..., LabGraph]

TINY = RECIPE_WORKLOAD.model_copy(
    update={"videos": 2, "questions": 3, "output_tokens": 8, "concurrencies": (2,)}
)

LAB_EMPTY_STREAM = "InvalidInferenceResultError"
"""Under CPU load the lab graph (Dynamo frontend + mock engine) now and then streams a response
without content (measured here: 1 request in 100 to 250 with both cores busy, with and without a
video part); AIPerf counts it as an error. A lab artefact, so this test tolerates exactly that."""


def lab_tolerant_results(outputs: StackOutputs, run: PodRun, out_dir: Path) -> ProfileResults:
    """The stage's results from the program's log; a lab empty stream is let through, nothing
    else."""
    try:
        return sweep_results(outputs, TINY, run, out_dir, out_dir / PROGRAM_LOG)
    except StageFailed as error:
        export = json.loads((out_dir / "c2/aiperf/profile_export_aiperf.json").read_text())
        kinds = {item["error_details"]["type"] for item in export.get("error_summary") or []}
        if kinds != {LAB_EMPTY_STREAM}:
            raise AssertionError(f"{error}; AIPerf's errors: {export.get('error_summary')}")
        return ProfileResults.load(out_dir / "results.json")  # saved before the check failed


def test_the_cluster_perf_plan_sweeps_the_lab_with_real_videos(
    start_graph: StartGraph, lab_install: LabInstall, tmp_path: Path
) -> None:
    graph = start_graph(RoutingProfile.SESSION_AFFINITY, workers=2)
    port = free_port()
    media = f"http://127.0.0.1:{port}"
    place = PodPlace(
        work_dir=str(tmp_path / "perf"),
        listen_host="127.0.0.1",
        listen_port=port,
        ffmpeg=imageio_ffmpeg.get_ffmpeg_exe(),
        aiperf=str(lab_install.aiperf_executable),
    )
    settings = PlanSettings(tokenizer=str(lab_install.model_dir), model_wait_seconds=30)
    plan = perf_pod_plan(graph.outputs, TINY, VideoUrl(media), media, place, settings)
    content = gzip.compress(json.dumps(plan).encode())

    run = run_program("perf_pod.py", (PERF_PLAN, content), tmp_path / "perf", lambda _: None)

    assert run.succeeded, run.tail()
    assert run.last_line == "Perf sweep finished: 1 levels"
    assert "2/2 videos made" in run.log and "concurrency 2 finished" in run.log
    assert f"{media}/c2-video-000.mp4 serves" in run.log
    results = lab_tolerant_results(graph.outputs, run, tmp_path / "perf")
    (level,) = results.levels
    assert level.concurrency == 2 and level.request_count + level.error_count == 6
    assert level.request_count >= 5 and level.output_tokens_mean == 8
    assert level.requests_per_second > 0
    assert ProfileResults.load(tmp_path / "perf" / "results.json") == results
    markdown = write_report(
        ProfileResults.load(FIXTURES / "results-round-robin.json"), results, tmp_path / "report"
    )
    assert "| 2 |" in markdown
