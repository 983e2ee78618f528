"""Placement on the real engine (issue 32): the API server agrees with the config check on every
placement key, and a stack with every placement field set comes up through `pulumi up`.

- The check and the API server agree: what the check takes, the API server takes (the graph and
  the download Job, dry run); each bad affinity and class name the check refuses, the API server
  refuses too in the Job's pod template, which it validates as a pod's; what the check refuses
  beyond the API server (tests/components/support.py says why) it is shown to take.
- `pulumi up`: the PriorityClass and RuntimeClass the pods name are made first (the Priority and
  RuntimeClass admission plugins refuse a pod naming a missing one: the download Job's pod would
  never exist). The Job's placement is set where kwok's nodes take it (a required node affinity on
  their GPU label, the default scheduler), so its pod runs and completes; the graph's (a gang
  scheduler that does not run here) is harmless, since kwok makes no pods for a graph.
- Bad placement through the CLI is refused at preview, naming each key, before anything exists.
"""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from components.settings import PROJECT
from testenv import cluster as local
from testenv.cluster import objects
from testenv.local_stacks import LAYER_SITE, SITE, LocalStacks
from tests.components.config_strategies import KEYS, objects_if_accepted
from tests.components.support import (
    BAD_AFFINITIES,
    BAD_NAMES,
    GOOD_AFFINITIES,
    PREFIXES,
    STRICTER_AFFINITIES,
    STRICTER_NAMES,
)
from tests.guardrails.support import Manifest, one_of_kind, rendered
from tests.real.support import LAYER_SECRETS, await_namespaces_gone, delete_namespaces
from tools.validate import dry_run_violations
from tools.violations import Violation

NAMESPACE = "cosmos3-nano-reasoner"
JOB = "cosmos3-nano-reasoner-model-download"
GRAPH = "cosmos3-nano-reasoner-agg-h200-round-robin"
PRIORITY_CLASS = "cosmos3-placement-test"
PRIORITY = 1000
RUNTIME_CLASS = "cosmos3-placement-runtime"

Judge = Any
"""`objects -> violations`, by the session's API server (dry run)."""


@pytest.fixture(scope="module")
def judge(local_cluster: local.LocalCluster) -> Iterator[Judge]:
    await_namespaces_gone(local_cluster)
    yield lambda manifests: dry_run_violations(manifests, local_cluster.kubeconfig, True)
    delete_namespaces(local_cluster)


def _job_with(name: str, **pod_fields: Any) -> Manifest:
    """The dev stack's download Job, renamed, its pod template given `pod_fields` as they are:
    what the API server says of a value the config check would never let through."""
    job = copy.deepcopy(one_of_kind(rendered("dev"), "Job"))
    job["metadata"]["name"] = name
    job["spec"]["template"]["spec"].update(pod_fields)
    return job


def _by_object(violations: list[Violation]) -> dict[str, list[Violation]]:
    found: dict[str, list[Violation]] = {}
    for violation in violations:
        found.setdefault(violation.object, []).append(violation)
    return found


# --- the config check and the API server agree ------------------------------------------------------


def test_every_good_affinity_on_every_component_is_accepted_by_both(judge: Judge) -> None:
    for affinity in GOOD_AFFINITIES:
        manifests = objects_if_accepted({f"{prefix}Affinity": affinity for prefix in PREFIXES})
        assert manifests is not None, affinity
        assert judge(manifests) == [], affinity


def test_every_field_set_at_once_is_accepted_by_both(judge: Judge) -> None:
    config: dict[str, Any] = {
        "workerPriorityClassName": "a" * 253,
        "workerRuntimeClassName": "nvidia.runtime-1",
        "workerSchedulerName": "Kai_Scheduler.v2",
        "frontendNodeSelector": ["node.kubernetes.io/instance-type=m7i.4xlarge"],
        "frontendTolerations": [":NoExecute", "dedicated=web:NoSchedule"],
        "frontendPriorityClassName": "web",
        "frontendRuntimeClassName": "runc",
        "frontendSchedulerName": "default-scheduler",
        "modelDownloadNodeSelector": ["pool=download"],
        "modelDownloadTolerations": ["pool:NoSchedule"],
        "modelDownloadPriorityClassName": "batch.low",
        "modelDownloadRuntimeClassName": "nvidia",
        "modelDownloadSchedulerName": "default-scheduler",
    }
    manifests = objects_if_accepted(config)
    assert manifests is not None
    assert judge(manifests) == []


def test_what_the_check_refuses_the_api_server_refuses_in_a_pod_template(judge: Judge) -> None:
    jobs: dict[str, Manifest] = {}
    for index, (affinity, where, _) in enumerate(BAD_AFFINITIES):
        for prefix in PREFIXES:
            assert objects_if_accepted({f"{prefix}Affinity": affinity}) is None, (prefix, where)
        jobs[f"Job/bad-affinity-{index}"] = _job_with(f"bad-affinity-{index}", affinity=affinity)
    for index, (suffix, value, _) in enumerate(BAD_NAMES):
        if not suffix.endswith("ClassName"):
            continue  # node selector and toleration syntax: test_server_validation.py's
        for prefix in PREFIXES:
            assert objects_if_accepted({f"{prefix}{suffix}": value}) is None, (prefix, suffix)
        field = suffix[0].lower() + suffix[1:]
        jobs[f"Job/bad-name-{index}"] = _job_with(f"bad-name-{index}", **{field: value})

    refused = _by_object(judge(list(jobs.values())))

    assert set(refused) == set(jobs), f"accepted by the API server: {set(jobs) - set(refused)}"
    for name, violations in refused.items():
        said = " ".join(f"{v.path} {v.message}" for v in violations)
        field = "affinity" if "affinity" in name else "ClassName"
        assert field in said, f"{name}: {said}"


def test_what_the_check_refuses_beyond_the_api_server_the_job_would_take(judge: Judge) -> None:
    """The check is stricter on purpose here (tests/components/support.py says why): the
    API server takes each in a Job's pod template, the DGD's schema refuses a missing
    `preference`."""
    jobs = []
    for index, (affinity, where, _) in enumerate(STRICTER_AFFINITIES):
        assert objects_if_accepted({"modelDownloadAffinity": affinity}) is None, where
        jobs.append(_job_with(f"stricter-affinity-{index}", affinity=affinity))
    for index, (suffix, value, _) in enumerate(STRICTER_NAMES):
        assert objects_if_accepted({f"worker{suffix}": value}) is None, value
        jobs.append(_job_with(f"stricter-name-{index}", schedulerName=value))
    assert judge(jobs) == []

    graph = copy.deepcopy(one_of_kind(rendered("dev"), "DynamoGraphDeployment"))
    no_preference = {
        "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1}]}
    }
    graph["spec"]["components"][1]["podTemplate"]["spec"]["affinity"] = no_preference
    said = " ".join(f"{v.path} {v.message}" for v in judge([graph]))
    assert "preference" in said and "Required" in said, said


PLACEMENT_KEYS = sorted(
    key
    for key in KEYS
    if key.startswith(("frontend", "modelDownload", "worker"))
    and key.endswith(("Affinity", "ClassName", "SchedulerName", "NodeSelector", "Tolerations"))
)


@pytest.mark.parametrize("key", PLACEMENT_KEYS)
@settings(max_examples=4, deadline=None)
@given(data=st.data())
def test_each_placement_key_alone_lands_as_the_api_server_accepts(
    key: str, data: st.DataObject, judge: Judge
) -> None:
    value, _ = data.draw(KEYS[key])
    manifests = objects_if_accepted({key: value})
    if manifests is not None:
        assert judge(manifests) == []


# --- through `pulumi up` ------------------------------------------------------------------------------


@pytest.fixture
def classes(local_cluster: local.LocalCluster) -> Iterator[None]:
    """The PriorityClass and RuntimeClass the test's pods name (cluster-wide), for one test."""
    local_cluster.create(  # never a cluster's own class taken over
        [
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": PRIORITY_CLASS},
                "value": PRIORITY,
            },
            {
                "apiVersion": "node.k8s.io/v1",
                "kind": "RuntimeClass",
                "metadata": {"name": RUNTIME_CLASS},
                "handler": "runc",
            },
        ]
    )
    yield
    local_cluster.kubectl("delete", "priorityclass", PRIORITY_CLASS, "--ignore-not-found")
    local_cluster.kubectl("delete", "runtimeclass", RUNTIME_CLASS, "--ignore-not-found")


def text(result: subprocess.CompletedProcess[str]) -> str:
    """What a command printed, its lines joined (the CLI wraps long ones)."""
    return " ".join((result.stdout + result.stderr).split())


def set_path(stacks: LocalStacks, stack: str, path: str, value: str, *flags: str) -> None:
    stacks.run("config", "set", "--path", path, value, *flags, "--stack", stack)


def kube_json(cluster: local.LocalCluster, *args: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(cluster.kubectl("get", *args, "-o", "json"))
    return found


GPU_TERM = "modelDownloadAffinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
WORKER_TERM = "workerAffinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"
FRONTEND_AFFINITY = {
    "nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 10,
                "preference": {
                    "matchExpressions": [
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
                    ]
                },
            }
        ]
    }
}


def _layer_with_download_placement(stacks: LocalStacks) -> None:
    layer = LAYER_SITE | {
        "modelDownloadPriorityClassName": PRIORITY_CLASS,
        "modelDownloadRuntimeClassName": RUNTIME_CLASS,
        "modelDownloadSchedulerName": "default-scheduler",
    }
    stacks.configure("shared", layer, LAYER_SECRETS)
    # The Job takes the workers' tolerations (no modelDownloadTolerations set).
    set_path(stacks, "shared", "workerTolerations[0]", "nvidia.com/gpu:NoSchedule")
    set_path(stacks, "shared", f"{GPU_TERM}.matchExpressions[0].key", "nvidia.com/gpu.product")
    set_path(stacks, "shared", f"{GPU_TERM}.matchExpressions[0].operator", "In")
    set_path(stacks, "shared", f"{GPU_TERM}.matchExpressions[0].values[0]", objects.GPU_PRODUCT)
    set_path(stacks, "shared", f"{GPU_TERM}.matchExpressions[1].key", "nvidia.com/gpu.present")
    set_path(stacks, "shared", f"{GPU_TERM}.matchExpressions[1].operator", "In")
    # `--path` would store true as a boolean: a label value is text.
    set_path(
        stacks, "shared", f"{GPU_TERM}.matchExpressions[1].values[0]", "true", "--type", "string"
    )


def _profile_with_placement(stacks: LocalStacks) -> None:
    stacks.configure(
        "round-robin",
        SITE
        | {
            "workerPriorityClassName": PRIORITY_CLASS,
            "workerRuntimeClassName": RUNTIME_CLASS,
            "workerSchedulerName": "kai-scheduler",
            "frontendPriorityClassName": PRIORITY_CLASS,
            "frontendSchedulerName": "default-scheduler",
        },
    )
    set_path(stacks, "round-robin", f"{WORKER_TERM}.weight", "100")  # stored as a number
    set_path(
        stacks,
        "round-robin",
        f"{WORKER_TERM}.podAffinityTerm.topologyKey",
        "kubernetes.io/hostname",
    )
    set_path(
        stacks,
        "round-robin",
        f"{WORKER_TERM}.podAffinityTerm.labelSelector.matchLabels.app",
        "cosmos3-worker",
    )
    set_path(stacks, "round-robin", "frontendNodeSelector[0]", "kubernetes.io/os=linux")
    set_path(stacks, "round-robin", "frontendTolerations[0]", "node-role/web:NoSchedule")
    # An affinity written as YAML in the stack file, as a user would.
    stack_file = stacks.project / "Pulumi.round-robin.yaml"
    written = yaml.safe_load(stack_file.read_text())
    written["config"][f"{PROJECT}:frontendAffinity"] = FRONTEND_AFFINITY
    stack_file.write_text(yaml.safe_dump(written))


def test_a_stack_with_placement_on_every_component_comes_up_and_stays_clean(
    stacks: LocalStacks, local_cluster: local.LocalCluster, classes: None
) -> None:
    _layer_with_download_placement(stacks)
    stacks.run("up", "--yes", "--stack", "shared")

    job = kube_json(local_cluster, "job", JOB, "-n", NAMESPACE)
    pod_spec = job["spec"]["template"]["spec"]
    assert pod_spec["priorityClassName"] == PRIORITY_CLASS
    assert pod_spec["runtimeClassName"] == RUNTIME_CLASS
    assert pod_spec["schedulerName"] == "default-scheduler"
    assert pod_spec["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    (term,) = pod_spec["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert term["matchExpressions"][1] == {
        "key": "nvidia.com/gpu.present",
        "operator": "In",
        "values": ["true"],
    }
    # Admitted (the Priority plugin resolved the class), scheduled on a GPU node, completed.
    assert job["status"].get("succeeded") == 1, job["status"]
    pods = kube_json(local_cluster, "pods", "-n", NAMESPACE, "-l", f"job-name={JOB}")["items"]
    assert pods and all(pod["spec"]["priority"] == PRIORITY for pod in pods)
    assert stacks.outputs("shared")["modelCacheReady"] is True

    _profile_with_placement(stacks)
    stacks.run("up", "--yes", "--stack", "round-robin")

    graph = kube_json(local_cluster, "dgd", GRAPH, "-n", NAMESPACE)
    frontend, worker = (c["podTemplate"]["spec"] for c in graph["spec"]["components"])
    assert worker["priorityClassName"] == PRIORITY_CLASS
    assert worker["runtimeClassName"] == RUNTIME_CLASS
    assert worker["schedulerName"] == "kai-scheduler"
    (preferred,) = worker["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert preferred["weight"] == 100
    assert preferred["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert frontend["affinity"] == FRONTEND_AFFINITY
    assert frontend["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert frontend["tolerations"] == [
        {"key": "node-role/web", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert frontend["priorityClassName"] == PRIORITY_CLASS
    assert "runtimeClassName" not in frontend, "the frontend takes nothing from the workers"

    for stack in ("shared", "round-robin"):
        stacks.run("preview", "--expect-no-changes", "--stack", stack)


def test_bad_placement_is_refused_at_preview_naming_each_key_before_anything_exists(
    stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    stacks.configure(
        "shared", LAYER_SITE | {"modelDownloadPriorityClassName": "Batch_Low"}, LAYER_SECRETS
    )
    stacks.run("config", "set", "modelDownloadAffinity", '{"podAffinity": {}}', "--stack", "shared")

    as_text = stacks.run("preview", "--stack", "shared", check=False)

    assert as_text.returncode != 0
    assert "configuration key 'modelDownloadAffinity' must be of type 'object'" in text(as_text)

    stacks.run("config", "rm", "modelDownloadAffinity", "--stack", "shared")
    term = "modelDownloadAffinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
    set_path(stacks, "shared", f"{term}.labelSelector.matchLabels.app", "cosmos3")

    refused = stacks.run("preview", "--stack", "shared", check=False)

    assert refused.returncode != 0
    said = text(refused)
    assert (
        f"{PROJECT}:modelDownloadAffinity: podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
        ".topologyKey: is required" in said
    ), said
    assert (
        f"{PROJECT}:modelDownloadPriorityClassName: must be a lowercase RFC 1123 subdomain" in said
    )
    assert "Traceback" not in said
    namespaces = local_cluster.kubectl("get", "namespace", NAMESPACE, "-o", "name", check=False)
    assert namespaces.strip() == ""
