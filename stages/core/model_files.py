"""Typed records (pydantic models) as the JSON files the stages and the lab write."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel


def write_model(model: BaseModel, path: Path) -> Path:
    """`model` as indented JSON at `path`, its folder made if needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(model.model_dump_json(indent=2) + "\n")
    return path
