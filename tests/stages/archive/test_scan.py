"""The secret scan: a run holding an obvious secret is refused whole, naming the file and the
kind of secret, never the value; nothing reaches the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from components.routing import RoutingProfile
from stages.archive import ArchiveError, ArchiveLocation, archive_run
from tests.stages.archive.helpers import bucket_keys, make_results, record_for


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


def test_refuses_an_empty_result_directory(tmp_path: Path, location: ArchiveLocation) -> None:
    (tmp_path / "empty").mkdir()

    with pytest.raises(ArchiveError, match="holds no files"):
        archive_run(tmp_path / "empty", record_for(RoutingProfile.ROUND_ROBIN, "r1"), location)
