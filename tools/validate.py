"""Offline validation of the objects a stack deploys: schemas first, then the CRD's own rules.

Why this exists: `pulumi preview` checks nothing against the API server when it cannot reach the
cluster, and it skips a DynamoGraphDeployment entirely when the CRD is not installed, so a typo in
a manifest would first surface during `pulumi up`. Here every rendered object is checked, offline:

* core objects (Namespace, Secret, PVC, Job, ...) against the Kubernetes OpenAPI schemas of a
  pinned version, in kubernetes-validate's strict variant: an unknown field is a violation
  (`tools.k8s_schemas`);
* the DynamoGraphDeployment against the CRD's v1beta1 `openAPIV3Schema`, read as the Kubernetes
  structural schema it is (`tools.crd_schema`);
* the CEL rules the CRD file itself carries (`x-kubernetes-validations`), evaluated with
  cel-python plus the Kubernetes CEL functions they use, as the API server does on create
  (`tools.crd_rules`, `tools.cel_check`, `tools.cel_k8s`, `tools.cel_quantity`,
  `tools.cel_values`); a rule that cannot be evaluated is reported by name, never skipped;
* the operator's admission rules that are no CEL rule of the CRD, hand-written
  (`tools.admission`).

Every violation is reported, each with the object, the JSON path of the field, a message and the
check that found it (`tools.violations`).

    python -m tools.validate --all
    kubectl get crd dynamographdeployments.nvidia.com -o yaml > dgd-crd.yaml
    python -m tools.validate --stack session-affinity --crd dgd-crd.yaml
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from jsonschema.protocols import Validator
from pulumi import RunError

from components.credentials import masked_output
from tools.admission import admission_violations
from tools.cel_check import cel_rule_violations
from tools.crd_rules import CelRules, compile_rules, rules_listing
from tools.crd_schema import (
    CRD_NAME,
    GRAPH_KIND,
    GRAPH_VERSION,
    CrdError,
    crd_schema_violations,
    graph_schema_validator,
    is_graph,
    load_graph_schema,
    structural_to_json_schema,
)
from tools.golden import example_render
from tools.k8s_schemas import KUBERNETES_VERSION, kubernetes_schema_violations
from tools.stack_files import ROOT, SHIPPED_STACKS
from tools.violations import (
    ADMISSION,
    CEL_UNEVALUABLE,
    CRD_CEL,
    CRD_SCHEMA,
    KUBERNETES_SCHEMA,
    Manifest,
    Violation,
)

__all__ = [
    "ADMISSION",
    "CEL_UNEVALUABLE",
    "CRD_CEL",
    "CRD_SCHEMA",
    "KUBERNETES_SCHEMA",
    "KUBERNETES_VERSION",
    "SHARED_CRD",
    "CrdError",
    "GraphChecks",
    "Violation",
    "graph_schema_validator",
    "kubernetes_schema_violations",
    "load_graph_checks",
    "load_graph_schema",
    "main",
    "structural_to_json_schema",
    "validate_objects",
]

SHARED_CRD = ROOT.parent / "shared" / "reference" / "nvidia.com_dynamographdeployments.yaml"
"""Where the team keeps the real CRD, beside the clone; never copied into the project."""


@dataclass(frozen=True)
class GraphChecks:
    """What one CRD file checks a DynamoGraphDeployment with: its schema and its CEL rules."""

    source: Path
    validator: Validator
    rules: CelRules


def load_graph_checks(path: Path, version: str = KUBERNETES_VERSION) -> GraphChecks:
    """The checks of the CRD at `path`; `version` is the Kubernetes API of the root metadata."""
    schema = load_graph_schema(path)
    return GraphChecks(path, graph_schema_validator(schema, version), compile_rules(schema))


def validate_objects(
    objects: Iterable[Manifest], graph: GraphChecks | None, version: str = KUBERNETES_VERSION
) -> list[Violation]:
    """All violations of a stack's objects. Without `graph` (no CRD at hand) the DGD's schema and
    CEL rules are not checked; the operator's admission rules are, as they need no CRD."""
    violations: list[Violation] = []
    for manifest in objects:
        if not is_graph(manifest):
            violations += kubernetes_schema_violations(manifest, version)
            continue
        if graph is not None:
            violations += crd_schema_violations(manifest, graph.validator)
            violations += cel_rule_violations(manifest, graph.rules)
        violations += admission_violations(manifest)
    return violations


def _report(stack: str, objects: Sequence[Manifest], violations: Sequence[Violation]) -> str:
    if not violations:
        return f"stack {stack}: {len(objects)} objects, no violations"
    lines = [f"stack {stack}: {len(violations)} violation(s) in {len(objects)} objects"]
    return "\n".join([*lines, *(f"  {violation}" for violation in violations)])


def _graph_checks_for(crd: Path | None, version: str) -> tuple[GraphChecks | None, str]:
    """The checks of `crd`, else of the shared CRD, and what to print about them."""
    path = crd or (SHARED_CRD if SHARED_CRD.exists() else None)
    if path is None:
        return None, (
            f"warning: {GRAPH_KIND} schema and CEL rules NOT checked: no CRD given and "
            f"{SHARED_CRD} is absent. Pass --crd FILE, e.g. from "
            f"`kubectl get crd {CRD_NAME} -o yaml > dgd-crd.yaml`."
        )
    checks = load_graph_checks(path, version)
    listing = "".join(f"\n  {line}" for line in rules_listing(checks.rules))
    return checks, f"{GRAPH_KIND} {GRAPH_VERSION} schema and CEL rules: {path}{listing}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.validate", description=__doc__.split("\n\n")[0]
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--stack", action="append", choices=SHIPPED_STACKS, help="a shipped stack (repeatable)"
    )
    which.add_argument("--all", action="store_true", help="every shipped stack (the default)")
    parser.add_argument(
        "--crd", type=Path, help=f"CRD YAML, e.g. `kubectl get crd {CRD_NAME} -o yaml`"
    )
    parser.add_argument(
        "--kubernetes-version", default=KUBERNETES_VERSION, help="default: %(default)s"
    )
    with masked_output():
        args = parser.parse_args(argv)
        try:
            return _validate(args)
        except (CrdError, RunError, ValueError) as error:  # a CRD, version or stack file it lacks
            print(f"validate: {error}", file=sys.stderr)
            return 2


def _validate(args: argparse.Namespace) -> int:
    graph, note = _graph_checks_for(args.crd, args.kubernetes_version)
    print(f"Kubernetes {args.kubernetes_version} schemas (strict); {note}")
    failed = False
    for stack in args.stack or SHIPPED_STACKS:
        objects, _ = example_render(stack)
        violations = validate_objects(objects, graph, args.kubernetes_version)
        print(_report(stack, objects, violations))
        failed = failed or bool(violations)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
