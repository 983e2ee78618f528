"""Shared fixtures: the real Pulumi program run in-process under mocks (see tools/offline.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pulumi
import pytest

from tools.offline import (
    ProgramRun,
    example_site_for,
    owns_layer,
    run_program,
    shared_layer_outputs,
)

NGC_KEY = "nvapi-test-key-0123456789abcdefXYZ"
"""A fake NGC key; tests search rendered objects, outputs and logs for it."""


@pytest.fixture(autouse=True)
def fresh_pulumi_runtime() -> Iterator[None]:
    """A new event loop per test and no Pulumi runtime state carried from one test to the next."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield
    pulumi.runtime.reset_options()
    loop.close()
    asyncio.set_event_loop(None)


@pytest.fixture
def run_stack() -> Callable[..., ProgramRun]:
    """Run a shipped stack as a user would after the Quick start's `pulumi config set` lines."""

    def run(stack: str, overrides: dict[str, Any] | None = None, **kwargs: Any) -> ProgramRun:
        kwargs.setdefault("secrets", {"ngcApiKey": NGC_KEY} if owns_layer(stack) else {})
        kwargs.setdefault("stack_outputs", shared_layer_outputs())
        return run_program(stack, example_site_for(stack) | (overrides or {}), **kwargs)

    return run
