"""`python -m lab`: help, and a clear failure when the lab is not installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest

import lab.__main__ as lab_entry
from common import REPO_ROOT
from components.routing import RoutingProfile
from lab.__main__ import main as lab_main
from lab.environment import LabInstall


def run_lab(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lab", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.parametrize("command", ["ab", "up"])
def test_every_command_has_help(command: str) -> None:
    result = run_lab(command, "--help")

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: python -m lab {command}")


@pytest.mark.slow
def test_ab_without_the_lab_installed_says_how_to_install_it(tmp_path: Path) -> None:
    result = run_lab("ab", "--out", str(tmp_path), env=os.environ | {"LAB_HOME": str(tmp_path)})

    assert result.returncode == 1
    assert "lab ab FAILED: the lab is not installed" in result.stderr
    assert "bash lab/setup.sh" in result.stderr


@pytest.mark.parametrize("command", [["ab", "--wrokers", "2"], ["up", "--profiel", "round-robin"]])
def test_a_mistyped_option_shows_its_subcommands_usage(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        lab_main(command)

    stderr = capsys.readouterr().err
    assert exit_.value.code == 2
    assert stderr.startswith(f"usage: python -m lab {command[0]} ")
    assert f"python -m lab {command[0]}: error: unrecognized arguments: {command[1]}" in stderr


def test_several_frontends_need_the_direct_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = lab_main(["ab", "--frontends", "2", "--out", str(tmp_path)])

    assert status == 2
    assert "--frontends: several frontends run on the direct path only (--direct)" in (
        capsys.readouterr().err
    )
    assert list(tmp_path.iterdir()) == [] or all(p.name.startswith(".") for p in tmp_path.iterdir())


class _GraphsInterruptedTwice:
    """A graph source whose start is interrupted (Ctrl-C) and whose stop is interrupted again."""

    name = "scripted lab"
    closed: ClassVar[bool] = False
    """Set when the lab closed it: every lab process stopped."""

    def __init__(self, *args: object) -> None:
        pass

    def stack(self, profile: RoutingProfile) -> str:
        return f"lab-{profile.value}"

    def prepare(self, target: object, say: object) -> None:
        pass

    def start(self, target: object, profile: RoutingProfile, say: object) -> None:
        raise KeyboardInterrupt

    def stop(self, profile: RoutingProfile, graph: object, say: object) -> None:
        raise KeyboardInterrupt

    def close(self) -> None:
        _GraphsInterruptedTwice.closed = True


def test_a_second_ctrl_c_during_the_ab_ends_with_one_line_and_130(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(lab_entry, "DirectGraphs", _GraphsInterruptedTwice)
    monkeypatch.setattr(LabInstall, "require", lambda install: install)

    status = lab_main(["ab", "--direct", "--out", str(tmp_path)])

    assert status == 130
    assert _GraphsInterruptedTwice.closed  # every lab process stopped on the way out
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == "lab: interrupted; every lab process was stopped"
    assert "Traceback" not in err
