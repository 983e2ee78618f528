"""Validation of the objects a stack deploys, before `pulumi up` creates any of them.

Why this exists: `pulumi preview` checks nothing against the API server when it cannot reach the
cluster, and it skips a DynamoGraphDeployment entirely when the CRD is not installed, so a typo in
a manifest would first surface during `pulumi up`. Here every rendered object is checked:

* by an API server, the check of record (`tools.dry_run`): a throwaway local control plane
  (`tools.cluster`: kube-apiserver 1.37.2, the real DGD CRD or the one `--crd` names) receives
  every object as a server-side dry run and judges it as it would judge `pulumi up`'s create:
  the built-in types' validation, the CRD's structural schema, defaults and CEL rules, list-type
  map keys, strict field validation;
* against the Dynamo operator's admission rules that are no CEL rule of the CRD (`tools.admission`,
  hand-written from the operator's source: no operator runs here).

Where `make engine` has not built the control plane's tools, or with `--offline`, a fallback of
schemas only runs instead, and says so: core objects against kubernetes-validate's strict schemas
(`tools.k8s_schemas`), the DGD against its CRD's structural schema (`tools.crd_schema`). The CRD's
CEL rules are then NOT evaluated; the run prints how many it left unchecked.

Every violation is reported, each with the object, the field, a message and the check that found
it (`tools.violations`).

    python -m tools.validate --all
    kubectl get crd dynamographdeployments.nvidia.com -o yaml > dgd-crd.yaml
    python -m tools.validate --stack session-affinity --crd dgd-crd.yaml
    python -m tools.validate --offline
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from jsonschema.protocols import Validator
from pulumi import RunError

from components.credentials import masked_output
from tools import cluster
from tools.admission import admission_violations
from tools.crd_schema import (
    CRD_NAME,
    GRAPH_KIND,
    GRAPH_VERSION,
    CrdError,
    crd_schema_violations,
    graph_schema_validator,
    is_graph,
    load_crd,
    load_graph_schema,
    structural_to_json_schema,
)
from tools.dry_run import dry_run_violations
from tools.engine import EngineError, cache_home, located
from tools.engine.pins import KUBERNETES_VERSION as SERVER_VERSION
from tools.golden import example_render
from tools.k8s_schemas import KUBERNETES_VERSION, kubernetes_schema_violations
from tools.stack_files import ROOT, SHIPPED_STACKS
from tools.violations import (
    ADMISSION,
    API_SERVER,
    CRD_SCHEMA,
    KUBERNETES_SCHEMA,
    Manifest,
    Violation,
)

__all__ = [
    "ADMISSION",
    "API_SERVER",
    "CRD_SCHEMA",
    "KUBERNETES_SCHEMA",
    "KUBERNETES_VERSION",
    "SHARED_CRD",
    "CrdError",
    "Violation",
    "graph_schema_validator",
    "kubernetes_schema_violations",
    "load_graph_schema",
    "main",
    "offline_violations",
    "server_violations",
    "structural_to_json_schema",
]

SHARED_CRD = ROOT.parent / "shared" / "reference" / "nvidia.com_dynamographdeployments.yaml"
"""Where the team keeps the real CRD, beside the clone; never copied into the project."""

Renders = dict[str, Sequence[Manifest]]


def server_violations(renders: Renders, crd: Path) -> dict[str, list[Violation]]:
    """Each stack's violations, judged by one throwaway local API server with `crd` installed,
    plus the operator's admission rules. Needs the engine's tools (`make engine`)."""
    engine = located(cache_home())
    with tempfile.TemporaryDirectory(prefix="cosmos3-validate-") as folder:
        running = cluster.up(Path(folder) / "cluster", engine, True, lambda _: None, crd)
        try:
            return {
                stack: dry_run_violations(objects, running.kubeconfig) + _admission(objects)
                for stack, objects in renders.items()
            }
        finally:
            running.down()


def offline_violations(
    objects: Iterable[Manifest], graph: Validator | None, version: str = KUBERNETES_VERSION
) -> list[Violation]:
    """The schemas-only fallback: core objects against the strict Kubernetes schemas, a DGD
    against its CRD's structural schema (when `graph` is given) and the admission rules."""
    objects = list(objects)
    violations: list[Violation] = []
    for manifest in objects:
        if not is_graph(manifest):
            violations += kubernetes_schema_violations(manifest, version)
        elif graph is not None:
            violations += crd_schema_violations(manifest, graph)
    return violations + _admission(objects)


def _admission(objects: Iterable[Manifest]) -> list[Violation]:
    return [v for manifest in objects if is_graph(manifest) for v in admission_violations(manifest)]


def cel_rule_count(path: Path) -> int:
    """How many CEL rules (`x-kubernetes-validations`) the CRD's served schema carries."""

    def count(node: object) -> int:
        if isinstance(node, dict):
            own = len(node.get("x-kubernetes-validations") or [])
            return own + sum(count(value) for value in node.values())
        if isinstance(node, list):
            return sum(count(value) for value in node)
        return 0

    return count(load_graph_schema(path))


def _report(stack: str, objects: Sequence[Manifest], violations: Sequence[Violation]) -> str:
    if not violations:
        return f"stack {stack}: {len(objects)} objects, no violations"
    lines = [f"stack {stack}: {len(violations)} violation(s) in {len(objects)} objects"]
    return "\n".join([*lines, *(f"  {violation}" for violation in violations)])


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
        "--offline",
        action="store_true",
        help="schemas only, no API server (the CRD's CEL rules are then not checked)",
    )
    parser.add_argument(
        "--kubernetes-version",
        default=KUBERNETES_VERSION,
        help="the schemas of --offline (default: %(default)s)",
    )
    with masked_output():
        args = parser.parse_args(argv)
        try:
            return _validate(args)
        except (CrdError, RunError, ValueError) as error:  # a CRD, version or stack file it lacks
            print(f"validate: {error}", file=sys.stderr)
            return 2


def _validate(args: argparse.Namespace) -> int:
    crd: Path | None = args.crd or (SHARED_CRD if SHARED_CRD.exists() else None)
    renders: Renders = {stack: example_render(stack)[0] for stack in args.stack or SHIPPED_STACKS}
    results, note = _checked(renders, crd, args)
    print(note)
    for stack, objects in renders.items():
        print(_report(stack, objects, results[stack]))
    return 1 if any(results.values()) else 0


def _checked(
    renders: Renders, crd: Path | None, args: argparse.Namespace
) -> tuple[dict[str, list[Violation]], str]:
    """Each stack's violations, and what was checked: by the API server unless it cannot be."""
    why_offline = "--offline" if args.offline else None
    if crd is None:
        why_offline = f"no CRD given and {SHARED_CRD} is absent (pass --crd FILE)"
    elif why_offline is None:
        try:
            load_crd(crd)  # a file that is no whole CRD is refused before a cluster starts
            results = server_violations(renders, crd)
        except (EngineError, cluster.ClusterError) as error:
            why_offline = f"no API server could be had: {error}"
        else:
            return results, f"kube-apiserver {SERVER_VERSION} with {crd}: every object dry-run"
    return _offline(renders, crd, args.kubernetes_version), _offline_note(crd, why_offline, args)


def _offline(renders: Renders, crd: Path | None, version: str) -> dict[str, list[Violation]]:
    graph = graph_schema_validator(load_graph_schema(crd), version) if crd else None
    return {
        stack: offline_violations(objects, graph, version) for stack, objects in renders.items()
    }


def _offline_note(crd: Path | None, why: str, args: argparse.Namespace) -> str:
    version = args.kubernetes_version
    if crd is None:
        graph = f"{GRAPH_KIND} schema and CEL rules NOT checked"
    else:
        unchecked = cel_rule_count(crd)
        graph = f"{GRAPH_KIND} {GRAPH_VERSION} schema: {crd}; its {unchecked} CEL rules NOT checked"
    return (
        f"warning: offline ({why}): Kubernetes {version} schemas (strict); {graph}. "
        "The API server's check needs `make engine` (docs/guardrails.md)."
    )


if __name__ == "__main__":
    sys.exit(main())
