"""What the guardrail tests share: each shipped stack's rendered objects, rendered once, and the
GitHub workflows as YAML."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from common import REPO_ROOT
from tools.golden import example_render

Manifest = dict[str, Any]

WORKFLOWS = REPO_ROOT / ".github" / "workflows"

_renders: dict[str, list[Manifest]] = {}


def rendered(stack: str) -> list[Manifest]:
    """A deep copy of a shipped stack's objects (example site, secrets masked), rendered once."""
    if stack not in _renders:
        _renders[stack] = example_render(stack)[0]
    return copy.deepcopy(_renders[stack])


def one_of_kind(objects: list[Manifest], kind: str) -> Manifest:
    (found,) = [manifest for manifest in objects if manifest["kind"] == kind]
    return found


def workflow(name: str) -> dict[str, Any]:
    loaded: dict[Any, Any] = yaml.safe_load((WORKFLOWS / name).read_text())
    loaded["on"] = loaded.pop(True, loaded.get("on"))  # YAML 1.1 reads the key `on` as true
    return loaded


def steps(name: str, job: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = workflow(name)["jobs"][job]["steps"]
    return found
