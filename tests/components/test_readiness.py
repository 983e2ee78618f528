"""When the download is done and the graph Ready, and why not: verdicts from objects as the API
server returns them, and the wait that polls them (on a fake clock)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from components.live import LiveReadError
from components.readiness import (
    Outcome,
    Verdict,
    WaitFailed,
    graph_verdict,
    job_verdict,
    pod_state,
    wait_for,
)

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def stamp(seconds_ago: float) -> str:
    return (NOW - timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def job(*conditions: tuple[str, str, str], started: float | None = 60) -> dict[str, Any]:
    status: dict[str, Any] = {
        "conditions": [
            {"type": kind, "status": "True", "reason": reason, "message": message}
            for kind, reason, message in conditions
        ]
    }
    if started is not None:
        status["startTime"] = stamp(started)
    return {"metadata": {"name": "download", "uid": "u1"}, "status": status}


def pod(name: str = "download-x", **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"phase": "Pending"} | status}


def test_a_complete_job_is_done() -> None:
    assert job_verdict(job(("Complete", "", "")), [], NOW).outcome is Outcome.DONE


@pytest.mark.parametrize("kind", ["FailureTarget", "Failed"])
def test_a_job_has_failed_once_kubernetes_decides_it_not_once_its_pods_are_gone(kind: str) -> None:
    """1.31+: FailureTarget comes first, Failed only after the pods terminate (maybe never)."""
    found = job((kind, "DeadlineExceeded", "Job was active longer than specified deadline"))
    verdict = job_verdict(found, [pod(metadata_deleting=True)], NOW)
    assert verdict.outcome is Outcome.FAILED
    assert verdict.summary == "DeadlineExceeded: Job was active longer than specified deadline"


def test_a_running_job_says_how_long_and_what_its_pods_wait_for() -> None:
    unschedulable = pod(
        conditions=[
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity",
            }
        ]
    )
    verdict = job_verdict(job(started=300), [unschedulable], NOW)
    assert verdict.outcome is Outcome.WAITING
    assert verdict.summary == "running for 5 min"
    assert verdict.details == (
        (
            "pod download-x: Pending, Unschedulable: 0/2 nodes are available: 2 node(s) didn't "
            "match Pod's node affinity"
        ),
    )


def test_a_pod_says_the_reason_its_container_waits_or_failed() -> None:
    waiting = {
        "name": "download",
        "state": {"waiting": {"reason": "ImagePullBackOff", "message": "no such image"}},
    }
    assert pod_state(pod(containerStatuses=[waiting]), NOW).endswith(
        "container download: ImagePullBackOff: no such image"
    )
    failed = {"name": "cache-owner", "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}
    assert pod_state(pod(initContainerStatuses=[failed]), NOW).endswith(
        "container cache-owner: exit code 1 (Error)"
    )
    creating = {"name": "download", "state": {"waiting": {"reason": "ContainerCreating"}}}
    assert pod_state(pod(containerStatuses=[creating]), NOW) == "pod download-x: Pending"


def test_a_terminating_pod_says_for_how_long() -> None:
    stuck = {
        "metadata": {"name": "p", "deletionTimestamp": stamp(900)},
        "status": {"phase": "Running"},
    }
    assert pod_state(stuck, NOW) == "pod p: Running, Terminating for 15 min"


def graph(
    ready: str | None, generation: int = 2, observed: int = 2, state: str = "pending"
) -> dict[str, Any]:
    status: dict[str, Any] = {"state": state}
    if ready is not None:
        status["conditions"] = [
            {
                "type": "Ready",
                "status": ready,
                "reason": "Why",
                "message": "what the operator says",
                "observedGeneration": observed,
            }
        ]
    return {"metadata": {"name": "g", "generation": generation}, "status": status}


def test_a_graph_is_ready_only_for_its_current_generation() -> None:
    assert graph_verdict(graph("True")).outcome is Outcome.DONE
    stale = graph_verdict(graph("True", generation=3, observed=2))
    assert stale.outcome is Outcome.WAITING
    assert "earlier generation than 3" in stale.summary


def test_a_graph_that_says_failed_for_its_generation_has_failed_with_its_reason() -> None:
    verdict = graph_verdict(graph("False", state="failed"))
    assert verdict.outcome is Outcome.FAILED
    assert verdict.summary == "state failed, Ready=False (Why)"
    assert verdict.details == ("what the operator says",)
    earlier = graph_verdict(graph("False", generation=3, observed=2, state="failed"))
    assert earlier.outcome is Outcome.WAITING, "a failure of the old spec says nothing of the new"


def test_a_graph_without_a_ready_condition_is_waited_for() -> None:
    verdict = graph_verdict(graph(None))
    assert verdict == Verdict(Outcome.WAITING, "no Ready condition yet (state: pending)")


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


def run_wait(verdicts: list[Verdict | Exception], **kwargs: Any) -> tuple[Any, list[str]]:
    clock = FakeClock()
    said: list[str] = []
    queue = list(verdicts)

    def judge() -> Verdict:
        item = queue.pop(0) if len(queue) > 1 else queue[0]
        if isinstance(item, Exception):
            raise item
        return item

    async def main() -> Any:
        return await wait_for(
            judge, report=said.append, clock=clock, sleep=clock.sleep, poll_seconds=5, **kwargs
        )

    try:
        result: Any = asyncio.run(main())
    except WaitFailed as failure:
        result = failure
    return result, said


WAITING = Verdict(Outcome.WAITING, "starting")
DONE = Verdict(Outcome.DONE, "ready")
FAILED = Verdict(Outcome.FAILED, "state failed", ("the reason",))


def test_the_wait_ends_when_done_and_reports_each_new_summary_once() -> None:
    result, said = run_wait([WAITING, WAITING, DONE], timeout_seconds=60)
    assert result == DONE and said == ["starting", "ready"]


def test_the_wait_goes_on_while_the_cluster_does_not_answer() -> None:
    result, said = run_wait([LiveReadError("HTTP 503"), DONE], timeout_seconds=60)
    assert result == DONE and said[0] == "the cluster did not answer: HTTP 503"


def test_the_wait_times_out_with_the_last_verdict() -> None:
    result, _ = run_wait([WAITING], timeout_seconds=20)
    assert isinstance(result, WaitFailed) and result.timed_out
    assert result.verdict == WAITING


def test_a_failure_ends_the_wait_once_it_lasted_its_grace() -> None:
    at_once, _ = run_wait([FAILED], timeout_seconds=600)
    assert isinstance(at_once, WaitFailed) and not at_once.timed_out
    assert str(at_once) == "state failed\n  the reason"
    recovered, _ = run_wait([FAILED, FAILED, DONE], timeout_seconds=600, failed_grace_seconds=30)
    assert recovered == DONE, "a failure that clears within the grace is not an ending"
    lasting, _ = run_wait([FAILED], timeout_seconds=600, failed_grace_seconds=30)
    assert isinstance(lasting, WaitFailed) and not lasting.timed_out
