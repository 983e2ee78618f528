"""A graph's status as the lab controller reports it, in the Dynamo operator's vocabulary.

The DGD CRD's status has a `state` (`initializing`, `pending`, `successful`, `failed`) and
conditions; the operator's `Ready` condition is what `pulumi up` waits for (the program's own wait,
components/readiness.py), comparing its `observedGeneration` with the object's generation, and a
`failed` state ends that wait early with the condition's reason. The controller writes one `Ready`
condition whose reason is the phase it is in.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

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


def graph_status(phase: Phase, message: str, generation: int) -> dict[str, Any]:
    """The status to write for a graph of `generation` in `phase`, with `message` as the reason."""
    return {
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
