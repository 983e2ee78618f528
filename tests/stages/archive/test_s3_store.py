"""What only a real S3 server shows: the archive's store on SeaweedFS (tests/s3.py) listens on
loopback only, keeps the sha256 it verified, lets exactly one of racing writers of a key win, and
a real `python -m stages archive` process with a wrong key is refused without showing it, and a
stopped server leaves nothing behind."""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from common import REPO_ROOT
from common.ports import LOOPBACK
from stages.archive import ArchiveConflictError, ArchiveLocation
from stages.archive.stores import Bucket
from testenv import s3_server
from testenv.s3_server import SERVERS, S3Server
from tests.real.listening import listening
from tests.s3 import ACCESS_KEY_ID, SECRET_ACCESS_KEY
from tests.stages.archive.helpers import make_results, one_line_error, push_args


def test_the_server_listens_on_loopback_only(seaweed: S3Server) -> None:
    addresses = listening(seaweed.started.pid)

    assert len(addresses) == 2 * len(SERVERS), addresses
    assert {address.rsplit(":", 1)[0] for address in addresses} == {LOOPBACK}, addresses


@pytest.mark.real  # a server of its own, not the session's `seaweed`
def test_a_stopped_server_leaves_no_process_and_no_socket(tmp_path: Path) -> None:
    """`stop` kills it at once (its SIGTERM took 15 s) and removes the gRPC sockets it hard-codes
    in /tmp, which its SIGTERM would have removed."""
    server = s3_server.start(tmp_path, s3_server.Identity(ACCESS_KEY_ID, SECRET_ACCESS_KEY))
    sockets = [
        Path(f"/tmp/seaweedfs-{name}-grpc-{server.ports[f'{name}.port.grpc']}.sock")
        for name in SERVERS
    ]
    assert all(socket.exists() for socket in sockets), sockets

    server.stop()

    assert server.popen.poll() is not None
    assert not [socket for socket in sockets if socket.exists()]


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


def test_concurrent_writers_of_one_key_only_one_wins(location: ArchiveLocation) -> None:
    """Two pushes of one run id racing past the manifest check: the store decides, atomically,
    by the If-None-Match: * every object is written with."""
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


@pytest.mark.parametrize("which", ["secret", "access key"])
def test_a_real_push_with_wrong_credentials_never_shows_the_secret(
    tmp_path: Path, location: ArchiveLocation, which: str
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
    for secret in (wrong, SECRET_ACCESS_KEY):
        assert secret not in done.stdout + done.stderr
    assert list(Bucket(location).keys(location.prefix)) == []
