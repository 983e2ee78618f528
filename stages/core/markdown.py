"""Text from input, made safe to paste into a Markdown report: the one escape function.

A results file is input: its graph name, header, failure text or timing note may hold anything,
and `report.md` is read rendered (GitHub, a CI summary, a browser). Pasted raw, a name like
`<img src=x onerror=...>` is HTML, `](javascript:...)` a link, `|` a table column, a backtick a
code span, a newline a new paragraph. `markdown_text` turns any value into plain text that renders
as itself, on one line: credentials masked (`common.credentials`), control and layout characters
made spaces, Markdown's punctuation backslash-escaped and HTML's `&`, `<`, `>` written as entities.
Every place the report writes a value that came from input goes through it.
"""

from __future__ import annotations

import html
import re
import unicodedata

from common.credentials import mask

_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()#+!|~])")
"""Characters that open emphasis, code, links, images, headings, tables or strikethrough.
`-` and `.` stay as they are, so a name like `cosmos3-nano-reasoner` reads as itself in the
file; either starts a block only at the beginning of a line, handled below."""
_BLOCK_START = re.compile(r"^(\d+)([.)])|^([-=])")
"""An ordered-list number, a bullet or a heading underline at the start of the text."""


def _one_line(text: str) -> str:
    """Every control, format or separator character a space, runs of spaces one."""
    visible = "".join(" " if unicodedata.category(char)[0] in "CZ" else char for char in text)
    return " ".join(visible.split())


def markdown_text(value: object) -> str:
    """`value` as Markdown that renders as its own text, on one line, with no credential."""
    text = _one_line(mask(str(value)))
    text = _MARKDOWN_PUNCTUATION.sub(r"\\\1", text)
    text = _BLOCK_START.sub(lambda m: f"{m[1]}\\{m[2]}" if m[1] else f"\\{m[3]}", text)
    return html.escape(text, quote=False)
