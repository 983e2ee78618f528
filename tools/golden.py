"""Golden manifests: what each shipped stack deploys, committed under `manifests/<stack>/`.

Why: a reviewer sees in the pull request's diff exactly which Kubernetes objects and stack outputs a
change alters, without a cluster or the Pulumi CLI, and the test suite fails when the program's
output drifts from what is committed. They are the offline render (`tools.render`) of each shipped
stack with the example site values (`--example-site`), secrets masked.

    python -m tools.golden --check     # exit 1 and a unified diff when a stack drifted
    python -m tools.golden --update    # regenerate after an intended change, then commit
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pulumi

from common import REPO_ROOT
from common.confined_paths import inside
from common.credentials import masked_output
from common.input_files import MAX_RECORD_BYTES, read_text
from common.parsers import CommandParser
from tools.render import OUTPUTS_FILE, render_files, render_stack, write_render
from tools.stack_files import SHIPPED_STACKS, example_site_for

MANIFESTS = REPO_ROOT / "manifests"
WRITER = "python -m tools.golden"


def example_render(stack: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A shipped stack's objects and outputs, rendered with the example site values."""
    try:
        return render_stack(stack, example_site_for(stack))
    finally:
        pulumi.runtime.reset_options()  # the next stack starts from a clean Pulumi runtime


def drift(stack: str) -> str:
    """A unified diff from the committed files to a fresh render; empty when they match."""
    directory = MANIFESTS / stack
    names = [path.name for path in directory.glob("*.yaml")] + [OUTPUTS_FILE]
    committed = {
        f"manifests/{stack}/{name}": read_golden(path)
        for name in names
        # A link a clone carries is refused, never read: its target could be anything.
        if (path := inside(MANIFESTS.parent, f"{MANIFESTS.name}/{stack}/{name}")).is_file()
    }
    fresh = render_files(*example_render(stack))  # what `--update` would write
    rendered = {f"manifests/{stack}/{name}": text.decode() for name, text in fresh.items()}
    return file_drift(committed, rendered, "rendered now")


def read_golden(path: Path) -> str:
    return read_text(path, "golden file", MAX_RECORD_BYTES)


def file_drift(committed: Mapping[str, str], fresh: Mapping[str, str], fresh_label: str) -> str:
    """A unified diff from the committed files to fresh ones, by name; empty when they match."""
    chunks: list[str] = []
    for name in sorted(committed.keys() | fresh.keys()):
        before, after = committed.get(name, ""), fresh.get(name, "")
        if before == after:
            continue
        old = f"{name} (committed)" if name in committed else "/dev/null"
        new = f"{name} ({fresh_label})" if name in fresh else "/dev/null"
        lines = before.splitlines(keepends=True), after.splitlines(keepends=True)
        chunks += difflib.unified_diff(*lines, fromfile=old, tofile=new)
    return "".join(chunks)


def update(stack: str) -> list[Path]:
    """Rewrite `manifests/<stack>/`: golden's own folder, which holds nothing it did not write."""
    objects, outputs = example_render(stack)
    inside(MANIFESTS.parent, f"{MANIFESTS.name}/{stack}")  # a link a clone carries: refused
    return write_render(MANIFESTS / stack, objects, outputs, WRITER, "golden manifests")


def main(argv: list[str] | None = None) -> int:
    with masked_output():  # a committed file is printed in a diff: never a credential in it
        return _run(argv)


def _run(argv: list[str] | None) -> int:
    parser = CommandParser(prog="python -m tools.golden", description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--check", action="store_true", help="diff the committed manifests against a fresh render"
    )
    mode.add_argument(
        "--update", action="store_true", help="rewrite manifests/<stack>/ from a fresh render"
    )
    parser.add_argument(
        "--stack", action="append", choices=SHIPPED_STACKS, help="default: every shipped stack"
    )
    args = parser.parse_args(argv)
    stacks = args.stack or list(SHIPPED_STACKS)
    if args.update:
        try:
            for stack in stacks:
                print(f"{stack}: {len(update(stack))} files written to manifests/{stack}/")
        except (ValueError, OSError) as error:  # a folder golden may not write, a full disk
            print(f"golden --update: {error}", file=sys.stderr)
            return 2
        return 0
    try:
        diffs = {stack: drift(stack) for stack in stacks}
    except (ValueError, OSError) as error:  # a link or an unreadable file among the golden ones
        print(f"golden --check: {error}", file=sys.stderr)
        return 2
    for stack, diff in diffs.items():
        print(diff if diff else f"{stack}: matches manifests/{stack}/", end="" if diff else "\n")
    if any(diffs.values()):
        print(
            "golden manifests drifted: review the diff, then run `python -m tools.golden --update`"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
