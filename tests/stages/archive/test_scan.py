"""The secret scan: a run holding an obvious secret is refused whole, naming the file and the
kind of secret, never the value; nothing reaches the store."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from components.routing import RoutingProfile
from stages.archive import ArchiveError, ArchiveLocation, archive_run, checked_files, find_secret
from tests.stages.archive.helpers import bucket_keys, make_results, record_for


@pytest.mark.parametrize(
    ("content", "kind"),
    [
        (b"ngc=NGC-VALUE-abcdefghijkl", "the value of $NGC_API_KEY"),
        # Assembled at run time so that secret scanners of the repository skip these fakes.
        (b"-----BEGIN " + b"OPENSSH PRIVATE KEY-----\n...", "a private key"),
        (b'{"api_key": "nvapi-' + b'0123456789abcdefghijklmnop"}', "an NGC API key"),
        (
            b"PIP_INDEX_URL=https://ci:" + b"NGC-VALUE-pw@pypi.example.com/simple",
            "a URL with embedded credentials",
        ),
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


def test_refuses_an_empty_result_directory(tmp_path: Path, location: ArchiveLocation) -> None:
    (tmp_path / "empty").mkdir()

    with pytest.raises(ArchiveError, match="holds no files"):
        archive_run(tmp_path / "empty", record_for(RoutingProfile.ROUND_ROBIN, "r1"), location)


@pytest.mark.parametrize(
    "text",
    [
        "index: https://ci-bot:" + "s3cr3t-pw@pypi.example.com/simple",
        "postgres://admin:" + "s3cr3t-pw@db:5432/results",
        "'http://u:" + "s3cr3t-pw@10.0.0.5:3141/root/pypi'",
    ],
)
def test_a_url_with_credentials_is_found_and_never_shown(tmp_path: Path, text: str) -> None:
    results = make_results(tmp_path / "results")
    (results / "manifests.yaml").write_text(f"env:\n  value: {text}\n")

    with pytest.raises(ArchiveError) as refused:
        checked_files(results)

    message = str(refused.value)
    assert "manifests.yaml contains a URL with embedded credentials" in message
    assert "s3cr3t" not in message


def test_a_file_named_with_a_credential_is_refused_without_showing_it(tmp_path: Path) -> None:
    results = make_results(tmp_path / "results")
    token = "glpat-" + "Cn7f3a9d2e41b8c6Zq0123"  # assembled: a canary, not a real token
    (results / f"{token}.log").write_text("a log\n")

    with pytest.raises(ArchiveError) as refused:
        checked_files(results)

    assert "a file name below" in str(refused.value) and token not in str(refused.value)


@pytest.mark.parametrize(
    "text",
    [
        "https://pypi.example.com/simple",
        "http://cosmos3-nano-reasoner-perf-media.ns.svc.cluster.local:8090/c1-video-000.mp4",
        "https://ci-bot:****@pypi.example.com/simple",  # pip's own masking in a log
        "PIP_INDEX_URL: <secret>",  # a dry run's masking
        "git+ssh://git@github.com/org/repo",  # a user, no password
        "http://host:8080/path@v2",
    ],
)
def test_urls_without_a_password_pass(text: str) -> None:
    assert find_secret(text.encode()) is None


def test_random_binary_files_are_not_taken_for_credentials() -> None:
    """A compressed chart is random-looking bytes: read whole as text, about one 60 kB file in
    twelve held something shaped like `-u a:b` or `user:pw@host`."""
    generator = random.Random(20261205)
    found = [find_secret(generator.randbytes(60_000)) for _ in range(200)]

    assert [kind for kind in found if kind] == []


def test_a_credential_written_into_a_binary_file_is_still_found() -> None:
    generator = random.Random(7)
    key = "nvapi-" + "Qx7Zr2Lm9Tb4Wc8Hd1Kf6Jp3Ns5Vg0Ye2Ua7Ro4Ei9"  # assembled: a canary
    chart = generator.randbytes(30_000) + b"\x00tEXt\x00Comment\x00" + key.encode() + b"\xff"

    assert find_secret(chart + generator.randbytes(30_000)) is not None
