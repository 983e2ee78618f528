"""The adapter's pod-log reads, over real HTTP against a fake API server.

Everything else the adapter does (creating the stage's objects as built, the re-run's foreground
deletion, pods by label selector, Job states, allocatable GPUs, an unreachable server, a missing or
overridden context, RBAC and validation refusals, a refused Secret kept out of the message) is
tested against the real API server of the local cluster: tests/real/test_cluster_stage_api.py.

What stays here is what that cluster cannot show: a pod's log. kwok runs no containers and serves
no kubelet, so the real API server answers a kwok pod's log read with HTTP 500, and a whole run
whose verdict comes from the program's log (`run_cluster_smoke` returning the answer) needs a
stand-in: a small fake of the few REST paths the stages use, on loopback, answering the real
client with a real kubeconfig file and context. It completes every Job at once with a pod whose
log is scripted; it is not a Kubernetes API server (no admission, scheduling or Job controller).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from components.routing import RoutingProfile
from stages.cluster.kubernetes_api import pod_state
from stages.cluster.run import ClusterOptions, run_cluster_smoke
from tests.stages.cluster.fakes import cluster_outputs
from tests.support import StandInHandler, stand_in_server

# A real HTTP server per test (its shutdown alone waits half a second): `make test` runs these.
pytestmark = pytest.mark.slow

PASSED = "frontend lists nvidia/cosmos3-nano-reasoner\nSmoke test passed: a box moves\n"


@dataclass
class ApiState:
    """What the stand-in API server holds and saw."""

    objects: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    log: str = PASSED


def _status(code: int, reason: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": reason,
        "code": code,
    }


TERMINATED_CONTAINER = {
    "name": "smoke",
    "ready": False,
    "restartCount": 0,
    "image": "python",
    "imageID": "python@sha256:0",
    "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
}


def _pod_for(job: dict[str, Any]) -> dict[str, Any]:
    """The pod a Job controller would have run to completion."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{job['metadata']['name']}-x7k2p",
            "namespace": job["metadata"]["namespace"],
            "labels": job["spec"]["template"]["metadata"]["labels"],
            "creationTimestamp": "2026-11-30T12:00:00Z",
        },
        "status": {
            "phase": "Succeeded",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [TERMINATED_CONTAINER],
        },
    }


class _Handler(StandInHandler):
    state: ApiState

    def do_POST(self) -> None:
        collection, _ = self._target()
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        key = (collection, body["metadata"]["name"])
        if key in self.state.objects:
            return self._send(409, _status(409, "AlreadyExists"))
        body["metadata"]["uid"] = str(uuid.uuid4())
        if collection == "jobs":
            body["status"] = {
                "succeeded": 1,
                "conditions": [{"type": "Complete", "status": "True"}],
            }
            pod = _pod_for(body)
            self.state.pods[pod["metadata"]["name"]] = pod
        self.state.objects[key] = body
        self._send(201, body)

    def do_GET(self) -> None:
        collection, name = self._target()
        if collection == "pods" and name and self.path.split("?")[0].endswith("/log"):
            return self._send_text(self.state.log)
        if collection == "pods":
            return self._send(
                200,
                {
                    "kind": "PodList",
                    "apiVersion": "v1",
                    "metadata": {},
                    "items": self._selected_pods(),
                },
            )
        found = self.state.objects.get((collection, name or ""))
        self._send(200, found) if found else self._send(404, _status(404, "NotFound"))

    def _target(self) -> tuple[str, str | None]:
        parts = urlsplit(self.path)
        self.state.requests.append(f"{self.command} {self.path}")
        segments = parts.path.strip("/").split("/")
        index = segments.index("namespaces") + 2
        rest = segments[index:]
        return rest[0], (rest[1] if len(rest) > 1 else None)

    def _selected_pods(self) -> list[dict[str, Any]]:
        query = parse_qs(urlsplit(self.path).query)
        wanted = dict(term.split("=", 1) for term in query["labelSelector"][0].split(","))
        return [
            p for p in self.state.pods.values() if wanted.items() <= p["metadata"]["labels"].items()
        ]

    def _send(self, code: int, body: dict[str, Any]) -> None:
        self.send_json(body, code)

    def _send_text(self, text: str) -> None:
        self.send_body(200, "text/plain", text.encode())


@pytest.fixture
def api_server() -> Iterator[tuple[str, ApiState]]:
    state = ApiState()
    handler = type("Handler", (_Handler,), {"state": state})
    with stand_in_server(handler) as port:
        yield f"http://127.0.0.1:{port}", state


def kubeconfig(tmp_path: Path, server: str) -> Path:
    """A kubeconfig whose context is named like the stack's kubeContext (no credentials)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "lab", "cluster": {"server": server}}],
        "users": [{"name": "stages", "user": {}}],
        "contexts": [{"name": "h200-cluster", "context": {"cluster": "lab", "user": "stages"}}],
        "current-context": "some-other-context",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def test_the_smoke_stage_runs_through_the_real_client(
    api_server: tuple[str, ApiState], tmp_path: Path
) -> None:
    server, state = api_server
    outputs = cluster_outputs(RoutingProfile.ROUND_ROBIN)  # kubeContext h200-cluster
    options = ClusterOptions(kubeconfig=kubeconfig(tmp_path, server), run_id="r1")

    answer = run_cluster_smoke(outputs, options, 60).answer

    assert answer == "a box moves"
    namespace = f"/namespaces/{outputs.namespace}/"
    creates = [r for r in state.requests if r.startswith("POST")]
    assert creates == [
        f"POST /api/v1{namespace}configmaps",
        f"POST /api/v1{namespace}services",
        f"POST /apis/batch/v1{namespace}jobs",
    ]
    assert any("labelSelector=cosmos3-nano-reasoner/run-id%3Dr1" in r for r in state.requests)
    assert any(r.endswith("/log") for r in state.requests)


def test_json_looking_log_lines_come_back_unchanged(
    api_server: tuple[str, ApiState], tmp_path: Path
) -> None:
    server, state = api_server
    state.log = 'noise {"key": "value"}\nSmoke test passed: {"answer": "a box"}\n'
    options = ClusterOptions(kubeconfig=kubeconfig(tmp_path, server), run_id="r1")

    answer = run_cluster_smoke(cluster_outputs(RoutingProfile.ROUND_ROBIN), options, 60).answer

    assert answer == '{"answer": "a box"}'


def test_a_pod_carries_its_ip_and_named_ports() -> None:
    pod = {
        "metadata": {"name": "w-0"},
        "spec": {
            "containers": [
                {"name": "main", "ports": [{"name": "system", "containerPort": 9090}]},
                {"name": "sidecar", "ports": [{"containerPort": 8080}, {"name": 7}]},
            ]
        },
        "status": {"phase": "Running", "podIP": "10.1.0.7"},
    }

    state = pod_state(pod)

    assert (state.ip, state.ports) == ("10.1.0.7", (("system", 9090),))
    assert state.port("system") == 9090 and state.port("http") is None
    assert pod_state({"status": {"phase": "Pending"}}).ip is None
