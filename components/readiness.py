"""When is the download done, when is the graph Ready, and why not: read from the live objects.

The program waits for what it deploys itself, after the provider has applied it: the provider's
awaits (pulumi-kubernetes 4.25.0) never time a Job out, hold `up` on a pod stuck `Terminating`,
and end a graph's wait without its reason (docs/day-two.md, "The program waits itself"). Here a
Job has failed as soon as it says `FailureTarget`, its wait is bounded by its deadline plus
`DEADLINE_MARGIN_SECONDS`, and a graph `failed` for its generation for `FAILED_GRACE_SECONDS`
ends the wait with its Ready reason. Each verdict is a pure function of the objects; `wait_for`
polls one until it is done or failed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from components.live import LiveReadError

POLL_SECONDS = 5.0
DEADLINE_MARGIN_SECONDS = 120
"""How long past a Job's deadline the wait gives Kubernetes to record it (the Job controller
marks `FailureTarget` within seconds; a minute's informer resync is the slowest it can be)."""
FAILED_GRACE_SECONDS = 30.0
"""How long a graph must stay `failed` for its generation before the wait gives up: the operator
retries a failed reconcile, and one that recovers within this is not worth failing an update."""


class Outcome(StrEnum):
    DONE = "done"
    WAITING = "waiting"
    FAILED = "failed"


@dataclass(frozen=True)
class Verdict:
    """Where an object is: `summary` is one line (progress, or the failure's head); `details`
    are the lines that explain it (a pod's reason, say)."""

    outcome: Outcome
    summary: str
    details: tuple[str, ...] = ()

    def text(self) -> str:
        return "\n".join((self.summary, *(f"  {line}" for line in self.details)))


Manifest = Mapping[str, Any]


def condition(obj: Manifest, kind: str) -> Manifest | None:
    for item in (obj.get("status") or {}).get("conditions") or []:
        if item.get("type") == kind:
            return item  # type: ignore[no-any-return]
    return None


def is_true(obj: Manifest, kind: str) -> bool:
    found = condition(obj, kind)
    return found is not None and found.get("status") == "True"


# --- the download Job ------------------------------------------------------------------------


def job_failure(job: Manifest) -> Manifest | None:
    """The condition that says a Job has failed: `FailureTarget` (1.31+: decided, pods may still
    be terminating) or `Failed`."""
    for kind in ("FailureTarget", "Failed"):
        if is_true(job, kind):
            return condition(job, kind)
    return None


def job_verdict(job: Manifest, pods: Sequence[Manifest], now: datetime | None = None) -> Verdict:
    """Complete, failed (its reason and its pods'), or still running (what its pods do)."""
    now = now or datetime.now(UTC)
    if is_true(job, "Complete"):
        return Verdict(Outcome.DONE, "the download completed")
    pod_lines = tuple(pod_state(pod, now) for pod in pods)
    failure = job_failure(job)
    if failure is not None:
        reason = failure.get("reason") or "Failed"
        message = failure.get("message") or ""
        return Verdict(Outcome.FAILED, f"{reason}: {message}".rstrip(": "), pod_lines)
    status = job.get("status") or {}
    started = _since(status.get("startTime"), now)
    summary = f"running for {started}" if started else "waiting for the Job controller"
    return Verdict(Outcome.WAITING, summary, pod_lines)


def pod_state(pod: Manifest, now: datetime) -> str:
    """One line: the pod's name and what holds it (unschedulable, pulling, a container's waiting
    reason, terminating since when)."""
    name = (pod.get("metadata") or {}).get("name", "?")
    status = pod.get("status") or {}
    phase = status.get("phase") or "Unknown"
    deleting = (pod.get("metadata") or {}).get("deletionTimestamp")
    if deleting:
        return f"pod {name}: {phase}, Terminating for {_since(deleting, now) or '0 s'}"
    scheduled = condition(pod, "PodScheduled")
    if scheduled is not None and scheduled.get("status") == "False":
        why = f"{scheduled.get('reason') or 'not scheduled'}: {scheduled.get('message') or ''}"
        return f"pod {name}: {phase}, {why.rstrip(': ')}"
    for container in [
        *(status.get("initContainerStatuses") or []),
        *(status.get("containerStatuses") or []),
    ]:
        state = container.get("state") or {}
        waiting = state.get("waiting")
        if waiting and waiting.get("reason") not in (None, "PodInitializing", "ContainerCreating"):
            detail = f"{waiting.get('reason')}: {waiting.get('message') or ''}".rstrip(": ")
            return f"pod {name}: {phase}, container {container.get('name')}: {detail}"
        ended = state.get("terminated")
        if ended and ended.get("exitCode", 0) != 0:
            detail = f"exit code {ended.get('exitCode')} ({ended.get('reason') or 'Error'})"
            return f"pod {name}: {phase}, container {container.get('name')}: {detail}"
    started = _since(status.get("startTime"), now)
    return f"pod {name}: {phase}" + (f" for {started}" if started else "")


# --- the graph -------------------------------------------------------------------------------


def graph_verdict(graph: Manifest) -> Verdict:
    """Ready for its current generation and done with the restart its spec asks for, failed (the
    operator's `state: failed` for it, or a failed restart), or not yet: always with the Ready
    condition's reason and message."""
    ready = condition(graph, "Ready")
    status = graph.get("status") or {}
    generation = (graph.get("metadata") or {}).get("generation")
    if ready is None:
        state = status.get("state") or "no status yet"
        return Verdict(Outcome.WAITING, f"no Ready condition yet (state: {state})")
    said = f"Ready={ready.get('status')} ({ready.get('reason') or 'no reason'})"
    message = str(ready.get("message") or "").strip()
    details = (message,) if message else ()
    if not describes_generation(graph, ready):
        return Verdict(
            Outcome.WAITING, f"{said} is for an earlier generation than {generation}", details
        )
    if ready.get("status") == "True":
        return _restart_verdict(graph, said, details)
    if status.get("state") == "failed":
        return Verdict(Outcome.FAILED, f"state failed, {said}", details)
    return Verdict(Outcome.WAITING, said, details)


def describes_generation(graph: Manifest, ready: Manifest) -> bool:
    """Does the Ready condition describe the current spec? Its `observedGeneration`, else the
    status's, against `metadata.generation` (as kubectl wait and the provider compare them). A
    status that records neither is current only at generation 1, where no earlier spec exists:
    after an update it may still be the old generation's Ready, so the wait goes on."""
    generation = (graph.get("metadata") or {}).get("generation")
    observed = ready.get("observedGeneration")
    if observed is None:
        observed = (graph.get("status") or {}).get("observedGeneration")
    if generation is None:
        return True
    if observed is None:
        return int(generation) <= 1
    return int(observed) >= int(generation)


RESTART_DONE = "Completed"
RESTART_FAILED = "Failed"


def _restart_verdict(graph: Manifest, said: str, details: tuple[str, ...]) -> Verdict:
    """A Ready graph whose spec asks for a restart (`spec.restart.id`) is done once the operator
    says that restart completed (`status.restart`: its `observedID` and phase `Completed`, what
    Dynamo's own tests wait for); Ready alone can precede the restart of every component."""
    wanted = ((graph.get("spec") or {}).get("restart") or {}).get("id")
    if not wanted:
        return Verdict(Outcome.DONE, said, details)
    restart = (graph.get("status") or {}).get("restart") or {}
    phase = restart.get("phase") or "not started"
    if restart.get("observedID") != wanted:
        return Verdict(Outcome.WAITING, f"{said}, restart {wanted!r} not started yet", details)
    if phase == RESTART_DONE:
        return Verdict(Outcome.DONE, f"{said}, restart {wanted!r} completed", details)
    if phase == RESTART_FAILED:
        return Verdict(Outcome.FAILED, f"{said}, restart {wanted!r} failed", details)
    in_progress = ", ".join(restart.get("inProgress") or [])
    doing = f" ({in_progress})" if in_progress else ""
    return Verdict(Outcome.WAITING, f"{said}, restart {wanted!r}: {phase}{doing}", details)


# --- waiting ---------------------------------------------------------------------------------


class WaitFailed(Exception):
    """A wait ended without its object being done; the message is the last verdict's text."""

    def __init__(self, verdict: Verdict, timed_out: bool) -> None:
        super().__init__(verdict.text())
        self.verdict = verdict
        self.timed_out = timed_out


async def wait_for(
    judge: Callable[[], Verdict],
    timeout_seconds: float,
    report: Callable[[str], None],
    failed_grace_seconds: float = 0.0,
    poll_seconds: float = POLL_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
) -> Verdict:
    """Judge until done (the verdict is returned), failed for `failed_grace_seconds` on end, or
    `timeout_seconds` (both raise `WaitFailed`). Each new summary is reported. A read that fails
    (`LiveReadError`: the API server did not answer) is a waiting verdict: the wait goes on."""
    began = clock()
    failing_since: float | None = None
    said = ""
    while True:
        now = clock()
        verdict = await _judged(judge)
        if verdict.summary != said:
            report(verdict.summary)
            said = verdict.summary
        if verdict.outcome is Outcome.DONE:
            return verdict
        if verdict.outcome is Outcome.FAILED:
            failing_since = now if failing_since is None else failing_since
            if now - failing_since >= failed_grace_seconds:
                raise WaitFailed(verdict, timed_out=False)
        else:
            failing_since = None
        if now - began >= timeout_seconds:
            raise WaitFailed(verdict, timed_out=True)
        await sleep(poll_seconds)


async def _judged(judge: Callable[[], Verdict]) -> Verdict:
    try:
        # The client is synchronous: read in a thread, so other registrations go on meanwhile.
        return await asyncio.to_thread(judge)
    except LiveReadError as error:
        return Verdict(Outcome.WAITING, f"the cluster did not answer: {error}")


def parsed_time(timestamp: str | None) -> datetime | None:
    """An API timestamp (`2026-12-05T06:00:00Z`), or None when there is none or it is malformed."""
    try:
        return datetime.strptime(timestamp or "", "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None


def _since(timestamp: str | None, now: datetime) -> str:
    then = parsed_time(timestamp)
    return duration(max(0.0, (now - then).total_seconds())) if then else ""


def duration(seconds: float) -> str:
    """`45 s`, `12 min`, `1 h 05 min`: how long, as a person reads it."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"
