"""Pulumi's mock runtime, recording what the engine would receive: resources with their options.

The mock monitor records the raw RegisterResource requests, because resource options (parent,
protect, timeouts, dependencies, provider) never reach `Mocks.new_resource`. Where the real
provider answers differently from an echo of the inputs, the mocks answer as it does (a Job as
completed, since that is when pulumi-kubernetes' await returns; a StackReference from a table of
stack outputs as the engine stores them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor

MASK = "<secret>"


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
    complete (as `RecordingMocks` answers it) and every graph Ready, each read recorded.
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
                        "delete": request.customTimeouts.delete,
                    },
                    resource_id=request.importId,
                    retain_on_delete=request.retainOnDelete,
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
