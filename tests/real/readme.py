"""README's shell blocks as commands a test runs: the Quick start is executed, not paraphrased."""

from __future__ import annotations

import re
from pathlib import Path

from common import REPO_ROOT

README = REPO_ROOT / "README.md"
_FENCE = re.compile(r"^```(\w*)\s*$")


def section_block(heading: str, readme: Path = README) -> list[str]:
    """The first ```bash block under `heading`, one command per entry: comments dropped, a
    `for ... done` loop kept whole."""
    lines = readme.read_text().splitlines()
    start = lines.index(heading)
    block: list[str] = []
    inside = False
    for line in lines[start + 1 :]:
        fence = _FENCE.match(line)
        if fence and not inside:
            inside = fence.group(1) == "bash"
            continue
        if fence and inside:
            break
        if inside:
            block.append(line)
    return _commands(block)


def _commands(lines: list[str]) -> list[str]:
    commands: list[str] = []
    loop: list[str] = []
    for raw in lines:
        line = _without_comment(raw).rstrip()
        if not line.strip():
            continue
        if loop or line.lstrip().startswith("for "):
            loop.append(line)
            if line.strip() == "done":
                commands.append("\n".join(loop))
                loop = []
            continue
        commands.append(line.strip())
    return commands


def _without_comment(line: str) -> str:
    # A `#` after two spaces starts a comment here; none of the commands quote a `#`.
    if line.lstrip().startswith("#"):
        return ""
    return re.split(r"\s{2,}#\s", line, maxsplit=1)[0]
