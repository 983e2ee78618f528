"""Fixtures of the archive tests: the S3 server, a fresh bucket per test and the hermetic AWS
environment come from tests/s3.py; every test here runs in that environment."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _hermetic_aws(aws_environment: None) -> None:
    """The server's identity from the environment for every test; nothing from ~/.aws."""
