"""`ClusterApi` through the official `kubernetes` client.

A refusal the stages can name becomes `stages.errors.ClusterUnreachable` (exit status 6), in words
a pipeline log reader can act on, never with the request's credentials.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from common.credentials import mask
from components.kubeconfig import KubeconfigError
from components.kubeconfig import api_client as kubeconfig_client
from stages.cluster.api import Condition, JobState, Manifest, PodState
from stages.errors import ClusterUnreachable, UsageError


@dataclass
class KubernetesApi:
    """`ClusterApi` through the official `kubernetes` client, for one namespace.

    The client is built from a kubeconfig (the default chain: $KUBECONFIG, ~/.kube/config, unless a
    file is named) and a context (the stack's `kubeContext` unless overridden, never the
    kubeconfig's current one), without touching the client's global configuration; a malformed
    kubeconfig is a ClusterUnreachable naming it (`components.kubeconfig`).
    """

    namespace: str
    core: Any = field(repr=False)
    batch: Any = field(repr=False)

    @classmethod
    def connect(cls, namespace: str, kubeconfig: Path | None, context: str) -> KubernetesApi:
        """The client for `context` of `kubeconfig` (None: $KUBECONFIG, then ~/.kube/config)."""
        from kubernetes import client

        try:
            api_client = kubeconfig_client(kubeconfig, context)
        except KubeconfigError as error:
            raise ClusterUnreachable(f"{error}; pass --kubeconfig/--context") from None
        return cls(namespace, client.CoreV1Api(api_client), client.BatchV1Api(api_client))

    def _call(self, verb: str, kind: str) -> Callable[..., Any]:
        """`create_namespaced_job`, `read_namespaced_secret`, ... of the client for `kind`."""
        client = self.batch if kind == "Job" else self.core
        method: Callable[..., Any] = getattr(client, f"{verb}_namespaced_{_KIND_NAMES[kind]}")
        return method

    def create(self, manifest: Manifest) -> None:
        kind, name = manifest["kind"], manifest["metadata"]["name"]
        create = self._call("create", kind)
        self._raw(f"create {kind} {name}", lambda **raw: create(self.namespace, manifest, **raw))

    def delete(self, kind: str, name: str) -> None:
        delete = self._call("delete", kind)
        self._raw(
            f"delete {kind} {name}",
            lambda **raw: delete(name, self.namespace, propagation_policy="Foreground", **raw),
            tolerated=NOT_FOUND,
        )

    def exists(self, kind: str, name: str) -> bool:
        return self._read(kind, name) is not None

    def read_job(self, name: str) -> JobState | None:
        job = self._read("Job", name)
        return None if job is None else job_state(json.loads(job))

    def _read(self, kind: str, name: str) -> bytes | None:
        read = self._call("read", kind)
        return self._raw(
            f"read {kind} {name}", lambda **raw: read(name, self.namespace, **raw), NOT_FOUND
        )

    def pods(self, label_selector: str) -> list[PodState]:
        listing = self._raw(
            f"list pods ({label_selector})",
            lambda **raw: self.core.list_namespaced_pod(
                self.namespace, label_selector=label_selector, **raw
            ),
        )
        return [pod_state(pod) for pod in json.loads(listing or b"{}").get("items") or []]

    def allocatable_gpus(self) -> int:
        """The `nvidia.com/gpu` every node offers, summed (what the scheduler can place)."""
        listing = self._raw("list nodes", lambda **raw: self.core.list_node(**raw))
        nodes = json.loads(listing or b"{}").get("items") or []
        return sum(_gpus(node) for node in nodes)

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
        status; any other refusal or a transport failure is a ClusterUnreachable.
        """
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            response = call(_preload_content=False, _request_timeout=REQUEST_TIMEOUT_SECONDS)
            return bytes(response.data)
        except ApiException as error:
            if error.status in tolerated:
                return None
            # A refused Secret's body could echo what it holds: never shown.
            secret = " Secret " in f" {action} "
            raise ClusterUnreachable(
                explain_api_error(action, self.namespace, error, show_body=not secret)
            ) from None
        except HTTPError as error:
            raise ClusterUnreachable(
                f"cannot reach the Kubernetes API to {action}: {error}; is the cluster up, and "
                "is it the kubeconfig's context? (pass --kubeconfig/--context)"
            ) from error


def stage_context(outputs_context: str | None, option: str | None) -> str:
    """The kube context a cluster stage connects to: `--context`, else the outputs' kubeContext.

    Never the kubeconfig's current context, whatever cluster that is now: the Pulumi program
    refuses it too (`kubeContext` is required config, `components.provider`). Outputs without the
    key (a hand-written file, an older program's) and no `--context` are a UsageError, raised
    before anything is built or any connection is made."""
    context = option or outputs_context
    if not context:
        raise UsageError(
            "the stack outputs name no kubeContext and no --context was given: a cluster stage "
            "connects only to the cluster it is told, never to the kubeconfig's current context; "
            "pass --context <the stack's kubeContext>, or use the outputs `pulumi stack output "
            "--json` prints (the program exports kubeContext)"
        )
    return context


_KIND_NAMES = {"Secret": "secret", "ConfigMap": "config_map", "Service": "service", "Job": "job"}
NOT_FOUND = frozenset({404})
WAITING_TO_START = frozenset({400})
REQUEST_TIMEOUT_SECONDS = 60
"""One API request's limit: the waits are the runner's, a hung connection must not be one."""


def explain_api_error(action: str, namespace: str, error: Any, show_body: bool = True) -> str:
    """A refusal in words a pipeline log reader can act on (never the request's credentials)."""
    status, reason = getattr(error, "status", None), getattr(error, "reason", "")
    hints = {
        401: "the kubeconfig's credentials were rejected (expired token?)",
        403: f"the kubeconfig's user may not do this in namespace {namespace} (RBAC): it needs "
        "create/delete/get on jobs, services and configmaps (and secrets, for a --pip-index-url "
        "with credentials), and get/list on pods and pods/log",
        404: f"namespace {namespace} (or the object) does not exist",
        409: "the object is still being deleted, or exists already",
        422: "the API server rejected the manifest",
    }
    hint = hints.get(status or 0, "")
    said = _status_message(getattr(error, "body", "")) if status in (403, 422) else ""
    return (
        f"{action} in {namespace}: HTTP {status} {reason}"
        + (f": {hint}" if hint else "")
        + (f" ({said})" if said and show_body else "")
    )


def _status_message(body: object) -> str:
    """What the API server said, from its Status body (the exact missing right of a 403, the
    field of a 422), shortened; the raw body when it is no Status."""
    text = body.decode(errors="replace") if isinstance(body, bytes) else str(body or "")
    try:
        message = json.loads(text).get("message", text)
    except (ValueError, AttributeError):
        message = text
    return mask(str(message))[:300]  # masked first: an image reference may carry a login


def _gpus(node: dict[str, Any]) -> int:
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    try:
        return int(allocatable.get("nvidia.com/gpu", 0))
    except ValueError:
        return 0


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
        ip=status.get("podIP"),
        ports=_named_ports(pod.get("spec") or {}),
    )


def _named_ports(spec: dict[str, Any]) -> tuple[tuple[str, int], ...]:
    ports = [p for c in spec.get("containers") or [] for p in c.get("ports") or []]
    return tuple(
        (p["name"], p["containerPort"])
        for p in ports
        if isinstance(p.get("name"), str) and isinstance(p.get("containerPort"), int)
    )


def _timestamp(value: str | None) -> float:
    """RFC 3339 `2026-11-30T12:00:00Z` -> seconds since the epoch (0 when absent)."""
    return datetime.fromisoformat(value).timestamp() if value else 0.0
