"""Typed records (pydantic models) as the JSON files the stages and the lab write and read, and a
refusal of one as a line: each field at fault, what is wrong, and the value when safe to show.

    levels[0].ttft_p50_ms: Input should be greater than or equal to 0 (got -5)
    request_count.avg: Input should be a finite number (got nan)

A value is shown only when it is short and does not look like a credential
(`components.config_rules.shown`); a long one by its length; an object, a list or a whole file
not at all (the problem says what it lacks).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from common.confined_paths import write_file
from common.credentials import masked_document
from common.input_files import (
    MAX_RECORD_BYTES,
    InputFileError,
    InputFileMissing,
    parsed_json,
    read_text,
)
from components.config_rules import SHOWN_MAX_CHARACTERS, shown

Model = TypeVar("Model", bound=BaseModel)
CHECKED = ConfigDict(frozen=True, allow_inf_nan=False, revalidate_instances="always")
"""Every results model: immutable, NaN or Infinity refused wherever a number goes, and a model
given to another checked again (a `model_copy(update=...)` is not checked when made)."""
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


def write_model(model: BaseModel, path: Path) -> Path:
    """`model` as indented JSON at `path`, its folder made if needed; a credential in it (a
    failure's log tail, an error message, a hand-edited graph name) is masked."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_file(path, masked_document((model.model_dump_json(indent=2) + "\n").encode()))


def read_model(
    model_type: type[Model],
    path: Path,
    what: str,
    how_to_make_one: str,
    error: type[Exception] = ValueError,
) -> Model:
    """The record at `path`; anything else (missing, not a regular file, over MAX_RECORD_BYTES,
    unreadable, not JSON, nested too deep, not this record) is `error` with a message naming the
    path and, for a missing file, how to make one."""
    try:
        text = read_text(path, what, MAX_RECORD_BYTES)
        parsed_json(text, str(path), what)  # its syntax and nesting, named, before the model's
    except InputFileMissing:
        raise error(f"no {what} at {path}: {how_to_make_one}") from None
    except InputFileError as problem:
        raise error(str(problem)) from None
    try:
        return model_type.model_validate_json(text)
    except ValidationError as problem:  # not this record: its fields named, a value only when
        # short and no credential (a record linked to a key file must not print its first line)
        raise error(f"{path} is not a {what}: {refusal(problem)}") from None
