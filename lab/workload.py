"""The lab's workloads: the recipe's shape, on Dynamo's deterministic mock engine."""

from __future__ import annotations

from stages.core.workload import RECIPE_WORKLOAD

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
