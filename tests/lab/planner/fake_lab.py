"""A stand-in for the lab's runner in unit tests: the warm/cold model computed from the knobs,
with an overhead the formulas do not know about (so that calibration has to correct), and a
queueing term that grows with concurrency. The real runner (`lab.sweep.LabRunner`) is exercised
by the lab-marked tests."""

from __future__ import annotations

from dataclasses import dataclass, field

from components.routing import RoutingProfile
from lab.mocker_timing import prefill_ms
from lab.planner.calibration import warm_new_tokens
from lab.planner.service_times import expected_cold_workers
from lab.sweep import LabKnobs, LabSweep
from stages.core.results import LevelResult

QUESTION_TOKENS = 37


@dataclass
class FakeLab:
    overhead_ms: float = 9.0
    """Time the lab adds to every first token, outside the engine."""
    queueing: float = 0.04
    """Each concurrent session beyond the first slows a request by this share."""
    wall_clock_ms: float = 0.0
    """Time the lab adds to every first token on the wall clock (it shrinks as slowdown grows)."""
    lockstep_cold_workers: float | None = None
    """Workers per video under round robin above concurrency 1, when not a random scatter's."""
    calls: list[tuple[RoutingProfile, LabKnobs, LabSweep, float]] = field(default_factory=list)

    def __call__(
        self, profile: RoutingProfile, knobs: LabKnobs, sweep: LabSweep, slowdown: float
    ) -> list[LevelResult]:
        self.calls.append((profile, knobs, sweep, slowdown))
        return [self.level(profile, knobs, sweep, c, slowdown) for c in sweep.concurrencies]

    def level(
        self,
        profile: RoutingProfile,
        knobs: LabKnobs,
        sweep: LabSweep,
        concurrency: int,
        slowdown: float = 1.0,
    ) -> LevelResult:
        speed = knobs.speed
        ttft = (
            knobs.pre_engine_delay_ms
            + self.overhead_ms
            + self.wall_clock_ms / slowdown
            + speed.prefill_ms(warm_new_tokens(QUESTION_TOKENS))
        )
        context = knobs.prefix_tokens + QUESTION_TOKENS + sweep.output_tokens // 2
        warm = ttft + (sweep.output_tokens - 1) * speed.decode_ms(context)
        extra = (
            prefill_ms(knobs.prefix_tokens + QUESTION_TOKENS)
            - prefill_ms(warm_new_tokens(QUESTION_TOKENS))
        ) / speed.speedup
        q = sweep.questions
        cold_share = (
            self._round_robin_cold_workers(sweep, concurrency) / q
            if profile is RoutingProfile.ROUND_ROBIN
            else 1 / q
        )
        slower = 1 + self.queueing * (concurrency - 1)
        mean = (warm + cold_share * extra) * slower
        prompt = knobs.prefix_tokens + QUESTION_TOKENS
        requests = sweep.videos(concurrency) * q
        return LevelResult(
            concurrency=concurrency,
            requests_per_second=concurrency * 1000 / mean,
            ttft_p50_ms=ttft * slower,
            ttft_p95_ms=(ttft + extra) * slower,
            request_latency_p50_ms=warm * slower,
            request_latency_mean_ms=mean,
            output_tokens_per_second=concurrency * 1000 / mean * sweep.output_tokens,
            request_count=requests,
            error_count=0,
            output_tokens_mean=sweep.output_tokens,
            prompt_tokens=prompt * requests,
            cached_prompt_tokens=round(prompt * requests * (1 - cold_share)),
        )

    def _round_robin_cold_workers(self, sweep: LabSweep, concurrency: int) -> float:
        if concurrency > 1 and self.lockstep_cold_workers is not None:
            return self.lockstep_cold_workers
        return expected_cold_workers(sweep.workers, sweep.questions, concurrency)
