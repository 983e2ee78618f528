"""The Dynamo operator's admission rules that are no CEL rule of the CRD.

The operator's validating webhook (ai-dynamo/dynamo `deploy/operator/internal/webhook/validation/`)
refuses more than the CRD's schema and CEL rules do; these are the ones that apply to what this
program renders, as recorded in ../shared/reference/dynamo-cosmos3-facts.md section 1.3:

* main-container: every component's podTemplate has a container named `main` with a non-empty
  image. The operator merges its defaults into `main` (a strategic merge by name) and refuses new
  components without it. The CRD's own CEL rule on `containers[*]` ("sidecar containers must
  specify a non-empty image") exempts `main`, so its image is checked here.

They are hand-written, unlike the CRD's CEL rules (which the API server evaluates: `dry_run`),
because the webhook is Go code that ships no machine-readable rules and no operator runs here; a
newer operator may add rules that are not checked here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from tools.violations import ADMISSION, Manifest, PathPart, Violation, json_path, object_name

MAIN_CONTAINER = "main"

Finding = tuple[list[PathPart], str]


def admission_violations(manifest: Manifest) -> list[Violation]:
    """The operator admission rules a DynamoGraphDeployment breaks."""
    name = object_name(manifest)
    return [
        Violation(name, json_path(path), message, ADMISSION)
        for index, component in enumerate(_components(manifest))
        for path, message in _main_container(component, ["spec", "components", index])
    ]


def _components(manifest: Manifest) -> list[Mapping[str, Any]]:
    spec = manifest.get("spec")
    components = spec.get("components") if isinstance(spec, Mapping) else None
    if not isinstance(components, list):
        return []  # the schema check reports a missing or mistyped list
    return [c if isinstance(c, Mapping) else {} for c in components]


def _main_container(component: Mapping[str, Any], at: list[PathPart]) -> Iterator[Finding]:
    containers_path = [*at, "podTemplate", "spec", "containers"]
    pod_spec = _mapping(_mapping(component.get("podTemplate")).get("spec"))
    containers = pod_spec.get("containers")
    entries = list(enumerate(containers)) if isinstance(containers, list) else []
    mains = [(i, _mapping(c)) for i, c in entries if _mapping(c).get("name") == MAIN_CONTAINER]
    if not mains:
        message = (
            f"component {component.get('name')!r} has no container named {MAIN_CONTAINER!r}: "
            "the operator merges its defaults into 'main' and refuses new components without it"
        )
        yield containers_path, message
    for index, container in mains:
        if not container.get("image"):
            yield [*containers_path, index, "image"], "'main' needs an image"


def _mapping(value: Any) -> Mapping[str, Any]:
    """`value`, or an empty mapping when it is none (the schema check reports bad types)."""
    return value if isinstance(value, Mapping) else {}
