"""The pod programs with the cluster's plan (real video files) against the real lab graph (`lab`).

The local target runs the lab's own plan (text stand-ins, nothing to make or serve); this runs the
plan a cluster Job gets, with videos made by FFmpeg and served on loopback, so the cluster's video
path runs end to end before any cluster: the lab's frontend accepts the `video_url` parts.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import imageio_ffmpeg  # type: ignore[import-untyped]
import pytest

from common.ports import free_port
from components.routing import RoutingProfile
from lab.environment import LabInstall
from lab.graph import LabGraph
from stages.core.pod_plans import PERF_PLAN, PlanSettings, PodPlace, perf_pod_plan, plan_file
from stages.core.report import write_report
from stages.core.results import ProfileResults
from stages.core.verdicts import sweep_results
from stages.core.workload import RECIPE_WORKLOAD, VideoUrl
from stages.local.run import PROGRAM_LOG, run_locally
from tests.stages.support import FIXTURES

pytestmark = pytest.mark.lab
StartGraph = Callable[..., LabGraph]

TINY = RECIPE_WORKLOAD.model_copy(
    update={"videos": 2, "questions": 3, "output_tokens": 8, "concurrencies": (2,)}
)


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
    content = plan_file(plan)

    run = run_locally("perf_pod.py", (PERF_PLAN, content), tmp_path / "perf", lambda _: None)

    assert run.succeeded, run.tail()
    assert run.last_line == "Perf sweep finished: 1 levels"
    assert "2/2 videos made" in run.log and "concurrency 2 finished" in run.log
    assert f"{media}/c2-video-000.mp4 serves" in run.log
    results = sweep_results(
        graph.outputs, TINY, run, tmp_path / "perf", tmp_path / "perf" / PROGRAM_LOG
    )
    (level,) = results.levels
    assert (level.concurrency, level.request_count, level.error_count) == (2, 6, 0)
    assert level.output_tokens_mean == 8
    assert level.requests_per_second > 0
    assert ProfileResults.load(tmp_path / "perf" / "results.json") == results
    markdown = write_report(
        ProfileResults.load(FIXTURES / "results-round-robin.json"), results, tmp_path / "report"
    )
    assert "| 2 |" in markdown
