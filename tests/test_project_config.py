"""Pulumi.yaml declares every key the program reads; stack files use only declared keys."""

from __future__ import annotations

from typing import Any

import pytest

from components.settings import PROJECT, SECRET_KEYS, StackSettings
from tools.stack_files import SHIPPED_STACKS, declared_config, stack_file_config

TYPES = {"string": str, "integer": int, "boolean": bool, "array": list, "object": dict}


def project_keys() -> dict[str, dict[str, Any]]:
    return {key: value for key, value in declared_config().items() if ":" not in key}


def test_every_setting_and_secret_is_declared_and_nothing_else() -> None:
    fields = {field.alias for field in StackSettings.model_fields.values()}
    assert set(project_keys()) == fields | SECRET_KEYS


@pytest.mark.parametrize("key", sorted(project_keys()))
def test_each_key_has_a_type_a_description_and_a_typed_default(key: str) -> None:
    declaration = project_keys()[key]
    assert declaration["type"] in TYPES
    assert len(declaration["description"]) > 20
    if key == "kubeContext":
        assert "default" not in declaration, "the context must be chosen per stack, never defaulted"
        return
    assert isinstance(declaration["default"], TYPES[declaration["type"]])
    if declaration["type"] == "array":
        assert declaration["items"] == {"type": "string"}


def test_secrets_default_to_empty_and_say_they_are_secret() -> None:
    for key in SECRET_KEYS:
        assert project_keys()[key]["default"] == ""
        assert project_keys()[key]["description"].startswith("SECRET.")


def test_default_providers_are_disabled_for_every_stack() -> None:
    assert declared_config()["pulumi:disable-default-providers"] == ["kubernetes"]


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_stack_files_use_only_declared_keys_of_this_project(stack: str) -> None:
    for key in stack_file_config(stack):
        namespace, _, name = key.partition(":")
        assert namespace == PROJECT, f"{key}: stack files configure only this project"
        assert name in project_keys(), f"{key} is not declared in Pulumi.yaml"


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_stack_files_hold_no_secret_and_no_site_value(stack: str) -> None:
    names = {key.partition(":")[2] for key in stack_file_config(stack)}
    assert not names & (SECRET_KEYS | {"kubeContext", "modelCacheStorageClass"})
