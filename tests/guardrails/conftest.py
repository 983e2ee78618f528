"""Guardrail fixtures: each shipped stack's name (its objects: tests/guardrails/support.py)."""

from __future__ import annotations

import pytest

from tools.stack_files import SHIPPED_STACKS


@pytest.fixture(params=SHIPPED_STACKS)
def stack(request: pytest.FixtureRequest) -> str:
    return str(request.param)
