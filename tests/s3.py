"""The S3 fixtures (a pytest plugin, `pytest_plugins` in tests/conftest.py): one real S3 server
for the test session, SeaweedFS on loopback (`testenv.s3_server`), a fresh bucket per test, and a
hermetic AWS environment signed with the server's one identity. A test that asks for `endpoint`
is a real-tier test (tests/conftest.py marks it): it needs `make s3-server`."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stages.archive import ArchiveLocation
from testenv import s3_server

ACCESS_KEY_ID = "testing-access-key-id"
SECRET_ACCESS_KEY = "testing-secret-access-key-not-real"
"""The identity the server accepts: made for the tests, never a real key."""


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[s3_server.S3Server]:
    identity = s3_server.Identity(ACCESS_KEY_ID, SECRET_ACCESS_KEY)
    server = s3_server.start(tmp_path_factory.mktemp("seaweedfs"), identity)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def endpoint(seaweed: s3_server.S3Server) -> str:
    return seaweed.endpoint


@pytest.fixture
def s3(seaweed: s3_server.S3Server) -> Any:
    """A boto3 S3 client signed with the server's identity."""
    return seaweed.client()


@pytest.fixture
def location(seaweed: s3_server.S3Server, s3: Any) -> Iterator[ArchiveLocation]:
    """A new bucket, emptied and removed afterwards (each bucket is a collection of volumes)."""
    bucket = f"archive-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    yield ArchiveLocation(bucket=bucket, endpoint_url=seaweed.endpoint)
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            s3.delete_object(Bucket=bucket, Key=item["Key"])
    s3.delete_bucket(Bucket=bucket)


@pytest.fixture
def aws_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The server's identity from the environment, and nothing read from the developer's ~/.aws."""
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
    monkeypatch.setenv("AWS_DEFAULT_REGION", s3_server.REGION)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
