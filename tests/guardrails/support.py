"""What the guardrail tests share: each shipped stack's rendered objects, rendered once."""

from __future__ import annotations

import copy
from typing import Any

from tools.golden import example_render

Manifest = dict[str, Any]

_renders: dict[str, list[Manifest]] = {}


def rendered(stack: str) -> list[Manifest]:
    """A deep copy of a shipped stack's objects (example site, secrets masked), rendered once."""
    if stack not in _renders:
        _renders[stack] = example_render(stack)[0]
    return copy.deepcopy(_renders[stack])


def one_of_kind(objects: list[Manifest], kind: str) -> Manifest:
    (found,) = [manifest for manifest in objects if manifest["kind"] == kind]
    return found
