"""What every validation check reports: a Violation, naming the object, the field and the check.

The checks (one module each) are told apart by the `check` field of what they report:

* KUBERNETES_SCHEMA: a core object against the strict Kubernetes OpenAPI schema (`k8s_schemas`);
* CRD_SCHEMA: the DynamoGraphDeployment against the CRD's structural schema (`crd_schema`);
* CRD_CEL: a CEL rule of the CRD (`x-kubernetes-validations`) that fails or errors (`crd_rules`);
* CEL_UNEVALUABLE: a CEL rule of the CRD this engine cannot compile or evaluate, by rule text and
  schema path, so it is never skipped silently (`crd_rules`);
* ADMISSION: a rule of the Dynamo operator's validating webhook, which is no CEL rule of the CRD
  (`admission`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

KUBERNETES_SCHEMA = "kubernetes-schema"
CRD_SCHEMA = "crd-schema"
CRD_CEL = "crd-cel"
CEL_UNEVALUABLE = "cel-unevaluable"
ADMISSION = "operator-admission"

PathPart = str | int
Manifest = Mapping[str, Any]


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
    metadata = manifest.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    return f"{manifest.get('kind', '?')}/{name or '?'}"
