"""The local cluster as a user runs it (`python -m testenv.cluster up/down`) and as kwok plays the
operator: loopback only, nothing left running after `down`, Ctrl-C or a killed parent, and a
graph's `Ready` that follows its generation."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from common import REPO_ROOT
from testenv import cluster as local
from testenv.cluster import processes
from tests.real.listening import listening


def cluster_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "testenv.cluster", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def started(folder: Path) -> list[processes.Started]:
    state = json.loads((folder / "cluster.json").read_text())
    return [processes.Started.from_json(item) for item in state["components"]]


def wait_gone(items: list[processes.Started], seconds: float = 20.0) -> list[str]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(processes.runs(item) for item in items):
        time.sleep(0.1)
    return [item.name for item in items if processes.runs(item)]


def test_up_and_down_from_the_command_line(tmp_path: Path) -> None:
    folder = tmp_path / "cluster"
    began = time.monotonic()
    up = cluster_cli("up", "--out", str(folder))
    ready_after = time.monotonic() - began
    assert up.returncode == 0, up.stderr
    print(f"testenv.cluster up: ready after {ready_after:.1f} s")  # measured, not asserted
    components = started(folder)
    try:
        assert [item.name for item in components] == [
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "kwok",
        ]
        env = (folder / "env.sh").read_text()
        for name in (
            "KUBECONFIG",
            "PULUMI_HOME",
            "PULUMI_SKIP_UPDATE_CHECK",
            "PULUMI_PYTHON_CMD",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION",
            "PULUMI_LOG_ROTATION_MAX_TOTAL_MB",
            "CLUSTER_CONTEXT",
            "CLUSTER_RWX_CLASS",
        ):
            assert f"export {name}=" in env
        sourced = subprocess.run(
            [
                "bash",
                "-c",
                (
                    f"source {folder / 'env.sh'} && command -v pulumi kubectl "
                    "&& kubectl get nodes -o name && pulumi version"
                ),
            ],
            capture_output=True,
            text=True,
            check=False,
            env={"PATH": os.defpath, "HOME": str(tmp_path)},
        )
        assert sourced.returncode == 0, sourced.stderr
        lines = sourced.stdout.split()
        assert lines[:2] == [
            str(Path(lines[0]).parent / "pulumi"),
            str(Path(lines[0]).parent / "kubectl"),
        ]
        assert lines[2:4] == ["node/kwok-h200-0", "node/kwok-h200-1"]
        assert lines[4] == "v3.274.1"
        for item in components:
            addresses = listening(item.pid)
            assert all(a.startswith("127.0.0.1:") for a in addresses), (item.name, addresses)
        again = cluster_cli("up", "--out", str(folder))
        assert again.returncode == 1 and "already running" in again.stderr
    finally:
        down = cluster_cli("down", "--out", str(folder))
    assert down.returncode == 0, down.stderr
    assert wait_gone(components) == []


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_up_leaves_nothing_running(tmp_path: Path, signum: signal.Signals) -> None:
    folder = tmp_path / "cluster"
    up = subprocess.Popen(
        [sys.executable, "-m", "testenv.cluster", "up", "--out", str(folder)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not _has_apiserver(folder):
        time.sleep(0.05)
    components = started(folder)
    up.send_signal(signum)
    up.communicate(timeout=60)
    assert up.returncode != 0
    assert wait_gone(components) == []


def test_a_killed_test_process_takes_its_cluster_with_it(tmp_path: Path) -> None:
    # What the real tier's fixture does (die_with_parent), in a process this test kills with -9.
    folder = tmp_path / "cluster"
    program = (
        "import sys, time; from pathlib import Path; from testenv import cluster; "
        "from testenv.engine import cache_home, located; "
        "cluster.up(Path(sys.argv[1]), located(cache_home()), die_with_parent=True); "
        "print('up', flush=True); time.sleep(600)"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", program, str(folder)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    lines = iter(holder.stdout.readline, "")
    assert any(line.strip() == "up" for line in lines)
    components = started(folder)
    holder.kill()
    holder.wait()
    assert wait_gone(components) == []


def test_a_graph_is_ready_for_its_current_generation(local_cluster: local.LocalCluster) -> None:
    # The dev stack's graph as the program renders it (manifests/dev/), under another name.
    graph = yaml.safe_load(
        next((REPO_ROOT / "manifests" / "dev").glob("*dynamographdeployment*")).read_text()
    )
    graph["metadata"] = {"name": "probe", "namespace": "default"}
    try:
        local_cluster.apply([graph])
        _wait_observed(local_cluster, 1)
        graph["spec"]["components"][1]["replicas"] = 2
        local_cluster.apply([graph])
        status = _wait_observed(local_cluster, 2)
        assert status["state"] == "successful"
        assert status["conditions"][0]["reason"] == "KwokStage"
    finally:
        local_cluster.kubectl(
            "delete", "dynamographdeployment", "probe", "-n", "default", "--wait=true"
        )


def _wait_observed(cluster: local.LocalCluster, generation: int) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = json.loads(cluster.kubectl("get", "dgd", "probe", "-n", "default", "-o", "json"))
        status = found.get("status") or {}
        conditions = status.get("conditions") or []
        if found["metadata"]["generation"] == generation and any(
            c["type"] == "Ready"
            and c["status"] == "True"
            and c.get("observedGeneration") == generation
            for c in conditions
        ):
            found_status: dict[str, Any] = status
            return found_status
        time.sleep(0.2)
    pytest.fail(f"the graph never became Ready for generation {generation}: {found}")


def _has_apiserver(folder: Path) -> bool:
    try:
        return any(item.name == "kube-apiserver" for item in started(folder))
    except (FileNotFoundError, json.JSONDecodeError):
        return False
