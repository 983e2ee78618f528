"""The cluster stages' adapter (stages/cluster/kubernetes_api.py) against the real API server.

The local control plane (testenv/cluster: kube-apiserver with RBAC and admission, the controller
manager's Job controller and garbage collector, the scheduler, kwok's H200 nodes) answers the
official client: the smoke stage's objects come back as built (the server's defaults aside), a
re-run's foreground deletion really waits for the previous Job's pods, RBAC refuses a user without
the rights, validation refuses a manifest, and the stage turns each refusal into exit status 6.

What this cluster cannot show stays on the fake API server (tests/stages/cluster/
test_kubernetes_api.py): a pod's log, and so a whole run whose verdict comes from it (kwok runs no
containers: the API server answers a kwok pod's log read with HTTP 500).
"""

from __future__ import annotations

import base64
import copy
import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from common.ports import free_port
from components.contract import StackOutputs
from components.routing import RoutingProfile
from stages.cli import main
from stages.cluster.api import Manifest
from stages.cluster.job_runner import JobRunner, WaitLimits
from stages.cluster.kubernetes_api import KubernetesApi
from stages.cluster.run import ClusterOptions, connect, smoke_objects
from stages.errors import EXIT_CLUSTER_UNREACHABLE, ClusterUnreachable
from testenv import cluster as local
from testenv.cluster import objects as cluster_objects
from tests.real.support import delete_namespaces, paused_kwok, wait_until
from tests.stages.cluster.fakes import cluster_outputs

JOB = "cosmos3-nano-reasoner-smoke"
SECRET = "cosmos3-nano-reasoner-smoke-pip"
STACK_CONTEXT = "h200-cluster"
"""The shipped stacks' kubeContext (the outputs name it; the local cluster's is cosmos3-local)."""
PIP_URL = "https://ci:" + "pw-0123456789@pypi.example.com/simple"  # assembled: not a real one
PASSWORD = "pw-0123456789"
COLLECTIONS = {"Secret": "secret", "ConfigMap": "configmap", "Service": "service", "Job": "job"}
QUICK = WaitLimits(timeout_seconds=60, poll_seconds=0.2, delete_timeout_seconds=60)


def selector(run_id: str) -> str:
    return f"cosmos3-nano-reasoner/run-id={run_id}"


@pytest.fixture
def namespace(local_cluster: local.LocalCluster) -> Iterator[str]:
    name = f"stage-api-{uuid.uuid4().hex[:6]}"
    local_cluster.kubectl("create", "namespace", name)
    yield name
    delete_namespaces(local_cluster)


@pytest.fixture
def outputs(namespace: str) -> StackOutputs:
    return cluster_outputs(RoutingProfile.ROUND_ROBIN).model_copy(update={"namespace": namespace})


@pytest.fixture
def api(local_cluster: local.LocalCluster, namespace: str) -> KubernetesApi:
    return KubernetesApi.connect(namespace, local_cluster.kubeconfig, cluster_objects.CONTEXT)


def read(cluster: local.LocalCluster, kind: str, name: str, namespace: str) -> dict[str, Any]:
    found = cluster.kubectl("get", COLLECTIONS[kind], name, "-n", namespace, "-o", "json")
    return dict(json.loads(found))


def outputs_file(tmp_path: Path, outputs: StackOutputs) -> Path:
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(outputs.to_json_dict()))
    return path


def kubeconfig_for(
    cluster: local.LocalCluster,
    tmp_path: Path,
    contexts: dict[str, str],
    token: str | None = None,
) -> Path:
    """The local cluster's kubeconfig with its user (or a token) under other context names, each
    on a server (`contexts`: name -> server); the current context is none of them."""
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    (cluster_entry,) = config["clusters"]
    (user,) = config["users"]
    if token is not None:
        user = {"name": "token-user", "user": {"token": token}}
    config["users"] = [user]
    config["clusters"], config["contexts"] = [], []
    for name, server in contexts.items():
        config["clusters"].append(
            {"name": name, "cluster": {**cluster_entry["cluster"], "server": server}}
        )
        config["contexts"].append(
            {"name": name, "context": {"cluster": name, "user": user["name"]}}
        )
    config["current-context"] = "some-other-context"
    path = tmp_path / f"kubeconfig-{uuid.uuid4().hex[:6]}"
    path.write_text(yaml.safe_dump(config))
    return path


def service_account_kubeconfig(
    cluster: local.LocalCluster, tmp_path: Path, namespace: str, rules: list[dict[str, Any]]
) -> Path:
    """A ServiceAccount allowed `rules` (none: no rights at all) in `namespace`, as a kubeconfig
    whose context is named like the stack's kubeContext."""
    cluster.kubectl("create", "serviceaccount", "stage-runner", "-n", namespace)
    if rules:
        role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role"}
        binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding"}
        cluster.apply(
            [
                role
                | {"metadata": {"name": "stage-runner", "namespace": namespace}, "rules": rules},
                binding
                | {
                    "metadata": {"name": "stage-runner", "namespace": namespace},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "Role",
                        "name": "stage-runner",
                    },
                    "subjects": [
                        {"kind": "ServiceAccount", "name": "stage-runner", "namespace": namespace}
                    ],
                },
            ]
        )
    token = cluster.kubectl("create", "token", "stage-runner", "-n", namespace).strip()
    return kubeconfig_for(cluster, tmp_path, {STACK_CONTEXT: cluster.server}, token=token)


def rule(group: str, resources: list[str], verbs: list[str]) -> dict[str, Any]:
    return {"apiGroups": [group], "resources": resources, "verbs": verbs}


def fields_set_but_changed(sent: Any, stored: Any, path: str = "") -> list[str]:
    """Where `stored` does not hold what `sent` set: every key we set must come back with the same
    value (lists element by element); keys the server added (its defaults) are not compared."""
    if isinstance(sent, dict):
        if not isinstance(stored, dict):
            return [path or "/"]
        return [
            wrong
            for key, value in sent.items()
            for wrong in fields_set_but_changed(value, stored.get(key), f"{path}.{key}")
        ]
    if isinstance(sent, list):
        if not isinstance(stored, list) or len(sent) != len(stored):
            return [path]
        return [
            wrong
            for index, (one, other) in enumerate(zip(sent, stored, strict=True))
            for wrong in fields_set_but_changed(one, other, f"{path}[{index}]")
        ]
    return [] if sent == stored else [f"{path}: sent {sent!r}, stored {stored!r}"]


class Recorder:
    """The adapter, with every create and delete recorded in order and hooks around them."""

    def __init__(
        self,
        api: KubernetesApi,
        after_delete: Callable[[str, str], None] = lambda kind, name: None,
        before_create: Callable[[Manifest], None] = lambda manifest: None,
    ) -> None:
        self.api = api
        self.namespace = api.namespace
        self.calls: list[tuple[str, str, str]] = []
        self.after_delete = after_delete
        self.before_create = before_create

    def create(self, manifest: Manifest) -> None:
        self.calls.append(("create", manifest["kind"], manifest["metadata"]["name"]))
        self.before_create(manifest)
        self.api.create(manifest)

    def delete(self, kind: str, name: str) -> None:
        self.calls.append(("delete", kind, name))
        self.api.delete(kind, name)
        self.after_delete(kind, name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.api, name)

    def of(self, verb: str) -> list[str]:
        return [kind for done, kind, _ in self.calls if done == verb]


def replace(api: Any, manifests: list[Manifest]) -> list[str]:
    """The stage's replace step (JobRunner.replace) with a quick poll; returns what it said."""
    said: list[str] = []
    JobRunner(api, QUICK, said.append).replace(manifests)
    return said


def first_pod(api: KubernetesApi, run_id: str, phase: str = "Succeeded") -> str:
    wait_until(
        lambda: any(pod.phase == phase for pod in api.pods(selector(run_id))),
        f"the {run_id} Job's pod {phase}",
    )
    (pod,) = api.pods(selector(run_id))
    return pod.name


# --- creating the stage's objects ----------------------------------------------------------------


def test_the_stage_objects_are_created_as_built(
    local_cluster: local.LocalCluster, namespace: str, api: KubernetesApi
) -> None:
    profile = cluster_outputs(RoutingProfile.SESSION_AFFINITY)
    outputs = profile.model_copy(update={"namespace": namespace})
    built = smoke_objects(outputs, ClusterOptions(run_id="r1", pip_index_url=PIP_URL), 60)

    said = replace(api, built)

    assert said == [f"created {m['kind']} {m['metadata']['name']}" for m in built]
    assert [m["kind"] for m in built] == ["Secret", "ConfigMap", "Service", "Job"]
    for manifest in built:
        stored = read(local_cluster, manifest["kind"], manifest["metadata"]["name"], namespace)
        sent = copy.deepcopy(manifest)
        if manifest["kind"] == "Secret":  # the server keeps stringData as base64 data
            assert "stringData" not in stored
            sent["data"] = {
                key: base64.b64encode(value.encode()).decode()
                for key, value in sent.pop("stringData").items()
            }
        assert fields_set_but_changed(sent, stored) == [], manifest["kind"]
        assert stored["metadata"]["namespace"] == namespace
    job = read(local_cluster, "Job", JOB, namespace)
    assert job["spec"]["template"]["metadata"]["labels"]["cosmos3-nano-reasoner/run-id"] == "r1"


def test_exists_follows_each_kind_of_object(
    outputs: StackOutputs, api: KubernetesApi, namespace: str
) -> None:
    built = smoke_objects(outputs, ClusterOptions(run_id="r1", pip_index_url=PIP_URL), 60)
    names = [(m["kind"], m["metadata"]["name"]) for m in built]
    assert [api.exists(*name) for name in names] == [False] * 4

    replace(api, built)

    assert [api.exists(*name) for name in names] == [True] * 4
    api.delete("Secret", SECRET)  # foreground: the garbage collector removes it, a moment later
    wait_until(lambda: not api.exists("Secret", SECRET), "the deleted Secret gone")
    assert api.exists("Secret", SECRET.removesuffix("-pip") + "-other") is False
    api.delete("Secret", SECRET)  # absent: no error


# --- a re-run -------------------------------------------------------------------------------------


def test_a_rerun_deletes_the_previous_job_in_the_foreground(
    local_cluster: local.LocalCluster, outputs: StackOutputs, api: KubernetesApi, namespace: str
) -> None:
    replace(api, smoke_objects(outputs, ClusterOptions(run_id="r1"), 60))
    old_pod = first_pod(api, "r1")
    old_uid = read(local_cluster, "Job", JOB, namespace)["metadata"]["uid"]
    # The old pod is held by a finalizer of the test's: a foreground deletion must wait for it.
    hold = '{"metadata":{"finalizers":["cosmos3.test/hold"]}}'
    local_cluster.kubectl("patch", "pod", old_pod, "-n", namespace, "--type=merge", "-p", hold)
    seen: dict[str, Any] = {}

    def after_delete(kind: str, name: str) -> None:
        if kind != "Job":
            return
        job = json.loads(
            local_cluster.kubectl("get", "job", name, "-n", namespace, "-o", "json", check=False)
            or "{}"
        )
        pod = json.loads(
            local_cluster.kubectl("get", "pod", old_pod, "-n", namespace, "-o", "json")
        )
        seen["job while its pod stays"] = (job.get("metadata") or {}).get("finalizers")
        seen["pod deleting"] = "deletionTimestamp" in pod["metadata"]
        release = '{"metadata":{"finalizers":null}}'
        local_cluster.kubectl(
            "patch", "pod", old_pod, "-n", namespace, "--type=merge", "-p", release
        )

    def before_create(manifest: Manifest) -> None:
        if manifest["kind"] == "Job":
            seen["old job at the new job's create"] = api.read_job(JOB)
            seen["old pods at the new job's create"] = api.pods(selector("r1"))

    recorder = Recorder(api, after_delete, before_create)
    replace(recorder, smoke_objects(outputs, ClusterOptions(run_id="r2"), 60))

    assert recorder.calls[:3] == [
        ("delete", "Job", JOB),
        ("delete", "Service", f"{JOB}-media"),
        ("delete", "ConfigMap", JOB),
    ]
    assert recorder.of("create") == ["ConfigMap", "Service", "Job"]
    assert seen == {
        "job while its pod stays": ["foregroundDeletion"],
        "pod deleting": True,
        "old job at the new job's create": None,
        "old pods at the new job's create": [],
    }
    new_job = read(local_cluster, "Job", JOB, namespace)
    assert new_job["metadata"]["uid"] != old_uid
    assert new_job["spec"]["template"]["metadata"]["labels"]["cosmos3-nano-reasoner/run-id"] == "r2"
    assert first_pod(api, "r2") != old_pod


def test_a_pip_secret_is_created_first_and_replaced(
    local_cluster: local.LocalCluster, outputs: StackOutputs, api: KubernetesApi, namespace: str
) -> None:
    first = Recorder(api)
    replace(first, smoke_objects(outputs, ClusterOptions(run_id="r1", pip_index_url=PIP_URL), 60))
    old_uid = read(local_cluster, "Secret", SECRET, namespace)["metadata"]["uid"]

    again = Recorder(api)
    replace(again, smoke_objects(outputs, ClusterOptions(run_id="r2", pip_index_url=PIP_URL), 60))

    assert first.of("create")[:2] == ["Secret", "ConfigMap"]
    assert first.of("delete") == []
    assert again.of("delete") == ["Job", "Service", "ConfigMap", "Secret"]
    secret = read(local_cluster, "Secret", SECRET, namespace)
    assert secret["metadata"]["uid"] != old_uid
    assert base64.b64decode(secret["data"]["PIP_INDEX_URL"]).decode() == PIP_URL


# --- what the stage reads ------------------------------------------------------------------------


def test_pods_are_the_runs_pods_as_kwok_runs_them(
    outputs: StackOutputs, api: KubernetesApi
) -> None:
    replace(api, smoke_objects(outputs, ClusterOptions(run_id="r1"), 60))

    name = first_pod(api, "r1")

    (pod,) = api.pods(selector("r1"))
    assert name.startswith(f"{JOB}-") and len(name) == len(JOB) + 6
    assert (pod.phase, pod.exit_code, pod.terminated_reason) == ("Succeeded", 0, "Completed")
    assert pod.started and pod.unschedulable is None
    assert abs(pod.created - time.time()) < 300
    assert api.pods(selector("r2")) == []


def test_read_job_follows_the_job_controller(
    local_cluster: local.LocalCluster, outputs: StackOutputs, api: KubernetesApi, namespace: str
) -> None:
    assert api.read_job(JOB) is None

    replace(api, smoke_objects(outputs, ClusterOptions(run_id="r1"), 60))

    uid = read(local_cluster, "Job", JOB, namespace)["metadata"]["uid"]
    assert api.read_job(JOB) is not None
    wait_until(lambda: bool((api.read_job(JOB) or pytest.fail("gone")).complete), "Job Complete")
    state = api.read_job(JOB)
    assert state is not None
    assert (state.uid, state.active, state.succeeded, state.failed) == (uid, 0, 1, 0)
    assert state.failure is None
    assert {c.type: (c.status, c.reason) for c in state.conditions} == {
        "SuccessCriteriaMet": ("True", "CompletionsReached"),
        "Complete": ("True", "CompletionsReached"),
    }


def test_a_job_past_its_deadline_reads_as_failed_while_its_pod_is_still_there(
    local_cluster: local.LocalCluster, outputs: StackOutputs, api: KubernetesApi
) -> None:
    (job,) = [
        m for m in smoke_objects(outputs, ClusterOptions(run_id="r1"), 60) if m["kind"] == "Job"
    ]
    job["spec"]["activeDeadlineSeconds"] = 1

    with paused_kwok(local_cluster):  # the pod stays Pending, and then Terminating
        api.create(job)
        wait_until(
            lambda: any(
                c.type == "FailureTarget" for c in (api.read_job(JOB) or pytest.fail()).conditions
            ),
            "FailureTarget",
        )
        pending = api.read_job(JOB)
        # Not `Failed` yet (its pod is there), but its failure is decided: the stage sees it now.
        assert pending is not None and pending.condition("Failed") is None
        assert pending.failure is not None and pending.failure.type == "FailureTarget"
        assert [pod.phase for pod in api.pods(selector("r1"))] == ["Pending"]

    wait_until(
        lambda: (api.read_job(JOB) or pytest.fail()).condition("Failed") is not None, "Failed"
    )
    state = api.read_job(JOB)
    assert state is not None and state.failure is not None
    assert (state.failure.type, state.failure.reason, state.failure.message) == (
        "Failed",
        "DeadlineExceeded",
        "Job was active longer than specified deadline",
    )
    assert api.pods(selector("r1")) == []


def test_allocatable_gpus_are_the_kwok_h200_nodes(
    local_cluster: local.LocalCluster, api: KubernetesApi
) -> None:
    listed = local_cluster.kubectl(
        "get", "nodes", "-o", r"jsonpath={.items[*].status.allocatable.nvidia\.com/gpu}"
    )

    assert api.allocatable_gpus() == 16 == sum(int(n) for n in listed.split())
    assert len(local.NODES) * cluster_objects.NODE_GPUS == 16


# --- the cluster cannot be used ------------------------------------------------------------------


def test_an_unreachable_api_server_exits_6(
    local_cluster: local.LocalCluster,
    outputs: StackOutputs,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = free_port()  # nothing listens there: a stopped API server
    config = kubeconfig_for(local_cluster, tmp_path, {STACK_CONTEXT: f"https://127.0.0.1:{port}"})

    status = main(
        ["smoke", "--outputs", str(outputs_file(tmp_path, outputs)), "--kubeconfig", str(config)]
    )

    assert status == EXIT_CLUSTER_UNREACHABLE == 6
    err = capsys.readouterr().err
    assert f"cannot reach the Kubernetes API to read Job {JOB}" in err
    assert f"port={port}" in err


def test_a_missing_context_exits_6_naming_it(
    local_cluster: local.LocalCluster,
    outputs: StackOutputs,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = main(
        [
            "smoke",
            "--outputs",
            str(outputs_file(tmp_path, outputs)),
            "--kubeconfig",
            str(local_cluster.kubeconfig),  # its one context is cosmos3-local
        ]
    )

    assert status == 6
    err = capsys.readouterr().err
    assert f"cannot use context '{STACK_CONTEXT}' of {local_cluster.kubeconfig}" in err
    assert "pass --kubeconfig/--context" in err
    with pytest.raises(ClusterUnreachable, match="context 'h200-cluster'"):
        KubernetesApi.connect(outputs.namespace, local_cluster.kubeconfig, STACK_CONTEXT)


def test_the_context_can_be_overridden(
    local_cluster: local.LocalCluster, outputs: StackOutputs, tmp_path: Path, namespace: str
) -> None:
    stopped = f"https://127.0.0.1:{free_port()}"
    contexts = {STACK_CONTEXT: stopped, "ci": local_cluster.server}
    config = kubeconfig_for(local_cluster, tmp_path, contexts)

    overridden = connect(outputs, ClusterOptions(kubeconfig=config, context="ci"))
    stack_context = connect(outputs, ClusterOptions(kubeconfig=config))
    assert isinstance(overridden, KubernetesApi) and isinstance(stack_context, KubernetesApi)
    replace(overridden, smoke_objects(outputs, ClusterOptions(run_id="r1"), 60))

    assert overridden.allocatable_gpus() == 16
    assert read(local_cluster, "Job", JOB, namespace)["metadata"]["namespace"] == namespace
    with pytest.raises(ClusterUnreachable, match="cannot reach the Kubernetes API to list nodes"):
        stack_context.allocatable_gpus()


READ_EVERYTHING = rule("", ["configmaps", "services", "secrets"], ["get"])
READ_JOBS = rule("batch", ["jobs"], ["get"])


@pytest.mark.parametrize(
    ("rules", "refused"),
    [
        ([], f"read Job {JOB}"),
        (
            [READ_EVERYTHING, READ_JOBS, rule("", ["configmaps", "services"], ["create"])],
            f"create Job {JOB}",
        ),
    ],
    ids=["no-rights", "no-create-jobs"],
)
def test_a_refusal_names_the_missing_permission(
    local_cluster: local.LocalCluster,
    outputs: StackOutputs,
    namespace: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    rules: list[dict[str, Any]],
    refused: str,
) -> None:
    config = service_account_kubeconfig(local_cluster, tmp_path, namespace, rules)

    status = main(
        ["smoke", "--outputs", str(outputs_file(tmp_path, outputs)), "--kubeconfig", str(config)]
    )

    assert status == EXIT_CLUSTER_UNREACHABLE
    err = capsys.readouterr().err
    assert f"{refused} in {namespace}: HTTP 403 Forbidden" in err
    assert f"may not do this in namespace {namespace} (RBAC)" in err
    assert "create/delete/get on jobs, services and configmaps" in err
    verb = {"read": "get", "create": "create"}[refused.split()[0]]
    assert f'cannot {verb} resource "jobs" in API group "batch"' in err  # the exact right
    assert not local_cluster.kubectl("get", "jobs", "-n", namespace, "-o", "name").strip()


def test_a_forbidden_secret_never_shows_its_value(
    local_cluster: local.LocalCluster,
    outputs: StackOutputs,
    namespace: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rules = [
        READ_EVERYTHING,
        READ_JOBS,
        rule("", ["configmaps", "services"], ["create"]),
        rule("batch", ["jobs"], ["create"]),
    ]
    config = service_account_kubeconfig(local_cluster, tmp_path, namespace, rules)
    arguments = ["--outputs", str(outputs_file(tmp_path, outputs)), "--kubeconfig", str(config)]

    status = main(["smoke", *arguments, "--pip-index-url", PIP_URL])

    err = capsys.readouterr().err
    assert status == 6
    assert f"create Secret {SECRET} in {namespace}: HTTP 403 Forbidden" in err
    assert "secrets, for a --pip-index-url with credentials" in err
    assert PASSWORD not in err


def test_an_invalid_secret_never_shows_its_value(outputs: StackOutputs, api: KubernetesApi) -> None:
    from kubernetes.client.exceptions import ApiException

    (secret,) = [
        m
        for m in smoke_objects(outputs, ClusterOptions(run_id="r1", pip_index_url=PIP_URL), 60)
        if m["kind"] == "Secret"
    ]
    secret["stringData"][PIP_URL] = "a key no Secret may have, echoed by the API server"
    with pytest.raises(ApiException) as raw:  # what the API server answers, unfiltered
        api.core.create_namespaced_secret(api.namespace, secret)
    assert raw.value.status == 422 and PASSWORD in str(raw.value.body)

    with pytest.raises(ClusterUnreachable) as refused:
        api.create(secret)

    message = str(refused.value)
    assert message.startswith(f"create Secret {SECRET} in {api.namespace}: HTTP 422")
    assert "the API server rejected the manifest" in message
    assert PASSWORD not in message and "is invalid" not in message


def test_a_refused_configmap_shows_the_api_servers_reason(
    outputs: StackOutputs, api: KubernetesApi
) -> None:
    built = smoke_objects(outputs, ClusterOptions(run_id="r1"), 60)
    built[0]["data"]["padding"] = "x" * (1024 * 1024)  # past a ConfigMap's 1 MiB

    with pytest.raises(ClusterUnreachable) as refused:
        replace(api, built)

    message = str(refused.value)
    assert message.startswith(f"create ConfigMap {JOB} in {api.namespace}: HTTP 422")
    assert "the API server rejected the manifest" in message
    assert f'ConfigMap "{JOB}" is invalid' in message  # the API server's own words
    assert "Too long" in message
    assert not api.exists("ConfigMap", JOB) and not api.exists("Job", JOB)
