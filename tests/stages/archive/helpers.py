"""What the archive tests share: stack outputs and records for both profiles, a result directory
like a perf stage's, views of the bucket and of directories to compare, bad manifests to plant,
and the CLI's push arguments and one-line errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from components.contract import StackOutputs
from components.routing import SESSION_HEADER, RoutingProfile
from stages.archive import (
    ArchiveError,
    ArchiveLocation,
    RunRecord,
    Stage,
    download_record,
    fetch_record,
)
from stages.archive.stores import NEW_RUN_ID_ADVICE, Bucket

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
RESULT_FILES = 6  # the files make_results writes
MANIFEST = "cosmos3-nano-reasoner/{}/manifest.json"
NOT_JSON = MANIFEST.format("round-robin/round-robin/broken/perf")
FOREIGN = MANIFEST.format("round-robin/round-robin/foreign/perf")


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


def pull(location: ArchiveLocation, run_id: str, dest: Path) -> Path:
    """The round-robin perf run `run_id` downloaded into `dest`, as `archive pull --run-id` does."""
    record = fetch_record(location, "round-robin", "round-robin", run_id)
    return download_record(location, record, dest)


def tree(directory: Path) -> dict[str, bytes]:
    return {
        path.relative_to(directory).as_posix(): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def bucket_keys(s3: Any, location: ArchiveLocation) -> list[str]:
    listing = s3.list_objects_v2(Bucket=location.bucket)
    return sorted(item["Key"] for item in listing.get("Contents", []))


def stored_files(s3: Any, location: ArchiveLocation, run: str) -> dict[str, bytes]:
    """The bodies stored under `<prefix>/<run>/files/`, by relative name."""
    folder = f"{location.prefix}/{run}/files/"
    return {
        key.removeprefix(folder): s3.get_object(Bucket=location.bucket, Key=key)["Body"].read()
        for key in bucket_keys(s3, location)
        if key.startswith(folder)
    }


@contextmanager
def recorded_puts(fail_after: int | None = None) -> Iterator[list[str]]:
    """Every key the archive stores while inside, in order. With `fail_after`, the store takes
    that many objects and then fails like a dropped connection: an interrupted push."""
    real_put_new = Bucket.put_new
    stored: list[str] = []

    def put_new(bucket: Bucket, key: str, body: bytes, advice: str = NEW_RUN_ID_ADVICE) -> None:
        if len(stored) == fail_after:
            raise ArchiveError(f"cannot reach the S3 endpoint {bucket.endpoint} (simulated)")
        real_put_new(bucket, key, body, advice)
        stored.append(key)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Bucket, "put_new", put_new)
        yield stored


def put_bad_manifests(s3: Any, location: ArchiveLocation) -> None:
    """One manifest that is not JSON, and a foreign JSON object at another run's manifest key."""
    s3.put_object(Bucket=location.bucket, Key=NOT_JSON, Body=b"\x00\xffnot json {")
    foreign = {"kind": "ConfigMap", "api_key": "foreign-value-never-echoed"}
    s3.put_object(Bucket=location.bucket, Key=FOREIGN, Body=json.dumps(foreign).encode())


def store_args(location: ArchiveLocation) -> list[str]:
    return ["--bucket", location.bucket, "--endpoint-url", str(location.endpoint_url)]


def push_args(tmp_path: Path, location: ArchiveLocation, results: Path, run_id: str) -> list[str]:
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(outputs_for(RoutingProfile.SESSION_AFFINITY).to_json_dict()))
    return [
        "push",
        "--stack",
        "session-affinity",
        "--outputs",
        str(outputs),
        "--stage",
        "perf",
        "--dir",
        str(results),
        "--run-id",
        run_id,
        *store_args(location),
    ]


def one_line_error(err: str, command: str) -> str:
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith(f"archive {command}: error: ")
    return err
