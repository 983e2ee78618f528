"""Offline validation of the objects a stack deploys: schemas first, then the CRD's own rules.

Why this exists: `pulumi preview` checks nothing against the API server when it cannot reach the
cluster, and it skips a DynamoGraphDeployment entirely when the CRD is not installed, so a typo in
a manifest would first surface during `pulumi up`. Here every rendered object is checked, offline:

* core objects (Namespace, Secret, PVC, Job, ...) against the Kubernetes OpenAPI schemas of a
  pinned version, in kubernetes-validate's strict variant: an unknown field is a violation;
* the DynamoGraphDeployment against the CRD's v1beta1 `openAPIV3Schema`, read as the Kubernetes
  structural schema it is (see `structural_to_json_schema`);
* the CRD's CEL rules and the operator's admission rules that apply to what we render, which no
  JSON-schema validator evaluates (see `graph_rule_violations`).

Every violation is reported, each with the object, the JSON path of the field and a message.

    python -m tools.validate --all
    kubectl get crd dynamographdeployments.nvidia.com -o yaml > dgd-crd.yaml
    python -m tools.validate --stack session-affinity --crd dgd-crd.yaml
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from jsonschema.protocols import Validator
from kubernetes_validate.utils import all_versions, schema_contents
from referencing import Registry, Resource

from tools.golden import example_render
from tools.offline import ROOT, SHIPPED_STACKS

KUBERNETES_VERSION = "1.33.0"
"""The Kubernetes API the core objects are checked against (a schema set kubernetes-validate ships)."""

GRAPH_GROUP = "nvidia.com"
GRAPH_KIND = "DynamoGraphDeployment"
GRAPH_VERSION = "v1beta1"
CRD_NAME = "dynamographdeployments.nvidia.com"
SHARED_CRD = ROOT.parent / "shared" / "reference" / "nvidia.com_dynamographdeployments.yaml"
"""Where the team keeps the real CRD, beside the clone; never copied into the project."""

MAX_COMPONENTS = 25
"""The CRD's `spec.components` maxItems (a test compares it with the CRD)."""
MAIN_CONTAINER = "main"
WORKER_BACKEND_ANNOTATION = "nvidia.com/vllm-distributed-executor-backend"

GRAPH_SCHEMA_ID = f"https://kubernetes.io/api/{GRAPH_KIND.lower()}/{GRAPH_GROUP}/{GRAPH_VERSION}"
"""Beside kubernetes-validate's schemas, so `/api/_definitions.json` resolves from it."""
OBJECT_META = "/api/_definitions.json#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

KUBERNETES_SCHEMA = "kubernetes-schema"
CRD_SCHEMA = "crd-schema"
GRAPH_RULES = "graph-rules"

PathPart = str | int
Manifest = Mapping[str, Any]


class CrdError(ValueError):
    """A CRD file that does not hold the DynamoGraphDeployment v1beta1 schema."""


@dataclass(frozen=True)
class Violation:
    """One problem: which object, which field (a JSON path), what is wrong, found by which check."""

    object: str
    path: str
    message: str
    check: str

    def __str__(self) -> str:
        return f"{self.object}: {self.path or '(the object)'}: {self.message} [{self.check}]"


def json_path(parts: Iterable[PathPart]) -> str:
    """`spec.components[1].podTemplate`; keys that are not plain names are quoted:
    `metadata.annotations["pulumi.com/waitFor"]`."""
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_$][A-Za-z0-9_$-]*", part):
            text += f".{part}" if text else part
        else:
            text += f'["{part}"]'
    return text


def object_name(manifest: Manifest) -> str:
    metadata = manifest.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    return f"{manifest.get('kind', '?')}/{name or '?'}"


def is_graph(manifest: Manifest) -> bool:
    api_version = str(manifest.get("apiVersion", ""))
    return manifest.get("kind") == GRAPH_KIND and api_version.startswith(f"{GRAPH_GROUP}/")


# --- Kubernetes' own schema keyword ------------------------------------------------------------


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


# --- Core objects: the Kubernetes OpenAPI schemas ------------------------------------------------


def kubernetes_schema_violations(
    manifest: Manifest, version: str = KUBERNETES_VERSION
) -> list[Violation]:
    """Check a core object against Kubernetes `version`'s strict schema (unknown fields fail).

    Uses kubernetes-validate's schema files and its file layout, but reports every error (where
    `kubernetes_validate.validate` raises the first one) and also enforces the list types.
    """
    schema = _kubernetes_kind_schema(
        str(manifest.get("kind")), str(manifest.get("apiVersion")), version
    )
    if schema is None:
        what = f"{manifest.get('apiVersion')} {manifest.get('kind')}"
        message = f"no schema for {what} in Kubernetes {version}"
        return [Violation(object_name(manifest), "kind", message, KUBERNETES_SCHEMA)]
    validator = KubernetesValidator(schema, registry=_kubernetes_registry(version))
    context = f"the Kubernetes {version} schema of {manifest.get('kind')}"
    return _schema_violations(validator, manifest, context, KUBERNETES_SCHEMA)


def _strict_schema_file(version: str, name: str) -> str:
    if version not in all_versions():
        raise ValueError(f"kubernetes-validate has no schemas for Kubernetes {version}")
    return f"kubernetes-json-schema/v{version}-local-strict/{name}"


@functools.cache
def _kubernetes_registry(version: str) -> Registry[Any]:
    definitions = schema_contents(_strict_schema_file(version, "_definitions.json"), version)
    registry: Registry[Any] = Resource.from_contents(definitions) @ Registry()
    return registry


def _kubernetes_kind_schema(kind: str, api_version: str, version: str) -> dict[str, Any] | None:
    # kubernetes-validate's naming: `batch/v1` -> `batch-v1`, `rbac.authorization.k8s.io/v1` ->
    # `rbac-v1`, `v1` stays `v1`.
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    file = _strict_schema_file(version, f"{kind.lower()}-{group_version}.json")
    try:
        schema: dict[str, Any] = schema_contents(file, version)
    except FileNotFoundError:
        return None
    return schema


# --- The DynamoGraphDeployment: the CRD's structural schema -------------------------------------


def load_graph_schema(path: Path, version: str = GRAPH_VERSION) -> dict[str, Any]:
    """The DGD's `openAPIV3Schema` from a CRD file.

    Accepts what `kubectl get crd dynamographdeployments.nvidia.com -o yaml` prints (the full
    CRD; `spec.versions[name=<version>].schema.openAPIV3Schema` is picked), a `kind: List` holding
    it, or a file that holds only the openAPIV3Schema object (YAML or JSON).
    """
    try:
        documents = [doc for doc in yaml.load_all(path.read_text(), Loader=_YAML_LOADER) if doc]
    except (OSError, yaml.YAMLError) as error:
        raise CrdError(f"{path}: cannot read a CRD: {error}") from error
    for document in _flatten_lists(documents):
        if document.get("kind") == "CustomResourceDefinition":
            return _version_schema(path, document, version)
        if "properties" in document and "spec" in document["properties"]:
            return dict(document)
    raise CrdError(f"{path}: no CustomResourceDefinition {CRD_NAME} in it")


_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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
    validator: Validator = KubernetesValidator(schema, registry=_kubernetes_registry(version))
    return validator


def crd_schema_violations(manifest: Manifest, validator: Validator) -> list[Violation]:
    context = f"the {GRAPH_KIND} {GRAPH_VERSION} schema; the API server would prune it silently"
    return _schema_violations(validator, manifest, context, CRD_SCHEMA)


# --- Schema errors as violations ----------------------------------------------------------------


def _schema_violations(
    validator: Validator, manifest: Manifest, context: str, check: str
) -> list[Violation]:
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
    return [Violation(name, json_path(path), error.message, check)]


# --- The CRD's rules that a JSON-schema validator cannot see ------------------------------------

RulePath = list[PathPart]
RuleResult = Iterator[tuple[RulePath, str]]


def graph_rule_violations(manifest: Manifest) -> list[Violation]:
    """The DGD rules beyond its JSON schema: the CRD's `x-kubernetes-validations` (CEL) and the
    operator's admission rules, as far as they apply to what this program renders.

    Implemented (CEL rule of the CRD unless marked admission):
      * spec.restart is unset on create (CEL on spec; `oldSelf` absent means create);
      * spec.components: at most MAX_COMPONENTS (maxItems), names unique case-insensitively, at
        most one `type: epp`;
      * per component: eppConfig only on `type: epp`, and then exactly one of configMapRef or
        config; minAvailable <= replicas unless replicas is 0; a container named `main` with a
        non-empty image (admission: "new components must include a container named main");
        sidecar and init containers name an image; the vLLM backend annotation is mp or ray.
    Not implemented: transition rules (minAvailable immutable needs the stored object) and the
    rules of fields we never render (experimental checkpoint, gpuMemoryService, kvTransferPolicy).
    """
    spec = manifest.get("spec")
    if not isinstance(spec, Mapping):
        return []
    name = object_name(manifest)
    rules: tuple[Callable[[Mapping[str, Any]], RuleResult], ...] = (
        _restart_unset_on_create,
        _components_within_limit,
        _component_names_unique,
        _at_most_one_epp,
        _component_rules,
    )
    return [
        Violation(name, json_path(["spec", *path]), message, GRAPH_RULES)
        for rule in rules
        for path, message in rule(spec)
    ]


def _components(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    components = spec.get("components")
    if not isinstance(components, list):
        return []
    return [c if isinstance(c, Mapping) else {} for c in components]


def _restart_unset_on_create(spec: Mapping[str, Any]) -> RuleResult:
    if "restart" in spec:
        message = (
            "must be unset on create (set spec.restart.id on an existing graph to request a "
            "restart, e.g. with kubectl patch; it is an operation, not configuration)"
        )
        yield ["restart"], message


def _components_within_limit(spec: Mapping[str, Any]) -> RuleResult:
    count = len(_components(spec))
    if count > MAX_COMPONENTS:
        yield ["components"], f"{count} components, the CRD allows at most {MAX_COMPONENTS}"


def _component_names_unique(spec: Mapping[str, Any]) -> RuleResult:
    first_index: dict[str, int] = {}
    for index, component in enumerate(_components(spec)):
        name = component.get("name")
        if not isinstance(name, str):
            continue
        if name.lower() in first_index:
            message = (
                f"component name {name!r} repeats components[{first_index[name.lower()]}]'s name; "
                "names must be unique case-insensitively (they become lower-case resource names)"
            )
            yield ["components", index, "name"], message
        first_index.setdefault(name.lower(), index)


def _at_most_one_epp(spec: Mapping[str, Any]) -> RuleResult:
    epp = [index for index, c in enumerate(_components(spec)) if c.get("type") == "epp"]
    for index in epp[1:]:
        yield ["components", index, "type"], f"a second epp component (first: components[{epp[0]}])"


def _component_rules(spec: Mapping[str, Any]) -> RuleResult:
    for index, component in enumerate(_components(spec)):
        for path, message in _one_component(component):
            yield ["components", index, *path], message


def _one_component(component: Mapping[str, Any]) -> RuleResult:
    yield from _epp_config(component)
    yield from _min_available(component)
    pod_spec = _at(component, "podTemplate", "spec")
    yield from _main_container(component, pod_spec)
    yield from _container_images(pod_spec)
    yield from _backend_annotation(component)


def _at(value: Any, *keys: str) -> Mapping[str, Any]:
    """The mapping at `keys` below `value`, or an empty one (the schema check reports bad types)."""
    for key in keys:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def _epp_config(component: Mapping[str, Any]) -> RuleResult:
    if "eppConfig" not in component:
        return
    if component.get("type") != "epp":
        yield ["eppConfig"], "eppConfig may only be set when type is epp"
    config = _at(component, "eppConfig")
    if ("configMapRef" in config) == ("config" in config):
        yield ["eppConfig"], "exactly one of configMapRef or config must be specified"


def _min_available(component: Mapping[str, Any]) -> RuleResult:
    minimum = component.get("minAvailable")
    replicas = component.get("replicas", 1)
    if not isinstance(minimum, int) or not isinstance(replicas, int) or replicas == 0:
        return
    if minimum > replicas:
        yield ["minAvailable"], f"minAvailable {minimum} exceeds replicas {replicas}"


def _containers(pod_spec: Mapping[str, Any], field: str) -> list[tuple[int, Mapping[str, Any]]]:
    containers = pod_spec.get(field)
    if not isinstance(containers, list):
        return []
    return [(index, _at(container)) for index, container in enumerate(containers)]


def _main_container(component: Mapping[str, Any], pod_spec: Mapping[str, Any]) -> RuleResult:
    containers = _containers(pod_spec, "containers")
    mains = [(index, c) for index, c in containers if c.get("name") == MAIN_CONTAINER]
    if not mains:
        message = (
            f"component {component.get('name')!r} has no container named {MAIN_CONTAINER!r}: "
            "the operator merges its defaults into 'main' and refuses new components without it"
        )
        yield ["podTemplate", "spec", "containers"], message
    for index, container in mains:
        if not container.get("image"):
            yield ["podTemplate", "spec", "containers", index, "image"], "'main' needs an image"


def _container_images(pod_spec: Mapping[str, Any]) -> RuleResult:
    for field in ("containers", "initContainers"):
        for index, container in _containers(pod_spec, field):
            role = "init" if field == "initContainers" else "sidecar"
            if role == "sidecar" and container.get("name") == MAIN_CONTAINER:
                continue  # checked by _main_container
            if not container.get("image"):
                message = (
                    f"{role} container {container.get('name')!r} must specify a non-empty image"
                )
                yield ["podTemplate", "spec", field, index, "image"], message


def _backend_annotation(component: Mapping[str, Any]) -> RuleResult:
    value = _at(component, "podTemplate", "metadata", "annotations").get(WORKER_BACKEND_ANNOTATION)
    if value is not None and str(value).lower() not in ("mp", "ray"):
        path: RulePath = ["podTemplate", "metadata", "annotations", WORKER_BACKEND_ANNOTATION]
        yield path, f"must be mp or ray (case-insensitively), got {value!r}"


# --- Everything together ------------------------------------------------------------------------


def validate_objects(
    objects: Iterable[Manifest],
    graph_validator: Validator | None,
    version: str = KUBERNETES_VERSION,
) -> list[Violation]:
    """All violations of a stack's objects. Without `graph_validator` (no CRD at hand) the DGD's
    schema is not checked; its CEL and admission rules are, as they need no CRD."""
    violations: list[Violation] = []
    for manifest in objects:
        if not is_graph(manifest):
            violations += kubernetes_schema_violations(manifest, version)
            continue
        if graph_validator is not None:
            violations += crd_schema_violations(manifest, graph_validator)
        violations += graph_rule_violations(manifest)
    return violations


def _report(stack: str, objects: Sequence[Manifest], violations: Sequence[Violation]) -> str:
    if not violations:
        return f"stack {stack}: {len(objects)} objects, no violations"
    lines = [f"stack {stack}: {len(violations)} violation(s) in {len(objects)} objects"]
    return "\n".join([*lines, *(f"  {violation}" for violation in violations)])


def _graph_validator_for(crd: Path | None, version: str) -> tuple[Validator | None, str]:
    path = crd or (SHARED_CRD if SHARED_CRD.exists() else None)
    if path is None:
        return None, (
            f"warning: {GRAPH_KIND} schema NOT checked: no CRD given and {SHARED_CRD} is absent. "
            f"Pass --crd FILE, e.g. from `kubectl get crd {CRD_NAME} -o yaml > dgd-crd.yaml`."
        )
    validator = graph_schema_validator(load_graph_schema(path), version)
    return validator, f"{GRAPH_KIND} {GRAPH_VERSION} schema: {path}"


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
    args = parser.parse_args(argv)
    try:
        graph_validator, note = _graph_validator_for(args.crd, args.kubernetes_version)
    except CrdError as error:
        print(error, file=sys.stderr)
        return 2
    print(f"Kubernetes {args.kubernetes_version} schemas (strict); {note}")
    failed = False
    for stack in args.stack or SHIPPED_STACKS:
        objects, _ = example_render(stack)
        violations = validate_objects(objects, graph_validator, args.kubernetes_version)
        print(_report(stack, objects, violations))
        failed = failed or bool(violations)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
