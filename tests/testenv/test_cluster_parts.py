"""The local cluster's parts that need no running cluster: every component's command line keeps
to loopback, kwok's Stages, the objects it installs, and the folder it refuses. The cluster itself
is tested running, in tests/real/test_cluster.py."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml

from testenv import cluster as local
from testenv.cluster import components, objects, processes
from testenv.cluster.pki import Pki
from testenv.crd import crd_path
from testenv.engine import Engine

ENGINE = Engine(Path("/engine"))
PKI = Pki.at(Path("/pki"))
PORTS = components.Ports(2379, 2380, 6443, 10257, 10259)
KUBECONFIG = Path("/cluster/kubeconfig")


def command_lines() -> dict[str, list[str]]:
    return {
        "etcd": components.etcd(ENGINE, Path("/data"), PORTS),
        "kube-apiserver": components.kube_apiserver(ENGINE, PKI, PORTS),
        "kube-controller-manager": components.kube_controller_manager(
            ENGINE, PKI, KUBECONFIG, PORTS
        ),
        "kube-scheduler": components.kube_scheduler(ENGINE, KUBECONFIG, PORTS),
        "kwok": components.kwok(ENGINE, KUBECONFIG, Path("/stages.yaml")),
    }


@pytest.mark.parametrize("name", list(command_lines()))
def test_every_address_a_component_is_given_is_loopback(name: str) -> None:
    argv = command_lines()[name]
    assert argv[0] == f"/engine/bin/{name}"
    text = " ".join(argv)
    assert "0.0.0.0" not in text and "::" not in text
    addresses = [flag for flag in argv if "address" in flag or "url" in flag or "bind" in flag]
    assert all("127.0.0.1" in flag or flag.endswith("=") for flag in addresses), addresses


@pytest.mark.parametrize(
    ("name", "flags"),
    [
        (
            "kube-apiserver",
            {
                "--bind-address=127.0.0.1",
                "--secure-port=6443",
                "--advertise-address=127.0.0.1",
                "--authorization-mode=Node,RBAC",
            },
        ),
        ("kube-controller-manager", {"--bind-address=127.0.0.1", "--secure-port=10257"}),
        ("kube-scheduler", {"--bind-address=127.0.0.1", "--secure-port=10259"}),
        (
            "etcd",
            {
                "--listen-client-urls=http://127.0.0.1:2379",
                "--listen-peer-urls=http://127.0.0.1:2380",
                "--listen-metrics-urls=",
            },
        ),
    ],
)
def test_every_listener_is_set_explicitly(name: str, flags: set[str]) -> None:
    # A listener left to its default binds every interface (kube-apiserver, the controller
    # manager and the scheduler all default to 0.0.0.0).
    assert flags <= set(command_lines()[name])


def test_kwok_serves_nothing() -> None:
    assert not [flag for flag in command_lines()["kwok"] if flag.startswith("--server-address")]


def test_kwoks_config_brings_back_its_own_stages_and_adds_the_graphs(tmp_path: Path) -> None:
    own = []
    for name in ("node-initialize", "pod-complete"):
        path = tmp_path / f"{name}.yaml"
        path.write_text(
            f"apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata:\n  name: {name}\n"
        )
        own.append(path)

    documents = list(yaml.safe_load_all(objects.kwok_config(own)))

    assert [d["metadata"]["name"] for d in documents] == [
        "node-initialize",
        "pod-complete",
        "dynamographdeployment-ready",
    ]
    graph = documents[-1]["spec"]
    assert graph["resourceRef"] == {
        "apiGroup": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
    }
    status = graph["next"]["statusTemplate"]
    assert "observedGeneration: {{ .metadata.generation }}" in status
    # The restart the spec asks for is reported done, as the wait requires (readiness.py).
    assert "{{ with .spec.restart }}" in status and "observedID: {{ Quote .id }}" in status
    assert "{{ Now" not in status, "a status that changes on every pass would loop"


@pytest.mark.slow  # reads and compares the whole CRD: seconds
def test_the_crd_is_the_reference_one_without_its_conversion_webhook() -> None:
    crd = objects.dgd_crd(crd_path())
    assert crd["metadata"]["name"] == "dynamographdeployments.nvidia.com"
    assert crd["spec"]["conversion"] == {"strategy": "None"}
    assert {v["name"] for v in crd["spec"]["versions"]} == {"v1alpha1", "v1beta1"}


def test_the_nodes_offer_eight_h200s_each_without_a_taint() -> None:
    node = objects.gpu_node("kwok-h200-0")
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H200"
    assert "taints" not in node["spec"]


def test_up_refuses_a_folder_it_did_not_make(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine\n")
    with pytest.raises(local.ClusterError, match="not empty and was not made by"):
        local.up(tmp_path, ENGINE, say=lambda _: None)
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


def test_a_component_leads_its_own_group_in_our_session(tmp_path: Path) -> None:
    """A group, never a session (see `stages.incluster.processes`): the tests' own processes keep
    their share of the cores beside a cluster's."""
    sleep = shutil.which("sleep")
    assert sleep is not None
    started, popen = processes.start("sleeper", [sleep, "600"], tmp_path / "log", {}, False)
    try:
        assert os.getpgid(started.pid) == started.pid != os.getpgrp()
        assert os.getsid(started.pid) == os.getsid(0)
    finally:
        processes.stop_all([started], {started.pid: popen})


def test_a_ctrl_c_as_a_component_starts_comes_once_it_is_recorded_for_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started_for_real = processes.start

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        made = started_for_real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, as Popen returns
        return made

    monkeypatch.setattr(processes, "start", interrupted)
    cluster = local.LocalCluster(tmp_path, ENGINE)

    with pytest.raises(KeyboardInterrupt):
        local.launch(cluster, "etcd", ["/bin/sleep", "60"], die_with_parent=True)

    [recorded] = cluster.started
    cluster.down()
    assert recorded.name == "etcd" and not processes.runs(recorded)
