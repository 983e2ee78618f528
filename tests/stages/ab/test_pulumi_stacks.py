"""What `PulumiStacks` decides without a CLI; everything it asks of the real one is tested on the
real tier (tests/real/test_pulumi_stacks.py, tests/real/test_ab.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pulumi.automation import OutputValue

from common import REPO_ROOT
from stages.ab import pulumi_stacks
from stages.ab.pulumi_stacks import (
    DeployError,
    PulumiStacks,
    _as_printed,
    _error_lines,
    _output_tail,
)


def test_a_missing_cli_is_a_deploy_error(tmp_path: Path) -> None:
    stacks = PulumiStacks(REPO_ROOT, lambda _: None, pulumi_root=tmp_path / "nowhere")

    with pytest.raises(DeployError, match=r"cannot use the Pulumi CLI \(.*nowhere/bin/pulumi\)"):
        stacks.outputs("round-robin")


def test_stages_ab_without_a_cli_says_so_before_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from stages import cli

    monkeypatch.setenv("PATH", str(tmp_path))  # no `pulumi` anywhere on it
    status = cli.main(["ab", "--archive-bucket", "my-ab-results", "--out", str(tmp_path / "ab")])

    printed = capsys.readouterr()
    assert status == 1
    assert "cannot use the Pulumi CLI (`pulumi` on PATH)" in printed.err
    assert "make engine" in printed.err and "no outputs of an earlier update" not in printed.err


def test_a_stack_is_selected_once_a_run_and_again_only_after_it_could_not_be(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    selected: list[str] = []

    def select_stack(name: str, **_: object) -> str:
        selected.append(name)
        if len(selected) == 1:
            raise RuntimeError("no stack named 'shared'")
        return f"the stack {name}"

    monkeypatch.setattr(pulumi_stacks, "select_stack", select_stack)
    stacks = PulumiStacks(REPO_ROOT, lambda _: None)
    monkeypatch.setattr(stacks, "_options", lambda: None)  # no CLI: nothing here runs one

    with pytest.raises(DeployError, match="shared"):
        stacks._select("shared")
    used = [stacks._select(name) for name in ("shared", "round-robin", "shared", "round-robin")]

    assert selected == ["shared", "shared", "round-robin"]
    assert [str(stack) for stack in used] == ["the stack shared", "the stack round-robin"] * 2


def test_outputs_read_as_stack_output_prints_them_a_secret_stays_masked() -> None:
    printed = _as_printed(
        {"namespace": OutputValue("cosmos3", False), "token": OutputValue("hunter2", True)}
    )
    assert printed == {"namespace": "cosmos3", "token": "[secret]"}


def test_an_error_ends_with_the_last_lines_pulumi_printed() -> None:
    class Failed(Exception):
        def __str__(self) -> str:
            stdout = "\n".join(f"line {n}" for n in range(30))
            return f"\n code: 255\n stdout: {stdout}\n stderr: error: the last word"

    tail = _output_tail(Failed()).splitlines()  # type: ignore[arg-type]
    assert tail[-1] == "error: the last word" and len(tail) == 15 and tail[0] == "line 16"


def test_the_engines_errors_come_first_when_a_traceback_fills_the_tail() -> None:
    class Cancelled(Exception):
        def __str__(self) -> str:
            traceback = "\n".join(f"  File line {n}" for n in range(30))
            stdout = (
                "Diagnostics:\n  pulumi:pulumi:Stack (dev):\n"
                '    error: unknown stack "org/project/shared"\n'
                '    error: unknown stack "org/project/shared"\n'
                f"{traceback}\n    KeyboardInterrupt\nResources:\n    2 errored"
            )
            return f"\n code: 255\n stdout: {stdout}\n stderr: "

    errors = _error_lines(Cancelled())  # type: ignore[arg-type]

    assert errors == ['error: unknown stack "org/project/shared"']
    assert "unknown stack" not in _output_tail(Cancelled())  # type: ignore[arg-type]
