"""Static checks: ruff (lint and format) and mypy --strict, over the paths this suite owns.

Scope: every Python file of the project for ruff (what git ignores, such as .lab/ and the venvs,
is skipped), and every module outside tests/ for mypy --strict. Settings are in pyproject.toml.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tools.offline import ROOT

RUFF_PATHS = ["."]
MYPY_PATHS = ["components", "tools", "policy/rules.py", "lab", "stages", "__main__.py"]


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize(
    "command",
    [
        ["ruff", "check", "--no-fix", *RUFF_PATHS],
        ["ruff", "format", "--check", "--diff", *RUFF_PATHS],
    ],
    ids=["ruff-check", "ruff-format"],
)
def test_ruff(command: list[str]) -> None:
    result = run(*command)
    assert result.returncode == 0, f"`{' '.join(command)}`:\n{result.stdout}{result.stderr}"


def test_mypy_strict() -> None:
    result = run("mypy", "--strict", *MYPY_PATHS)
    assert result.returncode == 0, result.stdout + result.stderr
