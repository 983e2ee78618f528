"""Fixtures for the stage tests. Tests marked `lab` (marker declared in pyproject.toml) start real
Dynamo processes from `.lab/`; they skip, saying why, when `bash lab/setup.sh` has not run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from moto.server import ThreadedMotoServer

from components.contract import StackOutputs
from components.routing import RECIPE_AFFINITY_TTL_SECONDS, RoutingProfile, routing_for
from lab.graph import GraphSpec

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def aiperf_export() -> dict[str, Any]:
    """A real AIPerf 0.13.0 export: session affinity, concurrency 2, 3 videos x 3 questions,
    8 output tokens, 4 mock workers (captured from `python -m lab ab` with a tiny workload)."""
    export: dict[str, Any] = json.loads((FIXTURES / "aiperf-session-affinity-c2.json").read_text())
    return export


def lab_outputs_for(profile: RoutingProfile, port: int = 8000) -> StackOutputs:
    """Stack outputs as a lab graph writes them, without starting one."""
    from lab.graph import lab_outputs

    spec = GraphSpec(routing=routing_for(profile, RECIPE_AFFINITY_TTL_SECONDS), workers=8)
    return lab_outputs(spec, port)


@pytest.fixture(params=list(RoutingProfile), ids=lambda p: p.value)
def any_outputs(request: pytest.FixtureRequest) -> StackOutputs:
    return lab_outputs_for(request.param)


# --- a real S3 endpoint on loopback, for the archive ---------------------------------------

ACCESS_KEY_ID = "testing-access-key-id"
SECRET_ACCESS_KEY = "testing-secret-access-key-not-real"


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    """moto's server: the S3 protocol over HTTP on 127.0.0.1, stopped after the module."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def aws_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Fake credentials from the environment, and nothing read from the developer's ~/.aws."""
    for name in [
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_S3",
        "AWS_REGION",
        "AWS_MAX_ATTEMPTS",
        "AWS_RETRY_MODE",
    ]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
