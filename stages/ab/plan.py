"""What an A/B run is before it starts: its id, its profiles in order, and its GPU budget.

The recipe's graphs each take all eight H200s of its cluster, so the two profiles run one after the
other on the same GPUs (also the matched comparison: same GPUs, same cluster conditions). Only with
room for both graphs may they stay deployed side by side; even then the stages run one after the
other, so neither profile is measured under the other's load.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from components.contract import StackOutputs
from components.routing import SESSION_HEADER, RoutingProfile
from components.settings import config_key
from stages.archive import ArchiveLocation
from stages.core.workload import PerfWorkload
from stages.errors import UsageError

PROFILES = (RoutingProfile.ROUND_ROBIN, RoutingProfile.SESSION_AFFINITY)
"""The baseline first, then the candidate the report evaluates."""
RECIPE_GRAPH_GPUS = 8
"""A graph's GPUs when its stack has never been deployed: the recipe's 8 workers x 1 GPU."""


@dataclass(frozen=True)
class AbRun:
    """One A/B run: its id, its workload, and where its results go."""

    run_id: str
    workload: PerfWorkload
    out_dir: Path
    archive: ArchiveLocation
    keep: bool = False
    """Leave a graph deployed after a failure or Ctrl-C, for a look at it (and every graph, when
    they fit side by side); a graph that passed is still taken down when the next profile needs its
    GPUs."""
    commit: str | None = None
    smoke_wait_seconds: float = 60.0
    perf_wait_seconds: float = 600.0
    rehearse: bool = False
    """Deploy and take down each graph for real, but write what each stage would run instead of
    running it: nothing measured, nothing archived, no report. For a target whose graphs serve
    nothing (the local cluster, where kwok stands in for the operator)."""

    def profile_dir(self, profile: RoutingProfile) -> Path:
        return self.out_dir / self.run_id / profile.value


@dataclass(frozen=True)
class Budget:
    """How the graphs share the target's GPUs, and why."""

    side_by_side: bool
    reason: str


def decide_budget(available: int | None, per_graph: dict[RoutingProfile, int]) -> Budget:
    """Side by side only when the target holds both graphs at once; `available` None: no GPUs to
    count (the lab, whose graphs share two CPU cores and would skew each other's numbers)."""
    if available is None:
        return Budget(False, "one graph at a time: the lab's graphs share this machine's cores")
    wanted = ", ".join(f"{profile.value} {gpus}" for profile, gpus in per_graph.items())
    largest = max(per_graph.values())
    if available < largest:
        raise UsageError(
            f"a graph needs {largest} GPUs ({wanted}) but the target has {available}: lower "
            "workerReplicas, or pass --gpus if the count the cluster reports is wrong"
        )
    both = sum(per_graph.values())
    if available >= both:
        return Budget(
            True,
            f"both graphs fit on {available} GPUs ({wanted}): they stay deployed side by side; "
            "the stages still run one profile after the other",
        )
    return Budget(
        False,
        f"{available} GPUs hold one graph at a time ({wanted}): each profile's graph is taken "
        "down before the next is deployed, on the same GPUs",
    )


def refuse_unhashed_frontends(outputs: StackOutputs, stack: str) -> None:
    """The stages reach the frontend through the operator's Service, which spreads requests over
    the frontend replicas without hashing the session header: with affinity and more than one
    frontend each session's requests would meet several frontends' session tables, and the
    profile would be measured as round robin."""
    if outputs.session_header is not None and outputs.frontends > 1:
        raise UsageError(unhashed_refusal(stack, outputs.frontends))


def unhashed_refusal(stack: str, frontends: int) -> str:
    return (
        f"{stack} runs {frontends} frontend replicas with session affinity: the A/B "
        "reaches them through the operator's frontend Service, which does not hash "
        f"{SESSION_HEADER}, so its numbers would be round robin's. Set "
        f"{config_key('frontendReplicas')} 1 on that stack for the A/B"
    )


class Outcome(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    NOT_RUN = "not run"


@dataclass(frozen=True)
class ProfileOutcome:
    """How one profile's part of the run ended, for the closing line."""

    profile: RoutingProfile
    outcome: Outcome
    detail: str = ""

    def line(self) -> str:
        detail = f" ({self.detail})" if self.detail else ""
        return f"{self.profile.value}: {self.outcome.value}{detail}"
