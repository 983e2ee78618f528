"""Subcommands that report their own mistakes (`stages`, `stages archive`, `lab`).

argparse hands a subcommand's unknown options back to the top-level parser, whose error then
shows the top-level usage (`usage: python -m lab [-h] COMMAND ...`), which lists none of the
options the user meant. A subcommand added with `add_subcommands` refuses unknown options
itself, so `lab ab --wrokers 2` prints `lab ab`'s usage and names `--wrokers` (exit status 2).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any


class SubcommandParser(argparse.ArgumentParser):
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
