"""Text from input as a terminal may show it: every control or invisible character escaped."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from common.terminal import invisible_characters, visible


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain text, with spaces", "plain text, with spaces"),
        ("a\x1b[2Jb", "a\\x1b[2Jb"),
        ("line\nbreak\r", "line\\x0abreak\\x0d"),
        ("\x9b31m", "\\x9b31m"),
        ("zero\u200bwidth", "zero\\u200bwidth"),
        ("\u202eright-to-left", "\\u202eright-to-left"),
        ("名前 ok", "名前 ok"),
        ("\U000e0001tag", "\\U000e0001tag"),
    ],
)
def test_each_control_or_invisible_character_is_shown_escaped(text: str, shown: str) -> None:
    assert visible(text) == shown


@given(st.text())
def test_what_visible_returns_is_printable_on_one_line(text: str) -> None:
    assert visible(text).isprintable()
    assert (visible(text) == text) == (invisible_characters(text) == [])


def test_the_invisible_characters_are_named_once_each() -> None:
    assert invisible_characters("a\u200bb\u200b\x1b") == ["U+001B", "U+200B"]
