"""What the stages need from the lab to run against its graph (`stages.local.run.LocalTools`): its
tools, and its workloads: the recipe's shape, on Dynamo's deterministic mock engine."""

from __future__ import annotations

from lab.environment import LabInstall
from lab.standin import VideoStandIn
from lab.time_scale import REAL_TIME
from stages.core.results import RunConditions
from stages.core.workload import RECIPE_WORKLOAD
from stages.local.run import LocalTools

LAB_TURN_JITTER_MS = 100
"""Measured with 8 mock workers: with no pause (16 videos x 8 questions), round robin pinned each
video to 2-4 workers at concurrency 4, for 67% prefix-cache hits where random scatter gives 34%.
With pauses of 0-100 ms (16 x 10), round robin hit 20-52% per level and 41.7% overall, where random
scatter gives 41%. The pause (50 ms on average per follow-up question) costs both profiles alike,
roughly 15-20% of their requests/s at 32 output tokens."""

LAB_WORKLOAD = RECIPE_WORKLOAD.model_copy(
    update={
        "videos": 16,
        "questions": 10,
        "output_tokens": 32,
        "turn_jitter_ms": LAB_TURN_JITTER_MS,
    }
)
"""The lab's default: the recipe's shape, scaled down so both profiles run in a few minutes."""

LAB_RECIPE_WORKLOAD = RECIPE_WORKLOAD.model_copy(update={"turn_jitter_ms": LAB_TURN_JITTER_MS})
"""The recipe's sizes on the lab's mock engine, which needs the interleaving pause."""


def lab_tools(
    install: LabInstall | None = None, conditions: RunConditions = REAL_TIME
) -> LocalTools:
    """The lab's AIPerf and tokenizer (from `lab/setup.sh`), its text stand-in for a video, its
    workloads, and how its graph is timed (real time unless a time scale was chosen); raises
    LabNotInstalled when the lab is not installed."""
    ready = (install or LabInstall()).require()
    return LocalTools(
        aiperf=ready.aiperf_executable,
        tokenizer=str(ready.model_dir),
        media_for=lambda workload: VideoStandIn(workload.prefix_tokens),
        default_workload=LAB_WORKLOAD,
        recipe_workload=LAB_RECIPE_WORKLOAD,
        conditions=conditions,
    )
