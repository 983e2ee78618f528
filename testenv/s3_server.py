"""A real S3 endpoint on loopback for the tests: SeaweedFS (`weed server -s3`, built by `make
s3-server` from the Go module proxy, `testenv.engine.pins.S3_SERVER`).

One `weed server` per test session: master, volume server, filer and S3 gateway in one process,
every port a free one on 127.0.0.1, its data in the folder given, one S3 identity (so a request
signed with anything else is refused, as AWS would). It is stopped by its PID and dies with its
parent (the parent-death signal, as the cluster's). It is the archive tests' one S3 server.
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.input_files import read_tail
from common.ports import LOOPBACK, free_port
from testenv.cluster import processes
from testenv.engine import cache_home
from testenv.engine.build import build_tools
from testenv.engine.pins import S3_SERVER

READY_SECONDS = 120.0
# Each SeaweedFS server listens on an HTTP port and a gRPC port; all are chosen here.
SERVERS = ("master", "volume", "filer", "s3")
REGION = "us-east-1"


class S3ServerError(RuntimeError):
    """The S3 server did not start, or stored nothing in time; the message has its log's tail."""


@dataclass(frozen=True)
class Identity:
    """The one access key the server accepts."""

    access_key_id: str
    secret_access_key: str


@dataclass
class S3Server:
    """A running `weed server -s3`: where its S3 gateway is and the identity it accepts."""

    endpoint: str
    identity: Identity
    started: processes.Started
    popen: subprocess.Popen[bytes]
    ports: dict[str, int]

    def client(self) -> Any:
        """A boto3 S3 client signed with the server's identity, failing fast."""
        import boto3  # type: ignore[import-untyped]
        from botocore.config import Config  # type: ignore[import-untyped]

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.identity.access_key_id,
            aws_secret_access_key=self.identity.secret_access_key,
            region_name=REGION,
            config=Config(connect_timeout=2, retries={"max_attempts": 1}),
        )

    def stop(self) -> None:
        """SIGKILL (`processes.KILLED_AT_ONCE`: SIGTERM's wind-down took about 15 s, at the end of
        every test session), then the gRPC sockets in /tmp that its SIGTERM would have removed."""
        processes.stop_all([self.started], {self.started.pid: self.popen})
        for name in SERVERS:
            grpc_port = self.ports[f"{name}.port.grpc"]
            Path(f"/tmp/seaweedfs-{name}-grpc-{grpc_port}.sock").unlink(missing_ok=True)


def start(folder: Path, identity: Identity) -> S3Server:
    """A new server with its data in `folder`, ready when an object can be written."""
    (folder / "data").mkdir(parents=True, exist_ok=True)
    s3_config = folder / "s3.json"
    s3_config.write_text(json.dumps(s3_identities(identity)))
    ports = {f"{name}.port{grpc}": free_port() for name in SERVERS for grpc in ("", ".grpc")}
    weed = build_tools(cache_home(), [S3_SERVER.name])[S3_SERVER.name]  # built once, if missing
    argv = weed_argv(weed, folder, s3_config, ports)
    started, popen = processes.start(
        "weed", argv, folder / "weed.log", {"PATH": "/usr/bin:/bin"}, die_with_parent=True
    )
    server = S3Server(f"http://{LOOPBACK}:{ports['s3.port']}", identity, started, popen, ports)
    try:
        _wait_until_it_stores(server, folder / "weed.log")
    except BaseException:
        server.stop()
        raise
    return server


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
        "-master.telemetry=false", "-master.volumeSizeLimitMB=64", "-volume.max=1000",
        "-volume.preStopSeconds=0", f"-filer.localSocket={folder / 'filer.sock'}",
        f"-s3.localSocket={folder / 's3.sock'}",
    ]  # fmt: skip


def s3_identities(identity: Identity) -> dict[str, Any]:
    """SeaweedFS's S3 configuration: one identity, allowed everything the archive does."""
    credentials = [{"accessKey": identity.access_key_id, "secretKey": identity.secret_access_key}]
    actions = ["Admin", "Read", "Write", "List", "Tagging"]
    return {"identities": [{"name": "archiver", "credentials": credentials, "actions": actions}]}


def _wait_until_it_stores(server: S3Server, log: Path) -> None:
    """Ready when an object can be written: the gateway answers before a volume is writable."""
    from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]

    client = server.client()
    deadline = time.monotonic() + READY_SECONDS
    last = ""
    while time.monotonic() < deadline:
        if server.popen.poll() is not None:
            raise S3ServerError(f"weed server exited ({server.popen.returncode}): {_tail(log)}")
        try:
            try:
                client.create_bucket(Bucket="ready")
            except ClientError as error:
                if "BucketAlready" not in str(error):
                    raise
            client.put_object(Bucket="ready", Key="probe", Body=b"ok")
            return
        except (ClientError, BotoCoreError) as error:
            last = str(error)
            time.sleep(0.5)
    raise S3ServerError(
        f"weed server stored nothing within {READY_SECONDS:.0f} s ({last}): {_tail(log)}"
    )


def _tail(log: Path) -> str:
    return " | ".join(read_tail(log).strip().splitlines()[-8:])
