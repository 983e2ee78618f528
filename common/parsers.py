"""Command lines that report their own mistakes (`stages`, `stages archive`, `lab`, the tools, `testenv`).

- argparse hands a subcommand's unknown options back to the top-level parser, whose error then
  shows the top-level usage (`usage: python -m lab [-h] COMMAND ...`), which lists none of the
  options the user meant. A subcommand added with `add_subcommands` refuses unknown options
  itself, so `lab ab --wrokers 2` prints `lab ab`'s usage and names `--wrokers` (exit status 2).
- Python 3.11's argparse drops a `--` given as an option's value (`--stack=--`) and stores `[]`,
  past the option's type check and `required`: the mistake surfaced later as a pydantic error
  naming no option. Every parser here refuses it, naming the option.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any


class CommandParser(argparse.ArgumentParser):
    """A parser that refuses `--option=--`, naming the option (exit status 2); one with
    subcommands leaves that to the subcommand, whose usage it is."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        for token in _options_part(args) if self._subparsers is None else []:
            option, separator, value = token.partition("=")
            if token.startswith("-") and separator and value == "--":
                self.error(f"argument {option}: `--` is not a value: give {option} a value")
        return super().parse_known_args(args, namespace)


class SubcommandParser(CommandParser):
    """A subcommand's parser: an unknown option is its own error, shown with its own usage.
    Its subcommands are SubcommandParsers too (argparse makes them of the parent's class)."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error("unrecognized arguments: " + " ".join(extras))
        return parsed, extras


def add_subcommands(
    parser: argparse.ArgumentParser, **kwargs: Any
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """`parser.add_subparsers(**kwargs)`, its subcommands SubcommandParsers."""
    return parser.add_subparsers(parser_class=SubcommandParser, **kwargs)


def _options_part(args: Sequence[str] | None) -> list[str]:
    """The tokens before a bare `--` (after it, everything is a positional value)."""
    tokens = list(args) if args is not None else sys.argv[1:]
    return tokens[: tokens.index("--")] if "--" in tokens else tokens
