"""The project's config as the Pulumi CLI hands it to the program, read from the checkout.

`Pulumi.yaml` declares every key with its default; `Pulumi.<stack>.yaml` sets what differs; explicit
overrides play `pulumi config set`. Values reach the program as strings, structured values as
JSON, like the CLI sends them. Both files are read as the CLI reads them (`tools.cli_yaml`: YAML
1.2, a scalar as its text); a broken one is a `StackFileError` naming it.
"""

from __future__ import annotations

import json
from typing import Any

from common import REPO_ROOT
from tools.cli_yaml import StackFileError, config_values, project_config

PROJECT = "cosmos3-nano-reasoner"
SHIPPED_STACKS = ("dev", "shared", "round-robin", "session-affinity")
ORGANIZATION = "organization"
"""The organization of a DIY backend (Pulumi Cloud uses your own); the shipped stacks assume it."""
SHARED_STACK = f"{ORGANIZATION}/{PROJECT}/shared"
SECRET_PLACEHOLDER = "offline-placeholder-secret"
"""Stands in for a secret the render cannot decrypt; it is masked in everything written."""

# Example site values: what a user sets per cluster before the first `pulumi up` (README, Quick
# start). The offline render fills them in with --example-site, the golden manifests use them.
EXAMPLE_SITE = {"kubeContext": "h200-cluster", "modelCacheStorageClass": "rwx-nfs"}


def cli_value(value: Any) -> str:
    """Config values reach the program as strings; structured values as JSON, like the CLI."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def declared_config() -> dict[str, Any]:
    """The `config:` block of Pulumi.yaml: declarations of this project, plain values of others."""
    declared = project_config(REPO_ROOT / "Pulumi.yaml")
    if not declared:
        raise StackFileError(
            f"{REPO_ROOT / 'Pulumi.yaml'} declares no config: it is not this project's"
        )
    return declared


def stack_file_config(stack: str) -> dict[str, Any]:
    """`Pulumi.<stack>.yaml`'s config as the CLI hands it over (an empty file: no config)."""
    return config_values(REPO_ROOT / f"Pulumi.{stack}.yaml")


def qualified(key: str) -> str:
    return key if ":" in key else f"{PROJECT}:{key}"


def cli_config(stack: str, overrides: dict[str, Any] | None = None) -> dict[str, str]:
    """Project defaults, then the stack file, then `overrides` (None values remove a key)."""
    config: dict[str, str] = {}
    for key, declaration in declared_config().items():
        if isinstance(declaration, dict) and "default" in declaration:
            config[qualified(key)] = cli_value(declaration["default"])
        elif not isinstance(declaration, dict):
            config[qualified(key)] = cli_value(declaration)
    for key, value in stack_file_config(stack).items():
        if isinstance(value, dict) and "secure" in value:
            continue  # encrypted by the CLI; supplied as a secret by the caller instead
        config[qualified(key)] = cli_value(value)
    for key, value in (overrides or {}).items():
        if value is None:
            config.pop(qualified(key), None)
        else:
            config[qualified(key)] = cli_value(value)
    return config


def owns_layer(stack: str) -> bool:
    """True for stacks that create namespace, secrets and cache (no sharedStack in the file)."""
    return not stack_file_config(stack).get(qualified("sharedStack"))


def example_site_for(stack: str) -> dict[str, Any]:
    """The example site values a stack still lacks (values its file sets are kept)."""
    needed = (
        dict(EXAMPLE_SITE) if owns_layer(stack) else {"kubeContext": EXAMPLE_SITE["kubeContext"]}
    )
    present = stack_file_config(stack)
    return {key: value for key, value in needed.items() if qualified(key) not in present}


def placeholder_secrets(stack: str) -> dict[str, str]:
    """Secrets the stack needs, as masked placeholders: the render never sees real secrets.

    The NGC key for a stack that owns the layer, and every secret the stack file sets (a
    mirror's `registryPassword: {secure: ...}`): `cli_config` leaves those encrypted values out,
    so without a placeholder the program would find a legal mirror stack's password missing."""
    set_secretly = {
        key.rpartition(":")[2]: SECRET_PLACEHOLDER
        for key, value in stack_file_config(stack).items()
        if isinstance(value, dict) and "secure" in value
    }
    return ({"ngcApiKey": SECRET_PLACEHOLDER} if owns_layer(stack) else {}) | set_secretly
