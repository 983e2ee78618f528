"""lab/setup.sh: fails loudly, and is quick and idempotent once the lab is installed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from common import REPO_ROOT
from lab.environment import LabInstall


def run_setup(**env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "lab/setup.sh"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env=os.environ | env,
        check=False,
    )


def test_an_unusable_python_fails_with_a_clear_message(tmp_path: Path) -> None:
    result = run_setup(PYTHON=str(tmp_path / "no-such-python"), LAB_HOME=str(tmp_path / "lab"))

    assert result.returncode != 0
    assert "lab setup FAILED" in result.stderr
    assert not (tmp_path / "lab" / "dynamo-venv").exists()


def test_the_locks_pin_every_package_exactly() -> None:
    for lock in ("lab/requirements-dynamo.lock", "stages/requirements-aiperf.lock"):
        lines = (REPO_ROOT / lock).read_text().splitlines()
        pins = [line for line in lines if line and not line.startswith("#")]
        assert pins and all("==" in pin and ";" not in pin for pin in pins), lock
    dynamo = (REPO_ROOT / "lab/requirements-dynamo.lock").read_text()
    assert "ai-dynamo==1.6.1" in dynamo and "ai-dynamo-runtime==1.6.1" in dynamo
    assert "aiperf==0.13.0" in (REPO_ROOT / "stages/requirements-aiperf.lock").read_text()


@pytest.mark.lab
def test_a_second_run_changes_nothing(lab_install: LabInstall) -> None:
    stamps = [lab_install.dynamo_venv / ".installed", lab_install.aiperf_venv / ".installed"]
    before = [path.stat().st_mtime for path in stamps]

    result = run_setup()

    assert result.returncode == 0, result.stderr
    assert result.stdout.count("is up to date") == 3
    assert [path.stat().st_mtime for path in stamps] == before


# A stand-in for pip's log, written as pip writes it: one `Collecting` line per package, then
# the install; its exit status is the last command's.
FAKE_PIP = """
(echo 'Collecting a==1' >"$log"; sleep 2.5; echo 'Collecting b==1' >>"$log"; sleep 2
 echo 'Installing collected packages: a, b' >>"$log"; sleep 2; exit "$status") &
watch_pip $! demo-venv "$log" 2 $SECONDS
"""


def watch_fake_pip(tmp_path: Path, status: int) -> subprocess.CompletedProcess[str]:
    script = f"source lab/setup.sh\nlog={tmp_path}/pip.log\nstatus={status}\n{FAKE_PIP}"
    return subprocess.run(
        ["bash", "-c", script],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ | {"PROGRESS_SECONDS": "1"},
        check=False,
    )


@pytest.mark.slow
def test_an_install_says_how_far_it_got_and_how_long_it_took(tmp_path: Path) -> None:
    result = watch_fake_pip(tmp_path, status=0)

    lines = result.stdout.splitlines()
    assert result.returncode == 0, result.stderr
    # The first report comes after a second, later on a busy host (make test runs this niced).
    for fetched in (1, 2):
        line = f"lab setup: demo-venv: fetched {fetched} of 2 packages (0m0"
        assert any(printed.startswith(line) for printed in lines), lines
    assert lines[-1].startswith("lab setup: demo-venv: installing 2 packages (0m0")


@pytest.mark.slow
def test_a_failed_install_is_its_status(tmp_path: Path) -> None:
    assert watch_fake_pip(tmp_path, status=3).returncode == 3
