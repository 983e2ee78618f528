"""A pydantic refusal of an input file as one line: each field at fault, what is wrong, and
the value when it is safe to show.

    levels[0].ttft_p50_ms: Input should be greater than or equal to 0 (got -5)
    request_count.avg: Input should be a finite number (got nan)

A value is shown only when it is short and does not look like a credential
(`components.config_rules.shown`); a long one by its length; an object, a list or a whole file
not at all (the problem says what it lacks).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from components.config_rules import SHOWN_MAX_CHARACTERS, shown

REFUSAL_PROBLEMS = 3
"""A refusal names the first few problems of a file; one is enough to fix it."""


def refusal(error: ValidationError, limit: int = REFUSAL_PROBLEMS) -> str:
    """`field.path: what is wrong (got <value>); ...` for the first `limit` problems."""
    problems = [_problem(problem) for problem in error.errors()]
    more = f" (+{len(problems) - limit} more)" if len(problems) > limit else ""
    return "; ".join(problems[:limit]) + more


def _problem(problem: Mapping[str, Any]) -> str:
    message = str(problem["msg"]).removeprefix("Value error, ")
    value = problem.get("input")
    whole = problem["type"] in {"missing", "json_invalid"}  # nothing to show, or the whole file
    if not whole and not isinstance(value, Mapping | list | tuple):
        message += f" (got {_shown_value(value)})"
    where = _location(problem["loc"])
    return f"{where}: {message}" if where else message


def _shown_value(value: object) -> str:
    """A text as `shown` shows it (quoted when short, never a credential); a number, a boolean
    or null as written, or by its length when it is very long."""
    if isinstance(value, str):
        return shown(value)
    text = repr(value)
    return text if len(text) <= SHOWN_MAX_CHARACTERS else f"a {len(text)}-character value"


def _location(loc: tuple[int | str, ...]) -> str:
    """`levels[0].ttft_p50_ms`: the field, with a list item's position."""
    parts = [f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc]
    return "".join(parts).removeprefix(".")
