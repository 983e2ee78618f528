"""Evaluate the Pulumi program in-process under Pulumi's mock runtime: no CLI, no cluster.

Config is loaded as the CLI hands it to the program: the defaults declared in `Pulumi.yaml`,
overridden by `Pulumi.<stack>.yaml`, then explicit overrides (what a user would `pulumi config
set`), with secrets marked secret. The mock monitor records the raw RegisterResource requests,
because resource options (parent, protect, timeouts, dependencies, provider) never reach
`Mocks.new_resource`. Used by the offline render and by the tests.
"""

from __future__ import annotations

import json
import runpy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor

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


class RecordingMocks(pulumi.runtime.Mocks):
    """Echo inputs back as outputs; answer StackReferences from a table of stack outputs."""

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
) -> ProgramRun:
    """Run `__main__.py` for a stack under mocks; return what it registered and exported."""
    run = ProgramRun()
    mocks = RecordingMocks(stack_outputs or {})
    pulumi.runtime.set_mocks(
        mocks,
        project=PROJECT,
        stack=stack,
        organization=ORGANIZATION,
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
        return pulumi.Output.all(
            pulumi.Output.all(**exported), pulumi.Output.all(**secret_flags)
        ).apply(lambda both: _record_exports(run, *both))

    program()
    return run


def _record_exports(run: ProgramRun, values: dict[str, Any], secret_flags: dict[str, bool]) -> None:
    run.exports.update(values)
    run.secret_exports.update(key for key, secret in secret_flags.items() if secret)


def shared_layer_outputs(
    namespace: str = PROJECT, pull_secret: str | None = None
) -> dict[str, Any]:
    """What the shipped shared stack exports, for the profile stacks' StackReference."""
    return {
        SHARED_STACK: {
            "namespace": namespace,
            "modelCacheClaim": "shared-model-cache",
            "modelCacheStorageClass": EXAMPLE_SITE["modelCacheStorageClass"],
            "ngcSecret": "ngc-api-secret",
            "registryPullSecret": pull_secret,
        }
    }


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
