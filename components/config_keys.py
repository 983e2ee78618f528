"""Config keys the program does not know: a typo of one it does, or of its namespace.

The CLI hands the program every key of the stack file. One of this project's namespace that is
not declared (`workerReplica`) is a typo; one of a namespace close to the project's
(`cosmos3_nano_reasoner:workerReplicas`, another case, a zero-width space inside) is one too,
and the worse one: it looks like another namespace's key, so it would be ignored and the default
deployed instead of what the file says. Each is refused with the key it most likely means, its
invisible characters shown as escapes (`common.terminal`), so two keys that print alike are told
apart. Pure: no Pulumi.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from common.terminal import invisible_characters, visible
from components.settings import PROJECT, SECRET_KEYS, StackSettings, config_key

REMOVED_KEYS = {
    "servedModel": (
        "no longer config: the NIM serves its own model id, which no setting renames "
        "(components/names.py SERVED_MODEL); the stack output servedModel still names it"
    ),
}
"""Keys older stack files may still set, with why they went."""


def declared_keys() -> set[str]:
    return {field.alias or name for name, field in StackSettings.model_fields.items()}


def unknown_key_lines(raw: Mapping[str, Any], unknown: list[str]) -> list[str]:
    """A line per key of a mistyped namespace among `raw`'s, then per `unknown` key of this
    project's, each with the key it most likely means and how to remove it."""
    return _mistyped_namespace_lines(raw) + _unknown_lines(unknown)


def _unknown_lines(unknown: list[str]) -> list[str]:
    lines = []
    for key in unknown:
        close = nearest_key(key)
        hint = f"did you mean {config_key(close)}?" if close else "see docs/configuration.md"
        hint = REMOVED_KEYS.get(key, hint)
        lines.append(
            f"  {visible(config_key(key))}{_invisible_note(key)}: {hint} ({_removal(key)})"
        )
    return lines


NEAR_NAMESPACE_RATIO = 0.8
"""How alike a namespace must be to the project's to be a typo of it: one or two characters off
in `cosmos3-nano-reasoner` (`pulumi`, `kubernetes` or `aws` are nowhere near)."""


def _mistyped_namespace_lines(raw: Mapping[str, Any]) -> list[str]:
    """Keys of a namespace that is this project's mistyped (`cosmos3_nano_reasoner:`, another
    case, an invisible character in it): the program would ignore them as another namespace's,
    and deploy its default instead of what the stack file says."""
    lines = []
    for key in sorted(raw):
        namespace, sep, name = key.rpartition(":")
        if not sep or namespace == PROJECT or not _near_project(namespace):
            continue
        close = nearest_key(name)
        hint = f"did you mean {config_key(close)}?" if close else f"this project's is {PROJECT}"
        lines.append(
            f"  {visible(key)}{_invisible_note(key)}: not this project's namespace, so it would be "
            f"ignored; {hint} ({_removal(key)})"
        )
    return lines


def nearest_key(key: str) -> str | None:
    """The declared key `key` most likely means: the same once invisible characters, case and
    `_`/`-` are set aside, else the closest spelling; None when none is close."""
    keys = sorted(declared_keys() | SECRET_KEYS)
    by_folded = {_folded(known): known for known in keys}
    if _folded(key) in by_folded:
        return by_folded[_folded(key)]
    close = difflib.get_close_matches(_folded(key), list(by_folded), n=1)
    return by_folded[close[0]] if close else None


def _near_project(namespace: str) -> bool:
    folded, project = _folded(namespace), _folded(PROJECT)
    return difflib.SequenceMatcher(None, folded, project).ratio() >= NEAR_NAMESPACE_RATIO


def _folded(text: str) -> str:
    """`text` without invisible characters, casefolded, `_` read as `-`."""
    return "".join(c for c in text if c.isprintable()).casefold().replace("_", "-")


def _removal(key: str) -> str:
    """How to remove a key: `pulumi config rm`, unless it holds a character nobody can type."""
    if invisible_characters(key):
        return "delete its line from the stack file: the key cannot be typed"
    return f"`pulumi config rm {key if ':' in key else config_key(key)}`"


def _invisible_note(key: str) -> str:
    hidden = invisible_characters(key)
    return f" (holds the invisible {', '.join(hidden)})" if hidden else ""
