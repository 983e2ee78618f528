"""scripts/venv.sh: one venv per lock outside the work tree, linked into it, never rebuilt for a
lock it already holds, and never replacing what is not a venv."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from common import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "venv.sh"

# Each new venv is a `python -m venv` with pip: seconds when idle, minutes on a busy host.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def make_venv(project: Path, home: Path, link: str, lock: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), link, lock],
        cwd=project,
        env=os.environ | {"COSMOS3_VENV_HOME": str(home), "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_lock_is_built_once_and_linked_and_a_changed_lock_gets_a_new_venv(
    tmp_path: Path,
) -> None:
    home, project, clone = tmp_path / "cache", tmp_path / "project", tmp_path / "clone"
    for folder in (project, clone):
        (folder / "policy").mkdir(parents=True)
        (folder / "policy" / "requirements.txt").write_text("# nothing pinned\n")

    first = make_venv(project, home, "policy/venv", "policy/requirements.txt")
    again = make_venv(clone, home, "policy/venv", "policy/requirements.txt")

    assert first.returncode == 0 and again.returncode == 0, first.stderr + again.stderr
    venv = (project / "policy" / "venv").resolve()
    assert venv.parent == home and venv.name.startswith("policy-venv-")
    assert (venv / ".installed").is_file() and (venv / "bin" / "python").exists()
    assert "building" in first.stdout and "building" not in again.stdout
    assert (clone / "policy" / "venv").resolve() == venv

    (project / "policy" / "requirements.txt").write_text("# another lock\n")
    changed = make_venv(project, home, "policy/venv", "policy/requirements.txt")

    assert changed.returncode == 0, changed.stderr
    assert "building" in changed.stdout
    assert (project / "policy" / "venv").resolve() not in (venv, project / "policy" / "venv")
    assert (venv / ".installed").is_file()  # the clone's link still works


def test_a_folder_that_is_no_venv_is_left_alone(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("# nothing pinned\n")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "notes.txt").write_text("mine")

    result = make_venv(tmp_path, tmp_path / "cache", ".venv", "requirements.txt")

    assert result.returncode == 2
    assert ".venv exists and is no virtualenv" in result.stderr
    assert (tmp_path / ".venv" / "notes.txt").read_text() == "mine"
