"""Every rendered object sent to a real API server as a server-side dry run: the check of record.

The local control plane (`testenv.cluster`: kube-apiserver 1.37 with the real DGD CRD installed)
judges each object as it would judge `pulumi up`'s create: the built-in types' validation, the
CRD's structural schema with its defaults, its CEL rules (`x-kubernetes-validations`), list-type
map keys, quantities, and strict field validation (an unknown or duplicated field is refused,
where `kubectl` and the Pulumi provider would only warn). Nothing is persisted
(`dryRun=All`); what the server refuses comes back as one Violation per cause it names.

A dry run of a namespaced object needs its namespace to exist, so the namespaces the objects use
are created first (after each Namespace object itself was dry-run) and deleted afterwards; a
namespace that already existed is neither created nor deleted. A Namespace object whose namespace
exists is judged as an update (a server-side apply, dry run).
"""

from __future__ import annotations

import json
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

from components.kubeconfig import api_client as kubeconfig_client
from tools.violations import API_SERVER, Manifest, Violation, metadata, object_name

DRY_RUN_QUERY = [("dryRun", "All"), ("fieldValidation", "Strict")]
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
        client.request(
            "post",
            resource.path(namespace=namespace),
            body=dict(manifest),
            query_params=DRY_RUN_QUERY,
        )
    except ConflictError as error:
        if manifest.get("kind") != "Namespace":
            return refusal_violations(name, error.body)
        return _applied(client, resource, manifest)  # it exists: judged as an update instead
    except DynamicApiError as error:
        return refusal_violations(name, error.body)
    return []


def _applied(client: DynamicClient, resource: Any, manifest: Manifest) -> list[Violation]:
    """A server-side apply of `manifest` as a dry run, for an object that exists already."""
    query = [*DRY_RUN_QUERY, ("fieldManager", "cosmos3-validate"), ("force", "true")]
    try:
        client.request(
            "patch",
            resource.path(name=_name(manifest)),
            body=json.dumps(dict(manifest)),
            query_params=query,
            content_type="application/apply-patch+yaml",
        )
    except DynamicApiError as error:
        return refusal_violations(object_name(manifest), error.body)
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
