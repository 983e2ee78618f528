"""Evaluate the Pulumi program in-process under Pulumi's mock runtime: no CLI, no cluster.

Config is loaded as the CLI hands it to the program (`tools.stack_files`), with secrets marked
secret. Used by the offline render and the tests.

The mock monitor records what the engine would receive: the raw RegisterResource requests, because
resource options (parent, protect, timeouts, dependencies, provider) never reach
`Mocks.new_resource`. Where the real provider answers differently from an echo of the inputs, the
mocks answer as it does (a Job as completed, since that is when pulumi-kubernetes' await returns;
a StackReference from a table of stack outputs as the engine stores them).

Over 300 lines: one run of the program under Pulumi's mock runtime, the mocks and monitor it
records through, and the record it returns (`ProgramRun`).

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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import pulumi
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.stack import massage

from common import REPO_ROOT
from common.credentials import MASK
from components import live
from components.credentials_digest import credentials_digest
from components.settings import PROJECT, qualified_stack_name
from tools.stack_files import (
    ORGANIZATION,
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

    view = MockCluster() if cluster is None else cluster
    with mock.patch.object(live, "connect", lambda *_: view):  # the program's live cluster
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
        "ngcSecretField": "NGC_API_KEY",
        "registryPullSecret": pull_secret,
        "workerImage": declared_config()["workerImage"]["default"],
        "workerMemory": declared_config()["workerMemory"]["default"],
        "nimModelProfile": declared_config()["nimModelProfile"]["default"],
        "nimSelectionEnv": [],
        "modelCacheReady": True,
        "credentialsDigest": credentials_digest(ngc_api_key, None),
    } | replaced
    return {layer_stack: {key: value for key, value in stored.items() if value is not None}}


def unwrap_secrets(value: Any, mask: bool = False, inside_secret: bool = False) -> Any:
    """Pulumi's secret envelopes in mock inputs replaced by their values; with `mask`, every value
    inside one masked instead, keeping its shape (a Secret's stringData keeps its keys): what may
    be written to disk or a log."""
    if isinstance(value, dict):
        if value.get(rpc._special_sig_key) == rpc._special_secret_sig:
            return unwrap_secrets(value["value"], mask, inside_secret=True)
        return {key: unwrap_secrets(item, mask, inside_secret) for key, item in value.items()}
    if isinstance(value, list):
        return [unwrap_secrets(item, mask, inside_secret) for item in value]
    return MASK if mask and inside_secret else value


@dataclass
class Registered:
    """One resource as the engine would receive it."""

    type: str
    name: str
    urn: str
    custom: bool
    parent: str
    dependencies: list[str]
    provider: str
    inputs: dict[str, Any] = field(default_factory=dict)
    raw_inputs: dict[str, Any] = field(default_factory=dict)
    protect: bool = False
    custom_timeouts: dict[str, str] = field(default_factory=dict)
    resource_id: str = ""
    retain_on_delete: bool = False

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


class MockCluster:
    """The live cluster the mocks imply (a `components.live.ClusterView`): the download Job
    complete (as `RecordingMocks` answers it), every graph Ready and every CRD installed, each
    read recorded.
    `objects` puts others in place, by (kind, name); a None there is an object that is not."""

    def __init__(self, objects: dict[tuple[str, str], dict[str, Any] | None] | None = None):
        self.objects = objects or {}
        self.reads: list[tuple[str, str]] = []

    def get(self, ref: Any) -> dict[str, Any] | None:
        self.reads.append((ref.kind, ref.name))
        if (ref.kind, ref.name) in self.objects:
            return self.objects[(ref.kind, ref.name)]
        metadata = {"name": ref.name, "namespace": ref.namespace, "uid": f"{ref.name}-uid"}
        if ref.kind == "Job":
            return {"metadata": metadata, "status": COMPLETED_JOB_STATUS}
        if ref.kind == "DynamoGraphDeployment":
            ready = {"type": "Ready", "status": "True", "reason": "Mock", "message": ""}
            return {"metadata": metadata, "status": {"state": "successful", "conditions": [ready]}}
        return None

    def metadata(self, ref: Any) -> dict[str, Any] | None:
        if ref.kind == "CustomResourceDefinition" and (ref.kind, ref.name) not in self.objects:
            return {"metadata": {"name": ref.name}}  # every CRD the program needs is installed
        found = self.objects.get((ref.kind, ref.name))
        return None if found is None else {"metadata": found.get("metadata", {})}

    def list(self, ref: Any, selector: Any = None) -> list[dict[str, Any]]:
        return [item for (kind, _), item in self.objects.items() if kind == ref.kind and item]


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
            self._record(
                request,
                response,
                request.custom,
                inputs=unwrap_secrets(raw),
                raw_inputs=raw,
                protect=request.protect,
                custom_timeouts={
                    step: getattr(request.customTimeouts, step)
                    for step in ("create", "update", "delete")
                },
                resource_id=request.importId,
                retain_on_delete=request.retainOnDelete,
            )
        return response

    def ReadResource(self, request: Any) -> Any:
        response = super().ReadResource(request)  # type: ignore[no-untyped-call]
        self._record(request, response, True, resource_id=request.id)
        return response

    def _record(self, request: Any, response: Any, custom: bool, **options: Any) -> None:
        self.run.resources.append(
            Registered(
                type=request.type,
                name=request.name,
                urn=response.urn,
                custom=custom,
                parent=request.parent,
                dependencies=list(request.dependencies),
                provider=request.provider,
                **options,
            )
        )
