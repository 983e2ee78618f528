"""`python -m tools.adopt`: the `pulumi import --file` document matches what the program registers."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tools.adopt import import_document, main
from tools.mock_engine import ProgramRun, Registered
from tools.stack_files import PROJECT, SHIPPED_STACKS

RunStack = Callable[..., ProgramRun]

# The fields of pulumi's `importSpec` (pkg/cmd/pulumi/operations/import.go) this tool writes.
IMPORT_SPEC_FIELDS = {
    "type", "name", "logicalName", "id", "parent", "provider", "version", "component", "inputs",
}  # fmt: skip


ROOT_STACK_TYPE = "pulumi:pulumi:Stack"


def urn(stack: str, qualified_type: str, name: str) -> str:
    return f"urn:pulumi:{stack}::{PROJECT}::{qualified_type}::{name}"


def urns_of(document: dict[str, Any], stack: str) -> dict[str, str]:
    """The URN `pulumi import` gives each entry: `urn.New(stack, project, parentType, type,
    logicalName)` with the parent's whole qualified type chained by `$`; no parent: the stack."""
    by_name = {entry["name"]: entry for entry in document["resources"]}

    def qualified_type(entry: dict[str, Any]) -> str:
        parent = entry.get("parent")
        return (f"{qualified_type(by_name[parent])}$" if parent else "") + entry["type"]

    return {
        e["name"]: urn(stack, qualified_type(e), e["logicalName"]) for e in document["resources"]
    }


def engine_urns(run: ProgramRun, stack: str) -> dict[str, str]:
    """The URN the real engine gives each registered resource (same `urn.New`, the parent's whole
    qualified type, pulumi `deployment.go`), by mock URN. The mock monitor's own URNs chain only the
    immediate parent's type, so they are not the engine's and cannot be compared directly."""
    by_urn = {r.urn: r for r in run.resources}

    def qualified_type(resource: Registered) -> str:
        parent = by_urn.get(resource.parent)
        return (f"{qualified_type(parent)}$" if parent else "") + resource.type

    return {r.urn: urn(stack, qualified_type(r), r.name) for r in run.resources}


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_every_adopted_resource_gets_the_urn_the_program_registers(
    run_stack: RunStack, stack: str
) -> None:
    run = run_stack(stack)
    document = import_document(run, include_job=True)
    by_engine_urn = {engine: run.by_urn(mock) for mock, engine in engine_urns(run, stack).items()}

    urns = urns_of(document, stack)
    for entry in document["resources"]:
        resource = by_engine_urn[urns[entry["name"]]]  # KeyError: a URN the program never has
        assert resource.type == entry["type"] and resource.name == entry["logicalName"]
        assert resource.custom == (not entry.get("component", False))
    adopted = {urns[e["name"]] for e in document["resources"] if "id" in e}
    assert adopted == {engine_urns(run, stack)[r.urn] for r in run.kubernetes_objects()}


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_the_document_has_the_import_file_shape(run_stack: RunStack, stack: str) -> None:
    document = import_document(run_stack(stack))
    assert set(document) == {"resources"}
    names = [entry["name"] for entry in document["resources"]]
    assert len(names) == len(set(names)), "names must be unique in an import file"
    provider = document["resources"][0]
    assert provider["type"] == "pulumi:providers:kubernetes" and "id" not in provider
    for entry in document["resources"]:
        assert set(entry) <= IMPORT_SPEC_FIELDS
        if entry.get("component"):
            assert "id" not in entry and "provider" not in entry
        elif entry is not provider:
            assert entry["provider"] == provider["name"] and entry["id"]
            assert entry.get("parent") in names


def test_ids_are_namespace_slash_name_and_the_job_is_left_out(run_stack: RunStack) -> None:
    document = import_document(run_stack("dev"))
    ids = {e["type"].rsplit(":", 1)[-1]: e["id"] for e in document["resources"] if "id" in e}
    assert ids == {
        "Namespace": "cosmos3-dev",
        "Secret": "cosmos3-dev/ngc-api-secret",
        "PersistentVolumeClaim": "cosmos3-dev/shared-model-cache",
        "DynamoGraphDeployment": "cosmos3-dev/cosmos3-nano-reasoner-agg-h200-round-robin",
    }


def test_the_provider_is_declared_with_the_programs_inputs(run_stack: RunStack) -> None:
    run = run_stack("round-robin")
    provider = import_document(run)["resources"][0]
    assert provider["inputs"] == {
        "context": "h200-cluster", "kubeconfig": "", "clusterIdentifier": "h200-cluster",
    }  # fmt: skip


def test_the_command_writes_the_document_and_names_the_import_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "adopt" / "shared.json"
    assert main(["--stack", "shared", "--example-site", "--out", str(out)]) == 0
    assert "pulumi import --stack shared --file" in capsys.readouterr().out
    kinds = [e["type"] for e in json.loads(out.read_text())["resources"] if "id" in e]
    assert kinds == [
        "kubernetes:core/v1:Namespace",
        "kubernetes:core/v1:Secret",
        "kubernetes:core/v1:PersistentVolumeClaim",
    ]


def test_a_profile_stack_takes_the_namespace_from_the_shared_outputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tools.offline import shared_layer_outputs
    from tools.stack_files import SHARED_STACK

    shared = tmp_path / "shared.json"
    shared.write_text(json.dumps(shared_layer_outputs("team-ns")[SHARED_STACK]))
    out = tmp_path / "rr.json"
    argv = ["--stack", "round-robin", "--example-site", "--out", str(out),
            "--shared-outputs", str(shared)]  # fmt: skip
    assert main(argv) == 0
    graph = next(e for e in json.loads(out.read_text())["resources"] if "id" in e)
    assert graph["id"] == "team-ns/cosmos3-nano-reasoner-agg-h200-round-robin"


def test_missing_site_config_is_a_message_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--stack", "dev", "--out", str(tmp_path / "x.json")]) == 2
    assert "kubeContext is required" in capsys.readouterr().err
