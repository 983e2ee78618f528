"""Golden manifests: the committed render of every shipped stack matches the program, masked."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from common.credentials import MASK
from tools import golden
from tools.stack_files import SECRET_PLACEHOLDER, SHIPPED_STACKS


def test_committed_manifests_match_the_program(stack: str) -> None:
    diff = golden.drift(stack)
    assert not diff, (
        f"manifests/{stack}/ drifted; if intended: python -m tools.golden --update\n{diff}"
    )


def test_every_shipped_stack_has_golden_manifests_and_nothing_else_does() -> None:
    directories = {path.name for path in golden.MANIFESTS.iterdir() if path.is_dir()}
    # engine/: the golden files only the real engine writes (tools/engine_goldens.py).
    assert directories == set(SHIPPED_STACKS) | {"engine"}
    engine_files = {path.name for path in (golden.MANIFESTS / "engine").iterdir()}
    assert engine_files == {f"{stack}.urns.txt" for stack in SHIPPED_STACKS} | {
        "session-affinity.preview-diff-ttl-120.txt"
    }
    assert (golden.MANIFESTS / "README.md").is_file()


def test_golden_manifests_hold_masked_secrets_only() -> None:
    for path in golden.MANIFESTS.rglob("*"):
        if path.is_file():
            assert SECRET_PLACEHOLDER not in path.read_text(), (
                f"{path} holds the placeholder secret"
            )
    secret = golden.MANIFESTS / "dev" / "02-secret-ngc-api-secret.yaml"
    assert f"NGC_API_KEY: {MASK}" in secret.read_text().replace("'", "")


@pytest.fixture
def scratch_manifests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the committed manifests the golden commands work on instead."""
    copy = tmp_path / "manifests"
    shutil.copytree(golden.MANIFESTS, copy)
    monkeypatch.setattr(golden, "MANIFESTS", copy)
    return copy


def test_check_prints_a_unified_diff_and_fails_on_drift(
    scratch_manifests: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    graph = next((scratch_manifests / "round-robin").glob("*dynamographdeployment*"))
    graph.write_text(graph.read_text().replace("replicas: 8", "replicas: 7"))
    assert golden.main(["--check", "--stack", "round-robin"]) == 1
    out = capsys.readouterr().out
    assert f"--- manifests/round-robin/{graph.name} (committed)" in out
    assert f"+++ manifests/round-robin/{graph.name} (rendered now)" in out
    assert "-    replicas: 7\n+    replicas: 8\n" in out
    assert "python -m tools.golden --update" in out


def test_check_notices_missing_and_unexpected_files(scratch_manifests: Path) -> None:
    (scratch_manifests / "shared" / "outputs.json").unlink()
    (scratch_manifests / "shared" / "99-configmap-stray.yaml").write_text("kind: ConfigMap\n")
    diff = golden.drift("shared")
    assert "+++ manifests/shared/outputs.json (rendered now)" in diff
    assert "--- manifests/shared/99-configmap-stray.yaml (committed)" in diff


def test_update_rewrites_a_stack_and_check_then_passes(
    scratch_manifests: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (scratch_manifests / "dev" / "outputs.json").write_text("{}\n")
    assert golden.main(["--update", "--stack", "dev"]) == 0
    assert golden.main(["--check", "--stack", "dev"]) == 0
    assert "dev: matches manifests/dev/" in capsys.readouterr().out
