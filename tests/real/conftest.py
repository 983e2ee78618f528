"""The real tier: the real `pulumi` CLI, provider and a local control plane (testenv/cluster).

One cluster per session (`local_cluster`): a new one, or with `$COSMOS3_CLUSTER` naming the
folder of a running one (`python -m testenv.cluster up --out DIR`) that one, left running
afterwards. Each test gets its own copy of the project (`pulumi config set` rewrites stack files),
its own file backend and passphrase (`stacks`, testenv/local_stacks.py), and leaves no namespace
behind. The tier never skips: a tool that is not
built fails every test with what to run (`make engine`).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import testenv
from common import REPO_ROOT
from testenv import cluster as local
from testenv.engine import Engine, EngineError, cache_home, located
from testenv.local_stacks import LocalStacks
from tests.support import NGC_KEY

SYSTEM_NAMESPACES = {"default", "kube-system", "kube-public", "kube-node-lease"}
MIN_FREE_VOLUMES = 4
LAYER_SECRETS = {"ngcApiKey": NGC_KEY}


@pytest.fixture(scope="session")
def engine() -> Engine:
    try:
        return located(cache_home())
    except EngineError as error:
        pytest.fail(f"the real tier needs the engine's tools: {error}")


@pytest.fixture(scope="session")
def local_cluster(
    engine: Engine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[local.LocalCluster]:
    for venv in (REPO_ROOT / ".venv", REPO_ROOT / "policy" / "venv"):
        if not (venv / "bin" / "python").exists():
            pytest.fail(f"the real tier needs {venv}: run `make venv policy-venv`")
    folder = tmp_path_factory.mktemp("cluster")
    try:
        running, ours = testenv.session_cluster(folder, die_with_parent=True)
    except local.ClusterError as error:
        pytest.fail(str(error))
    yield running
    if ours:
        running.down()


@pytest.fixture
def stacks(local_cluster: local.LocalCluster, tmp_path: Path) -> Iterator[LocalStacks]:
    if local_cluster.free_volumes() < MIN_FREE_VOLUMES:
        local_cluster.add_volumes(MIN_FREE_VOLUMES)
    yield LocalStacks.create(tmp_path, local_cluster, {"NGC_API_KEY": NGC_KEY})
    delete_namespaces(local_cluster)


def delete_namespaces(running: local.LocalCluster) -> None:
    """Every namespace a test made goes (with what it holds), so the next test starts clean; a
    graph a failed test left held by a finalizer is let go first."""
    held = running.kubectl(
        "get", "dgd", "-A", "-o", "jsonpath={range .items[?(@.metadata.finalizers)]}"
        "{.metadata.namespace}/{.metadata.name} {end}",
    ).split()  # fmt: skip
    for item in held:
        namespace, name = item.split("/")
        running.kubectl("patch", "dgd", name, "-n", namespace, "--type=merge",
                        "-p", '{"metadata":{"finalizers":null}}')  # fmt: skip
    names = running.kubectl("get", "namespaces", "-o", "jsonpath={.items[*].metadata.name}").split()
    mine = [name for name in names if name not in SYSTEM_NAMESPACES]
    if mine:
        running.kubectl("delete", "namespace", "--wait=true", "--timeout=60s", *mine)


@contextmanager
def paused_kwok(cluster: local.LocalCluster) -> Iterator[None]:
    """kwok stopped: a graph created meanwhile never becomes Ready, so its `up` keeps waiting."""
    (kwok,) = [item for item in cluster.started if item.name == "kwok"]
    os.kill(kwok.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(kwok.pid, signal.SIGCONT)


def exists(cluster: local.LocalCluster, name: str, namespace: str) -> bool:
    found = cluster.kubectl("get", name, "-n", namespace, "-o", "name", check=False)
    return bool(found.strip())


def wait_until(condition: Callable[[], bool], what: str, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    pytest.fail(f"not seen within {seconds:.0f} s: {what}")
