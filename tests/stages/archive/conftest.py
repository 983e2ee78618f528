"""Fixtures of the archive tests: a fresh bucket on moto's S3 server (the `endpoint` fixture of
tests/stages/conftest.py, on loopback) for every test, in a hermetic AWS environment."""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import boto3  # type: ignore[import-untyped]
import pytest

from stages.archive import ArchiveLocation


@pytest.fixture(autouse=True)
def _hermetic_aws(aws_environment: None) -> None:
    """Fake credentials from the environment for every test; nothing from ~/.aws."""


@pytest.fixture
def s3(endpoint: str) -> Any:
    return boto3.client("s3", endpoint_url=endpoint)


@pytest.fixture
def location(endpoint: str, s3: Any) -> ArchiveLocation:
    bucket = f"archive-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    return ArchiveLocation(bucket=bucket, endpoint_url=endpoint)


@pytest.fixture
def moto_auth(endpoint: str) -> Iterator[dict[str, str]]:
    """Turn on moto's credential checks; yields a real IAM key allowed to use S3."""
    iam = boto3.client("iam", endpoint_url=endpoint)
    user = f"archiver-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=user)
    policy = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
    }
    iam.put_user_policy(UserName=user, PolicyName="s3", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName=user)["AccessKey"]
    _set_moto_auth_free_requests(endpoint, "0")
    try:
        yield {"id": key["AccessKeyId"], "secret": key["SecretAccessKey"]}
    finally:
        _set_moto_auth_free_requests(endpoint, "inf")


def _set_moto_auth_free_requests(endpoint: str, count: str) -> None:
    """moto checks credentials after `count` requests (its INITIAL_NO_AUTH_ACTION_COUNT)."""
    request = urllib.request.Request(
        f"{endpoint}/moto-api/reset-auth",
        data=count.encode(),
        method="POST",
        headers={"Content-Type": "text/plain"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200
