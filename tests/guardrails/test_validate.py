"""tools.validate: rendered objects against the Kubernetes schemas, the real CRD and its CEL rules."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema.protocols import Validator

from tests.guardrails.conftest import Manifest, one_of_kind, rendered
from tools import validate
from tools.validate import (
    CRD_SCHEMA,
    GRAPH_RULES,
    KUBERNETES_SCHEMA,
    MAX_COMPONENTS,
    CrdError,
    Violation,
    crd_schema_violations,
    graph_rule_violations,
    kubernetes_schema_violations,
    load_graph_schema,
    structural_to_json_schema,
    validate_objects,
)

DGD = "DynamoGraphDeployment"
GRAPH_NAME = "DynamoGraphDeployment/cosmos3-nano-reasoner-agg-h200-round-robin"
JOB_NAME = "Job/cosmos3-nano-reasoner-model-download"
WORKER_MAIN = "spec.components[1].podTemplate.spec.containers[0]"


def graph() -> Manifest:
    return one_of_kind(rendered("dev"), DGD)


def worker(manifest: Manifest) -> dict[str, Any]:
    component: dict[str, Any] = manifest["spec"]["components"][1]
    return component


def found(violations: list[Violation], check: str, path: str) -> Violation:
    matches = [v for v in violations if v.check == check and v.path == path]
    assert matches, f"no {check} violation at {path}; got:\n" + "\n".join(map(str, violations))
    return matches[0]


# --- Every shipped stack is clean ---------------------------------------------------------------


def test_core_objects_of_every_stack_match_the_strict_kubernetes_schema(stack: str) -> None:
    core = [m for m in rendered(stack) if m["kind"] != DGD]
    assert [v for m in core for v in kubernetes_schema_violations(m)] == []


def test_the_graph_of_every_stack_matches_the_real_crd(
    stack: str, graph_validator: Validator
) -> None:
    graphs = [m for m in rendered(stack) if m["kind"] == DGD]
    assert [v for m in graphs for v in crd_schema_violations(m, graph_validator)] == []


def test_the_graph_of_every_stack_keeps_the_crd_rules(stack: str) -> None:
    assert [v for m in rendered(stack) if m["kind"] == DGD for v in graph_rule_violations(m)] == []


# --- Acceptance: a broken field fails the right check, naming the object and the field ---------


def test_unknown_key_in_the_worker_container_fails_the_crd_schema(
    graph_validator: Validator,
) -> None:
    manifest = graph()
    worker(manifest)["podTemplate"]["spec"]["containers"][0]["bogusField"] = "x"
    violation = found(
        crd_schema_violations(manifest, graph_validator), CRD_SCHEMA, f"{WORKER_MAIN}.bogusField"
    )
    assert violation.object == GRAPH_NAME
    assert "unknown field 'bogusField'" in str(violation)
    assert "prune" in violation.message


def test_component_without_main_fails_our_structural_check() -> None:
    manifest = graph()
    worker(manifest)["podTemplate"]["spec"]["containers"][0]["name"] = "server"
    (violation,) = graph_rule_violations(manifest)
    assert (violation.check, violation.object) == (GRAPH_RULES, GRAPH_NAME)
    assert violation.path == "spec.components[1].podTemplate.spec.containers"
    assert "'Worker' has no container named 'main'" in violation.message


def test_unknown_field_in_the_job_fails_the_strict_kubernetes_schema() -> None:
    job = one_of_kind(rendered("dev"), "Job")
    job["spec"]["template"]["spec"]["containers"][0]["bogusField"] = 1
    violations = kubernetes_schema_violations(job)
    path = "spec.template.spec.containers[0].bogusField"
    violation = found(violations, KUBERNETES_SCHEMA, path)
    assert violation.object == JOB_NAME
    assert str(violation).startswith(f"{JOB_NAME}: {path}: unknown field 'bogusField'")
    assert "Kubernetes 1.33.0" in violation.message


def test_every_violation_is_reported_not_only_the_first(graph_validator: Validator) -> None:
    objects = rendered("dev")
    job, manifest = one_of_kind(objects, "Job"), one_of_kind(objects, DGD)
    job["spec"]["backoffLimit"] = "three"
    job["spec"]["bogus"] = True
    worker(manifest)["replicas"] = "8"
    worker(manifest)["podTemplate"]["spec"]["containers"][0]["bogusField"] = 1
    manifest["spec"]["components"][0]["podTemplate"]["spec"]["containers"][0]["name"] = "server"
    violations = validate_objects(objects, graph_validator)
    assert {(v.object, v.path, v.check) for v in violations} == {
        (JOB_NAME, "spec.backoffLimit", KUBERNETES_SCHEMA),
        (JOB_NAME, "spec.bogus", KUBERNETES_SCHEMA),
        (GRAPH_NAME, "spec.components[1].replicas", CRD_SCHEMA),
        (GRAPH_NAME, f"{WORKER_MAIN}.bogusField", CRD_SCHEMA),
        (GRAPH_NAME, "spec.components[0].podTemplate.spec.containers", GRAPH_RULES),
    }


def test_core_object_of_unknown_kind_is_a_violation_not_a_pass() -> None:
    (violation,) = kubernetes_schema_violations(
        {"apiVersion": "v1", "kind": "Bogus", "metadata": {"name": "b"}}
    )
    assert violation.path == "kind" and "no schema for v1 Bogus" in violation.message


def test_duplicate_env_names_break_the_list_type_map(graph_validator: Validator) -> None:
    manifest = graph()
    env = worker(manifest)["podTemplate"]["spec"]["containers"][0]["env"]
    env.append({"name": "NIM_PRECISION", "value": "bf16"})
    violation = found(
        crd_schema_violations(manifest, graph_validator),
        CRD_SCHEMA,
        f"{WORKER_MAIN}.env[{len(env) - 1}]",
    )
    assert "duplicate entry {'name': 'NIM_PRECISION'}" in violation.message


def test_graph_metadata_is_checked_as_object_meta(graph_validator: Validator) -> None:
    manifest = graph()
    manifest["metadata"]["labels"]["app.kubernetes.io/part-of"] = 3
    manifest["metadata"]["owner"] = "me"
    violations = crd_schema_violations(manifest, graph_validator)
    found(violations, CRD_SCHEMA, "metadata.owner")
    found(violations, CRD_SCHEMA, 'metadata.labels["app.kubernetes.io/part-of"]')


# --- The structural schema, read the way the API server reads it --------------------------------


@pytest.mark.parametrize("size", ["64Gi", 68719476736])
def test_int_or_string_fields_take_both(graph_validator: Validator, size: object) -> None:
    manifest = graph()
    worker(manifest)["sharedMemorySize"] = size
    worker(manifest)["podTemplate"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = 16
    assert crd_schema_violations(manifest, graph_validator) == []


def test_int_or_string_fields_refuse_other_types(graph_validator: Validator) -> None:
    manifest = graph()
    worker(manifest)["sharedMemorySize"] = True
    found(
        crd_schema_violations(manifest, graph_validator),
        CRD_SCHEMA,
        "spec.components[1].sharedMemorySize",
    )


def test_preserve_unknown_fields_keeps_free_form_fields(graph_validator: Validator) -> None:
    manifest = graph()
    override = {"apiVersion": "grove.io/v1alpha1", "value": {"anything": {"goes": [1, 2]}}}
    worker(manifest)["providerOverride"] = override
    assert crd_schema_violations(manifest, graph_validator) == []
    worker(manifest)["providerOverride"]["surprise"] = 1
    found(
        crd_schema_violations(manifest, graph_validator),
        CRD_SCHEMA,
        "spec.components[1].providerOverride.surprise",
    )


def test_object_without_properties_prunes_every_field(graph_validator: Validator) -> None:
    manifest = graph()
    worker(manifest)["scalingAdapter"] = {}
    assert crd_schema_violations(manifest, graph_validator) == []
    worker(manifest)["scalingAdapter"] = {"minReplicas": 1}
    found(
        crd_schema_violations(manifest, graph_validator),
        CRD_SCHEMA,
        "spec.components[1].scalingAdapter.minReplicas",
    )


def test_structural_rewrite_rules() -> None:
    schema = structural_to_json_schema(
        {
            "type": "object",
            "properties": {
                "port": {"type": "string", "x-kubernetes-int-or-string": True},
                "note": {"type": "string", "nullable": True},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "choice": {
                    "type": "object",
                    "properties": {"a": {"type": "string"}},
                    "anyOf": [{"required": ["a"]}],
                },
                "embedded": {"type": "object", "x-kubernetes-embedded-resource": True},
            },
        }
    )
    assert schema["additionalProperties"] is False
    props = schema["properties"]
    assert "type" not in props["port"] and props["port"]["anyOf"] == [
        {"type": "integer"},
        {"type": "string"},
    ]
    assert props["note"]["type"] == ["string", "null"]
    assert "additionalProperties" not in props["free"]
    assert props["labels"]["additionalProperties"] == {"type": "string"}
    assert props["choice"]["additionalProperties"] is False
    assert props["choice"]["anyOf"] == [{"required": ["a"]}], "junctor branches never prune"
    assert set(props["embedded"]["properties"]) == {"apiVersion", "kind", "metadata"}


# --- The CRD's CEL rules: each either checked by us, or out of scope for a stated reason --------

Mutation = Callable[[Manifest], None]


def _set(path: list[Any], value: object) -> Mutation:
    def mutate(manifest: Manifest) -> None:
        target = manifest
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value

    return mutate


def _extra_component(**fields: Any) -> Mutation:
    def mutate(manifest: Manifest) -> None:
        component = {
            "podTemplate": {"spec": {"containers": [{"name": "main", "image": "x:1"}]}}
        } | fields
        manifest["spec"]["components"].append(component)

    return mutate


def _many_components(manifest: Manifest) -> None:
    for index in range(MAX_COMPONENTS):
        _extra_component(name=f"extra{index}")(manifest)


WORKER_POD = ["spec", "components", 1, "podTemplate"]
CHECKED_CEL_RULES: dict[str, tuple[Mutation, str]] = {
    "spec.restart must be unset on create; set spec.restart.id after creation to request a restart": (
        _set(["spec", "restart"], {"id": "1"}),
        "spec.restart",
    ),
    "at most one component may have type epp": (
        lambda m: [_extra_component(name=n, type="epp")(m) for n in ("epp1", "epp2")],
        "spec.components[3].type",
    ),
    "component names must be unique case-insensitively": (
        _extra_component(name="WORKER"),
        "spec.components[2].name",
    ),
    "eppConfig may only be set when type is epp": (
        _set(["spec", "components", 1, "eppConfig"], {"configMapRef": {"name": "c"}}),
        "spec.components[1].eppConfig",
    ),
    "exactly one of configMapRef or config must be specified": (
        _extra_component(name="epp", type="epp", eppConfig={}),
        "spec.components[2].eppConfig",
    ),
    "minAvailable must be less than or equal to replicas unless replicas is 0": (
        _set(["spec", "components", 1, "minAvailable"], 2),
        "spec.components[1].minAvailable",
    ),
    "podTemplate backend annotation must be mp or ray, case-insensitively": (
        _set(
            [*WORKER_POD, "metadata"],
            {"annotations": {"nvidia.com/vllm-distributed-executor-backend": "uni"}},
        ),
        'spec.components[1].podTemplate.metadata.annotations["nvidia.com/vllm-distributed-executor-backend"]',
    ),
    "sidecar containers must specify a non-empty image": (
        lambda m: worker(m)["podTemplate"]["spec"]["containers"].append({"name": "sidecar"}),
        "spec.components[1].podTemplate.spec.containers[1].image",
    ),
    "init containers must specify a non-empty image": (
        _set([*WORKER_POD, "spec", "initContainers"], [{"name": "init", "image": ""}]),
        "spec.components[1].podTemplate.spec.initContainers[0].image",
    ),
}
OUT_OF_SCOPE_CEL_RULES = {
    "minAvailable is immutable after creation": "a transition rule: needs the stored object",
    "checkpoint.job cannot be set when checkpointRef is specified": "experimental checkpoint: not rendered",
    "extraClientContainers is only supported with mode=IntraPod": "experimental gpuMemoryService: not rendered",
    "extraClientPods is only supported with mode=InterPod": "experimental gpuMemoryService: not rendered",
    "extraClientPods is reserved for inter-pod GMS and is not implemented yet": "gpuMemoryService: not rendered",
    "exactly one of labelKey or clusterTopologyName is required": "experimental kvTransferPolicy: not rendered",
    "preferredWeight is required when enforcement is preferred": "experimental kvTransferPolicy: not rendered",
    "preferredWeight may only be set when enforcement is preferred": "experimental kvTransferPolicy: not rendered",
    "labelKey prefix must be 253 characters or less": "experimental kvTransferPolicy: not rendered",
}


def _cel_messages(node: Any) -> set[str]:
    if isinstance(node, list):
        return set().union(*(_cel_messages(item) for item in node))
    if not isinstance(node, dict):
        return set()
    own = {rule["message"] for rule in node.get("x-kubernetes-validations", [])}
    return own.union(*(_cel_messages(value) for value in node.values()))


def test_every_cel_rule_of_the_crd_is_checked_or_out_of_scope(crd_schema: dict[str, Any]) -> None:
    in_crd = _cel_messages(crd_schema)
    assert in_crd == set(CHECKED_CEL_RULES) | set(OUT_OF_SCOPE_CEL_RULES), (
        "the CRD's CEL rules changed: implement new ones in tools.validate.graph_rule_violations"
    )


@pytest.mark.parametrize("rule", sorted(CHECKED_CEL_RULES))
def test_each_checked_cel_rule_catches_its_violation(rule: str) -> None:
    mutate, path = CHECKED_CEL_RULES[rule]
    manifest = graph()
    mutate(manifest)
    found(graph_rule_violations(manifest), GRAPH_RULES, path)


def test_components_are_limited_to_the_crds_max_items(crd_schema: dict[str, Any]) -> None:
    assert (
        crd_schema["properties"]["spec"]["properties"]["components"]["maxItems"] == MAX_COMPONENTS
    )
    manifest = graph()
    _many_components(manifest)
    violation = found(graph_rule_violations(manifest), GRAPH_RULES, "spec.components")
    assert f"at most {MAX_COMPONENTS}" in violation.message


# --- Reading CRD files --------------------------------------------------------------------------


@pytest.fixture
def crd_document(crd_schema: object) -> dict[str, Any]:
    """The whole CRD, as `kubectl get crd -o yaml` prints it (JSON is YAML, and quick to write)."""
    document: dict[str, Any] = yaml.load(validate.SHARED_CRD.read_text(), Loader=yaml.CSafeLoader)
    return document


def test_load_accepts_the_crd_a_list_of_it_and_the_bare_schema(
    tmp_path: Path, crd_document: dict[str, Any], crd_schema: dict[str, Any]
) -> None:
    (tmp_path / "list.yaml").write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": [crd_document]})
    )
    (tmp_path / "schema.json").write_text(json.dumps(crd_schema))
    assert load_graph_schema(tmp_path / "list.yaml") == crd_schema
    assert load_graph_schema(tmp_path / "schema.json") == crd_schema


def test_load_refuses_another_crd_or_a_missing_version(
    tmp_path: Path, crd_document: dict[str, Any]
) -> None:
    crd = crd_document
    crd["spec"]["versions"] = [v for v in crd["spec"]["versions"] if v["name"] != "v1beta1"]
    (tmp_path / "old.yaml").write_text(json.dumps(crd))
    with pytest.raises(CrdError, match="not v1beta1"):
        load_graph_schema(tmp_path / "old.yaml")
    crd["spec"]["names"]["kind"] = "Other"
    (tmp_path / "other.yaml").write_text(json.dumps(crd))
    with pytest.raises(CrdError, match="not DynamoGraphDeployment"):
        load_graph_schema(tmp_path / "other.yaml")
    (tmp_path / "empty.yaml").write_text("kind: ConfigMap\n")
    with pytest.raises(CrdError, match="no CustomResourceDefinition"):
        load_graph_schema(tmp_path / "empty.yaml")


# --- The command ---------------------------------------------------------------------------------


def test_cli_validates_a_stack_against_a_given_crd(
    capsys: pytest.CaptureFixture[str], crd_schema: object
) -> None:
    assert validate.main(["--stack", "round-robin", "--crd", str(validate.SHARED_CRD)]) == 0
    out = capsys.readouterr().out
    assert "stack round-robin: 1 objects, no violations" in out
    assert str(validate.SHARED_CRD) in out


def test_cli_lists_every_violation_and_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], crd_schema: object
) -> None:
    objects = rendered("dev")
    one_of_kind(objects, "Job")["spec"]["bogus"] = 1
    worker(one_of_kind(objects, DGD))["podTemplate"]["spec"]["containers"][0]["name"] = "server"
    monkeypatch.setattr(validate, "example_render", lambda stack: (objects, {}))
    assert validate.main(["--stack", "dev", "--crd", str(validate.SHARED_CRD)]) == 1
    out = capsys.readouterr().out
    assert "stack dev: 2 violation(s)" in out
    assert f"  {JOB_NAME}: spec.bogus: unknown field 'bogus'" in out
    assert (
        f"  {GRAPH_NAME}: spec.components[1].podTemplate.spec.containers: component 'Worker'" in out
    )


def test_cli_refuses_a_file_that_is_not_the_crd(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "crd.yaml").write_text("kind: ConfigMap\n")
    assert validate.main(["--stack", "dev", "--crd", str(tmp_path / "crd.yaml")]) == 2
    assert "no CustomResourceDefinition" in capsys.readouterr().err


def test_cli_without_any_crd_says_the_graph_schema_was_not_checked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(validate, "SHARED_CRD", tmp_path / "absent.yaml")
    assert validate.main(["--stack", "round-robin"]) == 0
    assert "schema NOT checked" in capsys.readouterr().out
