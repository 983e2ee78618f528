"""The real CRD's CEL rules, evaluated by tools.crd_rules / tools.cel_check on rendered manifests.

Each rule of the shipped CRD has a mutation of a shipped manifest that breaks it (and nothing
else), so the suite fails if the engine stops reporting a rule, and a rule a newer CRD adds fails
`test_every_rule_evaluated_on_create_has_a_breaking_mutation` until a mutation is written here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml
from jsonschema.protocols import Validator

from tests.guardrails.conftest import Manifest, one_of_kind, rendered
from tools import validate
from tools.cel_check import cel_rule_violations
from tools.crd_rules import CelRules, compile_rules
from tools.crd_schema import crd_schema_violations
from tools.violations import CEL_UNEVALUABLE, CRD_CEL

DGD = "DynamoGraphDeployment"
WORKER = "spec.components[1]"
KV_POLICY = "spec.experimental.kvTransferPolicy"
GMS = f"{WORKER}.experimental.gpuMemoryService"

Mutation = Callable[[Manifest], None]


@pytest.fixture(scope="session")
def cel_rules(crd_schema: dict[str, Any]) -> CelRules:
    return compile_rules(crd_schema)


def graph() -> Manifest:
    return one_of_kind(rendered("dev"), DGD)


def cel_findings(manifest: Manifest, rules: CelRules) -> set[tuple[str, str]]:
    """(path, message) of every CEL violation; a CEL_UNEVALUABLE one fails the test at once."""
    violations = cel_rule_violations(manifest, rules)
    assert [v for v in violations if v.check == CEL_UNEVALUABLE] == []
    return {(v.path, v.message) for v in violations if v.check == CRD_CEL}


# --- The rules the shipped CRD carries -----------------------------------------------------------


def _count_rules(node: Any) -> int:
    """An independent count of `x-kubernetes-validations` entries anywhere in a document."""
    if isinstance(node, list):
        return sum(_count_rules(item) for item in node)
    if not isinstance(node, dict):
        return 0
    own = len(node.get("x-kubernetes-validations") or [])
    return own + sum(_count_rules(value) for value in node.values())


def test_every_rule_of_every_served_version_compiles(crd_schema: object) -> None:
    """All the rules of the CRD file (v1alpha1's `quantity()` rule included): none unevaluable."""
    crd = yaml.load(validate.SHARED_CRD.read_text(), Loader=yaml.CSafeLoader)
    total = 0
    for served in crd["spec"]["versions"]:
        schema = served["schema"]["openAPIV3Schema"]
        rules = compile_rules(schema)
        assert len(rules.rules) == _count_rules(schema), "a declared rule was not found"
        assert [(r.rule.where, r.rule.rule, r.problem) for r in rules.rules if r.problem] == []
        total += len(rules.rules)
    assert total == _count_rules(crd)


def test_v1beta1_rules_evaluated_on_create_or_listed_as_transition(cel_rules: CelRules) -> None:
    assert [r.rule.name for r in cel_rules.transition_only] == [
        "minAvailable is immutable after creation"
    ]
    assert cel_rules.unevaluable == []
    assert len(cel_rules.evaluated) == len(cel_rules.rules) - 1
    restart = next(r for r in cel_rules.evaluated if "restart" in r.rule.name)
    assert restart.transition and restart.rule.optional_old_self, "runs on create: optionalOldSelf"


def test_every_stack_keeps_every_rule(stack: str, cel_rules: CelRules) -> None:
    for manifest in rendered(stack):
        if manifest["kind"] == DGD:
            assert cel_findings(manifest, cel_rules) == set()


# --- One breaking mutation per rule, and valid variants that must pass ---------------------------


def _at(manifest: Manifest, path: list[Any]) -> Any:
    for part in path:
        manifest = manifest[part]
    return manifest


def _set(path: list[Any], value: object) -> Mutation:
    def mutate(manifest: Manifest) -> None:
        _at(manifest, path[:-1])[path[-1]] = value

    return mutate


def _add_components(*components: dict[str, Any]) -> Mutation:
    def mutate(manifest: Manifest) -> None:
        for fields in components:
            main = {"name": "main", "image": "nvcr.io/x:1"}
            component = {"podTemplate": {"spec": {"containers": [main]}}} | fields
            manifest["spec"]["components"].append(component)

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
    "restart on create": (
        _set(["spec", "restart"], {"id": "r1"}),
        {("spec", RESTART_MESSAGE)},
    ),
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


@pytest.mark.parametrize("case", sorted(BREAKING))
def test_each_rule_reports_its_violation_at_its_path(
    case: str, cel_rules: CelRules, graph_validator: Validator
) -> None:
    mutate, expected = BREAKING[case]
    manifest = graph()
    mutate(manifest)
    assert crd_schema_violations(manifest, graph_validator) == [], "only the CEL rule may object"
    assert cel_findings(manifest, cel_rules) == expected


@pytest.mark.parametrize("case", sorted(PASSING))
def test_valid_variants_pass_every_rule(
    case: str, cel_rules: CelRules, graph_validator: Validator
) -> None:
    manifest = graph()
    PASSING[case](manifest)
    assert crd_schema_violations(manifest, graph_validator) == []
    assert cel_findings(manifest, cel_rules) == set()


def test_every_rule_evaluated_on_create_has_a_breaking_mutation(cel_rules: CelRules) -> None:
    covered = {message for _, expected in BREAKING.values() for _, message in expected}
    assert {rule.rule.name for rule in cel_rules.evaluated} == covered, (
        "the CRD's CEL rules changed: add a breaking mutation for each new rule to BREAKING"
    )
