"""The download Job's cache-owner step: its script run for real on directories with the wrong and
the right owner (kwok mounts no volume, so the cluster never runs it), and its pod spec."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from components.layer_manifests import CACHE_OWNER_SCRIPT, NIM_USER_ID, cache_owner_container

OTHER = 4242
NIM = f"{NIM_USER_ID}:{NIM_USER_ID}"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def run_script(cache: Path) -> str:
    container = cache_owner_container("nvcr.io/nim/nvidia/cosmos3:2.1.0")
    # The container's command and args, with the mount path replaced by the test's directory.
    argv = [*container["command"], str(cache), container["args"][1]]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def owned_by(path: Path) -> str:
    found = path.stat()
    return f"{found.st_uid}:{found.st_gid}"


def test_a_cache_someone_else_owns_becomes_the_nims_all_the_way_down(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    (cache / "ngc" / "hub").mkdir(parents=True)
    (cache / "ngc" / "hub" / "model.bin").write_bytes(b"weights")
    for path in [cache, *cache.rglob("*")]:
        os.chown(path, OTHER, OTHER)

    said = run_script(cache)

    assert f"was owned by {OTHER}:{OTHER}; now by {NIM}" in said
    assert {owned_by(path) for path in [cache, *cache.rglob("*")]} == {NIM}


def test_a_cache_the_nim_owns_is_left_alone(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    os.chown(cache, NIM_USER_ID, NIM_USER_ID)
    other = cache / "left-by-someone"
    other.write_text("x")
    os.chown(other, OTHER, OTHER)  # not re-owned: the root already is the NIM's

    said = run_script(cache)

    assert "nothing changed" in said
    assert owned_by(other) == f"{OTHER}:{OTHER}"


def test_it_runs_as_root_with_only_the_capabilities_chown_needs() -> None:
    security = cache_owner_container("image:1")["securityContext"]
    assert security["runAsUser"] == 0 and security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {
        "drop": ["ALL"],
        "add": ["CHOWN", "FOWNER", "DAC_READ_SEARCH"],
    }
    assert CACHE_OWNER_SCRIPT.startswith("set -eu\n")
