"""What the core stage tests share: profile results made from levels, and the recipe's two runs."""

from __future__ import annotations

from components.routing import SESSION_HEADER, RoutingProfile
from lab.stage_tools import LAB_WORKLOAD
from stages.core.results import LevelResult, ProfileResults

WORKLOAD = LAB_WORKLOAD.model_copy(
    update={"videos": 200, "questions": 20, "concurrencies": (1, 16)}
)
"""The recipe's 4,000 requests a level, on the lab."""


def level(concurrency: int, rps: float, ttft: float, cached: int = 0) -> LevelResult:
    return LevelResult(
        concurrency=concurrency,
        requests_per_second=rps,
        ttft_p50_ms=ttft,
        ttft_p95_ms=ttft * 2,
        request_latency_p50_ms=ttft * 5,
        output_tokens_per_second=rps * 128,
        request_count=4000,
        error_count=0,
        output_tokens_mean=128,
        prompt_tokens=10_000,
        cached_prompt_tokens=cached,
    )


def results(profile: RoutingProfile, levels: list[LevelResult]) -> ProfileResults:
    return ProfileResults(
        profile=profile,
        target="lab",
        graph_name=f"lab-{profile.value}",
        workers=8,
        session_header=SESSION_HEADER if profile is RoutingProfile.SESSION_AFFINITY else None,
        workload=WORKLOAD.model_copy(
            update={"concurrencies": tuple(sorted({lvl.concurrency for lvl in levels}))}
        )
        if levels
        else WORKLOAD,
        levels=levels,
    )


# The recipe's measured numbers at concurrency 1 and 16.
ROUND_ROBIN = results(
    RoutingProfile.ROUND_ROBIN, [level(1, 1.91, 61, 2_000), level(16, 21.39, 303, 4_000)]
)
AFFINITY = results(
    RoutingProfile.SESSION_AFFINITY, [level(1, 2.60, 58, 9_000), level(16, 37.68, 62, 9_400)]
)
