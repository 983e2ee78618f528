"""The Kubernetes API as the cluster stages use it: a small seam, and its adapter to the client.

`ClusterApi` is everything the stages ask of a cluster, in one namespace: create an object,
delete one (and its dependents), read a Job's status, list the pods of a run, read a pod's log.
`KubernetesApi` implements it with the official `kubernetes` client; tests use a fake. The
states it returns (`JobState`, `PodState`) are plain data, so the decisions in
`stages.job_runner` never touch client objects.

Errors the stages can name become `ClusterStageError`s with the exit code a pipeline sees
(documented in `python -m stages --help`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

Manifest = dict[str, Any]

EXIT_FAILED = 1
EXIT_FRONTEND_NOT_READY = 3
EXIT_TIMED_OUT = 4
EXIT_POD_NOT_STARTED = 5
EXIT_CLUSTER_UNREACHABLE = 6


class ClusterStageError(RuntimeError):
    """A cluster stage did not pass; `exit_code` says which way, for pipelines."""

    exit_code = EXIT_FAILED


class JobFailedError(ClusterStageError):
    """The Job failed, or finished without the verdict the stage requires."""


class FrontendNotReadyError(ClusterStageError):
    """The pod reported that the frontend never listed the served model."""

    exit_code = EXIT_FRONTEND_NOT_READY


class JobTimeoutError(ClusterStageError):
    """The Job did not finish within the stage's timeout (or its activeDeadlineSeconds)."""

    exit_code = EXIT_TIMED_OUT


class PodStartError(ClusterStageError):
    """The Job's pod never started: unschedulable, image not pullable, config error."""

    exit_code = EXIT_POD_NOT_STARTED


class ClusterAccessError(ClusterStageError):
    """The cluster cannot be reached or refuses the request (kubeconfig, credentials, RBAC)."""

    exit_code = EXIT_CLUSTER_UNREACHABLE


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
        return self.condition("Failed")


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


# --- the adapter to the official client ----------------------------------------------------------


@dataclass
class KubernetesApi:
    """`ClusterApi` through the official `kubernetes` client, for one namespace.

    The client is built from a kubeconfig (the default chain: $KUBECONFIG, ~/.kube/config, unless a
    file is named) and a context (the stack's `kubeContext` unless overridden), without touching
    the client's global configuration.
    """

    namespace: str
    core: Any = field(repr=False)
    batch: Any = field(repr=False)

    @classmethod
    def connect(
        cls, namespace: str, kubeconfig: Path | None = None, context: str | None = None
    ) -> KubernetesApi:
        from kubernetes import client, config
        from kubernetes.config.config_exception import ConfigException

        where = f"context {context!r}" if context else "the current context"
        source = str(kubeconfig) if kubeconfig else "the default kubeconfig ($KUBECONFIG, ~/.kube)"
        try:
            api_client = config.new_client_from_config(  # type: ignore[no-untyped-call]
                config_file=str(kubeconfig) if kubeconfig else None,
                context=context,
                persist_config=False,
            )
        except (ConfigException, OSError, TypeError, ValueError) as error:
            raise ClusterAccessError(
                f"cannot use {where} of {source}: {error}; pass --kubeconfig/--context"
            ) from error
        return cls(namespace, client.CoreV1Api(api_client), client.BatchV1Api(api_client))

    def create(self, manifest: Manifest) -> None:
        kind, name = manifest["kind"], manifest["metadata"]["name"]
        create = {
            "ConfigMap": self.core.create_namespaced_config_map,
            "Service": self.core.create_namespaced_service,
            "Job": self.batch.create_namespaced_job,
        }[kind]
        self._raw(f"create {kind} {name}", lambda **raw: create(self.namespace, manifest, **raw))

    def delete(self, kind: str, name: str) -> None:
        delete = {
            "ConfigMap": self.core.delete_namespaced_config_map,
            "Service": self.core.delete_namespaced_service,
            "Job": self.batch.delete_namespaced_job,
        }[kind]
        self._raw(
            f"delete {kind} {name}",
            lambda **raw: delete(name, self.namespace, propagation_policy="Foreground", **raw),
            tolerated=NOT_FOUND,
        )

    def exists(self, kind: str, name: str) -> bool:
        read = {
            "ConfigMap": self.core.read_namespaced_config_map,
            "Service": self.core.read_namespaced_service,
            "Job": self.batch.read_namespaced_job,
        }[kind]
        found = self._raw(
            f"read {kind} {name}", lambda **raw: read(name, self.namespace, **raw), NOT_FOUND
        )
        return found is not None

    def read_job(self, name: str) -> JobState | None:
        job = self._raw(
            f"read Job {name}",
            lambda **raw: self.batch.read_namespaced_job(name, self.namespace, **raw),
            NOT_FOUND,
        )
        return None if job is None else job_state(json.loads(job))

    def pods(self, label_selector: str) -> list[PodState]:
        listing = self._raw(
            f"list pods ({label_selector})",
            lambda **raw: self.core.list_namespaced_pod(
                self.namespace, label_selector=label_selector, **raw
            ),
        )
        return [pod_state(pod) for pod in json.loads(listing or b"{}").get("items") or []]

    def pod_log(self, name: str) -> str:
        """The log as sent (HTTP 400: the container has not started yet)."""
        log = self._raw(
            f"read the log of pod {name}",
            lambda **raw: self.core.read_namespaced_pod_log(name, self.namespace, **raw),
            WAITING_TO_START,
        )
        return "" if log is None else log.decode("utf-8", errors="replace")

    def _raw(
        self, action: str, call: Callable[..., Any], tolerated: frozenset[int] = frozenset()
    ) -> bytes | None:
        """The response body of a call made without the client's model deserialisation.

        Raw bodies because the client's models are not what the stages need: its string handling
        mangles JSON-looking log lines (kubernetes-client/python#811, #1354), and its strict
        models would reject a server field they do not know. Returns None for a tolerated HTTP
        status; any other refusal or a transport failure is a ClusterAccessError.
        """
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            response = call(_preload_content=False, _request_timeout=REQUEST_TIMEOUT_SECONDS)
            return bytes(response.data)
        except ApiException as error:
            if error.status in tolerated:
                return None
            raise ClusterAccessError(explain_api_error(action, self.namespace, error)) from None
        except HTTPError as error:
            raise ClusterAccessError(
                f"cannot reach the Kubernetes API to {action}: {error}"
            ) from error


NOT_FOUND = frozenset({404})
WAITING_TO_START = frozenset({400})
REQUEST_TIMEOUT_SECONDS = 60
"""One API request's limit: the waits are the runner's, a hung connection must not be one."""


def explain_api_error(action: str, namespace: str, error: Any) -> str:
    """A refusal in words a pipeline log reader can act on (never the request's credentials)."""
    status, reason = getattr(error, "status", None), getattr(error, "reason", "")
    hints = {
        401: "the kubeconfig's credentials were rejected (expired token?)",
        403: f"the kubeconfig's user may not do this in namespace {namespace} (RBAC): it needs "
        "create/delete/get on jobs, services and configmaps, and get/list on pods and pods/log",
        404: f"namespace {namespace} (or the object) does not exist",
        409: "the object is still being deleted, or exists already",
        422: "the API server rejected the manifest",
    }
    hint = hints.get(status or 0, "")
    body = str(getattr(error, "body", "") or "")[:300]
    return (
        f"{action} in {namespace}: HTTP {status} {reason}"
        + (f": {hint}" if hint else "")
        + (f" ({body})" if body and status == 422 else "")
    )


def job_state(job: dict[str, Any]) -> JobState:
    """A Job object as the API sends it (JSON) -> JobState."""
    status = job.get("status") or {}
    conditions = tuple(
        Condition(
            c.get("type", ""), c.get("status", ""), c.get("reason") or "", c.get("message") or ""
        )
        for c in status.get("conditions") or []
    )
    return JobState(
        uid=(job.get("metadata") or {}).get("uid", ""),
        active=status.get("active") or 0,
        succeeded=status.get("succeeded") or 0,
        failed=status.get("failed") or 0,
        conditions=conditions,
    )


def pod_state(pod: dict[str, Any]) -> PodState:
    """A Pod object as the API sends it (JSON) -> PodState (its first container)."""
    metadata, status = pod.get("metadata") or {}, pod.get("status") or {}
    containers = status.get("containerStatuses") or [{}]
    state = containers[0].get("state") or {}
    waiting, terminated = state.get("waiting") or {}, state.get("terminated")
    conditions: list[dict[str, Any]] = status.get("conditions") or []
    scheduled = next((c for c in conditions if c.get("type") == "PodScheduled"), {})
    unschedulable = None
    if scheduled.get("status") == "False":
        unschedulable = scheduled.get("message") or scheduled.get("reason") or "not scheduled"
    return PodState(
        name=metadata.get("name", ""),
        phase=status.get("phase") or "Unknown",
        created=_timestamp(metadata.get("creationTimestamp")),
        waiting_reason=waiting.get("reason"),
        waiting_message=waiting.get("message"),
        exit_code=terminated.get("exitCode") if terminated else None,
        terminated_reason=terminated.get("reason") if terminated else None,
        unschedulable=unschedulable,
        ready=bool(containers[0].get("ready")),
    )


def _timestamp(value: str | None) -> float:
    """RFC 3339 `2026-11-30T12:00:00Z` -> seconds since the epoch (0 when absent)."""
    return datetime.fromisoformat(value).timestamp() if value else 0.0
