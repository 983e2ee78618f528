"""Typed records (pydantic models) as the JSON files the stages and the lab write and read."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from common.credentials import masked_document

Model = TypeVar("Model", bound=BaseModel)


def write_model(model: BaseModel, path: Path) -> Path:
    """`model` as indented JSON at `path`, its folder made if needed; a credential in it (a
    failure's log tail, an error message, a hand-edited graph name) is masked."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(masked_document((model.model_dump_json(indent=2) + "\n").encode()))
    return path


def read_model(
    model_type: type[Model],
    path: Path,
    what: str,
    how_to_make_one: str,
    error: type[ValueError] = ValueError,
) -> Model:
    """The record at `path`; anything else (missing, a directory, unreadable, not JSON, not this
    record) is `error` with a message naming the path and, for a missing file, how to make one."""
    try:
        return model_type.model_validate_json(path.read_text())
    except FileNotFoundError:
        raise error(f"no {what} at {path}: {how_to_make_one}") from None
    except OSError as problem:  # a directory, no permission
        reason = problem.strerror or type(problem).__name__
        raise error(f"{path} cannot be read as a {what} ({reason})") from None
    except ValueError as problem:  # not UTF-8, not JSON, not this record
        raise error(f"{path} is not a {what}: {problem}") from None
