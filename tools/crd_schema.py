"""The DynamoGraphDeployment against its CRD's v1beta1 structural schema.

`load_graph_schema` reads the openAPIV3Schema out of a CRD file; `structural_to_json_schema`
rewrites it as the JSON Schema the API server effectively enforces (a plain JSON-schema validator
misreads a structural schema); `crd_schema_violations` reports what breaks it. This is
`tools.validate --offline`'s fallback, where no API server can be had: the CRD's CEL rules are
not evaluated offline, and the check of record is the API server's (`tools.dry_run`), which
`load_crd` reads the whole CRD for.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from jsonschema.protocols import Validator

from components.input_files import InputFileError, read_text
from tools.k8s_schemas import (
    KUBERNETES_VERSION,
    KubernetesValidator,
    kubernetes_registry,
    schema_violations,
)
from tools.violations import CRD_SCHEMA, Manifest, Violation

GRAPH_GROUP = "nvidia.com"
GRAPH_KIND = "DynamoGraphDeployment"
GRAPH_VERSION = "v1beta1"
CRD_NAME = "dynamographdeployments.nvidia.com"

GRAPH_SCHEMA_ID = f"https://kubernetes.io/api/{GRAPH_KIND.lower()}/{GRAPH_GROUP}/{GRAPH_VERSION}"
"""Beside kubernetes-validate's schemas, so `/api/_definitions.json` resolves from it."""
OBJECT_META = "/api/_definitions.json#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class CrdError(ValueError):
    """A CRD file that does not hold the DynamoGraphDeployment schema of the wanted version."""


def is_graph(manifest: Manifest) -> bool:
    api_version = str(manifest.get("apiVersion", ""))
    return manifest.get("kind") == GRAPH_KIND and api_version.startswith(f"{GRAPH_GROUP}/")


def load_graph_schema(path: Path, version: str = GRAPH_VERSION) -> dict[str, Any]:
    """The DGD's `openAPIV3Schema` from a CRD file.

    Accepts what `kubectl get crd dynamographdeployments.nvidia.com -o yaml` prints (the full
    CRD; `spec.versions[name=<version>].schema.openAPIV3Schema` is picked), a `kind: List` holding
    it, or a file that holds only the openAPIV3Schema object (YAML or JSON).
    """
    for document in _documents(path):
        if document.get("kind") == "CustomResourceDefinition":
            return _version_schema(path, document, version)
        if "properties" in document and "spec" in document["properties"]:
            return dict(document)
    raise CrdError(f"{path}: no CustomResourceDefinition {CRD_NAME} in it")


def load_crd(path: Path, version: str = GRAPH_VERSION) -> dict[str, Any]:
    """The whole DGD CRD from a file, as an API server can install it: its kind, name and spec
    (what `kubectl get crd -o yaml` adds beside them, such as status and resourceVersion, goes)."""
    for document in _documents(path):
        if document.get("kind") == "CustomResourceDefinition":
            _version_schema(path, document, version)  # the DGD's, serving `version`
            name = (document.get("metadata") or {}).get("name", CRD_NAME)
            return {
                "apiVersion": document.get("apiVersion", "apiextensions.k8s.io/v1"),
                "kind": "CustomResourceDefinition",
                "metadata": {"name": name},
                "spec": dict(document["spec"]),
            }
    raise CrdError(
        f"{path}: no whole CustomResourceDefinition {CRD_NAME} in it (the API server installs "
        f"the whole CRD: `kubectl get crd {CRD_NAME} -o yaml`; a bare schema serves --offline)"
    )


def _documents(path: Path) -> Iterator[Mapping[str, Any]]:
    try:
        text = read_text(path, "CRD file")
        documents = [doc for doc in yaml.load_all(text, Loader=_YAML_LOADER) if doc]
    except InputFileError as error:  # missing, a directory or device, too big, binary
        raise CrdError(f"cannot read a CRD: {error}") from None
    except (yaml.YAMLError, RecursionError) as error:
        raise CrdError(f"{path}: cannot read a CRD: {error}") from None
    return _flatten_lists(documents)


def _flatten_lists(documents: Iterable[Any]) -> Iterator[Mapping[str, Any]]:
    for document in documents:
        if isinstance(document, Mapping) and document.get("kind") == "List":
            yield from _flatten_lists(document.get("items") or [])
        elif isinstance(document, Mapping):
            yield document


def _version_schema(path: Path, crd: Mapping[str, Any], version: str) -> dict[str, Any]:
    spec = crd.get("spec") or {}
    if spec.get("group") != GRAPH_GROUP or (spec.get("names") or {}).get("kind") != GRAPH_KIND:
        found = f"{(spec.get('names') or {}).get('kind')} in group {spec.get('group')}"
        raise CrdError(f"{path}: the CRD defines {found}, not {GRAPH_KIND} in {GRAPH_GROUP}")
    for served in spec.get("versions") or []:
        if served.get("name") == version:
            schema: dict[str, Any] = served["schema"]["openAPIV3Schema"]
            return schema
    names = [served.get("name") for served in spec.get("versions") or []]
    raise CrdError(
        f"{path}: the CRD serves {names}, not {version}: is the Dynamo operator too old?"
    )


def structural_to_json_schema(
    node: Mapping[str, Any], *, in_junctor: bool = False
) -> dict[str, Any]:
    """A Kubernetes structural schema as the JSON Schema the API server effectively enforces.

    A plain JSON-schema validator ignores the `x-kubernetes-*` keywords, and it accepts any field a
    schema does not mention. The API server does neither, so this rewrite makes them explicit:

    * `x-kubernetes-int-or-string: true` accepts an integer or a string (`type` is dropped);
    * `nullable: true` also accepts null;
    * unknown fields: a structural schema *prunes* every field it does not specify (silently, on
      write), unless the node has `x-kubernetes-preserve-unknown-fields: true`. A pruned field is
      a field that never reaches the operator, so we treat it as an error: every object node
      without that marker gets `additionalProperties: false` (maps, which declare
      `additionalProperties`, keep theirs). Nodes with `x-kubernetes-embedded-resource` also allow
      `apiVersion`, `kind` and `metadata`, as the API server does.
    * Branches of `anyOf`/`allOf`/`oneOf`/`not` only constrain values in a structural schema
      (their fields are specified by the enclosing node), so they never get the pruning rule.

    List types (`x-kubernetes-list-type: map|set`) are enforced by `KubernetesValidator`.
    """
    schema = dict(node)
    if schema.get("x-kubernetes-int-or-string"):
        schema.pop("type", None)
        schema.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if schema.pop("nullable", False) and "type" in schema:
        schema["type"] = [schema["type"], "null"]
    if "properties" in schema:
        schema["properties"] = {
            key: structural_to_json_schema(value) for key, value in schema["properties"].items()
        }
    if isinstance(schema.get("items"), Mapping):
        schema["items"] = structural_to_json_schema(schema["items"])
    if isinstance(schema.get("additionalProperties"), Mapping):
        schema["additionalProperties"] = structural_to_json_schema(schema["additionalProperties"])
    for junctor in ("anyOf", "allOf", "oneOf"):
        if junctor in schema:
            schema[junctor] = [
                structural_to_json_schema(b, in_junctor=True) for b in schema[junctor]
            ]
    if isinstance(schema.get("not"), Mapping):
        schema["not"] = structural_to_json_schema(schema["not"], in_junctor=True)
    if schema.get("x-kubernetes-embedded-resource"):
        schema["properties"] = _EMBEDDED_RESOURCE_FIELDS | schema.get("properties", {})
    if _prunes_unknown_fields(schema, in_junctor):
        schema["additionalProperties"] = False
    return schema


_EMBEDDED_RESOURCE_FIELDS: dict[str, Any] = {
    "apiVersion": {"type": "string"},
    "kind": {"type": "string"},
    "metadata": {"type": "object"},
}


def _prunes_unknown_fields(schema: Mapping[str, Any], in_junctor: bool) -> bool:
    return (
        not in_junctor
        and schema.get("type") == "object"
        and "additionalProperties" not in schema
        and not schema.get("x-kubernetes-preserve-unknown-fields")
    )


def graph_schema_validator(
    openapi_schema: Mapping[str, Any], version: str = KUBERNETES_VERSION
) -> Validator:
    """A validator for DGD objects from the CRD's openAPIV3Schema.

    The CRD says only `metadata: {type: object}`; the API server checks the root metadata as an
    ObjectMeta, so we do the same with the Kubernetes schema of `version`.
    """
    schema = structural_to_json_schema(openapi_schema)
    schema["properties"] = dict(schema.get("properties", {})) | {"metadata": {"$ref": OBJECT_META}}
    schema["$id"] = GRAPH_SCHEMA_ID
    validator: Validator = KubernetesValidator(schema, registry=kubernetes_registry(version))
    return validator


def crd_schema_violations(manifest: Manifest, validator: Validator) -> list[Violation]:
    context = f"the {GRAPH_KIND} {GRAPH_VERSION} schema; the API server would prune it silently"
    return schema_violations(validator, manifest, context, CRD_SCHEMA)
