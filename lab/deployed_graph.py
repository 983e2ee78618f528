"""A DynamoGraphDeployment as the lab controller reads it, and the status it writes back.

The controller (`lab/controller.py`) turns each graph on its local API server into a lab graph
(`lab.graph.GraphSpec`) from the object as the API server stores it, never from the stack's
settings: the command line and `env` of the frontend container (`main`, else the first, of the
component of type `frontend`), and one `dynamo.mocker` per replica of the components of type
`worker` (`prefill`, `decode`): their NIM container cannot run here, so the lab's mock engine
stands in, serving the name the stack's outputs promise (`components.names.SERVED_MODEL`). A
frontend component of several replicas runs that many frontends behind the lab's pass-through,
which gives each connection to one at random, as the operator's Service does (no hashing).
docs/lab.md says what the lab sets over them. An object the lab cannot run raises
`UnrunnableGraph`, whose message becomes the graph's not-Ready reason.

The status is the operator's vocabulary (`graph_status`): a `state` and one `Ready` condition
whose reason is the controller's `Phase`, with `observedGeneration`, which `pulumi up`'s
readiness wait (components/readiness.py) compares; a `failed` state ends that wait early.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from components.names import MAIN_CONTAINER, SERVED_MODEL
from lab.environment import LabInstall
from lab.graph import (
    DEFAULT_STARTUP_TIMEOUT_SECONDS,
    MAX_FRONTENDS,
    MAX_WORKERS,
    FrontendCommand,
    GraphSpec,
)

FRONTEND_TYPE = "frontend"
WORKER_TYPES = ("worker", "prefill", "decode")


@dataclass(frozen=True)
class WorkerMapping:
    """What stands in for the NIM's worker: the lab's install (Dynamo, the tiny tokenizer), its
    `dynamo.mocker` timing arguments, and how long a graph may take to serve."""

    install: LabInstall = field(default_factory=LabInstall)
    mocker_args: tuple[str, ...] = ()
    startup_timeout_seconds: float = DEFAULT_STARTUP_TIMEOUT_SECONDS


class UnrunnableGraph(ValueError):
    """The lab cannot run this graph; the message says why, for its status."""


@dataclass(frozen=True)
class DeployedGraph:
    """One graph as the controller sees it: where it is, its generation, and what to run."""

    namespace: str
    name: str
    uid: str
    generation: int
    frontend: FrontendCommand = field(default_factory=FrontendCommand)
    frontends: int = 1
    """The frontend component's replicas."""
    workers: int = 0
    worker_template: str = ""
    """The workers' pod templates, as JSON: a change restarts them, as the operator's rolling
    update would (a rotated credential's digest, a new image)."""
    restart_id: str = ""
    """`spec.restart.id`: a new one restarts the graph, and Ready reports that restart done
    (`status.restart`), as the operator does (`graphRestartId`)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def spec(self, mapping: WorkerMapping) -> GraphSpec:
        """The lab graph that runs this one, its workers mapped to mockers by `mapping`."""
        return GraphSpec(
            workers=self.workers,
            install=mapping.install,
            mocker_args=mapping.mocker_args,
            startup_timeout_seconds=mapping.startup_timeout_seconds,
            frontend=self.frontend,
            frontends=self.frontends,
            frontend_hashing=False,  # a Service spreads connections; it does not read headers
            name=self.name,
            served_model=SERVED_MODEL,
        )


def read_graph(graph: Mapping[str, Any]) -> DeployedGraph:
    """The graph `graph` (a DynamoGraphDeployment as the API server returns it) describes."""
    metadata = graph.get("metadata") or {}
    components = (graph.get("spec") or {}).get("components") or []
    frontends = [c for c in components if c.get("type") == FRONTEND_TYPE]
    if len(frontends) != 1:
        raise UnrunnableGraph(
            f"the graph has {len(frontends)} components of type {FRONTEND_TYPE!r}; the lab runs "
            "exactly one frontend component"
        )
    frontend_replicas = _replicas(frontends[0])
    if not 1 <= frontend_replicas <= MAX_FRONTENDS:
        raise UnrunnableGraph(
            f"the graph's frontend component has {frontend_replicas} replicas; the lab runs 1 to "
            f"{MAX_FRONTENDS} frontends"
        )
    workers = sum(_replicas(c) for c in components if c.get("type") in WORKER_TYPES)
    if not 1 <= workers <= MAX_WORKERS:
        raise UnrunnableGraph(
            f"the graph's worker components have {workers} replicas in all; the lab runs 1 to "
            f"{MAX_WORKERS} mock workers"
        )
    return replace(
        graph_at(metadata),
        frontend=_frontend_command(frontends[0]),
        frontends=frontend_replicas,
        workers=workers,
        worker_template=json.dumps(
            [c.get("podTemplate") for c in components if c.get("type") in WORKER_TYPES],
            sort_keys=True,
        ),
        restart_id=str(((graph.get("spec") or {}).get("restart") or {}).get("id") or ""),
    )


def graph_at(metadata: Mapping[str, Any]) -> DeployedGraph:
    """Where a graph is, running nothing (where an unrunnable graph's status is written)."""
    return DeployedGraph(
        namespace=str(metadata.get("namespace", "")),
        name=str(metadata.get("name", "")),
        uid=str(metadata.get("uid", "")),
        generation=int(metadata.get("generation", 0)),
    )


def _replicas(component: Mapping[str, Any]) -> int:
    replicas = component.get("replicas")
    return 1 if replicas is None else int(replicas)


def _frontend_command(component: Mapping[str, Any]) -> FrontendCommand:
    pod = ((component.get("podTemplate") or {}).get("spec")) or {}
    containers = pod.get("containers") or []
    if not containers:
        raise UnrunnableGraph(f"the frontend component {component.get('name')!r} has no container")
    main = next((c for c in containers if c.get("name") == MAIN_CONTAINER), containers[0])
    command = [str(word) for word in main.get("command") or []]
    if not command:
        raise UnrunnableGraph(
            f"the frontend container {main.get('name')!r} gives no command: the lab cannot know "
            "its image's entrypoint; set the container's command (the program renders `python3`)"
        )
    argv = (*command, *(str(word) for word in main.get("args") or []))
    return FrontendCommand(argv=argv, env=tuple(_env_values(main.get("env") or [])))


def _env_values(entries: list[Mapping[str, Any]]) -> list[tuple[str, str]]:
    values = []
    for entry in entries:
        if "valueFrom" in entry:
            raise UnrunnableGraph(
                f"the frontend's environment variable {entry.get('name')!r} takes its value from "
                "another object (valueFrom), which the lab does not resolve"
            )
        values.append((str(entry["name"]), str(entry.get("value", ""))))
    return values


MESSAGE_LIMIT = 4000
"""A condition's message is a few lines: the start-up failure's log tails are cut there."""


class Phase(StrEnum):
    """Where the controller is with a graph; `Ready` is the only phase that serves."""

    STARTING = "Starting"
    READY = "Ready"
    START_FAILED = "StartFailed"
    PROCESS_EXITED = "ProcessExited"
    UNRUNNABLE = "Unrunnable"
    STOPPED = "ControllerStopped"


STATE = {Phase.STARTING: "pending", Phase.READY: "successful"}
"""The graph's `state` for a phase (the CRD's enum); any other phase is `failed`."""


def graph_status(
    phase: Phase, message: str, generation: int, restart_id: str = ""
) -> dict[str, Any]:
    """The status to write for a graph of `generation` in `phase`, with `message` as the reason;
    a graph Ready after the restart its spec asks for (`restart_id`) says that restart completed,
    in the operator's words (`status.restart`: `observedID`, phase `Completed`)."""
    restart = {"restart": {"observedID": restart_id, "phase": "Completed"}}
    return (restart if restart_id and phase is Phase.READY else {}) | {
        "state": STATE.get(phase, "failed"),
        "observedGeneration": generation,
        "conditions": [
            {
                "type": "Ready",
                "status": "True" if phase is Phase.READY else "False",
                "reason": phase.value,
                "message": message[:MESSAGE_LIMIT],
                "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "observedGeneration": generation,
            }
        ],
    }
