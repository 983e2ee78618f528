"""Hard faults against the real lab graph (marker `lab`): a worker, the frontend and the driver
killed with SIGKILL, which allows no cleanup at all.

- a worker killed mid-sweep: the sweep finishes, its failed requests are counted in results.json
  and the report says so;
- the frontend killed mid-sweep: the stage fails, and results.json keeps the levels it finished,
  marked incomplete;
- the driver (`python -m lab ab`) killed: no process of the lab survives it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import requests

from common import REPO_ROOT
from components.routing import RoutingProfile
from lab.graph import LabGraph
from stages.core.report import write_report
from stages.core.results import ProfileResults
from stages.incluster.processes import group_members
from tests.lab.support import command_line, lab_ab_direct, processes_with, served_requests
from tests.stages.support import FIXTURES

pytestmark = pytest.mark.lab
StartGraph = Callable[..., LabGraph]
SWEEP = [
    "--videos",
    "6",
    "--questions",
    "5",
    "--output-tokens",
    "32",
    "--prefix-tokens",
    "64",
    "--turn-jitter-ms",
    "0",
]


def perf_stage(outputs: Path, out: Path, concurrency: str) -> subprocess.Popen[str]:
    """`python -m lab stage perf` against a running graph, its progress on stderr."""
    command = [
        sys.executable,
        "-m",
        "lab",
        "stage",
        "perf",
        "--outputs",
        str(outputs),
        "--out",
        str(out),
        "--concurrency",
        concurrency,
        *SWEEP,
    ]
    return subprocess.Popen(command, cwd=REPO_ROOT, stderr=subprocess.PIPE, text=True)


def read_until(stage: subprocess.Popen[str], marker: str, seen: list[str]) -> None:
    assert stage.stderr is not None
    while line := stage.stderr.readline():
        seen.append(line)
        if marker in line:
            return
    raise AssertionError(f"{marker!r} never came:\n{''.join(seen[-20:])}")


def wait_until_served(metrics_url: str, seconds: float = 120.0) -> None:
    """Until the worker behind `metrics_url` has served a request (its own /metrics count)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if served_requests(requests.get(metrics_url, timeout=5).text) > 0:
            return
        time.sleep(0.1)
    raise AssertionError(f"the worker at {metrics_url} served no request in {seconds:.0f} s")


def the_process(graph: LabGraph, name: str) -> int:
    """The PID of the graph's `name` process itself (not the guard that leads its group)."""
    module = "dynamo.frontend" if name == "frontend" else "dynamo.mocker"
    process = next(p for p in graph.processes if p.name == name)
    members = [
        pid
        for pid in group_members(process.pgid)
        if module in command_line(pid) and pid != process.pgid
    ]
    assert members, f"no {module} process in {name}'s group"
    return members[0]


def test_a_worker_killed_mid_sweep_is_counted_and_reported(
    start_graph: StartGraph, tmp_path: Path
) -> None:
    graph = start_graph(RoutingProfile.ROUND_ROBIN, workers=3)
    stage = perf_stage(graph.outputs_path, tmp_path / "perf", "2")
    seen: list[str] = []
    read_until(stage, "level 1/1", seen)
    # Killed with requests of the sweep on it. Not after a fixed pause: on a busy host AIPerf may
    # not have sent one yet. Not between two requests either: the frontend then routes the rest
    # around the dead worker and none fails. So, once it has served one, it is frozen for a
    # second (the round robin hands it requests that cannot finish), then killed.
    worker = the_process(graph, "worker-1")
    wait_until_served(graph.worker_metrics_urls[1])
    os.kill(worker, signal.SIGSTOP)
    time.sleep(1)
    os.kill(worker, signal.SIGKILL)
    assert stage.wait(timeout=300) == 1, "".join(seen)  # the sweep broke its promises

    results = ProfileResults.load(tmp_path / "perf" / "results.json")
    (level,) = results.levels
    assert level.error_count > 0 and level.request_count + level.error_count == 30
    # The report of this sweep against any affinity result says what happened to it.
    affinity = ProfileResults.load(FIXTURES / "results-session-affinity.json")
    levels = [affinity.levels[0].model_copy(update={"concurrency": 2})]
    other = affinity.model_copy(update={"workload": results.workload, "levels": levels})
    markdown = write_report(results, other, tmp_path / "report")
    assert f"round-robin: {level.error_count} requests failed" in markdown


def test_a_frontend_killed_mid_sweep_keeps_the_finished_levels(
    start_graph: StartGraph, tmp_path: Path
) -> None:
    graph = start_graph(RoutingProfile.SESSION_AFFINITY, workers=2)
    stage = perf_stage(graph.outputs_path, tmp_path / "perf", "4,1")
    seen: list[str] = []
    read_until(stage, "concurrency 4 finished", seen)
    read_until(stage, "level 2/2", seen)

    os.kill(the_process(graph, "frontend"), signal.SIGKILL)
    status = stage.wait(timeout=300)

    assert status == 1, "".join(seen)
    results = ProfileResults.load(tmp_path / "perf" / "results.json")
    assert not results.complete and [level.concurrency for level in results.levels] == [4]
    assert results.failure and "exit status" in results.failure


def test_a_sigkilled_lab_leaves_no_process_behind(lab_install: object, tmp_path: Path) -> None:
    marker = f"LAB_TEST_RUN={uuid.uuid4()}"
    name, value = marker.split("=")
    command = lab_ab_direct(tmp_path, "--concurrency", "1", *SWEEP)
    lab = subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        env=os.environ | {name: value},
        stderr=subprocess.PIPE,
        text=True,
        process_group=0,
    )
    try:
        seen: list[str] = []
        read_until(lab, "level 1/1", seen)  # graph, perf program and AIPerf all running
        deadline = time.monotonic() + 30
        while not [p for p in processes_with(marker) if "aiperf" in command_line(p)]:
            assert time.monotonic() < deadline, "AIPerf did not start"
            time.sleep(0.1)
        started = len(processes_with(marker))

        lab.kill()  # SIGKILL: no handler, no finally, nothing of the driver runs
        lab.wait()

        deadline = time.monotonic() + 30
        while processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = [command_line(pid)[:80] for pid in processes_with(marker)]
        assert started > 5 and left == []
    finally:
        for pid in processes_with(marker):
            os.kill(pid, signal.SIGKILL)


def test_lab_up_says_when_a_worker_and_then_the_frontend_die(
    lab_install: object, tmp_path: Path
) -> None:
    run_dir = (tmp_path / "up" / "round-robin").resolve()
    marker = f"DYN_FILE_KV={run_dir}"
    command = [sys.executable, "-m", "lab", "up", "--workers", "2", "--out", str(tmp_path)]
    lab = subprocess.Popen(
        command, cwd=REPO_ROOT, stderr=subprocess.PIPE, text=True, process_group=0
    )
    try:
        seen: list[str] = []
        read_until(lab, "serving at", seen)

        def dynamo(module: str) -> int:
            return next(p for p in processes_with(marker) if module in command_line(p))

        os.kill(dynamo("dynamo.mocker"), signal.SIGKILL)
        read_until(lab, "exited", seen)
        assert "1 workers still serve" in seen[-1]
        os.kill(dynamo("dynamo.frontend"), signal.SIGKILL)
        read_until(lab, "the frontend exited", seen)

        assert lab.wait(timeout=60) == 1
        deadline = time.monotonic() + 15
        while processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert processes_with(marker) == []
    finally:
        if lab.poll() is None:
            os.killpg(lab.pid, signal.SIGKILL)
        for pid in processes_with(marker):
            os.kill(pid, signal.SIGKILL)
