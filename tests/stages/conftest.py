"""Fixtures for the stage tests. Tests marked `lab` (marker declared in pyproject.toml) start real
Dynamo processes from `.lab/`; they skip, saying why, when `bash lab/setup.sh` has not run."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.contract import StackOutputs
from components.routing import RoutingProfile
from tests.stages.support import FIXTURES, lab_outputs_for


@pytest.fixture
def aiperf_export() -> dict[str, Any]:
    """A real AIPerf 0.13.0 export: session affinity, concurrency 2, 3 videos x 3 questions,
    8 output tokens, 4 mock workers (captured from `python -m lab ab` with a tiny workload)."""
    export: dict[str, Any] = json.loads((FIXTURES / "aiperf-session-affinity-c2.json").read_text())
    return export


@pytest.fixture(params=list(RoutingProfile), ids=lambda p: p.value)
def any_outputs(request: pytest.FixtureRequest) -> StackOutputs:
    return lab_outputs_for(request.param)
