"""The archive against a real S3 endpoint: moto's server on loopback, spoken to over HTTP.

The server is started once for the module and stopped at teardown. Every test gets its own bucket
and a hermetic AWS environment: fake credentials from environment variables, no ~/.aws files, no
instance metadata lookups.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]
import pytest
from pydantic import ValidationError

from components.contract import StackOutputs
from components.routing import SESSION_HEADER, RoutingProfile
from stages.archive import (
    ArchiveConflictError,
    ArchiveError,
    ArchiveLocation,
    RunNotFoundError,
    RunRecord,
    Stage,
    archive_run,
    current_commit,
    download_record,
    download_run,
    fetch_record,
    latest_run,
    list_runs,
    new_run_id,
)
from stages.archive_cli import main as archive_cli
from tests.stages.conftest import ACCESS_KEY_ID, SECRET_ACCESS_KEY

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)

# --- fixtures -------------------------------------------------------------------------


pytestmark = pytest.mark.usefixtures("aws_environment")


@pytest.fixture
def s3(endpoint: str) -> Any:
    return boto3.client("s3", endpoint_url=endpoint)


@pytest.fixture
def location(endpoint: str, s3: Any) -> ArchiveLocation:
    bucket = f"archive-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    return ArchiveLocation(bucket=bucket, endpoint_url=endpoint)


def outputs_for(profile: RoutingProfile) -> StackOutputs:
    affinity = profile is RoutingProfile.SESSION_AFFINITY
    graph = f"cosmos3-nano-reasoner-agg-h200-{profile}"
    return StackOutputs.model_validate(
        {
            "namespace": "cosmos3",
            "profile": profile.value,
            "graphName": graph,
            "frontendService": f"{graph}-frontend",
            "frontendPort": 8000,
            "frontendUrl": f"http://{graph}-frontend.cosmos3.svc.cluster.local:8000",
            "modelsUrl": f"http://{graph}-frontend.cosmos3.svc.cluster.local:8000/v1/models",
            "servedModel": "nvidia/cosmos3-nano-reasoner",
            "sessionAffinityTtlSeconds": 300 if affinity else None,
            "sessionHeader": SESSION_HEADER if affinity else None,
            "workerReplicas": 8,
            "modelCacheClaim": "shared-model-cache",
            "portForwardCommand": f"kubectl -n cosmos3 port-forward svc/{graph}-frontend 8000",
        }
    )


def record_for(
    profile: RoutingProfile,
    run_id: str,
    created_at: datetime = T0,
    stage: Stage = Stage.PERF,
    stack: str | None = None,
) -> RunRecord:
    return RunRecord.create(
        stack=stack or profile.value,
        stage=stage,
        outputs=outputs_for(profile),
        run_id=run_id,
        created_at=created_at,
    )


def make_results(directory: Path, marker: str = "first") -> Path:
    """A result directory like a perf stage's: nested exports, binary data, an empty file."""
    files = {
        "summary.json": json.dumps({"marker": marker, "requestThroughput": 1.5}).encode(),
        "aiperf/concurrency-1/profile_export_aiperf.json": b'{"ttft": {"p50": 120.5}}',
        "aiperf/concurrency-16/profile_export.jsonl": b'{"request": 1}\n' * 500,
        "chart.png": bytes(range(256)) * 40,
        "smoke/empty.txt": b"",
        "manifest.json": b'{"a result file": "not the archive manifest"}',
    }
    for name, data in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return directory


def tree(directory: Path) -> dict[str, bytes]:
    return {
        path.relative_to(directory).as_posix(): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def bucket_keys(s3: Any, location: ArchiveLocation) -> list[str]:
    listing = s3.list_objects_v2(Bucket=location.bucket)
    return sorted(item["Key"] for item in listing.get("Contents", []))


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
    set_moto_auth_free_requests(endpoint, "0")
    try:
        yield {"id": key["AccessKeyId"], "secret": key["SecretAccessKey"]}
    finally:
        set_moto_auth_free_requests(endpoint, "inf")


def set_moto_auth_free_requests(endpoint: str, count: str) -> None:
    """moto checks credentials after `count` requests (its INITIAL_NO_AUTH_ACTION_COUNT)."""
    request = urllib.request.Request(
        f"{endpoint}/moto-api/reset-auth",
        data=count.encode(),
        method="POST",
        headers={"Content-Type": "text/plain"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


# --- round trip -----------------------------------------------------------------------


def test_round_trip_restores_identical_files(
    tmp_path: Path, location: ArchiveLocation, s3: Any
) -> None:
    results = make_results(tmp_path / "results")
    record = record_for(RoutingProfile.ROUND_ROBIN, "20261130T120000Z-abc1234")

    stored = archive_run(results, record, location)
    [listed] = list_runs(location)
    pulled = download_run(
        location, "round-robin", "round-robin", stored.run_id, tmp_path / "pulled"
    )

    assert listed == stored
    assert tree(pulled) == tree(results)
    for entry in listed.files:
        data = (pulled / entry.name).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (
            entry.size,
            entry.sha256,
        )
    assert {entry.name for entry in listed.files} == set(tree(results))
    assert listed.stack_outputs() == outputs_for(RoutingProfile.ROUND_ROBIN)


def test_keys_follow_the_documented_layout(
    tmp_path: Path, location: ArchiveLocation, s3: Any
) -> None:
    results = make_results(tmp_path / "results")
    archive_run(results, record_for(RoutingProfile.ROUND_ROBIN, "run-1"), location)

    base = "cosmos3-nano-reasoner/round-robin/round-robin/run-1/perf"
    expected = [f"{base}/files/{name}" for name in tree(results)] + [f"{base}/manifest.json"]
    assert bucket_keys(s3, location) == sorted(expected)


def test_manifest_records_run_and_holds_no_environment(
    tmp_path: Path, location: ArchiveLocation, s3: Any
) -> None:
    results = make_results(tmp_path / "results")
    archive_run(results, record_for(RoutingProfile.SESSION_AFFINITY, "run-1"), location)

    key = "cosmos3-nano-reasoner/session-affinity/session-affinity/run-1/perf/manifest.json"
    raw = s3.get_object(Bucket=location.bucket, Key=key)["Body"].read()
    manifest = json.loads(raw)
    assert set(manifest) == {
        "manifest_version",
        "stack",
        "profile",
        "run_id",
        "stage",
        "created_at",
        "commit",
        "outputs",
        "files",
    }
    assert manifest["outputs"] == outputs_for(RoutingProfile.SESSION_AFFINITY).to_json_dict()
    assert manifest["created_at"] == "2026-11-30T12:00:00Z"
    assert SECRET_ACCESS_KEY.encode() not in raw
    assert ACCESS_KEY_ID.encode() not in raw


def test_commit_and_default_run_id() -> None:
    created = datetime(2026, 11, 30, 18, 42, 0, tzinfo=UTC)
    commit = "0518aea" + "0" * 33
    record = RunRecord.create(
        stack="dev",
        stage="smoke",
        outputs=outputs_for(RoutingProfile.ROUND_ROBIN),
        commit=commit,
        created_at=created,
    )

    assert record.run_id == "20261130T184200Z-0518aea"
    assert new_run_id(created, "unknown") == "20261130T184200Z"
    assert re.fullmatch(r"[0-9a-f]{40}", current_commit())
    assert current_commit(Path("/")) == "unknown"


# --- no overwrite, manifest last ------------------------------------------------------


def test_second_push_of_same_run_is_refused_and_first_kept(
    tmp_path: Path, location: ArchiveLocation
) -> None:
    record = record_for(RoutingProfile.ROUND_ROBIN, "run-1")
    first = make_results(tmp_path / "first", marker="first")
    second = make_results(tmp_path / "second", marker="second")
    archive_run(first, record, location)

    with pytest.raises(ArchiveConflictError) as refused:
        archive_run(second, record, location)

    message = str(refused.value)
    assert "round-robin/round-robin/run-1/perf/manifest.json" in message
    assert location.bucket in message
    assert "new run id" in message
    pulled = download_run(location, "round-robin", "round-robin", "run-1", tmp_path / "p")
    assert tree(pulled) == tree(first)


def test_store_refuses_to_replace_any_file(
    tmp_path: Path, location: ArchiveLocation, s3: Any
) -> None:
    """A key taken mid-run (another writer, an interrupted push) is refused by the store itself;
    the run then has no manifest, so it is never listed as complete."""
    results = make_results(tmp_path / "results")
    record = record_for(RoutingProfile.ROUND_ROBIN, "run-1")
    taken = "cosmos3-nano-reasoner/round-robin/round-robin/run-1/perf/files/summary.json"
    s3.put_object(Bucket=location.bucket, Key=taken, Body=b"someone else's")

    with pytest.raises(ArchiveConflictError, match=re.escape(taken)):
        archive_run(results, record, location)

    kept = s3.get_object(Bucket=location.bucket, Key=taken)["Body"].read()
    assert kept == b"someone else's"
    run = "cosmos3-nano-reasoner/round-robin/round-robin/run-1/perf"
    keys = bucket_keys(s3, location)
    assert f"{run}/files/chart.png" in keys  # uploaded before the refused key
    assert f"{run}/manifest.json" not in keys
    assert list_runs(location) == []
    with pytest.raises(RunNotFoundError, match="archive list"):
        fetch_record(location, "round-robin", "round-robin", "run-1")


def test_download_detects_a_file_changed_behind_the_archive(
    tmp_path: Path, location: ArchiveLocation, s3: Any
) -> None:
    archive_run(
        make_results(tmp_path / "r"),
        record_for(RoutingProfile.ROUND_ROBIN, "r1"),
        location,
    )
    key = "cosmos3-nano-reasoner/round-robin/round-robin/r1/perf/files/summary.json"
    s3.put_object(Bucket=location.bucket, Key=key, Body=b"tampered")

    with pytest.raises(ArchiveError, match="does not match its manifest"):
        download_run(location, "round-robin", "round-robin", "r1", tmp_path / "p")


def test_download_refuses_a_non_empty_directory(tmp_path: Path, location: ArchiveLocation) -> None:
    archive_run(
        make_results(tmp_path / "r"),
        record_for(RoutingProfile.ROUND_ROBIN, "r1"),
        location,
    )
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "old.json").write_text("{}")

    with pytest.raises(ArchiveError, match="not empty"):
        download_run(location, "round-robin", "round-robin", "r1", dest)
    assert [path.name for path in dest.iterdir()] == ["old.json"]


# --- listing and both profiles --------------------------------------------------------


def test_lists_runs_per_stack_profile_and_stage_oldest_first(
    tmp_path: Path, location: ArchiveLocation
) -> None:
    results = make_results(tmp_path / "results")
    rr, sa = RoutingProfile.ROUND_ROBIN, RoutingProfile.SESSION_AFFINITY
    pushes = [
        record_for(rr, "rr-2", T0 + timedelta(hours=2)),
        record_for(rr, "rr-1", T0),
        record_for(rr, "rr-1", T0, stage=Stage.SMOKE),
        record_for(sa, "sa-1", T0 + timedelta(hours=1)),
        record_for(sa, "dev-1", T0 + timedelta(hours=3), stack="dev"),
    ]
    for record in pushes:
        archive_run(results, record, location)

    def ids(runs: list[RunRecord]) -> list[str]:
        return [f"{r.stack}:{r.run_id}:{r.stage}" for r in runs]

    assert ids(list_runs(location, stack="round-robin")) == [
        "round-robin:rr-1:perf",
        "round-robin:rr-1:smoke",
        "round-robin:rr-2:perf",
    ]
    assert ids(list_runs(location, profile=sa)) == [
        "session-affinity:sa-1:perf",
        "dev:dev-1:perf",
    ]
    assert ids(list_runs(location, stack="session-affinity", profile=sa)) == [
        "session-affinity:sa-1:perf"
    ]
    assert ids(list_runs(location, stage=Stage.SMOKE)) == ["round-robin:rr-1:smoke"]
    assert latest_run(location, profile=rr).run_id == "rr-2"
    assert latest_run(location, profile=sa).run_id == "dev-1"
    assert latest_run(location, stack="session-affinity").run_id == "sa-1"
    assert latest_run(location, stack="round-robin", stage="smoke").run_id == "rr-1"


def test_latest_run_of_nothing_says_so(location: ArchiveLocation) -> None:
    with pytest.raises(RunNotFoundError, match="no archived perf run.*archive push"):
        latest_run(location, stack="round-robin")


def test_report_reads_both_profiles_back(tmp_path: Path, location: ArchiveLocation) -> None:
    for profile in RoutingProfile:
        archive_run(
            make_results(tmp_path / f"old-{profile}", marker=f"old {profile}"),
            record_for(profile, "run-1", T0),
            location,
        )
        archive_run(
            make_results(tmp_path / f"new-{profile}", marker=f"new {profile}"),
            record_for(profile, "run-2", T0 + timedelta(minutes=30)),
            location,
        )

    for profile in RoutingProfile:
        latest = latest_run(location, profile=profile)
        pulled = download_record(location, latest, tmp_path / "pulled" / profile)
        summary = json.loads((pulled / "summary.json").read_text())
        assert (latest.run_id, summary["marker"]) == ("run-2", f"new {profile}")
        assert latest.stack_outputs().profile is profile
    named = fetch_record(location, "session-affinity", "session-affinity", "run-1")
    older = download_record(location, named, tmp_path / "named")
    assert json.loads((older / "summary.json").read_text())["marker"] == ("old session-affinity")


# --- clear errors ---------------------------------------------------------------------


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
    tmp_path: Path,
    location: ArchiveLocation,
    moto_auth: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    results = make_results(tmp_path / "results")
    wrong_secret = "wrong-secret-for-a-real-key-id"
    cases = {
        "InvalidAccessKeyId": (ACCESS_KEY_ID, SECRET_ACCESS_KEY),
        "SignatureDoesNotMatch": (moto_auth["id"], wrong_secret),
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

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", moto_auth["secret"])
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


# --- secrets and validation -----------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "kind"),
    [
        (b"ngc=NGC-VALUE-abcdefghijkl", "the value of $NGC_API_KEY"),
        # Assembled at run time so that secret scanners of the repository skip these fakes.
        (b"-----BEGIN " + b"OPENSSH PRIVATE KEY-----\n...", "a private key"),
        (b'{"api_key": "nvapi-' + b'0123456789abcdefghijklmnop"}', "an NGC API key"),
    ],
)
def test_refuses_results_that_hold_a_secret(
    tmp_path: Path,
    location: ArchiveLocation,
    s3: Any,
    monkeypatch: pytest.MonkeyPatch,
    content: bytes,
    kind: str,
) -> None:
    monkeypatch.setenv("NGC_API_KEY", "NGC-VALUE-abcdefghijkl")
    results = make_results(tmp_path / "results")
    (results / "aiperf" / "inputs.json").write_bytes(content)

    with pytest.raises(ArchiveError) as refused:
        archive_run(results, record_for(RoutingProfile.ROUND_ROBIN, "r1"), location)

    message = str(refused.value)
    assert "inputs.json" in message
    assert kind in message
    assert "NGC-VALUE" not in message
    assert bucket_keys(s3, location) == []


def test_records_reject_unsafe_names_and_inconsistent_profiles() -> None:
    good = record_for(RoutingProfile.ROUND_ROBIN, "run-1").model_dump(mode="json")
    file_entry = {"name": "a.json", "size": 1, "sha256": "0" * 64}
    broken = {
        "run id with a slash": {**good, "run_id": "a/b"},
        "stack with a dot first": {**good, "stack": "..up"},
        "profile not the outputs'": {**good, "profile": "session-affinity"},
        "time without a zone": {**good, "created_at": "2026-11-30T12:00:00"},
        "file escaping the run": {**good, "files": [{**file_entry, "name": "../x"}]},
        "absolute file name": {**good, "files": [{**file_entry, "name": "/etc/x"}]},
    }

    assert RunRecord.model_validate(good) == record_for(RoutingProfile.ROUND_ROBIN, "run-1")
    assert [case for case, data in broken.items() if validates(data)] == []


def validates(data: dict[str, Any]) -> bool:
    try:
        RunRecord.model_validate(data)
    except ValidationError:
        return False
    return True


def test_refuses_an_empty_result_directory(tmp_path: Path, location: ArchiveLocation) -> None:
    (tmp_path / "empty").mkdir()

    with pytest.raises(ArchiveError, match="holds no files"):
        archive_run(tmp_path / "empty", record_for(RoutingProfile.ROUND_ROBIN, "r1"), location)


# --- command line ---------------------------------------------------------------------


def test_cli_push_list_pull(
    tmp_path: Path,
    location: ArchiveLocation,
    capsys: pytest.CaptureFixture[str],
) -> None:
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(outputs_for(RoutingProfile.SESSION_AFFINITY).to_json_dict()))
    results = make_results(tmp_path / "results")
    store = ["--bucket", location.bucket, "--endpoint-url", str(location.endpoint_url)]

    push = ["push", "--stack", "session-affinity", "--outputs", str(outputs)]
    push += ["--stage", "perf", "--dir", str(results), "--run-id", "cli-1", *store]
    assert archive_cli(push) == 0
    assert archive_cli(push) == 1
    assert archive_cli(["list", *store]) == 0
    pull = ["pull", "--stack", "session-affinity", "--profile", "session-affinity"]
    assert archive_cli([*pull, "--latest", "--dest", str(tmp_path / "p"), *store]) == 0

    out, err = capsys.readouterr()
    assert "run id: cli-1" in out
    assert re.search(r"session-affinity\s+session-affinity\s+perf\s+cli-1", out)
    assert "downloaded run session-affinity/session-affinity/cli-1/perf" in out
    assert "already exists" in err
    assert err.startswith("archive push: error:")
    assert tree(tmp_path / "p") == tree(results)


@pytest.mark.parametrize("command", ["push", "list", "pull"])
def test_cli_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        archive_cli([command, "--help"])

    assert exited.value.code == 0
    assert "--bucket" in capsys.readouterr().out
