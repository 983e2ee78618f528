"""Text from input, as a terminal may show it: every control or invisible character escaped.

A value a user (or a file someone else wrote) gave reaches a terminal in messages and tables: an
ESC there starts an escape sequence that can recolour, move the cursor or retitle the window,
a carriage return or a backspace can hide what came before it, and a zero-width space makes two
different keys look the same. `visible` shows each such character as its Python escape
(`\\x1b`, `\\u200b`), so what is printed is what was given, on one line. Standard library only.
"""

from __future__ import annotations


def visible(text: str) -> str:
    """`text` with each character that is not printable (C0 and C1 controls, ESC, DEL, newlines,
    format characters such as U+200B, separators other than the space) as its escape."""
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def invisible_characters(text: str) -> list[str]:
    """The code points (`U+200B`) of the characters of `text` that `visible` escapes, once each."""
    return sorted({f"U+{ord(c):04X}" for c in text if not c.isprintable()})


def _escape(character: str) -> str:
    code = ord(character)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
