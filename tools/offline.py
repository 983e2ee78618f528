"""Evaluate the Pulumi program in-process under Pulumi's mock runtime: no CLI, no cluster.

Config is loaded as the CLI hands it to the program: the defaults declared in `Pulumi.yaml`,
overridden by `Pulumi.<stack>.yaml`, then explicit overrides (what a user would `pulumi config
set`), with secrets marked secret. The mock monitor records the raw RegisterResource requests,
because resource options (parent, protect, timeouts, dependencies, provider) never reach
`Mocks.new_resource`. Used by the offline render and by the tests.

The stack outputs a run reports are the engine's view (`ProgramRun.exports`): the root outputs
serialized by the SDK's own code, as the language host sends them when the program ends
(`Stack._finish`: `massage`, then `serialize_properties`, which drops None-valued keys), and read
back the way `pulumi stack output --json` prints them (secrets as "[secret]", whole numbers as
integers). Under mocks the root stack registers its outputs before the program runs, so that
request never happens on its own; `engine_outputs` makes it.
"""

from __future__ import annotations

import asyncio
import json
import runpy
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.stack import massage

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "cosmos3-nano-reasoner"
SHIPPED_STACKS = ("dev", "shared", "round-robin", "session-affinity")
ORGANIZATION = "organization"
"""The organization of a DIY backend (Pulumi Cloud uses your own); the shipped stacks assume it."""
SHARED_STACK = f"{ORGANIZATION}/{PROJECT}/shared"
SECRET_PLACEHOLDER = "offline-placeholder-secret"
"""Stands in for a secret the render cannot decrypt; it is masked in everything written."""
MASK = "<secret>"

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
    project: dict[str, Any] = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    return dict(project["config"])


def stack_file_config(stack: str) -> dict[str, Any]:
    stack_file: dict[str, Any] = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())
    return dict(stack_file.get("config") or {})


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
    """Secrets the stack needs, as masked placeholders: the render never sees real secrets."""
    return {"ngcApiKey": SECRET_PLACEHOLDER} if owns_layer(stack) else {}


def unwrap_secrets(value: Any) -> Any:
    """Replace Pulumi's secret envelopes in mock inputs by their values."""
    if isinstance(value, dict):
        if value.get(rpc._special_sig_key) == rpc._special_secret_sig:
            return unwrap_secrets(value["value"])
        return {key: unwrap_secrets(item) for key, item in value.items()}
    if isinstance(value, list):
        return [unwrap_secrets(item) for item in value]
    return value


def has_secret_envelope(value: Any) -> bool:
    if isinstance(value, dict):
        if value.get(rpc._special_sig_key) == rpc._special_secret_sig:
            return True
        return any(has_secret_envelope(item) for item in value.values())
    if isinstance(value, list):
        return any(has_secret_envelope(item) for item in value)
    return False


@dataclass
class Registered:
    """One resource as the engine would receive it."""

    type: str
    name: str
    urn: str
    custom: bool
    inputs: dict[str, Any]
    raw_inputs: dict[str, Any]
    parent: str
    dependencies: list[str]
    protect: bool
    provider: str
    custom_timeouts: dict[str, str]
    resource_id: str = ""

    @property
    def kind(self) -> str:
        return self.type.rsplit(":", 1)[-1]


@dataclass
class ProgramRun:
    resources: list[Registered] = field(default_factory=list)
    exports: dict[str, Any] = field(default_factory=dict)
    """The stack outputs as the engine stores them: what `pulumi stack output --json` prints."""
    python_exports: dict[str, Any] = field(default_factory=dict)
    """The program's own values, None-valued keys included (never seen by the engine)."""
    secret_exports: set[str] = field(default_factory=set)

    def of_type(self, type_: str) -> list[Registered]:
        return [r for r in self.resources if r.type == type_]

    def one(self, type_: str) -> Registered:
        found = self.of_type(type_)
        assert len(found) == 1, f"expected one {type_}, got {[r.name for r in found]}"
        return found[0]

    def by_urn(self, urn: str) -> Registered:
        return next(r for r in self.resources if r.urn == urn)

    def kubernetes_objects(self) -> list[Registered]:
        return [
            r
            for r in self.resources
            if r.custom
            and r.type.startswith("kubernetes:")
            and "providers" not in r.type
            and not r.resource_id
        ]


JOB_TYPE = "kubernetes:batch/v1:Job"
COMPLETED_JOB_STATUS = {
    "succeeded": 1,
    "conditions": [{"type": "Complete", "status": "True"}],
}
"""What pulumi-kubernetes returns for a Job once its await saw it complete."""


class RecordingMocks(pulumi.runtime.Mocks):
    """Echo inputs back as outputs (a Job as completed, which is when its await returns); answer
    StackReferences from a table of stack outputs, each as the engine stores them."""

    def __init__(self, stack_outputs: dict[str, dict[str, Any]]) -> None:
        self.stack_outputs = stack_outputs
        self.reads: list[pulumi.runtime.MockResourceArgs] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        if args.typ == "pulumi:pulumi:StackReference":
            name = str(args.inputs.get("name") or args.resource_id)
            return name, {
                "name": name,
                "outputs": self.stack_outputs.get(name, {}),
                "secretOutputNames": [],
            }
        if args.resource_id:
            # A read of an existing object (`Resource.get`): answer like the API server would.
            self.reads.append(args)
            namespace, _, name = args.resource_id.rpartition("/")
            return args.resource_id, {"metadata": {"name": name, "namespace": namespace}}
        if args.typ == JOB_TYPE:
            return f"{args.name}-id", dict(args.inputs) | {"status": COMPLETED_JOB_STATUS}
        return f"{args.name}-id", dict(args.inputs)

    def call(
        self, args: pulumi.runtime.MockCallArgs
    ) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None


class CapturingMonitor(MockMonitor):
    """The mock monitor, keeping each RegisterResource request's options."""

    def __init__(self, mocks: RecordingMocks, run: ProgramRun) -> None:
        super().__init__(mocks)
        self.run = run

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        if request.type != "pulumi:pulumi:Stack":
            raw = rpc.deserialize_properties(request.object, keep_unknowns=True)
            self.run.resources.append(
                Registered(
                    type=request.type,
                    name=request.name,
                    urn=response.urn,
                    custom=request.custom,
                    inputs=unwrap_secrets(raw),
                    raw_inputs=raw,
                    parent=request.parent,
                    dependencies=list(request.dependencies),
                    protect=request.protect,
                    provider=request.provider,
                    custom_timeouts={
                        "create": request.customTimeouts.create,
                        "update": request.customTimeouts.update,
                    },
                    resource_id=request.importId,
                )
            )
        return response

    def ReadResource(self, request: Any) -> Any:
        response = super().ReadResource(request)  # type: ignore[no-untyped-call]
        self.run.resources.append(
            Registered(
                type=request.type,
                name=request.name,
                urn=response.urn,
                custom=True,
                inputs={},
                raw_inputs={},
                parent=request.parent,
                dependencies=list(request.dependencies),
                protect=False,
                provider=request.provider,
                custom_timeouts={},
                resource_id=request.id,
            )
        )
        return response


def run_program(
    stack: str,
    overrides: dict[str, Any] | None = None,
    secrets: dict[str, str] | None = None,
    stack_outputs: dict[str, dict[str, Any]] | None = None,
    organization: str = ORGANIZATION,
) -> ProgramRun:
    """Run `__main__.py` for a stack under mocks; return what it registered and exported."""
    run = ProgramRun()
    mocks = RecordingMocks(stack_outputs or {})
    pulumi.runtime.set_mocks(
        mocks,
        project=PROJECT,
        stack=stack,
        organization=organization,
        preview=False,
        monitor=CapturingMonitor(mocks, run),
    )
    config = cli_config(stack, overrides)
    for key, value in (secrets or {}).items():
        config[qualified(key)] = value
    pulumi.runtime.set_all_config(config, secret_keys=[qualified(key) for key in (secrets or {})])

    @pulumi.runtime.test  # type: ignore[untyped-decorator]
    def program() -> pulumi.Output[Any]:
        runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")
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

    program()
    return run


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


def shared_layer_outputs(
    namespace: str = PROJECT,
    pull_secret: str | None = None,
    **replaced: Any,
) -> dict[str, dict[str, Any]]:
    """What the shipped shared stack's outputs are in the engine (no key for a None value), for
    the profile stacks' StackReference; `replaced` sets (or, with None, removes) keys."""
    stored: dict[str, Any] = {
        "namespace": namespace,
        "modelCacheClaim": "shared-model-cache",
        "ngcSecret": "ngc-api-secret",
        "registryPullSecret": pull_secret,
        "workerImage": declared_config()["workerImage"]["default"],
        "modelCacheReady": True,
    } | replaced
    return {SHARED_STACK: {key: value for key, value in stored.items() if value is not None}}


def mask_secrets(value: Any, inside_secret: bool = False) -> Any:
    """Mask every value inside a secret envelope, keeping its shape (a Secret's stringData keeps
    its keys): what may be written to disk or a log."""
    if isinstance(value, dict):
        if value.get(rpc._special_sig_key) == rpc._special_secret_sig:
            return mask_secrets(value["value"], inside_secret=True)
        return {key: mask_secrets(item, inside_secret) for key, item in value.items()}
    if isinstance(value, list):
        return [mask_secrets(item, inside_secret) for item in value]
    return MASK if inside_secret else value
