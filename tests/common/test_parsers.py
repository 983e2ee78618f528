"""The house's command lines name the option at fault. Python 3.11's argparse stores `[]` for
`--option=--`, past the option's type and `required`; hypothesis found `archive push --stack=--`
ending in a pydantic error that named no option."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable

import pytest

import lab.__main__ as lab_cli
import stages.archive.cli as archive_cli
import stages.cli as stages_cli
import tools.render
import tools.validate
from common import REPO_ROOT
from common.parsers import CommandParser, add_subcommands


def parser() -> CommandParser:
    top = CommandParser(prog="tool")
    top.add_argument("--name", required=True)
    top.add_argument("rest", nargs="*")
    return top


def test_a_double_dash_as_an_options_value_is_refused_naming_the_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        parser().parse_args(["--name=--"])
    assert exited.value.code == 2
    assert "argument --name: `--` is not a value" in capsys.readouterr().err


def test_values_that_merely_contain_dashes_and_positionals_after_the_marker_pass() -> None:
    assert parser().parse_args(["--name=a--", "--", "--x=--"]).rest == ["--x=--"]


def test_a_subcommand_refuses_it_too(capsys: pytest.CaptureFixture[str]) -> None:
    top = CommandParser(prog="tool")
    sub = add_subcommands(top, dest="command", required=True).add_parser("push")
    sub.add_argument("--stack", required=True)
    with pytest.raises(SystemExit):
        top.parse_args(["push", "--stack=--"])
    assert "tool push: error: argument --stack: `--` is not a value" in capsys.readouterr().err


COMMANDS: dict[str, tuple[Callable[[list[str]], int], list[str], str]] = {
    "archive push": (archive_cli.main, ["push", "--bucket=b", "--stack=--"], "--stack"),
    "stages perf": (stages_cli.main, ["perf", "--outputs=--"], "--outputs"),
    "lab ab": (lab_cli.main, ["ab", "--workers=--"], "--workers"),
    "tools.validate": (tools.validate.main, ["--context=--"], "--context"),
    "tools.render": (tools.render.main, ["--stack=--"], "--stack"),
}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_line_of_the_house_names_the_option(command: str) -> None:
    main, argv, option = COMMANDS[command]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as exited:
        main(list(argv))
    assert exited.value.code == 2
    assert f"argument {option}: `--` is not a value" in err.getvalue()


def test_no_command_line_is_built_on_plain_argparse() -> None:
    """A parent parser (add_help=False) only lends options; every other parser is ours."""
    plain = [
        f"{path.relative_to(REPO_ROOT)}:{number}"
        for folder in ("common", "components", "stages", "lab", "tools", "testenv", "policy")
        for path in sorted((REPO_ROOT / folder).rglob("*.py"))
        if "venv" not in path.parts
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "argparse.ArgumentParser(" in line and "add_help=False" not in line
    ]
    assert plain == []
