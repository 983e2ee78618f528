"""Validation of the objects a stack deploys, before `pulumi up` creates any of them.

Why this exists: `pulumi preview` checks nothing against the API server when it cannot reach the
cluster, and it skips a DynamoGraphDeployment entirely when the CRD is not installed, so a typo in
a manifest would first surface during `pulumi up`. Here every rendered object is checked:

* by an API server, the check of record: a throwaway local control plane (`testenv.cluster`:
  kube-apiserver 1.37.2 with the DGD CRD that `testenv.crd` finds) receives every object as a
  server-side dry run and judges it as it would judge `pulumi up`'s create: the built-in types'
  validation, the CRD's structural schema with its defaults, its CEL rules
  (`x-kubernetes-validations`), list-type map keys, quantities, and strict field validation (an
  unknown or duplicated field is refused, where `kubectl` and the Pulumi provider would only
  warn). Nothing is persisted (`dryRun=All`); what the server refuses comes back as one Violation
  per cause it names;
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
with the Dynamo platform's CRD installed). A dry run of a namespaced object needs its namespace to
exist, so the namespaces the objects use are created first (after each Namespace object itself was
dry-run) and deleted afterwards; a namespace that already existed is neither created nor deleted.
A Namespace object whose namespace exists is judged as an update (a server-side apply, dry run).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import (
    ConflictError,
    DynamicApiError,
    NotFoundError,
    ResourceNotFoundError,
)
from pulumi import RunError

from common.credentials import masked_output
from common.input_files import MAX_KUBECONFIG_BYTES
from common.parsers import CommandParser
from common.yaml_input import read_yaml_file
from components.kubeconfig import api_client as kubeconfig_client
from testenv import cluster
from testenv.crd import CRD_NAME, ENV, CrdError, crd_path, load_crd
from testenv.engine import EngineError, cache_home, located
from testenv.engine.pins import KUBERNETES_VERSION as SERVER_VERSION
from tools.golden import example_render
from tools.stack_files import SHIPPED_STACKS
from tools.violations import (
    API_SERVER,
    Manifest,
    Violation,
    admission_violations_of,
    metadata,
    object_name,
)

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

    where = f"context {context!r} of {kubeconfig}" if context else str(kubeconfig)
    try:
        return _judged(renders, kubeconfig, context)
    except (ConfigException, HTTPError, OSError) as error:
        raise ValueError(f"cannot reach the API server of {where}: {error}") from None
    except DynamicApiError as error:  # not a dry run's verdict on an object: those are violations
        raise ValueError(
            f"the API server of {where} answered {error.status} {error.reason}: give "
            "--kubeconfig credentials that may read the API and dry-run into a namespace"
        ) from None


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


DRY_RUN_QUERY = [("dryRun", "All"), ("fieldValidation", "Strict")]
APPLY_QUERY = [*DRY_RUN_QUERY, ("fieldManager", "cosmos3-validate"), ("force", "true")]
NAMESPACE_GONE_SECONDS = 60.0


def dry_run_violations(
    objects: Sequence[Manifest],
    kubeconfig: Path,
    keep_namespaces: bool = False,
    context: str | None = None,
) -> list[Violation]:
    """What the API server behind `kubeconfig` (its `context`, else its current one) refuses of
    `objects`, each created as a dry run. `keep_namespaces` leaves the namespaces made for them (a
    caller judging many object sets in one throwaway cluster saves their deletion each time)."""
    api_client = kubeconfig_client(kubeconfig, context)  # a KubeconfigError names the file
    client = DynamicClient(api_client)  # type: ignore[no-untyped-call]
    namespace_api = client.resources.get(api_version="v1", kind="Namespace")
    namespaces = [m for m in objects if m.get("kind") == "Namespace"]
    for manifest in namespaces:  # one an earlier run deleted would refuse its own create
        _settled(namespace_api, _name(manifest))
    violations = [v for m in namespaces for v in _dry_run(client, m)]
    with _namespaces_of(namespace_api, objects, keep_namespaces):
        violations += [v for m in objects if m not in namespaces for v in _dry_run(client, m)]
    return violations


def _dry_run(client: DynamicClient, manifest: Manifest) -> list[Violation]:
    name = object_name(manifest)
    try:
        resource = client.resources.get(
            api_version=manifest.get("apiVersion"), kind=manifest.get("kind")
        )
    except ResourceNotFoundError:
        message = f"the API server serves no {manifest.get('kind')} in {manifest.get('apiVersion')}"
        return [Violation(name, "", message, API_SERVER)]
    namespace = _namespace(manifest) if resource.namespaced else None
    try:
        try:
            client.request(
                "post",
                resource.path(namespace=namespace),
                body=dict(manifest),
                query_params=DRY_RUN_QUERY,
            )
        except ConflictError:
            if manifest.get("kind") != "Namespace":
                raise
            # It exists: judged as an update instead, a server-side apply as a dry run.
            client.request(
                "patch",
                resource.path(name=_name(manifest)),
                body=json.dumps(dict(manifest)),
                query_params=APPLY_QUERY,
                content_type="application/apply-patch+yaml",
            )
    except DynamicApiError as error:
        return refusal_violations(name, error.body)
    return []


def refusal_violations(name: str, body: str | bytes | None) -> list[Violation]:
    """One Violation per cause of a refusal (a Kubernetes Status), else one for its message."""
    try:
        status: dict[str, Any] = json.loads(body or "{}")
    except ValueError:
        status = {"message": str(body)}
    causes = status.get("details", {}).get("causes") or []
    if not causes:
        return [Violation(name, "", str(status.get("message", "refused")), API_SERVER)]
    return [
        Violation(name, str(cause.get("field", "")), _cause_message(cause), API_SERVER)
        for cause in causes
    ]


def _cause_message(cause: Mapping[str, Any]) -> str:
    """The cause's message without the field the Violation already names in front of it."""
    message = str(cause.get("message", cause.get("reason", "")))
    field = str(cause.get("field", ""))
    prefix = f"{field}: "
    return message[len(prefix) :] if field and message.startswith(prefix) else message


def _namespace(manifest: Manifest) -> str:
    return str(metadata(manifest).get("namespace") or "default")


def _name(manifest: Manifest) -> str:
    return str(metadata(manifest).get("name", ""))


def _settled(api: Any, namespace: str) -> bool:
    """Whether `namespace` exists, once it is not being deleted (an earlier run's, awaited: nothing
    can be created in a namespace being terminated, not even as a dry run)."""
    deadline = time.monotonic() + NAMESPACE_GONE_SECONDS
    while True:
        try:
            found = api.get(name=namespace)
        except NotFoundError:
            return False
        if found.status.phase != "Terminating" or time.monotonic() > deadline:
            return True
        time.sleep(0.2)


@contextmanager
def _namespaces_of(api: Any, objects: Sequence[Manifest], keep: bool) -> Iterator[None]:
    """The namespaces `objects` live in exist while the block runs; those made here go after,
    unless `keep`."""
    wanted = {_namespace(m) for m in objects if m.get("kind") != "Namespace"}
    made = [namespace for namespace in sorted(wanted) if not _settled(api, namespace)]
    for namespace in made:
        api.create(body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    try:
        yield
    finally:
        for namespace in [] if keep else made:
            api.delete(name=namespace)


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
