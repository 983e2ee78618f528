"""Every command's `--help` reads as written: the one masker, which every command's output goes
through (`common.credentials.masked_output`), finds no credential in it. A group title such as
`(credentials: the AWS environment)` reads to it as a credential-named field, and a metavar
`KEY=VALUE` as a secret variable, so the help showed `<secret>` where the text was."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator

import pytest

from common.credentials import MASK, mask
from lab.__main__ import build_parser as lab_parser
from stages.cli import build_parser as stages_parser
from tools import config_reference, golden, render, validate

Main = Callable[[list[str] | None], int]
TOOLS: dict[str, Main] = {
    "tools.config_reference": config_reference.sync,
    "tools.render": render.main,
    "tools.golden": golden.main,
    "tools.validate": validate.main,
}


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """The parser, then every subcommand's, depth first."""
    yield parser
    for action in parser._actions:  # argparse keeps its subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            for subparser in dict.fromkeys(action.choices.values()):  # aliases share a parser
                yield from _subcommands(subparser)


def _helps(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    return [(sub.prog, sub.format_help()) for sub in _subcommands(parser)]


@pytest.mark.parametrize("build", [stages_parser, lab_parser], ids=["stages", "lab"])
def test_no_subcommands_help_holds_what_the_masker_would_hide(
    build: Callable[[], argparse.ArgumentParser],
) -> None:
    helps = _helps(build())

    assert len(helps) > 3  # the subcommands were found
    hidden = {prog: mask(text) for prog, text in helps if mask(text) != text}
    assert hidden == {}


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_a_tools_help_is_printed_as_written(tool: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_status:
        TOOLS[tool](["--help"])

    printed = capsys.readouterr().out
    assert exit_status.value.code == 0
    assert printed.startswith(f"usage: python -m {tool}")
    assert MASK not in printed
