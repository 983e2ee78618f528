"""What the real-tier tests share: namespaces left clean, kwok paused, objects looked up, waits,
the layer stack's secret config, and a stack's state checked against the cluster."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from testenv import cluster as local
from testenv.engine import Engine, cache_home
from testenv.engine.build import located_crds
from testenv.engine.pins import CrdSource
from testenv.local_stacks import LAYER_SITE, SITE, LocalStacks
from tests.support import NGC_KEY

MIN_FREE_VOLUMES = 4
LAYER_SECRETS = {"ngcApiKey": NGC_KEY}
NAMESPACE_GONE_SECONDS = 90
"""How long the namespaces the last test deleted may take to go (the namespace controller's 5 s
grace period, then its deletions)."""


def delete_namespaces(running: local.LocalCluster, wait: bool = True) -> None:
    """Every namespace a test made goes (with what it holds), so the next test starts clean; a
    graph a failed test left held by a finalizer is let go first. The cluster's own namespaces
    stay (`kept_namespaces`: on one the tier attached to, all it held before). Without `wait`,
    the deletion goes on while the next test sets up, which then awaits it
    (`await_namespaces_gone`)."""
    held = running.kubectl(
        "get", "dgd", "-A", "-o", "jsonpath={range .items[?(@.metadata.finalizers)]}"
        "{.metadata.namespace}/{.metadata.name} {end}",
    ).split()  # fmt: skip
    for item in held:
        namespace, name = item.split("/")
        running.kubectl("patch", "dgd", name, "-n", namespace, "--type=merge",
                        "-p", '{"metadata":{"finalizers":null}}')  # fmt: skip
    names = running.kubectl("get", "namespaces", "-o", "jsonpath={.items[*].metadata.name}").split()
    mine = [name for name in names if name not in running.kept_namespaces]
    if mine:
        running.kubectl(
            "delete", "namespace", f"--wait={str(wait).lower()}", "--timeout=60s", *mine
        )


def await_namespaces_gone(running: local.LocalCluster) -> None:
    """The namespaces a test deleted without waiting are gone. Each deletion takes the namespace
    controller at least 5 s, a fixed grace period (`namespaceDeletionGracePeriod`, no flag), which
    the next test's set-up overlaps; a test creating a namespace that is still terminating fails.
    One `kubectl wait`, which watches: a `kubectl get` five times a second cost 0.28 CPU-seconds
    a second of waiting (client and API server), the watch 0.07 in all (2026-12-06)."""
    path = "jsonpath={range .items[*]}{.metadata.name}={.status.phase} {end}"
    phases = dict(item.split("=") for item in running.kubectl("get", "ns", "-o", path).split())
    terminating = [  # namespaces a module keeps on purpose (`keep_namespaces`) may stay
        f"namespace/{name}"
        for name, phase in phases.items()
        if phase == "Terminating" and name not in running.kept_namespaces
    ]
    if not terminating:
        return
    try:  # one gone before the watch starts counts as gone
        running.kubectl(
            "wait", "--for=delete", f"--timeout={NAMESPACE_GONE_SECONDS}s", *terminating
        )
    except local.ClusterError as error:
        pytest.fail(
            f"the namespaces the last test deleted are not gone within {NAMESPACE_GONE_SECONDS} s:"
            f" {error}"
        )


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


def engine_processes(engine: Engine, stacks: LocalStacks) -> list[str]:
    """The engine's processes of one test ("<pid> <executable>"): its backend is in their
    environment (the CLI and its plugins inherit it), so another test's, run beside it, are not
    counted. A plugin outlives a CLI killed with SIGKILL (it is in a process group of its own)."""
    backend = f"PULUMI_BACKEND_URL={stacks.env['PULUMI_BACKEND_URL']}\0".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            exe = os.readlink(entry / "exe")
            environment = (entry / "environ").read_bytes()
        except OSError:
            continue
        if exe.startswith(str(engine.root)) and backend in environment:
            found.append(f"{entry.name} {exe}")
    return found


def stop_engine_processes(engine: Engine, stacks: LocalStacks) -> None:
    """What a test's killed CLI left running, stopped by PID."""
    for found in engine_processes(engine, stacks):
        try:
            os.kill(int(found.split()[0]), signal.SIGKILL)
        except ProcessLookupError:
            pass


@contextmanager
def pinned_crds_installed(cluster: local.LocalCluster, source: CrdSource) -> Iterator[None]:
    """The CRDs of `source` (testenv.engine.pins) on `cluster` while inside, then gone again (a
    refusal's test needs a cluster without them). A cluster that has any of them already fails
    the test: removing them would delete every object of theirs."""
    paths = located_crds(cache_home(), source)
    if not paths:
        pytest.fail(f"this test needs {source.name}'s CRDs: run `make pinned-crds`")
    files = [argument for path in paths for argument in ("-f", str(path))]
    there = cluster.kubectl("get", *files, "--ignore-not-found", "-o", "name").split()
    if there:
        pytest.fail(f"this test installs and removes {source.name}'s CRDs; the cluster has {there}")
    cluster.kubectl("apply", "--server-side", *files)
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", *files)
    try:
        yield
    finally:
        cluster.kubectl("delete", "--wait=true", "--timeout=60s", *files)


def layer_up(stacks: LocalStacks, *profiles: str) -> None:
    """The shared layer stack configured for the local cluster and up, then each of `profiles`
    on it: a test's starting point (`LocalStacks.deploy`)."""
    stacks.configure("shared", LAYER_SITE, LAYER_SECRETS)
    stacks.deploy("shared")
    for profile in profiles:
        stacks.configure(profile, SITE)
        stacks.deploy(profile)


def state_objects(stacks: LocalStacks, stack: str) -> list[tuple[str, str, str]]:
    """(kind, namespace, name) of every Kubernetes object the stack's state holds."""
    exported = json.loads(stacks.run("stack", "export", "--stack", stack).stdout)
    deployment = exported["deployment"]
    assert not deployment.get("pending_operations"), deployment["pending_operations"]
    found = []
    for resource in deployment["resources"]:
        if not resource["type"].startswith("kubernetes:") or resource["type"].startswith(
            "pulumi:providers"
        ):
            continue
        outputs = resource.get("outputs", {})
        metadata = outputs.get("metadata", {})
        found.append((outputs["kind"], metadata.get("namespace", ""), metadata["name"]))
    return sorted(found)


def assert_state_is_in_the_cluster(
    stacks: LocalStacks, cluster: local.LocalCluster, stack: str
) -> list[tuple[str, str, str]]:
    objects = state_objects(stacks, stack)
    for kind, namespace, name in objects:
        where = ["-n", namespace] if namespace else []
        found = cluster.kubectl("get", kind.lower(), name, *where, "-o", "name", check=False)
        assert found.strip(), (
            f"{kind} {namespace}/{name} is in the state of {stack} but not in the cluster"
        )
    return objects
