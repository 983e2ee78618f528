"""Guardrail fixtures: each shipped stack's rendered objects, and the real DGD CRD when present.

The CRD is data the team keeps beside the clone (`../shared/reference/`), never in the project;
tests that need it skip, saying so, when it is absent.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from jsonschema.protocols import Validator

from tools import validate
from tools.golden import example_render
from tools.stack_files import SHIPPED_STACKS

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


@pytest.fixture(params=SHIPPED_STACKS)
def stack(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def crd_schema() -> dict[str, Any]:
    if not validate.SHARED_CRD.exists():
        pytest.skip(
            f"the DynamoGraphDeployment CRD is not at {validate.SHARED_CRD} (../shared/reference/)"
        )
    return validate.load_graph_schema(validate.SHARED_CRD)


@pytest.fixture(scope="session")
def graph_validator(crd_schema: dict[str, Any]) -> Validator:
    return validate.graph_schema_validator(crd_schema)
