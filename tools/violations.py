"""What every validation check reports: a Violation, naming the object, the field and the check
(API_SERVER: what a real API server refused on a server-side dry run, the check of record,
`tools.validate`; ADMISSION: a rule of the Dynamo operator's validating webhook, here).

The webhook (ai-dynamo/dynamo `deploy/operator/internal/webhook/validation/`) refuses more than the
CRD's schema and CEL rules do; these are the ones that apply to what this program renders, as read
in that source:

* main-container: every component's podTemplate has a container named `main` with a non-empty
  image. The operator merges its defaults into `main` (a strategic merge by name) and refuses new
  components without it. The CRD's own CEL rule on `containers[*]` ("sidecar containers must
  specify a non-empty image") exempts `main`, so its image is checked here.

They are hand-written, unlike the CRD's CEL rules (which the API server evaluates), because the
webhook is Go code that ships no machine-readable rules and no operator runs here; a newer operator
may add rules that are not checked here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from components.names import MAIN_CONTAINER
from testenv.crd import GRAPH_KIND

API_SERVER = "api-server"
ADMISSION = "operator-admission"

PathPart = str | int
Manifest = Mapping[str, Any]
Finding = tuple[list[PathPart], str]


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
    """`Kind/name`, with `?` for what is missing."""
    return f"{manifest.get('kind', '?')}/{metadata(manifest).get('name') or '?'}"


def metadata(manifest: Manifest) -> Mapping[str, Any]:
    return mapping(manifest.get("metadata"))


def admission_violations(manifest: Manifest) -> list[Violation]:
    """The operator admission rules a DynamoGraphDeployment breaks."""
    name = object_name(manifest)
    return [
        Violation(name, json_path(path), message, ADMISSION)
        for index, component in enumerate(_components(manifest))
        for path, message in _main_container(component, ["spec", "components", index])
    ]


def _components(manifest: Manifest) -> list[Mapping[str, Any]]:
    components = mapping(manifest.get("spec")).get("components")
    if not isinstance(components, list):
        return []  # the schema check reports a missing or mistyped list
    return [c if isinstance(c, Mapping) else {} for c in components]


def _main_container(component: Mapping[str, Any], at: list[PathPart]) -> Iterator[Finding]:
    containers_path = [*at, "podTemplate", "spec", "containers"]
    pod_spec = mapping(mapping(component.get("podTemplate")).get("spec"))
    containers = pod_spec.get("containers")
    entries = list(enumerate(containers)) if isinstance(containers, list) else []
    mains = [(i, mapping(c)) for i, c in entries if mapping(c).get("name") == MAIN_CONTAINER]
    if not mains:
        message = (
            f"component {component.get('name')!r} has no container named {MAIN_CONTAINER!r}: "
            "the operator merges its defaults into 'main' and refuses new components without it"
        )
        yield containers_path, message
    for index, container in mains:
        if not container.get("image"):
            yield [*containers_path, index, "image"], "'main' needs an image"


def mapping(value: Any) -> Mapping[str, Any]:
    """`value`, or an empty mapping when it is none (the schema check reports bad types)."""
    return value if isinstance(value, Mapping) else {}


def admission_violations_of(objects: Iterable[Manifest]) -> list[Violation]:
    """The operator's admission rules, on every graph among `objects`."""
    return [v for manifest in objects if is_graph(manifest) for v in admission_violations(manifest)]


def is_graph(manifest: Manifest) -> bool:
    return manifest.get("kind") == GRAPH_KIND and str(manifest.get("apiVersion", "")).startswith(
        "nvidia.com/"
    )
