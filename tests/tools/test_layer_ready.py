"""`python -m tools.layer_ready`: the CI gate before a profile stack's preview."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tools.layer_ready import main
from tools.offline import shared_layer_outputs
from tools.stack_files import SHARED_STACK


def check(tmp_path: Path, outputs: Any, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    path = tmp_path / "shared.json"
    path.write_text(outputs if isinstance(outputs, str) else json.dumps(outputs))
    status = main([str(path)])
    return status, capsys.readouterr().out


def test_a_deployed_shared_stack_is_ready(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert check(tmp_path, shared_layer_outputs()[SHARED_STACK], capsys)[0] == 0


@pytest.mark.parametrize(
    ("outputs", "reason"),
    [
        ("", "no output namespace"),  # `pulumi stack output` failed: no such stack
        ({}, "never deployed"),
        ("[]", "not a JSON object"),
        ("{", "cannot be read"),
    ],
)
def test_anything_else_is_not_ready_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], outputs: Any, reason: str
) -> None:
    status, printed = check(tmp_path, outputs, capsys)
    assert status == 1 and reason in printed


@pytest.mark.parametrize(
    ("replaced", "note"),
    [
        ({"modelCacheReady": False}, "has not completed"),
        ({"credentialsDigest": None}, "no credentialsDigest"),
    ],
)
def test_a_layer_the_profile_preview_warns_about_passes_with_the_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], replaced: dict[str, Any], note: str
) -> None:
    status, printed = check(tmp_path, shared_layer_outputs(**replaced)[SHARED_STACK], capsys)
    assert status == 0 and note in printed and "its up refuses" in printed


@pytest.mark.parametrize("argv", [[], ["a.json", "b.json"], ["--output", "a.json"]])
def test_a_command_line_that_names_no_one_file_is_a_usage_error(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as usage:
        main(argv)
    assert usage.value.code == 2 and "SHARED_OUTPUTS_JSON" in capsys.readouterr().err


def test_help_is_help_not_a_file_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0 and "shared stack's outputs" in capsys.readouterr().out
