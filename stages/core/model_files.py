"""Typed records (pydantic models) as the JSON files the stages and the lab write and read."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from common.confined_paths import write_file
from common.credentials import masked_document
from common.input_files import (
    MAX_RECORD_BYTES,
    InputFileError,
    InputFileMissing,
    parsed_json,
    read_text,
)
from stages.core.refusals import refusal

Model = TypeVar("Model", bound=BaseModel)


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
    error: type[ValueError] = ValueError,
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
