"""What the real-tier tests share: namespaces left clean, kwok paused, objects looked up, waits,
and the layer stack's secret config."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from testenv import cluster as local
from tests.support import NGC_KEY

SYSTEM_NAMESPACES = {"default", "kube-system", "kube-public", "kube-node-lease"}
MIN_FREE_VOLUMES = 4
LAYER_SECRETS = {"ngcApiKey": NGC_KEY}


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
