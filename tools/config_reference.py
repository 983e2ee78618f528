"""The configuration reference in docs/configuration.md, generated from Pulumi.yaml's declarations.

    python -m tools.config_reference            # rewrites the generated block in the page
    python -m tools.config_reference --check    # exit 1 when docs/configuration.md is out of date
    python -m tools.config_reference --print    # prints the Markdown table

A test compares that page with this output, so the reference cannot drift from Pulumi.yaml.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from common import REPO_ROOT
from common.confined_paths import OutputFolderError, write_inside
from common.input_files import MAX_RECORD_BYTES, read_text
from common.parsers import CommandParser
from tools.stack_files import declared_config

PAGE = "docs/configuration.md"
TARGET = REPO_ROOT / PAGE
"""The page that holds the generated block."""
START, END = "<!-- CONFIG-REFERENCE:START -->", "<!-- CONFIG-REFERENCE:END -->"


def _default(declaration: dict[str, Any]) -> str:
    if "default" not in declaration:
        return "required"
    value = declaration["default"]
    return f"`{value}`" if isinstance(value, str) and value else f"`{json.dumps(value)}`"


def reference_table() -> str:
    lines = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    for key, declaration in declared_config().items():
        if ":" in key:
            continue
        kind = declaration["type"]
        if kind == "array":
            kind = f"array of {declaration['items']['type']}"
        description = " ".join(declaration["description"].split()).replace("<", "&lt;")
        lines.append(f"| `{key}` | {kind} | {_default(declaration)} | {description} |")
    return "\n".join(lines)


def synced(text: str) -> str:
    """`text` with the block between START and END replaced by the current reference table; a
    ValueError naming the marker when one is missing (or END comes first)."""
    head, start, rest = text.partition(START)
    _, end, tail = rest.partition(END)
    if not (start and end):
        missing = END if start else START
        raise ValueError(
            f"{PAGE} lacks the marker {missing}: put it back around the reference table"
        )
    return f"{head}{START}\n{reference_table()}\n{END}{tail}"


def sync(argv: list[str] | None = None) -> int:
    """`python -m tools.config_reference [--check | --print]`: rewrite the page's block, check it,
    or print the table. Anything else is a usage error (exit 2) that writes nothing."""
    parser = CommandParser(
        prog="python -m tools.config_reference", description=__doc__.split("\n")[0]
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 when the page is out of date")
    mode.add_argument("--print", action="store_true", help="print the table; write nothing")
    args = parser.parse_args(argv)
    if args.print:
        print(reference_table())
        return 0
    text = read_text(TARGET, "configuration reference", MAX_RECORD_BYTES)
    try:
        fresh = synced(text)
    except ValueError as error:
        print(f"tools.config_reference: {error}", file=sys.stderr)
        return 2
    if args.check:
        if fresh != text:
            print(
                "docs/configuration.md configuration reference is stale: "
                "run python -m tools.config_reference",
                file=sys.stderr,
            )
            return 1
        return 0
    try:  # a link there (a clone may carry one) is refused, never written through
        write_inside(REPO_ROOT, PAGE, fresh)
    except OutputFolderError as error:
        print(f"tools.config_reference: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(sync())
