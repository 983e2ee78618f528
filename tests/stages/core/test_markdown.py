"""Text from input in the Markdown report: it renders as itself, on one line, without HTML."""

from __future__ import annotations

import html
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from common.credentials import mask
from stages.core.markdown import markdown_text

ESCAPED = re.compile(r"\\([\\`*_{}\[\]()#+!|~\-=.)])")
"""A backslash escape `markdown_text` writes (the last four only at the start of the text)."""
STRUCTURE = set("\\`*_{}[]()#+!|~")
"""What may open a Markdown construct inline (HTML's `<` and `>` are entities instead)."""


def rendered_text(escaped: str) -> str:
    """The text a Markdown renderer shows for `escaped`: entities and backslash escapes undone."""
    return ESCAPED.sub(r"\1", html.unescape(escaped))


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ("cosmos3-nano-reasoner-lab-round-robin", "cosmos3-nano-reasoner-lab-round-robin"),
        ("<img src=x onerror=alert(1)>", "&lt;img src=x onerror=alert\\(1\\)&gt;"),
        ("[x](javascript:alert(1))", "\\[x\\]\\(javascript:alert\\(1\\)\\)"),
        ("a | b", "a \\| b"),
        ("`code`", "\\`code\\`"),
        ("two\nlines\r\nand\u2028more", "two lines and more"),
        ("# heading", "\\# heading"),
        ("- item", "\\- item"),
        ("1. first", "1\\. first"),
        ("&amp;", "&amp;amp;"),
        ("bidi \u202eevil", "bidi evil"),
        (
            "https://ci:hunter2hunter2@mirror.example.com/simple",
            "https://&lt;secret&gt;@mirror.example.com/simple",
        ),
    ],
)
def test_input_text_becomes_plain_markdown(text: str, escaped: str) -> None:
    assert markdown_text(text) == escaped


@given(st.text(max_size=300))
def test_any_text_renders_as_itself_on_one_line_without_html(text: str) -> None:
    escaped = markdown_text(text)

    assert not {"<", ">", "\n", "\r"} & set(escaped)
    assert not STRUCTURE & set(ESCAPED.sub("", html.unescape(escaped)))
    visible = "".join(char if char.isprintable() else " " for char in mask(text))
    assert rendered_text(escaped) == " ".join(visible.split())
