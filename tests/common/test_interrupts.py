"""Ctrl-C while a command imports: one line and status 130 (the commands themselves are run in
tests/tools/test_hostile_rest.py); importing our packages from a program changes nothing."""

from __future__ import annotations

import sys

import pytest

from common import REPO_ROOT
from common.interrupts import command_name, end_interrupts_quietly


@pytest.mark.parametrize(
    ("main_file", "name"),
    [
        (REPO_ROOT / "tools" / "render.py", "python -m tools.render"),
        (REPO_ROOT / "stages" / "__main__.py", "python -m stages"),
        (REPO_ROOT / "testenv" / "cluster" / "__main__.py", "python -m testenv.cluster"),
        ("-m", "python -m"),
        ("/elsewhere/script.py", "script.py"),
    ],
)
def test_the_command_is_named_as_it_was_typed(main_file: object, name: str) -> None:
    assert command_name(str(main_file)) == name


def test_importing_a_package_of_ours_leaves_the_excepthook_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "argv", ["pytest"])
    end_interrupts_quietly()
    assert sys.excepthook is sys.__excepthook__


def test_under_python_dash_m_the_hook_is_installed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["-m"])
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    end_interrupts_quietly()
    installed = sys.excepthook
    end_interrupts_quietly()
    assert installed is not sys.__excepthook__ and sys.excepthook is installed
