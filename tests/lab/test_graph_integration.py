"""The real lab graph: routing per profile, readiness, clean shutdown (marker `lab`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests

from common import REPO_ROOT
from components.contract import StackOutputs
from components.routing import SESSION_HEADER, RoutingProfile, frontend_args
from lab.graph import LabGraph, LabGraphError
from stages.incluster.processes import group_members
from tests.lab.support import command_line, lab_ab_direct, processes_with, served_requests

pytestmark = pytest.mark.lab
StartGraph = Callable[..., LabGraph]


def ask_with_session(outputs: StackOutputs, session: str, question: str) -> int:
    """One chat request in a session; returns the id of the worker that decoded it."""
    body: dict[str, Any] = {
        "model": outputs.served_model,
        "messages": [{"role": "user", "content": question}],
        "max_tokens": 4,
        "nvext": {"extra_fields": ["worker_id", "timing"]},
    }
    response = requests.post(
        f"{outputs.frontend_url}/v1/chat/completions",
        json=body,
        headers={SESSION_HEADER: session},
        timeout=30,
    )
    response.raise_for_status()
    return int(response.json()["nvext"]["worker_id"]["decode_worker_id"])


def requests_per_worker(graph: LabGraph) -> list[int]:
    """Each worker's own count of served requests, from its /metrics."""
    return [served_requests(requests.get(url, timeout=5).text) for url in graph.worker_metrics_urls]


def test_affinity_pins_a_session_to_one_worker(start_graph: StartGraph) -> None:
    graph = start_graph(RoutingProfile.SESSION_AFFINITY, workers=4)

    workers = {ask_with_session(graph.outputs, "video-7", f"question {i}") for i in range(8)}

    assert len(workers) == 1
    assert sorted(requests_per_worker(graph)) == [0, 0, 0, 8]


def test_round_robin_spreads_a_session_over_the_workers(start_graph: StartGraph) -> None:
    graph = start_graph(RoutingProfile.ROUND_ROBIN, workers=4)

    workers = [ask_with_session(graph.outputs, "video-7", f"question {i}") for i in range(8)]

    assert len(set(workers)) == 4
    assert requests_per_worker(graph) == [2, 2, 2, 2]


def test_the_graph_serves_and_writes_its_outputs(start_graph: StartGraph) -> None:
    graph = start_graph(RoutingProfile.SESSION_AFFINITY, workers=2)

    written = StackOutputs.load(graph.outputs_path)
    models = requests.get(written.models_url, timeout=5).json()

    assert written == graph.outputs and written.target == "lab" and written.worker_replicas == 2
    assert [m["id"] for m in models["data"]] == [written.served_model]


def test_every_short_answer_carries_text(start_graph: StartGraph) -> None:
    # The mock engine answers with token ids 1000-1999 whatever the model; with an id the tiny
    # tokenizer cannot decode, about 1 in 4 two-token answers was empty text (AIPerf: a failed
    # request). 2 x 40 tokens, every id decoded: `lab.tiny_model.pad_vocabulary`.
    graph = start_graph(RoutingProfile.ROUND_ROBIN, workers=1)
    body: dict[str, Any] = {
        "model": graph.outputs.served_model,
        "messages": [{"role": "user", "content": "What happens in this video ?"}],
        "max_tokens": 2,
        "min_tokens": 2,
        "ignore_eos": True,
        "nvext": {"extra_fields": ["completion_token_ids"]},
    }
    url = f"{graph.outputs.frontend_url}/v1/chat/completions"
    answers = [requests.post(url, json=body, timeout=30).json() for _ in range(40)]

    ids = [i for a in answers for i in a["nvext"]["completion_token_ids"]]
    assert len(ids) == 80 and min(ids) >= 1000 and max(ids) < 2000
    assert [a for a in answers if not a["choices"][0]["message"]["content"].strip()] == []


def test_the_frontend_runs_with_the_clusters_routing_arguments(start_graph: StartGraph) -> None:
    graph = start_graph(RoutingProfile.SESSION_AFFINITY, workers=1)
    frontend = graph.processes[0]

    # The group's leader is its guard (stages.incluster.processes); the frontend is its child.
    commands = [
        Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]
        for pid in group_members(frontend.pgid)
    ]
    argv = next(argv for argv in commands if argv[1:3] == ["-m", "dynamo.frontend"])

    assert graph.spec.routing is not None
    assert argv[3:] == frontend_args(graph.spec.routing)


def test_stopping_leaves_no_process_behind(start_graph: StartGraph) -> None:
    graph = start_graph(RoutingProfile.ROUND_ROBIN, workers=2)
    pgids = graph.pgids
    assert all(group_members(pgid) for pgid in pgids)

    graph.stop()

    assert [group_members(pgid) for pgid in pgids] == [[], [], []]


def test_a_failure_inside_the_block_still_stops_the_graph(
    start_graph: StartGraph, tmp_path: Path
) -> None:
    probe = start_graph(RoutingProfile.ROUND_ROBIN, workers=1)
    spec = probe.spec
    probe.stop()
    pgids: list[int] = []

    with (
        pytest.raises(RuntimeError, match="a test failed here"),
        LabGraph(spec, tmp_path / "failing") as graph,
    ):
        pgids = graph.pgids
        raise RuntimeError("a test failed here")

    assert pgids and all(group_members(pgid) == [] for pgid in pgids)


def test_a_worker_that_cannot_start_fails_fast_with_its_log(start_graph: StartGraph) -> None:
    with pytest.raises(LabGraphError) as failure:
        start_graph(RoutingProfile.ROUND_ROBIN, workers=2, mocker_args=("--no-such-flag",))

    message = str(failure.value)
    assert "exited during start-up" in message
    assert "--no-such-flag" in message  # the worker's own error, from the tail of its log


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_signal_stops_the_lab_command_and_its_graph(
    lab_install: object, tmp_path: Path, signum: int, reap_marked: list[str]
) -> None:
    run_dir = (tmp_path / "up" / "round-robin").resolve()
    reap_marked.append(f"DYN_FILE_KV={run_dir}")
    command = [sys.executable, "-m", "lab", "up", "--workers", "2", "--out", str(tmp_path)]
    lab = subprocess.Popen(
        command, cwd=REPO_ROOT, stderr=subprocess.PIPE, text=True, process_group=0
    )
    try:
        assert lab.stderr is not None
        banner = ""
        for _ in range(20):  # the banner is printed once the graph serves
            banner = lab.stderr.readline()
            if not banner or "serving at" in banner:
                break
        assert "serving at http://127.0.0.1:" in banner, banner
        assert len(processes_with(f"DYN_FILE_KV={run_dir}")) >= 3  # the lab sets it for Dynamo

        lab.send_signal(signum)
        status = lab.wait(timeout=60)
    finally:
        if lab.poll() is None:
            os.killpg(lab.pid, signal.SIGKILL)
            lab.wait()

    assert status == 130
    deadline = time.monotonic() + 5
    while processes_with(f"DYN_FILE_KV={run_dir}") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_with(f"DYN_FILE_KV={run_dir}") == []
    assert json.loads((run_dir / "outputs.json").read_text())["target"] == "lab"


def test_sigterm_during_the_benchmark_stops_aiperf_and_the_graph(
    lab_install: object, tmp_path: Path, reap_marked: list[str]
) -> None:
    marker = f"LAB_TEST_RUN={uuid.uuid4()}"
    reap_marked.append(marker)
    name, value = marker.split("=")
    options = ("--videos", "2", "--questions", "2", "--output-tokens", "4", "--concurrency", "1")
    command = lab_ab_direct(tmp_path, *options)
    env = os.environ | {name: value}
    lab = subprocess.Popen(
        command, cwd=REPO_ROOT, env=env, stderr=subprocess.PIPE, text=True, process_group=0
    )
    try:
        assert lab.stderr is not None
        line, seen = "", []
        while line := lab.stderr.readline():  # until AIPerf has been started for the first level
            seen.append(line)
            if "level 1/1" in line:
                break
        assert "level 1/1" in line, "".join(seen[-20:])
        deadline = time.monotonic() + 30
        while not (aiperf := [p for p in processes_with(marker) if "aiperf" in command_line(p)]):
            assert time.monotonic() < deadline, "AIPerf did not start"
            time.sleep(0.1)
        # AIPerf retitles its processes (which hides the marker), so follow its process group.
        aiperf_groups = {os.getpgid(pid) for pid in aiperf}

        lab.send_signal(signal.SIGTERM)
        status = lab.wait(timeout=90)
    finally:
        if lab.poll() is None:
            os.killpg(lab.pid, signal.SIGKILL)
            lab.wait()

    assert status == 130
    deadline = time.monotonic() + 30  # a loaded 2-core machine may take a while to reap
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_with(marker) == []
    # The perf program's group and AIPerf's own: both gone.
    assert aiperf_groups and all(group_members(pgid) == [] for pgid in aiperf_groups)
