"""Reads the stack's config from the Pulumi runtime into settings and secret Outputs."""

from __future__ import annotations

import pulumi
from pulumi.runtime import config as runtime_config

from components.config_parser import parse_stack_config
from components.secrets import SecretValues
from components.settings import PROJECT, StackSettings


def load_stack_config() -> tuple[StackSettings, SecretValues | None]:
    """Validate all config before any resource exists; secrets come back as secret Outputs.

    Raises `components.config_parser.ConfigError`, whose message names each bad key and its fix.
    """
    raw = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    secret_keys = set(runtime_config.get_config_secret_keys_env())
    secret_keys |= {key for key in raw if runtime_config.is_config_secret(key)}
    settings = parse_stack_config(raw, secret_keys)
    if not settings.manages_secrets:
        return settings, None
    config = pulumi.Config(PROJECT)
    registry_password = (
        config.get_secret("registryPassword") if settings.uses_registry_mirror else None
    )
    return settings, SecretValues(config.require_secret("ngcApiKey"), registry_password)
