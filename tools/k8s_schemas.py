"""Core objects (Namespace, Secret, PVC, Job, ...) against the Kubernetes OpenAPI schemas.

The schemas are kubernetes-validate's, in its strict variant: an unknown field is a violation.
The JSON Schema validator built here (`KubernetesValidator`) also enforces Kubernetes' list types,
and `crd_schema` reuses it, and the schema registry, for the DynamoGraphDeployment.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from typing import Any

import jsonschema
from jsonschema.protocols import Validator
from kubernetes_validate.utils import all_versions, schema_contents
from referencing import Registry, Resource

from tools.violations import KUBERNETES_SCHEMA, Manifest, Violation, json_path, object_name

KUBERNETES_VERSION = "1.33.0"
"""The Kubernetes API whose schemas (shipped by kubernetes-validate) the core objects must match."""


def _list_type(
    validator: Validator, list_type: str, instance: Any, schema: Mapping[str, Any]
) -> Iterator[jsonschema.ValidationError]:
    """`x-kubernetes-list-type`, which JSON Schema does not know: the entries of a `map` list are
    unique by their `x-kubernetes-list-map-keys`, those of a `set` are unique. The API server
    refuses duplicates in custom resources, and server-side apply (Pulumi's default) refuses them
    in every object."""
    if not isinstance(instance, list) or list_type not in ("map", "set"):
        return
    keys = schema.get("x-kubernetes-list-map-keys") or []
    if list_type == "map" and not keys:
        return
    seen: list[Any] = []
    for index, item in enumerate(instance):
        identity = (
            [item.get(key) for key in keys]
            if list_type == "map" and isinstance(item, dict)
            else item
        )
        if identity in seen:
            what = (
                f"entry {dict(zip(keys, identity, strict=True))}" if list_type == "map" else "value"
            )
            message = f"duplicate {what}: this list's entries must be unique"
            yield jsonschema.ValidationError(message, path=[index])
        seen.append(identity)


KubernetesValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, validators={"x-kubernetes-list-type": _list_type}
)
"""JSON Schema 2020-12 plus the list types; used for the core schemas and the CRD alike."""


def kubernetes_schema_violations(
    manifest: Manifest, version: str = KUBERNETES_VERSION
) -> list[Violation]:
    """Check a core object against Kubernetes `version`'s strict schema (unknown fields fail).

    Uses kubernetes-validate's schema files and its file layout, but reports every error (where
    `kubernetes_validate.validate` raises the first one) and also enforces the list types.
    """
    schema = _kind_schema(str(manifest.get("kind")), str(manifest.get("apiVersion")), version)
    if schema is None:
        what = f"{manifest.get('apiVersion')} {manifest.get('kind')}"
        message = f"no schema for {what} in Kubernetes {version}"
        return [Violation(object_name(manifest), "kind", message, KUBERNETES_SCHEMA)]
    validator = KubernetesValidator(schema, registry=kubernetes_registry(version))
    context = f"the Kubernetes {version} schema of {manifest.get('kind')}"
    return schema_violations(validator, manifest, context, KUBERNETES_SCHEMA)


def _strict_schema_file(version: str, name: str) -> str:
    if version not in all_versions():
        raise ValueError(f"kubernetes-validate has no schemas for Kubernetes {version}")
    return f"kubernetes-json-schema/v{version}-local-strict/{name}"


@functools.cache
def kubernetes_registry(version: str) -> Registry[Any]:
    """The shared definitions (`/api/_definitions.json`) of Kubernetes `version`, for `$ref`s."""
    definitions = schema_contents(_strict_schema_file(version, "_definitions.json"), version)
    registry: Registry[Any] = Resource.from_contents(definitions) @ Registry()
    return registry


def _kind_schema(kind: str, api_version: str, version: str) -> dict[str, Any] | None:
    # kubernetes-validate's naming: `batch/v1` -> `batch-v1`, `rbac.authorization.k8s.io/v1` ->
    # `rbac-v1`, `v1` stays `v1`.
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    file = _strict_schema_file(version, f"{kind.lower()}-{group_version}.json")
    try:
        schema: dict[str, Any] = schema_contents(file, version)
    except FileNotFoundError:
        return None
    return schema


def schema_violations(
    validator: Validator, manifest: Manifest, context: str, check: str
) -> list[Violation]:
    """Every JSON-schema error of `manifest`, sorted by path; `context` names the schema."""
    name = object_name(manifest)
    errors = sorted(validator.iter_errors(manifest), key=lambda e: json_path(e.absolute_path))
    return [violation for error in errors for violation in _explain(error, name, context, check)]


def _explain(
    error: jsonschema.ValidationError, name: str, context: str, check: str
) -> list[Violation]:
    """One violation per error; an unknown-fields error becomes one violation per unknown field,
    each pointing at the field itself."""
    path = list(error.absolute_path)
    if error.validator == "additionalProperties" and error.validator_value is False:
        known = set(error.schema.get("properties", {}))
        return [
            Violation(
                name, json_path([*path, key]), f"unknown field {key!r}: not in {context}", check
            )
            for key in sorted(set(error.instance) - known)
        ]
    return [Violation(name, json_path(path), _short_message(error), check)]


def _short_message(error: jsonschema.ValidationError) -> str:
    """jsonschema's message, with a long list or object it quotes in full (`[...] is too long`
    for 30 components) shortened to its size."""
    message, quoted = str(error.message), repr(error.instance)
    if not isinstance(error.instance, list | dict) or len(quoted) <= 80:
        return message
    what = "items" if isinstance(error.instance, list) else "fields"
    return message.replace(quoted, f"<{len(error.instance)} {what}>")
