"""What every validation check reports: a Violation, naming the object, the field and the check.

The checks (one module each) are told apart by the `check` field of what they report:

* API_SERVER: what a real API server refused of the object on a server-side dry run, the check of
  record (`dry_run`);
* ADMISSION: a rule of the Dynamo operator's validating webhook, which is no CEL rule of the CRD
  (`admission`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

API_SERVER = "api-server"
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
