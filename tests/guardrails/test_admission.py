"""The Dynamo operator's admission rules that are no CEL rule of the CRD (tools.violations, ours,
written from the operator's source): every shipped stack keeps them, and a graph that breaks one
is reported with its field. What the API server refuses is the real tier's: a server-side dry run
(tests/real/test_server_validation.py), the one oracle of the manifests."""

from __future__ import annotations

from typing import Any

from tests.guardrails.support import Manifest, one_of_kind, rendered
from tools.violations import ADMISSION, admission_violations, admission_violations_of

DGD = "DynamoGraphDeployment"
GRAPH_NAME = "DynamoGraphDeployment/cosmos3-nano-reasoner-agg-h200-round-robin"
WORKER_MAIN = "spec.components[1].podTemplate.spec.containers[0]"


def graph() -> Manifest:
    return one_of_kind(rendered("dev"), DGD)


def worker(manifest: Manifest) -> dict[str, Any]:
    component: dict[str, Any] = manifest["spec"]["components"][1]
    return component


def test_every_stack_keeps_the_operators_admission_rules(stack: str) -> None:
    assert admission_violations_of(rendered(stack)) == []


def test_component_without_main_fails_the_admission_rule() -> None:
    manifest = graph()
    worker(manifest)["podTemplate"]["spec"]["containers"][0]["name"] = "server"
    (violation,) = admission_violations(manifest)
    assert (violation.check, violation.object) == (ADMISSION, GRAPH_NAME)
    assert violation.path == "spec.components[1].podTemplate.spec.containers"
    assert "'Worker' has no container named 'main'" in violation.message


def test_main_without_image_fails_the_admission_rule() -> None:
    manifest = graph()
    del worker(manifest)["podTemplate"]["spec"]["containers"][0]["image"]
    violations = admission_violations_of([manifest])
    assert [(v.path, v.message, v.check) for v in violations] == [
        (f"{WORKER_MAIN}.image", "'main' needs an image", ADMISSION)
    ]
