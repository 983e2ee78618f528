"""tools.validate's offline fallback (the strict Kubernetes schemas, the real CRD's structural
schema, the operator's admission rules) and its command line; what the API server itself refuses
on the check of record, a server-side dry run, is the real tier's: tests/real/test_server_validation.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from jsonschema.protocols import Validator

from tests.guardrails.conftest import Manifest, one_of_kind, rendered
from tools import validate
from tools.admission import admission_violations
from tools.crd_schema import crd_schema_violations
from tools.validate import (
    ADMISSION,
    CRD_SCHEMA,
    KUBERNETES_SCHEMA,
    CrdError,
    Violation,
    kubernetes_schema_violations,
    load_graph_schema,
    offline_violations,
    structural_to_json_schema,
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


def test_the_graph_of_every_stack_keeps_the_operators_admission_rules(stack: str) -> None:
    assert [v for m in rendered(stack) if m["kind"] == DGD for v in admission_violations(m)] == []


def test_every_stack_is_clean_with_every_check(stack: str, graph_validator: Validator) -> None:
    assert offline_violations(rendered(stack), graph_validator) == []


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


def test_component_without_main_fails_the_admission_rule() -> None:
    manifest = graph()
    worker(manifest)["podTemplate"]["spec"]["containers"][0]["name"] = "server"
    (violation,) = admission_violations(manifest)
    assert (violation.check, violation.object) == (ADMISSION, GRAPH_NAME)
    assert violation.path == "spec.components[1].podTemplate.spec.containers"
    assert "'Worker' has no container named 'main'" in violation.message


def test_main_without_image_fails_the_admission_rule(graph_validator: Validator) -> None:
    manifest = graph()
    del worker(manifest)["podTemplate"]["spec"]["containers"][0]["image"]
    violations = offline_violations([manifest], graph_validator)
    assert [(v.path, v.message, v.check) for v in violations] == [
        (f"{WORKER_MAIN}.image", "'main' needs an image", ADMISSION)
    ]


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
    manifest["spec"]["components"][0]["name"] = "worker"
    violations = offline_violations(objects, graph_validator)
    assert {(v.object, v.path, v.check) for v in violations} == {
        (JOB_NAME, "spec.backoffLimit", KUBERNETES_SCHEMA),
        (JOB_NAME, "spec.bogus", KUBERNETES_SCHEMA),
        (GRAPH_NAME, "spec.components[1].replicas", CRD_SCHEMA),
        (GRAPH_NAME, f"{WORKER_MAIN}.bogusField", CRD_SCHEMA),
        (GRAPH_NAME, "spec.components[0].podTemplate.spec.containers", ADMISSION),
    }  # the two components named alike break a CEL rule: the API server's to refuse


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


def test_components_are_limited_to_the_crds_max_items(
    crd_schema: dict[str, Any], graph_validator: Validator
) -> None:
    limit = crd_schema["properties"]["spec"]["properties"]["components"]["maxItems"]
    manifest = graph()
    main = {"name": "main", "image": "nvcr.io/x:1"}
    manifest["spec"]["components"] += [
        {"name": f"extra{index}", "podTemplate": {"spec": {"containers": [main]}}}
        for index in range(limit - 1)
    ]
    violation = found(
        crd_schema_violations(manifest, graph_validator), CRD_SCHEMA, "spec.components"
    )
    assert violation.message == f"<{limit + 1} items> is too long"


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


def test_cli_offline_checks_the_schemas_and_says_what_it_left(
    capsys: pytest.CaptureFixture[str], crd_schema: object
) -> None:
    argv = ["--stack", "round-robin", "--crd", str(validate.SHARED_CRD), "--offline"]
    assert validate.main(argv) == 0
    out = capsys.readouterr().out
    assert "stack round-robin: 1 objects, no violations" in out
    assert out.startswith("warning: offline (--offline): Kubernetes 1.33.0 schemas (strict)")
    assert f"schema: {validate.SHARED_CRD}; its 18 CEL rules NOT checked" in out


def test_cli_without_the_engine_falls_back_offline_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    crd_schema: object,
) -> None:
    monkeypatch.setenv("COSMOS3_ENGINE_HOME", str(tmp_path / "no-engine"))
    assert validate.main(["--stack", "round-robin"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("warning: offline (no API server could be had: ")
    assert "make engine" in out and "CEL rules NOT checked" in out


def test_cli_offline_uses_the_schema_of_the_crd_it_is_given(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    crd_document: dict[str, Any],
) -> None:
    """A newer CRD's field is accepted without a code change; a field it drops is refused."""
    (served,) = [v for v in crd_document["spec"]["versions"] if v["name"] == "v1beta1"]
    spec = served["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["properties"]["newKnob"] = {"type": "string"}
    del spec["properties"]["restart"]
    (tmp_path / "crd.yaml").write_text(json.dumps(crd_document))
    objects = rendered("round-robin")
    one_of_kind(objects, DGD)["spec"] |= {"newKnob": "on", "restart": {"id": "1"}}
    monkeypatch.setattr(validate, "example_render", lambda stack: (objects, {}))
    argv = ["--stack", "round-robin", "--crd", str(tmp_path / "crd.yaml"), "--offline"]
    assert validate.main(argv) == 1
    out = capsys.readouterr().out
    assert "stack round-robin: 1 violation(s)" in out
    assert f"  {GRAPH_NAME}: spec.restart: unknown field 'restart'" in out


def test_cli_lists_every_violation_and_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], crd_schema: object
) -> None:
    objects = rendered("dev")
    one_of_kind(objects, "Job")["spec"]["bogus"] = 1
    worker(one_of_kind(objects, DGD))["podTemplate"]["spec"]["containers"][0]["name"] = "server"
    monkeypatch.setattr(validate, "example_render", lambda stack: (objects, {}))
    assert validate.main(["--stack", "dev", "--crd", str(validate.SHARED_CRD), "--offline"]) == 1
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
    assert "no whole CustomResourceDefinition" in capsys.readouterr().err


def test_cli_without_any_crd_says_the_graph_schema_and_rules_were_not_checked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(validate, "SHARED_CRD", tmp_path / "absent.yaml")
    assert validate.main(["--stack", "round-robin"]) == 0
    assert "schema and CEL rules NOT checked" in capsys.readouterr().out
