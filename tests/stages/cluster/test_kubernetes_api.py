"""The adapter to the official `kubernetes` client, over real HTTP against a fake API server.

No cluster can run here, so a small stand-in for the Kubernetes API (the few REST paths the stages
use, on loopback) answers the real client: this checks the calls the adapter makes (paths,
propagation policy, label selectors, raw log reads) and how it reports refusals, with a real
kubeconfig file and context. It is not a Kubernetes API server: what a real one does beyond these
answers (admission, scheduling, the Job controller) is not exercised.
"""

from __future__ import annotations

import http.server
import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from components.routing import RoutingProfile
from stages.cli import main
from stages.cluster.kubernetes_api import KubernetesApi
from stages.cluster.run import ClusterOptions, run_cluster_smoke, smoke_objects
from stages.errors import EXIT_CLUSTER_UNREACHABLE, ClusterUnreachable
from tests.stages.cluster.fakes import cluster_outputs

# A real HTTP server per test (its shutdown alone waits half a second): `make test` runs these.
pytestmark = pytest.mark.slow

COLLECTIONS = {"configmaps": "ConfigMap", "services": "Service", "jobs": "Job"}
PASSED = "frontend lists nvidia/cosmos3-nano-reasoner\nSmoke test passed: a box moves\n"


@dataclass
class ApiState:
    """What the stand-in API server holds and saw."""

    objects: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    log: str = PASSED
    forbidden: set[str] = field(default_factory=set)
    """Collections whose create answers 403 (RBAC)."""
    invalid: set[str] = field(default_factory=set)
    """Collections whose create answers 422, its message echoing the object sent."""


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


class _Handler(http.server.BaseHTTPRequestHandler):
    state: ApiState

    def do_POST(self) -> None:
        collection, _ = self._target()
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if collection in self.state.forbidden:
            return self._send(403, _status(403, "Forbidden"))
        if collection in self.state.invalid:
            return self._send(422, _status(422, "Invalid") | {"message": json.dumps(body)})
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

    def do_DELETE(self) -> None:
        collection, name = self._target()
        found = self.state.objects.pop((collection, name or ""), None)
        if found is None:
            return self._send(404, _status(404, "NotFound"))
        if collection == "jobs":  # foreground: the Job's pods go with it
            labels = found["spec"]["template"]["metadata"]["labels"]
            self.state.pods = {
                n: p for n, p in self.state.pods.items() if p["metadata"]["labels"] != labels
            }
        self._send(200, found)  # the object as deleted, as the API server answers

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
        self._write(code, "application/json", json.dumps(body).encode())

    def _send_text(self, text: str) -> None:
        self._write(200, "text/plain", text.encode())

    def _write(self, code: int, content_type: str, data: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def api_server() -> Iterator[tuple[str, ApiState]]:
    state = ApiState()
    handler = type("Handler", (_Handler,), {"state": state})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()


def kubeconfig(tmp_path: Path, server: str, context: str = "h200-cluster") -> Path:
    """A kubeconfig whose context is named like the stack's kubeContext (no credentials)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "lab", "cluster": {"server": server}}],
        "users": [{"name": "stages", "user": {}}],
        "contexts": [{"name": context, "context": {"cluster": "lab", "user": "stages"}}],
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

    answer = run_cluster_smoke(outputs, options, 60)

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


def test_the_client_sends_the_manifests_unchanged(
    api_server: tuple[str, ApiState], tmp_path: Path
) -> None:
    server, state = api_server
    outputs = cluster_outputs(RoutingProfile.SESSION_AFFINITY)
    options = ClusterOptions(kubeconfig=kubeconfig(tmp_path, server), run_id="r1")
    run_cluster_smoke(outputs, options, 60)

    for manifest in smoke_objects(outputs, options, 60):
        collection = {"ConfigMap": "configmaps", "Service": "services", "Job": "jobs"}[
            manifest["kind"]
        ]
        sent = dict(state.objects[(collection, manifest["metadata"]["name"])])
        sent["metadata"] = {k: v for k, v in sent["metadata"].items() if k != "uid"}
        sent.pop("status", None)
        assert sent == manifest


def test_a_rerun_deletes_the_previous_job_in_the_foreground(
    api_server: tuple[str, ApiState], tmp_path: Path
) -> None:
    server, state = api_server
    outputs = cluster_outputs(RoutingProfile.ROUND_ROBIN)
    config = kubeconfig(tmp_path, server)
    run_cluster_smoke(outputs, ClusterOptions(kubeconfig=config, run_id="r1"), 60)

    answer = run_cluster_smoke(outputs, ClusterOptions(kubeconfig=config, run_id="r2"), 60)

    deletes = [r for r in state.requests if r.startswith("DELETE")]
    assert [d.split("?")[0].rsplit("/", 2)[1] for d in deletes] == [
        "jobs",
        "services",
        "configmaps",
    ]
    assert all("propagationPolicy=Foreground" in d for d in deletes)
    assert answer == "a box moves"
    labels = state.objects[("jobs", "cosmos3-nano-reasoner-smoke")]["spec"]["template"]["metadata"][
        "labels"
    ]
    assert labels["cosmos3-nano-reasoner/run-id"] == "r2"


def test_json_looking_log_lines_come_back_unchanged(
    api_server: tuple[str, ApiState], tmp_path: Path
) -> None:
    server, state = api_server
    state.log = 'noise {"key": "value"}\nSmoke test passed: {"answer": "a box"}\n'
    options = ClusterOptions(kubeconfig=kubeconfig(tmp_path, server), run_id="r1")

    answer = run_cluster_smoke(cluster_outputs(RoutingProfile.ROUND_ROBIN), options, 60)

    assert answer == '{"answer": "a box"}'


def test_a_refusal_names_the_missing_permission(
    api_server: tuple[str, ApiState], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server, state = api_server
    state.forbidden = {"jobs"}
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(cluster_outputs(RoutingProfile.ROUND_ROBIN).to_json_dict()))

    status = main(
        ["smoke", "--outputs", str(outputs), "--kubeconfig", str(kubeconfig(tmp_path, server))]
    )

    assert status == EXIT_CLUSTER_UNREACHABLE == 6
    err = capsys.readouterr().err
    assert "create Job cosmos3-nano-reasoner-smoke" in err and "HTTP 403" in err and "RBAC" in err


def test_an_unreachable_api_server_exits_6(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from stages.local.run import free_port

    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(cluster_outputs(RoutingProfile.ROUND_ROBIN).to_json_dict()))
    config = kubeconfig(tmp_path, f"http://127.0.0.1:{free_port()}")

    status = main(["smoke", "--outputs", str(outputs), "--kubeconfig", str(config)])

    assert status == 6
    assert "cannot reach the Kubernetes API" in capsys.readouterr().err


def test_a_missing_context_exits_6_naming_it(tmp_path: Path) -> None:
    config = kubeconfig(tmp_path, "http://127.0.0.1:1", context="another-cluster")

    with pytest.raises(ClusterUnreachable, match="context 'h200-cluster'"):
        KubernetesApi.connect("ns", config, "h200-cluster")


def test_the_context_can_be_overridden(api_server: tuple[str, ApiState], tmp_path: Path) -> None:
    server, _ = api_server
    config = kubeconfig(tmp_path, server, context="ci")
    options = ClusterOptions(kubeconfig=config, context="ci", run_id="r1")

    assert run_cluster_smoke(cluster_outputs(RoutingProfile.ROUND_ROBIN), options, 60)


PIP_URL = "https://ci:" + "pw-0123456789@pypi.example.com/simple"  # assembled: not a real one


def test_a_pip_secret_is_created_first_through_the_real_client_and_replaced(
    api_server: tuple[str, ApiState], tmp_path: Path
) -> None:
    server, state = api_server
    outputs = cluster_outputs(RoutingProfile.ROUND_ROBIN)
    config = kubeconfig(tmp_path, server)
    run_cluster_smoke(
        outputs, ClusterOptions(kubeconfig=config, run_id="r1", pip_index_url=PIP_URL), 60
    )

    run_cluster_smoke(
        outputs, ClusterOptions(kubeconfig=config, run_id="r2", pip_index_url=PIP_URL), 60
    )

    namespace = f"/namespaces/{outputs.namespace}/"
    creates = [r for r in state.requests if r.startswith("POST")]
    assert creates[:2] == [f"POST /api/v1{namespace}secrets", f"POST /api/v1{namespace}configmaps"]
    deletes = [r.split("?")[0].rsplit("/", 2)[1] for r in state.requests if r.startswith("DELETE")]
    assert deletes == ["jobs", "services", "configmaps", "secrets"]
    secret = state.objects[("secrets", "cosmos3-nano-reasoner-smoke-pip")]
    assert secret["stringData"] == {"PIP_INDEX_URL": PIP_URL}


@pytest.mark.parametrize("refusal", ["forbidden", "invalid"])
def test_a_refused_secret_never_shows_its_value(
    api_server: tuple[str, ApiState],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    refusal: str,
) -> None:
    server, state = api_server
    setattr(state, refusal, {"secrets"})
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(cluster_outputs(RoutingProfile.ROUND_ROBIN).to_json_dict()))

    status = main(
        [
            "smoke",
            "--outputs",
            str(outputs),
            "--kubeconfig",
            str(kubeconfig(tmp_path, server)),
            "--pip-index-url",
            PIP_URL,
        ]
    )

    err = capsys.readouterr().err
    assert status == 6
    assert "create Secret cosmos3-nano-reasoner-smoke-pip" in err
    assert "pw-0123456789" not in err
    assert ("secrets, for a --pip-index-url with credentials" in err) is (refusal == "forbidden")


def test_a_refused_configmap_shows_the_api_servers_reason(
    api_server: tuple[str, ApiState], tmp_path: Path
) -> None:
    server, state = api_server
    state.invalid = {"configmaps"}
    options = ClusterOptions(kubeconfig=kubeconfig(tmp_path, server), run_id="r1")

    with pytest.raises(ClusterUnreachable, match="HTTP 422 .*Invalid"):
        run_cluster_smoke(cluster_outputs(RoutingProfile.ROUND_ROBIN), options, 60)
