"""The lab controller's passes (`lab.controller.GraphController.reconcile`) over a fake API server
and fake graphs: what each pass starts, stops and publishes when an object is made again under
its name, when the API server fails once in a restart, and when a start meets a full disk. The
processes and the real API server are the real tier's (tests/real/test_lab_controller.py)."""

from __future__ import annotations

import errno
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from components.routing import routing_for
from lab import controller
from lab.controller import GraphController, Managed
from lab.deployed_graph import Phase, WorkerMapping
from lab.graph import GraphSpec, LabGraph


def graph_object(uid: str) -> dict[str, Any]:
    frontend = {"name": "main", "command": ["python3"], "args": ["-m", "dynamo.frontend"]}
    return {
        "metadata": {"namespace": "ns", "name": "g", "uid": uid, "generation": 1},
        "spec": {
            "components": [
                {"name": "Frontend", "type": "frontend", "podTemplate": {"spec": {
                    "containers": [frontend]}}},
                {"name": "w", "type": "worker", "replicas": 2},
            ]
        },
    }  # fmt: skip


@dataclass
class Cluster:
    """The DGD listing, their status writes and the frontend Service, each able to fail once."""

    items: list[dict[str, Any]] = field(default_factory=list)
    annotation: str | None = None
    owner: str | None = None
    fail_status_once: bool = False
    fail_annotation_once: bool = False
    events: list[str] = field(default_factory=list)

    def list_cluster_custom_object(self, *args: object) -> dict[str, Any]:
        return {"items": self.items}

    def patch_namespaced_custom_object_status(self, *args: Any) -> None:
        if self.fail_status_once:
            self.fail_status_once = False
            raise ApiException(status=500, reason="etcdserver: request timed out")

    def read_namespaced_service(self, name: str, namespace: str) -> Any:
        if self.owner is None:
            raise ApiException(status=404)
        owners = [type("Owner", (), {"uid": self.owner})()]
        return type("Service", (), {"metadata": type("Meta", (), {"owner_references": owners})})

    def create_namespaced_service(self, namespace: str, body: dict[str, Any]) -> None:
        self.owner = body["metadata"]["ownerReferences"][0]["uid"]

    def patch_namespaced_service(self, name: str, namespace: str, body: Any) -> None:
        if self.fail_annotation_once:
            self.fail_annotation_once = False
            raise ApiException(status=500, reason="transient")
        self.annotation = next(iter(body["metadata"]["annotations"].values()))
        self.events.append(f"annotate {self.annotation}")


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Cluster:
    """A cluster whose graphs are fakes that record their starts and stops in its events."""
    made = Cluster()

    class FakeGraph:
        count = 0

        def __init__(self, spec: object, run_dir: Path) -> None:
            FakeGraph.count += 1
            self.name, self.client_port = f"graph {FakeGraph.count}", 20000 + FakeGraph.count

        def start(self) -> None:
            made.events.append(f"start {self.name}")

        def stop(self) -> None:
            made.events.append(f"stop {self.name}")

        def exited(self) -> list[object]:
            return []

    monkeypatch.setattr(controller, "LabGraph", FakeGraph)
    return made


def controller_on(cluster: Cluster, tmp_path: Path) -> GraphController:
    running = GraphController(Path("/nonexistent"), WorkerMapping(), tmp_path, say=lambda _: None)
    running._api = running._core = cluster
    return running


def test_a_graph_made_again_under_its_name_is_published_after_the_old_one_stops(
    cluster: Cluster, tmp_path: Path
) -> None:
    passes = controller_on(cluster, tmp_path)
    cluster.items = [graph_object("old")]
    passes.reconcile()
    cluster.items, cluster.owner = [graph_object("new")], None  # its Service went with it

    passes.reconcile()

    assert cluster.events[-4:] == [
        "stop graph 1",
        "annotate None",  # the old graph's address taken down before the new one's goes up
        "start graph 2",
        "annotate http://127.0.0.1:20002",
    ]
    assert cluster.annotation == "http://127.0.0.1:20002"


@pytest.mark.parametrize("failing", ["fail_status_once", "fail_annotation_once"])
def test_a_restart_the_api_server_failed_once_is_tried_again_at_the_next_pass(
    cluster: Cluster, tmp_path: Path, failing: str
) -> None:
    passes = controller_on(cluster, tmp_path)
    cluster.items = [graph_object("uid")]
    setattr(cluster, failing, True)
    with pytest.raises(ApiException):
        passes.reconcile()

    passes.reconcile()

    [managed] = passes.managed.values()
    assert managed.phase is Phase.READY and managed.running is not None
    assert cluster.annotation == f"http://127.0.0.1:{managed.running.client_port}"


def test_a_start_on_a_full_disk_fails_the_graph_saying_why(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(self: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("lab.controller.LabGraph.start", full_disk)  # the fake graph's
    passes = controller_on(cluster, tmp_path)
    cluster.items = [graph_object("uid")]

    passes.reconcile()

    [managed] = passes.managed.values()
    assert managed.phase is Phase.START_FAILED and "No space left" in managed.message


@dataclass
class Ended:
    """A graph process that exited (what `LabGraph.exited` and `exit_cause` read of one)."""

    name: str
    code: int | None

    def exit_code(self) -> int | None:
        return self.code

    def log_tail(self, lines: int) -> str:
        return ""


def test_the_pass_through_before_several_frontends_exiting_takes_the_graph_out_of_ready(
    tmp_path: Path,
) -> None:
    graph = LabGraph(GraphSpec(routing=routing_for("session-affinity", 300), frontends=2), tmp_path)
    graph.processes = [Ended(name, None) for name in ("frontend", "frontend-1", "worker-0")]  # type: ignore[misc]
    graph.pass_through = Ended("pass-through", -9)  # type: ignore[assignment]
    managed = Managed(graph=None, running=graph, phase=Phase.READY)
    passes = GraphController(Path("/nonexistent"), WorkerMapping(), tmp_path, say=lambda _: None)

    passes._notice_exits(managed)

    assert managed.phase is Phase.PROCESS_EXITED and "pass-through" in managed.message
