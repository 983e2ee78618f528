"""Evaluate the Pulumi program in-process under Pulumi's mock runtime: no CLI, no cluster.

Config is loaded as the CLI hands it to the program (`tools.stack_files`), with secrets marked
secret; the mock monitor records what the engine would receive (`tools.mock_engine`). Used by the
offline render and the tests.

The stack outputs a run reports are the engine's view (`ProgramRun.exports`): the root outputs
serialized by the SDK's own code, as the language host sends them when the program ends
(`Stack._finish`: `massage`, then `serialize_properties`, which drops None-valued keys), and read
back the way `pulumi stack output --json` prints them (secrets as "[secret]", whole numbers as
integers). Under mocks the root stack registers its outputs before the program runs, so that
request never happens on its own; `engine_outputs` makes it.
"""

from __future__ import annotations

import asyncio
import runpy
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pulumi
from pulumi.runtime import rpc
from pulumi.runtime.stack import massage

from common import REPO_ROOT
from components import live
from components.credentials_digest import credentials_digest
from components.settings import qualified_stack_name
from tools.mock_engine import CapturingMonitor, MockCluster, ProgramRun, RecordingMocks
from tools.stack_files import (
    ORGANIZATION,
    PROJECT,
    SECRET_PLACEHOLDER,
    SHARED_STACK,
    cli_config,
    declared_config,
    qualified,
)


def run_program(
    stack: str,
    overrides: dict[str, Any] | None = None,
    secrets: dict[str, str] | None = None,
    stack_outputs: dict[str, dict[str, Any]] | None = None,
    organization: str = ORGANIZATION,
    cluster: Any = None,
    preview: bool = False,
) -> ProgramRun:
    """Run `__main__.py` for a stack under mocks; return what it registered and exported. The
    program reads `cluster` as the live cluster (a `MockCluster` by default: what the mocks
    imply); `preview` runs it as `pulumi preview` does (nothing is awaited)."""
    run = ProgramRun()
    mocks = RecordingMocks(stack_outputs or {})
    pulumi.runtime.set_mocks(
        mocks,
        project=PROJECT,
        stack=stack,
        organization=organization,
        preview=preview,
        monitor=CapturingMonitor(mocks, run),
    )
    config = cli_config(stack, overrides)
    for key, value in (secrets or {}).items():
        config[qualified(key)] = value
    pulumi.runtime.set_all_config(config, secret_keys=[qualified(key) for key in (secrets or {})])

    @pulumi.runtime.test  # type: ignore[untyped-decorator]
    def program() -> pulumi.Output[Any]:
        runpy.run_path(str(REPO_ROOT / "__main__.py"), run_name="__main__")
        exported = pulumi.runtime.settings.get_root_resource().outputs  # type: ignore[union-attr]
        secret_flags = {
            key: pulumi.Output.from_input(value.is_secret()) for key, value in exported.items()
        }
        engine: pulumi.Output[dict[str, Any]] = pulumi.Output.from_input(
            asyncio.ensure_future(engine_outputs(exported))
        )
        return pulumi.Output.all(
            pulumi.Output.all(**exported), pulumi.Output.all(**secret_flags), engine
        ).apply(lambda all_three: _record_exports(run, *all_three))

    with _live_view(MockCluster() if cluster is None else cluster):
        program()
    return run


@contextmanager
def _live_view(view: Any) -> Iterator[None]:
    """The program's live cluster (`components.live.connect`) is `view` meanwhile."""
    real = live.connect
    live.connect = lambda *_: view
    try:
        yield
    finally:
        live.connect = real


async def engine_outputs(exported: Mapping[str, Any]) -> dict[str, Any]:
    """The stack outputs the engine stores for `exported`, as `pulumi stack output --json` prints
    them: the SDK's own serialization of the root outputs, read back."""
    struct = await rpc.serialize_properties(massage(dict(exported), []), {})
    return {key: _as_printed(value) for key, value in rpc.deserialize_properties(struct).items()}


def _as_printed(value: Any) -> Any:
    # The CLI shows a secret output as "[secret]" (`display.MassageSecrets`) and numbers as
    # JSON numbers (the engine's float64 8 prints as 8).
    if rpc.is_rpc_secret(value):
        return "[secret]"
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _as_printed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_as_printed(item) for item in value]
    return value


def _record_exports(
    run: ProgramRun,
    values: dict[str, Any],
    secret_flags: dict[str, bool],
    engine: dict[str, Any],
) -> None:
    run.python_exports.update(values)
    run.exports.update(engine)
    run.secret_exports.update(key for key, secret in secret_flags.items() if secret)


def shared_stack_name(
    stack: str, overrides: dict[str, Any] | None = None, organization: str = ORGANIZATION
) -> str:
    """The shared layer's stack that `stack` reads (its `sharedStack`, after `overrides`),
    qualified as the program qualifies it (`<org>/<project>/<name>` for a short name); the
    shipped shared stack for a stack that reads none."""
    configured = cli_config(stack, overrides).get(qualified("sharedStack")) or SHARED_STACK
    return qualified_stack_name(configured, organization, PROJECT)


def shared_layer_outputs(
    namespace: str = PROJECT,
    pull_secret: str | None = None,
    *,
    layer_stack: str = SHARED_STACK,
    ngc_api_key: str = SECRET_PLACEHOLDER,
    **replaced: Any,
) -> dict[str, dict[str, Any]]:
    """What the shipped shared stack's outputs are in the engine (no key for a None value), for
    the profile stacks' StackReference, served under `layer_stack` (the qualified name the
    program asks for: `shared_stack_name`), its credentials' digest that of `ngc_api_key`;
    `replaced` sets (or, with None, removes) keys."""
    stored: dict[str, Any] = {
        "namespace": namespace,
        "modelCacheClaim": "shared-model-cache",
        "ngcSecret": "ngc-api-secret",
        "registryPullSecret": pull_secret,
        "workerImage": declared_config()["workerImage"]["default"],
        "modelCacheReady": True,
        "credentialsDigest": credentials_digest(ngc_api_key, None),
    } | replaced
    return {layer_stack: {key: value for key, value in stored.items() if value is not None}}
