"""The check of record (`tools.validate`): every rendered object as a server-side dry run on the
local control plane, the real kube-apiserver with the real DGD CRD and its CEL rules.

Each bad object the retired hand-written checks refused (a CRD rule broken, an unknown field, a
duplicated list-map key, a wrong type, too many components) is sent here, and the API server
itself refuses it at the same field; each valid variant they accepted, it accepts. A CEL rule a
newer CRD adds fails `test_every_rule_on_create_has_a_breaking_mutation` until one is written.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import event, given, settings
from hypothesis import strategies as st

from components.routing import RoutingProfile
from stages.cluster.manifests import JobSettings, perf_manifests, smoke_manifests
from stages.core.workload import RECIPE_WORKLOAD
from testenv import cluster as local
from testenv.cluster.objects import CONTEXT
from testenv.crd import TESTED_SCHEMA_SHA256, crd_path
from testenv.engine.pins import KUBERNETES_VERSION
from tests.components.config_strategies import (
    KEYS,
    objects_if_accepted,
    stack_configs,
)
from tests.components.support import LEGAL_EDGES
from tests.guardrails.support import Manifest, one_of_kind, rendered
from tests.real.support import await_namespaces_gone, delete_namespaces
from tests.stages.cluster.fakes import cluster_outputs
from tests.stages.cluster.support import MIRROR as PIP_MIRROR
from tests.stages.cluster.support import PLAN
from tools import validate
from tools.validate import dry_run_violations
from tools.violations import API_SERVER, Violation, admission_violations

# `make real` shares tests out one by one (--dist loadgroup); this module's tests stay together:
# its namespaces stay until its last test, on one worker.
pytestmark = pytest.mark.xdist_group("test_server_validation")

DGD = "DynamoGraphDeployment"
WORKER = "spec.components[1]"
WORKER_MAIN = f"{WORKER}.podTemplate.spec.containers[0]"
KV_POLICY = "spec.experimental.kvTransferPolicy"
GMS = f"{WORKER}.experimental.gpuMemoryService"
JOB = "Job/cosmos3-nano-reasoner-model-download"

Mutation = Callable[[Manifest], None]
Judge = Callable[[list[Manifest]], list[Violation]]


@pytest.fixture(scope="module")
def judge(local_cluster: local.LocalCluster) -> Iterator[Judge]:
    # The namespaces made for the objects stay until the module ends: deleting one takes the
    # namespace controller seconds, which a next dry run in it would wait for.
    await_namespaces_gone(local_cluster)  # made before the autouse fixture's wait
    yield lambda objects: dry_run_violations(objects, local_cluster.kubeconfig, True)
    delete_namespaces(local_cluster)


def graph() -> Manifest:
    return one_of_kind(rendered("dev"), DGD)


def worker(manifest: Manifest) -> dict[str, Any]:
    component: dict[str, Any] = manifest["spec"]["components"][1]
    return component


def refused(violations: list[Violation]) -> set[tuple[str, str]]:
    assert {v.check for v in violations} <= {API_SERVER}
    return {(v.path, v.message) for v in violations}


def found(violations: list[Violation], path: str, words: str) -> Violation:
    matches = [v for v in violations if v.path == path and words in v.message]
    assert matches, f"nothing at {path} saying {words!r}; got:\n" + "\n".join(map(str, violations))
    return matches[0]


# --- Every shipped stack is accepted -------------------------------------------------------------


@pytest.mark.parametrize("stack", ["dev", "shared", "round-robin", "session-affinity"])
def test_every_object_of_every_stack_is_accepted(stack: str, judge: Judge) -> None:
    assert judge(rendered(stack)) == []


# --- One breaking mutation per CEL rule of the CRD, refused by the API server ----------------------


def _at(manifest: Manifest, path: list[Any]) -> Any:
    for part in path:
        manifest = manifest[part]
    return manifest


def _set(path: list[Any], value: object) -> Mutation:
    def mutate(manifest: Manifest) -> None:
        _at(manifest, path[:-1])[path[-1]] = copy.deepcopy(value)

    return mutate


def _add_components(*components: dict[str, Any]) -> Mutation:
    def mutate(manifest: Manifest) -> None:
        for fields in components:
            main = {"name": "main", "image": "nvcr.io/x:1"}
            component = {"podTemplate": {"spec": {"containers": [main]}}} | fields
            manifest["spec"]["components"].append(copy.deepcopy(component))

    return mutate


def _kv_policy(**fields: Any) -> Mutation:
    return _set(["spec", "experimental"], {"kvTransferPolicy": {"domain": "zone"} | fields})


def _worker_experimental(**fields: Any) -> Mutation:
    return _set(["spec", "components", 1, "experimental"], fields)


EPP_CONFIG = {"configMapRef": {"name": "epp", "key": "config.yaml"}}
CLIENT_POD = {"name": "client", "podTemplate": {"spec": {"containers": [{"name": "c"}]}}}
LONG_PREFIX = ".".join(["a" * 63] * 4)  # a valid DNS subdomain of 255 characters
WORKER_POD = ["spec", "components", 1, "podTemplate"]
BACKEND = "nvidia.com/vllm-distributed-executor-backend"
RESTART_MESSAGE = (
    "spec.restart must be unset on create; set spec.restart.id after creation to request a restart"
)

BREAKING: dict[str, tuple[Mutation, set[tuple[str, str]]]] = {
    "restart on create": (_set(["spec", "restart"], {"id": "r1"}), {("spec", RESTART_MESSAGE)}),
    "two epp components": (
        _add_components(*({"name": n, "type": "epp", "eppConfig": EPP_CONFIG} for n in "ab")),
        {("spec.components", "at most one component may have type epp")},
    ),
    "names equal but for case": (
        _add_components({"name": "WORKER"}),
        {("spec.components", "component names must be unique case-insensitively")},
    ),
    "eppConfig on a worker": (
        _set(["spec", "components", 1, "eppConfig"], EPP_CONFIG),
        {(WORKER, "eppConfig may only be set when type is epp")},
    ),
    "eppConfig with neither source": (
        _add_components({"name": "epp", "type": "epp", "eppConfig": {}}),
        {
            (
                "spec.components[2].eppConfig",
                "exactly one of configMapRef or config must be specified",
            )
        },
    ),
    "minAvailable above replicas": (
        _set(["spec", "components", 1, "minAvailable"], 2),
        {(WORKER, "minAvailable must be less than or equal to replicas unless replicas is 0")},
    ),
    "checkpoint job and checkpointRef": (
        _worker_experimental(checkpoint={"enabled": True, "checkpointRef": "ck", "job": {}}),
        {
            (
                f"{WORKER}.experimental.checkpoint",
                "checkpoint.job cannot be set when checkpointRef is specified",
            )
        },
    ),
    "GMS client containers inter-pod": (
        _worker_experimental(gpuMemoryService={"mode": "InterPod", "extraClientContainers": ["c"]}),
        {(GMS, "extraClientContainers is only supported with mode=IntraPod")},
    ),
    "GMS client pods intra-pod (the default mode)": (
        _worker_experimental(gpuMemoryService={"extraClientPods": [CLIENT_POD]}),
        {
            (GMS, "extraClientPods is only supported with mode=InterPod"),
            (GMS, "extraClientPods is reserved for inter-pod GMS and is not implemented yet"),
        },
    ),
    "backend annotation neither mp nor ray": (
        _set([*WORKER_POD, "metadata"], {"annotations": {BACKEND: "uni"}}),
        {
            (
                f"{WORKER}.podTemplate.metadata.annotations",
                "podTemplate backend annotation must be mp or ray, case-insensitively",
            )
        },
    ),
    "sidecar without an image": (
        lambda m: _at(m, [*WORKER_POD, "spec", "containers"]).append({"name": "sidecar"}),
        {
            (
                f"{WORKER}.podTemplate.spec.containers[1]",
                "sidecar containers must specify a non-empty image",
            )
        },
    ),
    "init container with an empty image": (
        _set([*WORKER_POD, "spec", "initContainers"], [{"name": "init", "image": ""}]),
        {
            (
                f"{WORKER}.podTemplate.spec.initContainers[0]",
                "init containers must specify a non-empty image",
            )
        },
    ),
    "both labelKey and clusterTopologyName": (
        _kv_policy(labelKey="topology.kubernetes.io/zone", clusterTopologyName="grove"),
        {(KV_POLICY, "exactly one of labelKey or clusterTopologyName is required")},
    ),
    "preferred without a weight": (
        _kv_policy(clusterTopologyName="grove", enforcement="preferred"),
        {(KV_POLICY, "preferredWeight is required when enforcement is preferred")},
    ),
    "a weight, enforcement defaulted to required": (
        _kv_policy(clusterTopologyName="grove", preferredWeight=0.5),
        {(KV_POLICY, "preferredWeight may only be set when enforcement is preferred")},
    ),
    "labelKey prefix over 253 characters": (
        _kv_policy(labelKey=f"{LONG_PREFIX}/zone"),
        {(f"{KV_POLICY}.labelKey", "labelKey prefix must be 253 characters or less")},
    ),
}

PASSING: dict[str, Mutation] = {
    "backend annotation Ray": _set([*WORKER_POD, "metadata"], {"annotations": {BACKEND: "Ray"}}),
    "minAvailable with replicas 0": lambda m: _at(m, ["spec", "components", 1]).update(
        replicas=0, minAvailable=2
    ),
    "an epp component with its config": _add_components(
        {"name": "epp", "type": "epp", "eppConfig": EPP_CONFIG}
    ),
    "GMS client containers, mode defaulted to IntraPod": _worker_experimental(
        gpuMemoryService={"extraClientContainers": ["c"]}
    ),
    "preferred with a weight": _kv_policy(
        labelKey="topology.kubernetes.io/zone", enforcement="preferred", preferredWeight=0.5
    ),
    "checkpointRef alone": _worker_experimental(checkpoint={"enabled": True, "checkpointRef": "c"}),
}


def rule_message(message: str) -> str:
    """A CEL rule's own message out of the API server's `Invalid value: ["<value>": ]<message>`."""
    rest = message.removeprefix("Invalid value: ")
    if rest.startswith('"'):
        _, end = json.JSONDecoder().raw_decode(rest)
        rest = rest[end:].removeprefix(": ")
    return rest


def rule_messages(violations: list[Violation]) -> set[tuple[str, str]]:
    """(field, rule message) of each refusal."""
    return {(path, rule_message(message)) for path, message in refused(violations)}


@pytest.mark.parametrize("case", sorted(BREAKING))
def test_each_rule_is_refused_at_its_field(case: str, judge: Judge) -> None:
    mutate, expected = BREAKING[case]
    manifest = graph()
    mutate(manifest)
    assert rule_messages(judge([manifest])) == expected


@pytest.mark.parametrize("case", sorted(PASSING))
def test_valid_variants_are_accepted(case: str, judge: Judge) -> None:
    manifest = graph()
    PASSING[case](manifest)
    assert judge([manifest]) == []


def crd_rules_on_create() -> set[str]:
    """The message of every CEL rule of the CRD's served v1beta1 schema that runs on create (a
    transition rule, one that reads `oldSelf`, runs on update only)."""
    crd = yaml.safe_load(crd_path().read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta1"]
    messages: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for rule in node.get("x-kubernetes-validations", []):
                if "oldSelf" not in rule["rule"] or "optionalOldSelf" in rule:
                    messages.add(rule.get("message") or rule["rule"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(version["schema"]["openAPIV3Schema"])
    return messages


def test_every_rule_on_create_has_a_breaking_mutation() -> None:
    covered = {message for _, expected in BREAKING.values() for _, message in expected}
    assert crd_rules_on_create() == covered, "the CRD's CEL rules changed: add them to BREAKING"


# --- The schemas, strict field validation and the built-in types ------------------------------------


def test_an_unknown_field_in_the_worker_container_is_refused(judge: Judge) -> None:
    manifest = graph()
    worker(manifest)["podTemplate"]["spec"]["containers"][0]["bogusField"] = "x"
    (violation,) = judge([manifest])
    assert violation.object == f"{DGD}/cosmos3-nano-reasoner-agg-h200-round-robin"
    assert 'unknown field "' in violation.message and "bogusField" in violation.message


def test_an_unknown_field_in_the_job_is_refused(judge: Judge) -> None:
    job = one_of_kind(rendered("dev"), "Job")
    job["spec"]["template"]["spec"]["containers"][0]["bogusField"] = 1
    (violation,) = judge([job])
    assert violation.object == JOB and "bogusField" in violation.message


def test_every_refusal_of_every_object_is_reported(judge: Judge) -> None:
    objects = rendered("dev")
    job, manifest = one_of_kind(objects, "Job"), one_of_kind(objects, DGD)
    job["spec"]["backoffLimit"] = -1
    job["spec"]["completions"] = -2
    worker(manifest)["replicas"] = -1
    manifest["spec"]["components"][0]["name"] = "worker"
    violations = judge(objects)
    assert {v.object for v in violations} == {JOB, f"{DGD}/{manifest['metadata']['name']}"}
    found(violations, "spec.backoffLimit", "greater than or equal to 0")
    found(violations, "spec.completions", "greater than or equal to 0")
    found(violations, "spec.components", "component names must be unique case-insensitively")


def test_a_kind_the_server_does_not_serve_is_refused(judge: Judge) -> None:
    (violation,) = judge([{"apiVersion": "v1", "kind": "Bogus", "metadata": {"name": "b"}}])
    assert violation.message == "the API server serves no Bogus in v1"


def test_duplicate_env_names_break_the_list_map(judge: Judge) -> None:
    manifest = graph()
    env = worker(manifest)["podTemplate"]["spec"]["containers"][0]["env"]
    env.append({"name": "NIM_PRECISION", "value": "bf16"})
    found(judge([manifest]), f"{WORKER_MAIN}.env[{len(env) - 1}]", "Duplicate value")


def test_graph_metadata_is_object_meta(judge: Judge) -> None:
    manifest = graph()
    manifest["metadata"]["owner"] = "me"
    (violation,) = judge([manifest])
    assert "metadata.owner" in violation.message


@pytest.mark.parametrize("size", ["64Gi", 68719476736])
def test_int_or_string_fields_take_both(judge: Judge, size: object) -> None:
    manifest = graph()
    worker(manifest)["sharedMemorySize"] = size
    worker(manifest)["podTemplate"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = 16
    assert judge([manifest]) == []


def test_int_or_string_fields_refuse_other_types(judge: Judge) -> None:
    manifest = graph()
    worker(manifest)["sharedMemorySize"] = True
    assert judge([manifest]) != []


def test_preserve_unknown_fields_keep_free_form_fields(judge: Judge) -> None:
    manifest = graph()
    override = {"apiVersion": "grove.io/v1alpha1", "value": {"anything": {"goes": [1, 2]}}}
    worker(manifest)["providerOverride"] = override
    assert judge([manifest]) == []
    worker(manifest)["providerOverride"]["surprise"] = 1
    (violation,) = judge([manifest])
    assert "surprise" in violation.message


def test_components_are_limited_to_the_crds_max_items(judge: Judge) -> None:
    crd = yaml.safe_load(crd_path().read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta1"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    limit = spec["properties"]["components"]["maxItems"]
    manifest = graph()
    main = {"name": "main", "image": "nvcr.io/x:1"}
    manifest["spec"]["components"] += [
        {"name": f"extra{index}", "podTemplate": {"spec": {"containers": [main]}}}
        for index in range(limit - 1)
    ]
    found(judge([manifest]), "spec.components", f"must have at most {limit} items")


def test_namespaces_it_made_are_gone_and_others_kept(local_cluster: local.LocalCluster) -> None:
    local_cluster.kubectl("create", "namespace", "kept-by-its-owner")
    objects = rendered("dev")
    for manifest in objects:
        if manifest["kind"] == "Namespace":
            manifest["metadata"]["name"] = "judged-only"
        else:
            manifest["metadata"]["namespace"] = "kept-by-its-owner"
    one_of_kind(objects, "Secret")["metadata"]["namespace"] = "made-for-the-run"

    assert dry_run_violations(objects, local_cluster.kubeconfig) == []

    def phase(name: str) -> str:
        path = "jsonpath={.status.phase}"
        return local_cluster.kubectl("get", "namespace", name, "-o", path, check=False)

    assert phase("kept-by-its-owner") == "Active"
    assert phase("made-for-the-run") in ("Terminating", "")  # being deleted, or gone
    assert phase("judged-only") == ""  # its Namespace object was a dry run only
    local_cluster.kubectl("delete", "namespace", "kept-by-its-owner", "--wait=false")


# --- What the program accepts, the API server accepts ----------------------------------------------


@settings(max_examples=100, deadline=None)
@given(config=stack_configs())
def test_accepted_configs_build_objects_the_api_server_accepts(
    config: tuple[str, dict[str, Any], bool], judge: Judge
) -> None:
    stack, overrides, _ = config
    objects = objects_if_accepted(overrides, stack)
    event("refused" if objects is None else "accepted")
    if objects is not None:
        assert judge(objects) == []


@pytest.mark.parametrize("key", sorted(KEYS))
@settings(max_examples=4, deadline=None)
@given(data=st.data())
def test_each_key_alone_lands_as_the_api_server_accepts(
    key: str, data: st.DataObject, judge: Judge
) -> None:
    value, _ = data.draw(KEYS[key])
    objects = objects_if_accepted({key: value})
    if objects is not None:
        assert judge(objects) == []


@pytest.mark.parametrize("overrides", LEGAL_EDGES)
def test_legal_edge_values_deploy_objects_the_api_server_accepts(
    overrides: dict[str, Any], judge: Judge
) -> None:
    objects = objects_if_accepted(overrides)
    assert objects is not None
    assert judge(objects) == []


def test_main_without_an_image_passes_the_crd_but_not_the_operators_admission_rule(
    judge: Judge,
) -> None:
    # The CRD's sidecar rule exempts `main`; the operator's webhook refuses it (tools/violations.py).
    manifest = graph()
    del worker(manifest)["podTemplate"]["spec"]["containers"][0]["image"]
    assert judge([manifest]) == []
    assert [v.message for v in admission_violations(manifest)] == ["'main' needs an image"]


# --- The test stages' Jobs: the API server takes them too (strict field validation) ---------------


def test_every_stage_object_is_accepted_and_a_mistyped_field_refused(judge: Judge) -> None:
    digest = "python:3.11.7-slim-bookworm@sha256:" + "a" * 64
    for profile in RoutingProfile:
        outputs = cluster_outputs(profile)
        settings = JobSettings(run_id="r1", plan=PLAN, image=digest, pip_index_url=PIP_MIRROR)
        objects = smoke_manifests(outputs, settings) + perf_manifests(
            outputs, RECIPE_WORKLOAD, settings
        )
        assert judge(objects) == [], profile
    job = next(m for m in smoke_manifests(outputs, settings) if m["kind"] == "Job")
    job["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy "] = "Always"
    (violation,) = judge([job])
    assert 'unknown field "spec.template.spec.containers[0].imagePullPolicy "' in str(violation)


# --- The command, with an API server of its own ------------------------------------------------------


def test_the_command_judges_every_stack_on_an_api_server(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert validate.main(["--all"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"kube-apiserver {KUBERNETES_VERSION} with {crd_path()}: ")
    assert "stack session-affinity: 2 objects, no violations" in out  # the graph, its budget


def test_the_command_judges_on_a_cluster_that_already_runs(
    local_cluster: local.LocalCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--kubeconfig --context`: a user's own cluster with the CRD installed (here the session's)
    judges every object; one that does not answer, or refuses the credentials, is named, with
    status 2."""
    their = ["--kubeconfig", str(local_cluster.kubeconfig), "--context", CONTEXT]
    assert validate.main(["--all", *their]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"the API server of {CONTEXT}: every object dry-run\n"), out
    assert "stack session-affinity: 2 objects, no violations" in out  # the graph, its budget

    config = yaml.safe_load(local_cluster.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:9"  # nothing listens there
    (tmp_path / "gone").write_text(yaml.safe_dump(config))
    gone = ["--kubeconfig", str(tmp_path / "gone"), "--context", CONTEXT]
    assert validate.main(["--stack", "dev", *gone]) == 2
    err = capsys.readouterr().err
    assert f"validate: cannot reach the API server of context '{CONTEXT}' of " in err

    config = yaml.safe_load(local_cluster.kubeconfig.read_text())
    config["users"][0]["user"] = {"token": "not-a-token-it-knows"}  # credentials it refuses
    (tmp_path / "refused").write_text(yaml.safe_dump(config))
    refused = ["--kubeconfig", str(tmp_path / "refused"), "--context", CONTEXT]
    assert validate.main(["--stack", "dev", *refused]) == 2
    err = capsys.readouterr().err
    assert f"validate: the API server of context '{CONTEXT}' of " in err
    # 401, or 403 where the server takes a token it does not know as anonymous
    assert re.search(r" answered 40[13] (Unauthorized|Forbidden): give --kubeconfig", err), err


def test_the_command_uses_the_rules_of_the_crd_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A newer CRD's CEL rule applies without a code change (the API server evaluates it)."""
    crd = yaml.safe_load(crd_path().read_text())
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta1"]
    spec = served["schema"]["openAPIV3Schema"]["properties"]["spec"]
    rule = {"rule": "self.components.size() <= 1", "message": "one component, please"}
    spec["x-kubernetes-validations"] = [*spec.get("x-kubernetes-validations", []), rule]
    crd["status"] = {"acceptedNames": {"kind": "ignored"}}  # as `kubectl get -o yaml` has it
    (tmp_path / "crd.yaml").write_text(yaml.safe_dump(crd))
    monkeypatch.setattr(validate, "example_render", lambda stack: (rendered(stack), {}))
    assert validate.main(["--stack", "round-robin", "--crd", str(tmp_path / "crd.yaml")]) == 1
    out = capsys.readouterr().out
    assert "stack round-robin: 1 violation(s) in 2 objects" in out  # the graph and its budget
    assert out.startswith("warning: the DynamoGraphDeployment CRD at "), "another CRD than tested"
    assert f"sha256 {TESTED_SCHEMA_SHA256[:12]}); using it" in out.splitlines()[0]
    assert f"  {DGD}/cosmos3-nano-reasoner-agg-h200-round-robin: spec: Invalid value: " in out
    assert "one component, please [api-server]" in out
