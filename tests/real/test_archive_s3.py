"""The archive end to end against a real S3 server: SeaweedFS (`weed server -s3`, built by `make
engine` from the Go module proxy, docs/engine.md), where the fast tests use moto's S3 server.

One `weed server` for the module: master, volume server, filer and S3 gateway in one process,
every port a free one on 127.0.0.1, its data in a pytest tmp dir, one S3 identity (an access key
and a secret made for this run), so requests signed with anything else are refused. It is
stopped by its PID afterwards and dies with pytest (the parent-death signal, as the cluster's).
The archive is driven through its public entry points: `python -m stages archive ...`
(`stages.archive.cli.main`), `python -m stages report --archive-bucket ...` and the Python API.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import secrets
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]
import pytest
from botocore.config import Config  # type: ignore[import-untyped]
from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]

from common import REPO_ROOT
from components.routing import RoutingProfile
from stages.archive import ArchiveConflictError, ArchiveLocation
from stages.archive.cli import main as archive_cli
from stages.archive.store import Bucket
from stages.cli import main as stages_cli
from testenv.cluster import processes
from testenv.cluster.components import LOOPBACK, free_port
from testenv.engine import Engine, cache_home
from testenv.engine.build import s3_server
from tests.real.listening import listening
from tests.stages.archive.helpers import make_results, recorded_puts, tree
from tests.stages.archive.test_cli import one_line_error, push_args, store_args
from tests.stages.archive.test_report_inputs import T0, push_perf_run, report_args
from tests.stages.conftest import aws_environment  # noqa: F401  (the fixture, used by name)

ACCESS_KEY_ID = "cosmos3-archiver"
READY_SECONDS = 120.0
# `weed server` takes about 15 s to stop on SIGTERM (its filer, then its master, wind down); a
# SIGKILL instead leaves its master's gRPC socket in /tmp.
STOP_GRACE_SECONDS = 40.0
# Each SeaweedFS server listens on an HTTP port and a gRPC port; all are chosen here.
SERVERS = ("master", "volume", "filer", "s3")


@dataclass(frozen=True)
class Seaweed:
    """A running `weed server -s3`: where its S3 gateway is and the identity it accepts."""

    endpoint: str
    secret: str
    started: processes.Started

    def client(self) -> Any:
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY_ID,
            aws_secret_access_key=self.secret,
            region_name="us-east-1",
            config=Config(connect_timeout=2, retries={"max_attempts": 1}),
        )


def weed_argv(weed: Path, folder: Path, s3_config: Path, ports: dict[str, int]) -> list[str]:
    """`weed server` with the filer and S3 gateway: every listener on loopback (`-ip.bind`), each
    port explicit (else 9333, 8080, 8888, 8333 and port+10000), the Iceberg and Lance listeners
    (on by default) and telemetry off. Each bucket is a collection of its own that grows 7 volumes,
    hence small volumes and many of them (sparse files). The gRPC unix sockets are hard-coded to
    /tmp/seaweedfs-<server>-grpc-<port>.sock; the other two are put in `folder`."""
    return [
        str(weed), "server", f"-ip={LOOPBACK}", f"-ip.bind={LOOPBACK}", f"-dir={folder / 'data'}",
        *(f"-{name}={port}" for name, port in ports.items()), "-filer", "-s3",
        f"-s3.config={s3_config}", "-s3.port.iceberg=0", "-s3.port.lance=0",
        "-master.telemetry=false", "-master.volumeSizeLimitMB=64", "-volume.max=300",
        "-volume.preStopSeconds=0", f"-filer.localSocket={folder / 'filer.sock'}",
        f"-s3.localSocket={folder / 's3.sock'}",
    ]  # fmt: skip


def pick_ports() -> dict[str, int]:
    return {f"{name}.port{grpc}": free_port() for name in SERVERS for grpc in ("", ".grpc")}


def s3_identity(secret: str) -> dict[str, Any]:
    """SeaweedFS's S3 configuration: one identity, allowed everything the archive does."""
    credentials = [{"accessKey": ACCESS_KEY_ID, "secretKey": secret}]
    actions = ["Admin", "Read", "Write", "List", "Tagging"]
    return {"identities": [{"name": "archiver", "credentials": credentials, "actions": actions}]}


@pytest.fixture(scope="module")
def seaweed(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seaweed]:
    folder = tmp_path_factory.mktemp("seaweedfs")
    (folder / "data").mkdir()
    secret = secrets.token_urlsafe(24)
    s3_config = folder / "s3.json"
    s3_config.write_text(json.dumps(s3_identity(secret)))
    ports = pick_ports()
    argv = weed_argv(s3_server(cache_home()), folder, s3_config, ports)
    started, popen = processes.start(
        "weed", argv, folder / "weed.log", {"PATH": "/usr/bin:/bin"}, die_with_parent=True
    )
    running = Seaweed(f"http://{LOOPBACK}:{ports['s3.port']}", secret, started)
    try:
        _wait_until_it_stores(running, popen, Path(started.log))
        yield running
    finally:
        if processes.stop_all([started], {started.pid: popen}, grace=STOP_GRACE_SECONDS):
            for name in SERVERS:  # killed: what its SIGTERM would have removed
                Path(f"/tmp/seaweedfs-{name}-grpc-{ports[f'{name}.port.grpc']}.sock").unlink(
                    missing_ok=True
                )


def _wait_until_it_stores(running: Seaweed, popen: subprocess.Popen[bytes], log: Path) -> None:
    """Ready when an object can be written: the gateway answers before a volume is writable."""
    client = running.client()
    deadline = time.monotonic() + READY_SECONDS
    last = ""
    while time.monotonic() < deadline:
        if popen.poll() is not None:
            pytest.fail(f"weed server exited ({popen.returncode}): {_tail(log)}")
        try:
            client.create_bucket(Bucket="ready")
        except (ClientError, BotoCoreError) as error:
            last = str(error)
            if "BucketAlready" not in last:
                time.sleep(0.5)
                continue
        try:
            client.put_object(Bucket="ready", Key="probe", Body=b"ok")
            return
        except (ClientError, BotoCoreError) as error:
            last = str(error)
            time.sleep(0.5)
    pytest.fail(f"weed server stored nothing within {READY_SECONDS:.0f} s ({last}): {_tail(log)}")


def _tail(log: Path) -> str:
    return " | ".join(log.read_text(errors="replace").strip().splitlines()[-8:])


@pytest.fixture(autouse=True)
def _credentials(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, seaweed: Seaweed
) -> None:
    """The hermetic AWS environment of the archive's fast tests, with the server's identity."""
    request.getfixturevalue("aws_environment")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", seaweed.secret)


@pytest.fixture
def location(seaweed: Seaweed) -> ArchiveLocation:
    bucket = f"archive-{uuid.uuid4().hex[:12]}"
    seaweed.client().create_bucket(Bucket=bucket)
    return ArchiveLocation(bucket=bucket, endpoint_url=seaweed.endpoint)


def test_weed_listens_on_loopback_only(seaweed: Seaweed) -> None:
    addresses = listening(seaweed.started.pid)

    assert len(addresses) == 2 * len(SERVERS), addresses
    assert {address.rsplit(":", 1)[0] for address in addresses} == {LOOPBACK}, addresses


def test_push_list_pull_round_trip(
    tmp_path: Path, location: ArchiveLocation, capsys: pytest.CaptureFixture[str]
) -> None:
    results = make_results(tmp_path / "results")
    store = store_args(location)

    assert archive_cli(push_args(tmp_path, location, results, "real-1")) == 0
    assert archive_cli(["list", *store]) == 0
    pull = ["pull", "--stack", "session-affinity", "--profile", "session-affinity"]
    assert archive_cli([*pull, "--latest", "--dest", str(tmp_path / "pulled"), *store]) == 0

    out, err = capsys.readouterr()
    assert err == ""
    assert "archived 6 files of" in out and "run id: real-1" in out
    assert re.search(r"session-affinity\s+session-affinity\s+perf\s+real-1\s+\S+\s+6\n", out)
    assert "downloaded run session-affinity/session-affinity/real-1/perf (6 files)" in out
    assert tree(tmp_path / "pulled") == tree(results)


def test_the_store_keeps_the_sha256_it_verified(location: ArchiveLocation) -> None:
    """`put_new` sends ChecksumAlgorithm=SHA256; a resumed push compares stored files by it."""
    bucket = Bucket(location)
    key = f"{location.prefix}/checksum/probe"
    body = b"archived bytes"
    bucket.put_new(key, body)

    head = bucket.client.head_object(Bucket=location.bucket, Key=key, ChecksumMode="ENABLED")

    digest = hashlib.sha256(body).digest()
    assert head.get("ChecksumSHA256") == base64.b64encode(digest).decode(), sorted(head)
    assert bucket.sha256(key) == digest.hex()


def test_a_second_push_of_the_same_run_is_refused(
    tmp_path: Path, location: ArchiveLocation, capsys: pytest.CaptureFixture[str]
) -> None:
    first = make_results(tmp_path / "first", marker="first")
    second = make_results(tmp_path / "second", marker="second")

    assert archive_cli(push_args(tmp_path, location, first, "once")) == 0
    assert archive_cli(push_args(tmp_path, location, second, "once")) == 1
    pull = ["pull", "--stack", "session-affinity", "--profile", "session-affinity"]
    assert archive_cli([*pull, "--run-id", "once", "--dest", str(tmp_path / "p"),
                        *store_args(location)]) == 0  # fmt: skip

    error = one_line_error(capsys.readouterr().err, "push")
    assert "manifest.json already exists" in error and "never overwrites" in error
    assert tree(tmp_path / "p") == tree(first)


def test_the_server_refuses_a_conditional_put_over_an_object(location: ArchiveLocation) -> None:
    """The archive's last line of defence: every object is written with If-None-Match: *, so a
    push racing another (both past the manifest check) cannot replace what the other stored."""
    bucket = Bucket(location)
    key = f"{location.prefix}/race/object"
    bucket.put_new(key, b"first writer")

    with pytest.raises(ArchiveConflictError, match="already exists .* never overwrites"):
        bucket.put_new(key, b"second writer")

    assert bucket.read(key) == b"first writer"


def test_concurrent_writers_of_one_key_only_one_wins(location: ArchiveLocation) -> None:
    """Two pushes of one run id racing past the manifest check: the store decides, atomically."""
    key = f"{location.prefix}/race/manifest.json"
    writers = 8

    def write(number: int) -> int | None:
        try:
            Bucket(location).put_new(key, f"writer {number}".encode())
        except ArchiveConflictError:
            return None
        return number

    with ThreadPoolExecutor(writers) as pool:
        outcomes = list(pool.map(write, range(writers)))

    (winner,) = [number for number in outcomes if number is not None]
    assert Bucket(location).read(key) == f"writer {winner}".encode()


def test_an_interrupted_push_is_resumed(
    tmp_path: Path, location: ArchiveLocation, capsys: pytest.CaptureFixture[str]
) -> None:
    results = make_results(tmp_path / "results")
    push = ["archive", *push_args(tmp_path, location, results, "cut")]
    with recorded_puts(fail_after=4):
        assert stages_cli(push) == 1
    assert stages_cli(["archive", "incomplete", *store_args(location)]) == 0
    listing = capsys.readouterr().out

    assert stages_cli([*push, "--resume"]) == 0

    assert re.search(r"session-affinity\s+session-affinity\s+perf\s+cut\s+4\s", listing)
    assert "(4 kept from the interrupted push, 2 uploaded)" in capsys.readouterr().out


def test_the_report_reads_both_stacks_from_the_archive(
    tmp_path: Path, location: ArchiveLocation, capsys: pytest.CaptureFixture[str]
) -> None:
    later = T0 + timedelta(hours=1)
    push_perf_run(location, tmp_path, RoutingProfile.ROUND_ROBIN, "rr-old", T0)
    push_perf_run(location, tmp_path, RoutingProfile.ROUND_ROBIN, "rr-new", later)
    push_perf_run(location, tmp_path, RoutingProfile.SESSION_AFFINITY, "aff-1", T0)

    status = stages_cli(report_args(location, tmp_path / "report"))

    out, err = capsys.readouterr()
    assert status == 0, err
    assert "| Concurrency | Round-robin req/s" in out
    assert "round-robin: run rr-new" in err and "session-affinity: run aff-1" in err
    sources = json.loads((tmp_path / "report" / "sources.json").read_text())
    assert [(s["stack"], s["runId"]) for s in sources] == [
        ("round-robin", "rr-new"),
        ("session-affinity", "aff-1"),
    ]


@pytest.mark.parametrize("which", ["secret", "access key"])
def test_wrong_credentials_are_refused_without_showing_the_secret(
    tmp_path: Path, location: ArchiveLocation, seaweed: Seaweed, which: str
) -> None:
    """A real `python -m stages archive push` process with a wrong key: one line, status 1,
    naming the refusal and what to check, never the secret it was given."""
    wrong = secrets.token_urlsafe(24)
    env = dict(os.environ)
    if which == "secret":
        env["AWS_SECRET_ACCESS_KEY"] = wrong
    else:
        env["AWS_ACCESS_KEY_ID"] = "not-" + ACCESS_KEY_ID
    results = make_results(tmp_path / "results")
    command = [sys.executable, "-m", "stages", "archive",
               *push_args(tmp_path, location, results, "denied")]  # fmt: skip

    done = subprocess.run(
        command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False, timeout=120
    )

    assert done.returncode == 1, done.stderr
    error = one_line_error(done.stderr, "push")
    code = "SignatureDoesNotMatch" if which == "secret" else "InvalidAccessKeyId"
    assert f"refused the credentials while listing s3://{location.bucket}/" in error
    assert f"({code})" in error and "AWS_SECRET_ACCESS_KEY" in error
    for secret in (wrong, seaweed.secret):
        assert secret not in done.stdout + done.stderr
    assert list(Bucket(location).keys(location.prefix)) == []
