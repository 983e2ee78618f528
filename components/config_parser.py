"""Stack config as the CLI hands it to the program -> `StackSettings`, or one error naming every
offending key and its fix.

No Pulumi import: the offline render, the lab and the tests use it as-is.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping
from typing import Any

from pydantic import ValidationError

from components.settings import PROJECT, SECRET_KEYS, StackSettings, config_key


class ConfigError(ValueError):
    """Stack config that cannot be deployed; the message names each key and the fix."""


def parse_stack_config(raw: Mapping[str, Any], secret_keys: Collection[str]) -> StackSettings:
    """Validate the project's config (keys with or without the project prefix) into settings.

    `raw` holds every config value the CLI passes and `secret_keys` the keys it marks secret.
    Secret values are only checked for presence and secrecy; they never enter the settings.
    Keys of other namespaces (e.g. `pulumi:`) are ignored; unknown keys of this project are typos.
    """
    own = _own_keys(raw)
    unknown = sorted(set(own) - _declared_keys() - SECRET_KEYS)
    if unknown:
        raise ConfigError(_unknown_keys_message(unknown))
    values = {key: value for key, value in own.items() if key not in SECRET_KEYS}
    try:
        settings = StackSettings.model_validate(values)
    except ValidationError as error:
        raise ConfigError(_validation_message(error)) from None
    secrets = {key: bool(own.get(key)) for key in SECRET_KEYS}
    _check_secrets(settings, secrets, {key.rpartition(":")[2] for key in secret_keys})
    return settings


def _check_secrets(settings: StackSettings, present: dict[str, bool], marked: set[str]) -> None:
    problems = [
        f"  {config_key(key)} is stored in plain text: set it again with "
        f"`pulumi config set --secret {config_key(key)} <value>`"
        for key, is_set in sorted(present.items())
        if is_set and key not in marked
    ]
    if settings.manages_secrets and not present["ngcApiKey"]:
        problems.append(
            f"  {config_key('ngcApiKey')} is required to create the ngc-api-secret: "
            f'`pulumi config set --secret {config_key("ngcApiKey")} "$NGC_API_KEY"`'
        )
    if (
        settings.manages_secrets
        and settings.uses_registry_mirror
        and not present["registryPassword"]
    ):
        problems.append(
            f"  {config_key('registryPassword')} is required with registryServer: "
            f"`pulumi config set --secret {config_key('registryPassword')} <password>`"
        )
    if settings.uses_shared_layer and any(present.values()):
        problems.append(
            f"  secrets are set on a stack that reads them from sharedStack={settings.shared_stack}: "
            "set them on the shared stack and `pulumi config rm` them here"
        )
    if problems:
        raise ConfigError("\n".join(["Invalid secret config:", *problems]))


def _own_keys(raw: Mapping[str, Any]) -> dict[str, Any]:
    own: dict[str, Any] = {}
    for key, value in raw.items():
        namespace, sep, name = key.rpartition(":")
        if not sep or namespace == PROJECT:
            own[name] = value
    return own


def _declared_keys() -> set[str]:
    return {field.alias or name for name, field in StackSettings.model_fields.items()}


def _unknown_keys_message(unknown: list[str]) -> str:
    lines = ["Unknown stack config (a typo?):"]
    for key in unknown:
        close = difflib.get_close_matches(key, _declared_keys() | SECRET_KEYS, n=1)
        hint = f"did you mean {config_key(close[0])}?" if close else "see docs/configuration.md"
        lines.append(f"  {config_key(key)}: {hint} (`pulumi config rm {config_key(key)}`)")
    return "\n".join(lines)


def _validation_message(error: ValidationError) -> str:
    lines = ["Invalid stack config:"]
    for problem in error.errors():
        key = ".".join(str(part) for part in problem["loc"] if not isinstance(part, int))
        message = problem["msg"].removeprefix("Value error, ")
        if not key:
            lines.append(f"  {message}")
        elif problem["type"] == "missing":
            lines.append(
                f"  {config_key(key)} is required: `pulumi config set {config_key(key)} <value>`"
            )
        else:
            lines.append(f"  {config_key(key)}: {message} (got {problem.get('input')!r})")
    return "\n".join(lines)
