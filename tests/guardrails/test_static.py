"""Static checks: ruff (lint and format) and mypy --strict, over the paths this suite owns.

Scope is explicit: the Pulumi program (components/, __main__.py), tools/, the policy pack and the
tests beside them. lab/ and stages/ are not covered yet. Settings are in pyproject.toml.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tools.offline import ROOT

RUFF_PATHS = [
    "components",
    "tools",
    "policy",
    "tests/components",
    "tests/guardrails",
    "tests/test_program.py",
    "tests/conftest.py",
    "__main__.py",
]
MYPY_PATHS = [
    "components",
    "tools/render.py",
    "tools/validate.py",
    "tools/golden.py",
    "policy/rules.py",
]


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
