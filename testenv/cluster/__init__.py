"""A local Kubernetes control plane for the real tier: the real API server, kwok for the nodes.

`up` starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (the engine's
pinned builds, testenv/engine/), every one on 127.0.0.1 with fresh certificates and RBAC on, then
installs what the recipe needs of a cluster (testenv/cluster/objects.py) and returns once it is
usable: API server ready, the DGD CRD established, the GPU nodes Ready. It writes, in its folder:

    kubeconfig   context `cosmos3-local`, the admin client certificate
    env.sh       KUBECONFIG, PATH with the engine's `pulumi` and `kubectl` first, PULUMI_HOME, the
                 Pulumi settings of the local tier, PULUMI_PYTHON_CMD, CLUSTER_CONTEXT and
                 CLUSTER_RWX_CLASS
    cluster.json what `down` stops: each component's PID and binary
    logs/        one log per component

`down` stops what `up` started, by PID, and leaves nothing running. Both own only a folder `up`
made (its `.cosmos3-local-cluster` mark): `down` on any other folder, or on a `cluster.json` that is
not one `up` wrote, is refused with a message and stops nothing. Nothing either removes or writes
passes through a link (`common.confined_paths`), and `down` signals only the components it knows
by their binary. The same code is the real tier's pytest fixture (tests/real/conftest.py): one
cluster per session.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import yaml

from common import REPO_ROOT
from common.confined_paths import OutputFolderError, remove_tree_inside, write_inside
from common.input_files import InputFileError, read_tail
from testenv.cluster import components, objects, processes
from testenv.cluster.folder import (
    OWNER_MARK,
    ClusterError,
    claim_folder,
    made_by_up,
    read_state,
)
from testenv.cluster.pki import make_pki
from testenv.crd import crd_path, load_crd, schema_note
from testenv.engine import Engine

__all__ = ["OWNER_MARK", "ClusterError", "LocalCluster", "attach", "up"]

READY_TIMEOUT_SECONDS = 90.0
MADE_BY_SELECTOR = ",".join(f"{key}={value}" for key, value in objects.MADE_BY.items())
NODES = ("kwok-h200-0", "kwok-h200-1")
INITIAL_VOLUMES = 8


@dataclass
class LocalCluster:
    """One running control plane, as `up` left it (or as `down` finds it in its folder)."""

    folder: Path
    engine: Engine
    server: str = ""
    started: list[processes.Started] = field(default_factory=list)
    children: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    kept_namespaces: frozenset[str] = objects.SYSTEM_NAMESPACES
    """Namespaces no test deletes: the system's, and on an existing cluster all it held before."""
    STATE_PARTS: ClassVar[tuple[str, ...]] = ("cluster.json", "etcd")  # `down` removes them

    @property
    def kubeconfig(self) -> Path:
        return self.folder / "kubeconfig"

    def environment(self) -> dict[str, str]:
        """What a process needs to use this cluster with the engine's tools (env.sh, as a dict)."""
        env = self.engine.environment()
        env.update(
            KUBECONFIG=str(self.kubeconfig),
            PULUMI_PYTHON_CMD=str(REPO_ROOT / ".venv" / "bin" / "python"),
            CLUSTER_CONTEXT=objects.CONTEXT,
            CLUSTER_RWX_CLASS=objects.RWX_CLASS,
        )
        return env

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        command = [
            str(self.engine.tool("kubectl")),
            f"--kubeconfig={self.kubeconfig}",
            f"--cache-dir={self.folder / 'kube-cache'}",  # not the user's ~/.kube
            *args,
        ]
        result = subprocess.run(command, input=stdin, capture_output=True, text=True, check=False)
        if check and result.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def answers(self) -> bool:
        """The API server's /readyz says ok."""
        return self.kubectl("get", "--raw=/readyz", check=False).strip() == "ok"

    def apply(self, documents: list[dict[str, Any]]) -> None:
        self.kubectl(
            "apply",
            "--server-side",
            "--field-manager=cosmos3-local-cluster",
            "-f",
            "-",
            stdin=objects.as_json_stream(documents),
        )

    def create(self, documents: list[dict[str, Any]]) -> None:
        """Objects that must be new: one of the same name fails, it is never taken over."""
        self.kubectl("create", "-f", "-", stdin=objects.as_json_stream(documents))

    def add_volumes(self, count: int) -> None:
        """`count` more ReadWriteMany volumes for claims (each claim binds one, for good), under
        names no volume has yet: applying over one would take it over."""
        taken = set(self.kubectl("get", "pv", "-o", "name").split())
        free = (n for n in itertools.count() if f"persistentvolume/model-cache-{n}" not in taken)
        self.apply([objects.volume(f"model-cache-{n}") for n, _ in zip(free, range(count))])

    def free_volumes(self) -> int:
        """The tier's volumes no claim has bound yet (a cluster's own are not counted)."""
        listing = json.loads(self.kubectl("get", "pv", "-o", "json", "-l", MADE_BY_SELECTOR))
        return sum(1 for item in listing["items"] if item["status"].get("phase") == "Available")

    def down(self) -> list[str]:
        """Stop every component, by PID; returns those that needed SIGKILL."""
        killed = processes.stop_all(self.started, self.children)
        self.started.clear()
        self.children.clear()
        try:
            for part in self.STATE_PARTS:
                remove_tree_inside(self.folder, part)
        except OutputFolderError as error:
            raise ClusterError(f"stopped, but left its state: {error}") from None
        return killed


def up(
    folder: Path,
    engine: Engine,
    die_with_parent: bool = False,
    say: Callable[[str], None] = print,
    crd: Path | None = None,
    graph_stage: bool = True,
    gpu_nodes: bool = True,
) -> LocalCluster:
    """Start a cluster in `folder` and return once it is usable (see the module docstring), with
    the DGD CRD `testenv.crd.crd_path(crd)` finds (missing: nothing starts; another version: a
    warning through `say`). `graph_stage` False leaves the graphs' status to another controller
    (the lab's) instead of kwok's Stage; `gpu_nodes` False, the control plane and the CRD alone
    (no kwok, nodes or volumes: a cluster as `existing.attach_existing` expects one)."""
    began = time.monotonic()
    crd_file = crd_path(crd)
    if note := schema_note(load_crd(crd_file), crd_file):
        say(note)
    folder = folder.resolve()
    claim_folder(folder)
    cluster = LocalCluster(folder, engine)
    try:
        _start(cluster, die_with_parent, say, crd_file, graph_stage, gpu_nodes)
    except BaseException:
        cluster.down()
        raise
    header = "# The local cluster and the engine's tools; made by `python -m testenv.cluster up`.\n"
    write_inside(folder, "env.sh", header + engine.exports(cluster.environment()))
    say(
        f"cluster: ready in {time.monotonic() - began:.1f} s at {cluster.server}; "
        f"source {folder / 'env.sh'}"
    )
    return cluster


def attach(folder: Path, engine: Engine) -> LocalCluster:
    """The cluster `up` left running in `folder` (for `down` from another process); refused,
    naming the folder, when `up` did not make it or its `cluster.json` is not one `up` wrote."""
    folder = folder.resolve()
    if not made_by_up(folder):
        raise ClusterError(
            f"--out {folder} was not made by `testenv.cluster up` (no {OWNER_MARK} file): "
            "nothing in it is stopped or removed; give the folder `up` wrote"
        )
    state = read_state(folder)
    if state is None:
        raise ClusterError(f"{folder} holds no running cluster (no cluster.json)")
    return LocalCluster(folder, engine, state[0], state[1])


def _start(
    cluster: LocalCluster,
    die_with_parent: bool,
    say: Callable[[str], None],
    crd: Path,
    graph_stage: bool,
    gpu_nodes: bool,
) -> None:
    """The control plane, then what the recipe needs of it; kwok last but one, because it must
    find the graph's kind served when it loads its Stages."""
    folder, engine = cluster.folder, cluster.engine
    pki = make_pki(folder / "pki")
    ports = components.Ports.pick()
    cluster.server = ports.server
    config = objects.kubeconfig(
        {"server": ports.server, "certificate-authority": str(pki.ca_cert)},
        {"client-certificate": str(pki.admin_cert), "client-key": str(pki.admin_key)},
    )
    write_inside(folder, "kubeconfig", yaml.safe_dump(config), mode=0o600)
    kubeconfig = cluster.kubeconfig
    launch(cluster, "etcd", components.etcd(engine, folder / "etcd", ports), die_with_parent)
    apiserver = components.kube_apiserver(engine, pki, ports)
    launch(cluster, "kube-apiserver", apiserver, die_with_parent)
    _wait_for(cluster, "the API server's /readyz", cluster.answers)
    manager = components.kube_controller_manager(engine, pki, kubeconfig, ports)
    launch(cluster, "kube-controller-manager", manager, die_with_parent)
    scheduler = components.kube_scheduler(engine, kubeconfig, ports)
    launch(cluster, "kube-scheduler", scheduler, die_with_parent)
    cluster.apply([objects.dgd_crd(crd)])
    _wait_for(cluster, "the DGD CRD to be established", lambda: established(cluster))
    if gpu_nodes:
        add_gpu_nodes(cluster, die_with_parent, graph_stage)
    say(f"cluster: control plane started ({', '.join(item.name for item in cluster.started)})")


def add_gpu_nodes(cluster: LocalCluster, die_with_parent: bool, graph_stage: bool) -> None:
    """What the recipe needs of a cluster beyond its API server, once the DGD CRD is served:
    kwok (started here, with the graph's Stage unless `graph_stage` is False), the GPU nodes it
    keeps Ready, the ReadWriteMany class and its first volumes."""
    try:
        kwok_config = objects.kwok_config(cluster.engine.kwok_stages, graph_stage)
    except InputFileError as error:  # the engine's copy of kwok's stages, damaged
        raise ClusterError(f"{error}: build the engine again (make engine)") from None
    stages = write_inside(cluster.folder, "kwok-stages.yaml", kwok_config)
    kwok = components.kwok(cluster.engine, cluster.kubeconfig, stages)
    launch(cluster, "kwok", kwok, die_with_parent)
    cluster.apply([objects.storage_class(), *[objects.gpu_node(name) for name in NODES]])
    cluster.add_volumes(INITIAL_VOLUMES)
    _wait_for(cluster, "the kwok nodes to be Ready", lambda: _nodes_ready(cluster))


def launch(cluster: LocalCluster, name: str, argv: list[str], die_with_parent: bool) -> None:
    """One component, its log in the cluster's folder, recorded in `cluster.json` at once."""
    env = {"PATH": os.defpath, "HOME": str(cluster.folder)}
    log = cluster.folder / "logs" / f"{name}.log"
    with processes.held_interrupts():  # recorded before an interrupt can strike: `down` sees it
        started, popen = processes.start(name, argv, log, env, die_with_parent)
        cluster.started.append(started)
        cluster.children[started.pid] = popen
    state = {"server": cluster.server, "components": [asdict(item) for item in cluster.started]}
    write_inside(cluster.folder, "cluster.json", json.dumps(state, indent=2) + "\n")


def established(cluster: LocalCluster) -> bool:
    """Established, and published in the OpenAPI v3 index (a moment later), which kwok reads
    when it loads a Stage: it exits if the graph's group is not there yet."""
    path = '{.status.conditions[?(@.type=="Established")].status}'
    crd = "crd/dynamographdeployments.nvidia.com"
    if cluster.kubectl("get", crd, "-o", f"jsonpath={path}", check=False) != "True":
        return False
    index = cluster.kubectl("get", "--raw", "/openapi/v3", check=False)
    return '"apis/nvidia.com/v1beta1"' in index


def _nodes_ready(cluster: LocalCluster) -> bool:
    path = 'jsonpath={.items[*].status.conditions[?(@.type=="Ready")].status}'
    listed = cluster.kubectl("get", "nodes", "-l", MADE_BY_SELECTOR, "-o", path, check=False)
    return listed.split() == ["True"] * len(NODES)


def _wait_for(
    cluster: LocalCluster,
    what: str,
    ready: Callable[[], bool],
    seconds: float = READY_TIMEOUT_SECONDS,
) -> None:
    """Poll `ready` until it holds; fail at once, with its log, if a component exits meanwhile."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        dead = [item for item in cluster.started if not processes.running(item, cluster.children)]
        if dead:
            log = Path(dead[0].log)
            tail = "\n".join(read_tail(log).splitlines()[-15:])
            raise ClusterError(f"{dead[0].name} exited while waiting for {what}; {log}:\n{tail}")
        if ready():
            return
        time.sleep(0.25)
    raise ClusterError(
        f"{what} not reached within {seconds:.0f} s; logs in {cluster.folder / 'logs'}"
    )
