"""Validation of the objects a stack deploys, before `pulumi up` creates any of them.

Why this exists: `pulumi preview` checks nothing against the API server when it cannot reach the
cluster, and it skips a DynamoGraphDeployment entirely when the CRD is not installed, so a typo in
a manifest would first surface during `pulumi up`. Here every rendered object is checked:

* by an API server, the check of record (`tools.dry_run`): a throwaway local control plane
  (`testenv.cluster`: kube-apiserver 1.37.2 with the DGD CRD that `testenv.crd` finds) receives
  every object as a server-side dry run and judges it as it would judge `pulumi up`'s create:
  the built-in types' validation, the CRD's structural schema, defaults and CEL rules, list-type
  map keys, strict field validation;
* against the Dynamo operator's admission rules that are no CEL rule of the CRD
  (`tools.violations`, hand-written from the operator's source: no operator runs here).

There is no offline fallback: a check without an API server would be a second, weaker oracle. It
needs `make engine` (the pinned control plane) and the CRD. Every violation is reported, each
with the object, the field, a message and the check that found it (`tools.violations`).

    python -m tools.validate --all
    kubectl get crd dynamographdeployments.nvidia.com -o yaml > dgd-crd.yaml
    python -m tools.validate --stack session-affinity --crd dgd-crd.yaml
    python -m tools.validate --all --kubeconfig ~/.kube/config --context my-cluster

With `--kubeconfig` the objects are judged by that cluster's API server instead (a user's own,
with the Dynamo platform's CRD installed): nothing is persisted, but a namespace an object needs
and the cluster lacks is created for its dry run and deleted afterwards.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from pulumi import RunError

from common.credentials import masked_output
from common.input_files import MAX_KUBECONFIG_BYTES
from common.parsers import CommandParser
from common.yaml_input import read_yaml_file
from testenv import cluster
from testenv.crd import CRD_NAME, ENV, CrdError, crd_path, load_crd
from testenv.engine import EngineError, cache_home, located
from testenv.engine.pins import KUBERNETES_VERSION as SERVER_VERSION
from tools.dry_run import dry_run_violations
from tools.golden import example_render
from tools.stack_files import SHIPPED_STACKS
from tools.violations import Manifest, Violation, admission_violations_of

Renders = dict[str, Sequence[Manifest]]


def server_violations(renders: Renders, crd: Path) -> dict[str, list[Violation]]:
    """Each stack's violations, judged by one throwaway local API server with `crd` installed,
    plus the operator's admission rules. Needs the engine's tools (`make engine`)."""
    engine = located(cache_home())
    with tempfile.TemporaryDirectory(prefix="cosmos3-validate-") as folder:
        running = cluster.up(Path(folder) / "cluster", engine, True, _say_warnings, crd)
        try:
            return _judged(renders, running.kubeconfig)
        finally:
            running.down()


def _on_their_cluster(
    renders: Renders, kubeconfig: Path, context: str | None
) -> dict[str, list[Violation]]:
    """Each stack's violations, judged by the API server of a cluster that already runs."""
    from kubernetes.config.config_exception import ConfigException
    from urllib3.exceptions import HTTPError

    try:
        return _judged(renders, kubeconfig, context)
    except (ConfigException, HTTPError, OSError) as error:
        where = f"context {context!r} of {kubeconfig}" if context else str(kubeconfig)
        raise ValueError(f"cannot reach the API server of {where}: {error}") from None


def _judged(
    renders: Renders, kubeconfig: Path, context: str | None = None
) -> dict[str, list[Violation]]:
    return {
        stack: dry_run_violations(objects, kubeconfig, context=context)
        + admission_violations_of(objects)
        for stack, objects in renders.items()
    }


def _say_warnings(line: str) -> None:
    if line.startswith("warning:"):  # a CRD of another version than the tested one
        print(line)


def _report(stack: str, objects: Sequence[Manifest], violations: Sequence[Violation]) -> str:
    if not violations:
        return f"stack {stack}: {len(objects)} objects, no violations"
    lines = [f"stack {stack}: {len(violations)} violation(s) in {len(objects)} objects"]
    return "\n".join([*lines, *(f"  {violation}" for violation in violations)])


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(prog="python -m tools.validate", description=__doc__.split("\n\n")[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--stack", action="append", choices=SHIPPED_STACKS, help="a shipped stack (repeatable)"
    )
    which.add_argument("--all", action="store_true", help="every shipped stack (the default)")
    parser.add_argument(
        "--kubeconfig", type=Path, help="judge on this cluster's API server instead of a local one"
    )
    parser.add_argument("--context", help="the kubeconfig's context (default: its current one)")
    parser.add_argument(
        "--crd",
        type=Path,
        help=f"CRD YAML, e.g. `kubectl get crd {CRD_NAME} -o yaml` (default: ${ENV}, else "
        "../shared/reference/ beside the clone)",
    )
    with masked_output():
        args = parser.parse_args(argv)
        try:
            return _validate(args)
        except (CrdError, EngineError, cluster.ClusterError, RunError, ValueError) as error:
            print(f"validate: {error}", file=sys.stderr)
            return 2


def _validate(args: argparse.Namespace) -> int:
    # The files first: one that cannot be used is refused before seconds of rendering.
    crd = None if args.kubeconfig is not None else crd_path(args.crd)
    if crd is None:
        read_yaml_file(args.kubeconfig, "kubeconfig", MAX_KUBECONFIG_BYTES)
    else:
        load_crd(crd)  # a file that is no whole CRD is refused before anything starts
    renders: Renders = {stack: example_render(stack)[0] for stack in args.stack or SHIPPED_STACKS}
    if crd is None:
        results = _on_their_cluster(renders, args.kubeconfig, args.context)
        print(f"the API server of {args.context or 'the current context'}: every object dry-run")
    else:
        results = server_violations(renders, crd)
        print(f"kube-apiserver {SERVER_VERSION} with {crd}: every object dry-run")
    for stack, objects in renders.items():
        print(_report(stack, objects, results[stack]))
    return 1 if any(results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
