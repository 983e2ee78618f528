"""The store's failures, each an ArchiveError that names the bucket or endpoint and the fix, and
never a credential: a missing bucket, refused, missing or unknown credentials, no endpoint."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from components.routing import RoutingProfile
from stages.archive import ArchiveError, ArchiveLocation, archive_run, list_runs
from tests.s3 import ACCESS_KEY_ID, SECRET_ACCESS_KEY
from tests.stages.archive.helpers import make_results, record_for


def test_missing_bucket_is_named_with_a_fix(tmp_path: Path, endpoint: str) -> None:
    location = ArchiveLocation(bucket="no-such-archive-bucket", endpoint_url=endpoint)
    results = make_results(tmp_path / "results")

    record = record_for(RoutingProfile.ROUND_ROBIN, "r")
    attempts: list[Callable[[], object]] = [
        lambda: archive_run(results, record, location),
        lambda: list_runs(location),
    ]
    for attempt in attempts:
        with pytest.raises(ArchiveError) as failed:
            attempt()
        message = str(failed.value)
        assert "'no-such-archive-bucket' does not exist" in message
        assert endpoint in message
        assert "aws s3 mb s3://no-such-archive-bucket" in message


def test_bad_credentials_are_reported_without_the_secret(
    tmp_path: Path, location: ArchiveLocation, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = make_results(tmp_path / "results")
    wrong_secret = "wrong-secret-for-a-real-key-id"
    cases = {
        "InvalidAccessKeyId": ("not-" + ACCESS_KEY_ID, SECRET_ACCESS_KEY),
        "SignatureDoesNotMatch": (ACCESS_KEY_ID, wrong_secret),
    }
    for code, (key_id, secret) in cases.items():
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", key_id)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
        with pytest.raises(ArchiveError) as refused:
            list_runs(location)
        message = str(refused.value)
        assert f"({code})" in message
        assert location.bucket in message
        assert "AWS_ACCESS_KEY_ID" in message
        assert secret not in message

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY)
    archive_run(results, record_for(RoutingProfile.ROUND_ROBIN, "r1"), location)
    assert [run.run_id for run in list_runs(location)] == ["r1"]


def test_missing_credentials_are_named(
    location: ArchiveLocation, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")

    with pytest.raises(ArchiveError, match="no AWS credentials found.*AWS_PROFILE"):
        list_runs(location)


def test_unknown_aws_profile_is_named(location: ArchiveLocation) -> None:
    elsewhere = location.model_copy(update={"aws_profile": "no-such-profile"})

    with pytest.raises(ArchiveError, match="'no-such-profile' is not in the AWS config"):
        list_runs(elsewhere)


def test_unreachable_endpoint_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")

    with pytest.raises(ArchiveError) as failed:
        list_runs(ArchiveLocation(bucket="results", endpoint_url=closed))
    assert f"cannot reach the S3 endpoint {closed}" in str(failed.value)


def test_an_endpoint_password_is_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    unusable = ArchiveLocation(bucket="results", endpoint_url="http://user:hunter2-pw@[::1")

    with pytest.raises(ArchiveError) as failed:
        list_runs(unusable)
    assert "hunter2-pw" not in str(failed.value)


def test_endpoint_from_the_aws_environment(
    tmp_path: Path, location: ArchiveLocation, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", str(location.endpoint_url))
    from_environment = location.model_copy(update={"endpoint_url": None})

    archive_run(
        make_results(tmp_path / "r"),
        record_for(RoutingProfile.ROUND_ROBIN, "r1"),
        from_environment,
    )
    assert [run.run_id for run in list_runs(location)] == ["r1"]
