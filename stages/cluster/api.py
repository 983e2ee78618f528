"""The Kubernetes API as the cluster stages use it: a small seam and the plain states it returns.

`ClusterApi` is everything the stages ask of a cluster, in one namespace: create an object,
delete one (and its dependents), read a Job's status, list the pods of a run, read a pod's log.
`stages.cluster.kubernetes_api.KubernetesApi` implements it with the official `kubernetes` client;
tests use a fake. The states (`JobState`, `PodState`) are plain data, so the decisions in
`stages.cluster.job_runner` never touch client objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

Manifest = dict[str, Any]


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class JobState:
    """A Job's status, as far as the stage needs it."""

    uid: str
    active: int = 0
    succeeded: int = 0
    failed: int = 0
    conditions: tuple[Condition, ...] = ()

    def condition(self, kind: str) -> Condition | None:
        """The condition of this type if it is true (`Complete`, `Failed`, ...)."""
        return next((c for c in self.conditions if c.type == kind and c.status == "True"), None)

    @property
    def complete(self) -> bool:
        return self.condition("Complete") is not None

    @property
    def failure(self) -> Condition | None:
        """`Failed`, or the `FailureTarget` that comes first: since Kubernetes 1.31 a Job past its
        deadline or backoff limit is `FailureTarget` at once and `Failed` only once its pods are
        gone (seen on kube-apiserver 1.37.2), which a stuck pod can delay for long."""
        return self.condition("Failed") or self.condition("FailureTarget")


@dataclass(frozen=True)
class PodState:
    """One pod of a run: where it is in its life, and why it waits if it does."""

    name: str
    phase: str
    created: float = 0.0
    waiting_reason: str | None = None
    waiting_message: str | None = None
    exit_code: int | None = None
    terminated_reason: str | None = None
    unschedulable: str | None = None
    """The scheduler's message while the pod cannot be placed (PodScheduled=False)."""
    ready: bool = False
    ip: str | None = None
    ports: tuple[tuple[str, int], ...] = ()
    """Its containers' named ports: (name, port)."""

    def port(self, name: str) -> int | None:
        return next((number for named, number in self.ports if named == name), None)

    @property
    def started(self) -> bool:
        """Its container has run (so it has a log)."""
        return self.phase in {"Running", "Succeeded", "Failed"}

    def describe(self) -> str:
        """One line for progress output, e.g. `Pending (ImagePullBackOff: ...)`."""
        detail = self.waiting_reason or ("Unschedulable" if self.unschedulable else None)
        message = self.waiting_message or self.unschedulable
        if self.exit_code is not None:
            detail = f"exit code {self.exit_code}" + (
                f", {self.terminated_reason}" if self.terminated_reason else ""
            )
        if not detail:
            return self.phase + (", ready" if self.ready else "")
        return f"{self.phase} ({detail}{': ' + message if message else ''})"


class ClusterApi(Protocol):
    """What the cluster stages do with the Kubernetes API, in the stack's namespace."""

    namespace: str

    def create(self, manifest: Manifest) -> None:
        """Create a ConfigMap, Service or Job."""

    def delete(self, kind: str, name: str) -> None:
        """Delete an object and, for a Job, its pods first (foreground); absent is fine."""

    def exists(self, kind: str, name: str) -> bool:
        """Whether the object exists (including while it is being deleted)."""

    def read_job(self, name: str) -> JobState | None:
        """The Job's status, or None when it does not exist."""

    def pods(self, label_selector: str) -> list[PodState]:
        """The pods that match a label selector."""

    def pod_log(self, name: str) -> str:
        """The pod's whole log so far ('' while its container has not started)."""
