"""What one measured level says about a worker: a warm request, a cold one, a warm first token.

At concurrency 1 nothing queues, so a profile's mean request latency is its requests' average:
with `q` questions per video, round robin over `w` workers sends a video's questions to
min(w, q) different workers, each of which processes the video once (a cold request), while
session affinity processes it once in all. Two profiles, two unknowns:

    q x R_round_robin   = k x cold + (q - k) x warm      (k = min(w, q))
    q x R_affinity      = 1 x cold + (q - 1) x warm

so warm = (k x R_affinity - R_round_robin) / (k - 1). The affinity profile's TTFT p50 is a warm
request's (all but one in q are warm), and a warm request's time after its first token is
(output tokens - 1) inter-token gaps. Above concurrency 1, requests/s hides queueing, and round
robin's spread is no longer exact: `expected_cold_workers` assumes the scatter of a real cluster.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from components.routing import RoutingProfile
from lab.planner.measured_table import AFF, RR, MeasuredRow
from stages.core.results import LevelResult


class ModelMismatch(ValueError):
    """Numbers the warm/cold model cannot explain (e.g. round robin faster than affinity)."""


def expected_cold_workers(workers: int, questions: int, concurrency: int) -> float:
    """How many workers process each video under round robin: exactly min(w, q) at concurrency 1
    (consecutive requests go to consecutive workers); above it, a random scatter's expectation."""
    if concurrency == 1:
        return float(min(workers, questions))
    return workers * (1 - (1 - 1 / workers) ** questions)


def scatter_cache_hits(workers: int, questions: int, concurrency: int) -> float:
    """Share of round robin's requests that find their video cached when they scatter over the
    workers as on a real cluster (exact at concurrency 1)."""
    return 1 - expected_cold_workers(workers, questions, concurrency) / questions


def scattered_latency_ms(
    level: LevelResult, workers: int, questions: int, cold_extra_ms: float
) -> float:
    """Round robin's mean latency in the lab had its requests scattered like a real cluster's.

    Deterministic engines keep concurrent sessions in step, so a video keeps meeting the few
    workers that already cached it and the lab's round robin gets more cache hits than a real
    cluster's (docs/lab-prediction.md, effect 1). Each hit a scatter would not have had costs one
    video's processing, `cold_extra_ms`. The lab counts hits in prompt tokens; the per-video
    prefix is nearly all of a prompt, so its token share stands in for the share of requests."""
    scatter = scatter_cache_hits(workers, questions, level.concurrency)
    return mean_latency_ms(level) + (level.cache_hit_ratio - scatter) * cold_extra_ms


def mean_latency_ms(level: LevelResult) -> float:
    if level.request_latency_mean_ms is None:
        raise ValueError("the lab's level has no mean request latency")
    return level.request_latency_mean_ms


class ServiceTimes(BaseModel):
    """Milliseconds of one request on an otherwise idle worker."""

    model_config = ConfigDict(frozen=True)

    warm_ms: float = Field(gt=0)
    cold_ms: float = Field(gt=0)
    warm_ttft_ms: float = Field(gt=0)
    output_tokens: int = Field(gt=1)

    @property
    def cold_extra_ms(self) -> float:
        """What processing the video costs the first request on a worker."""
        return self.cold_ms - self.warm_ms

    @property
    def itl_ms(self) -> float:
        return (self.warm_ms - self.warm_ttft_ms) / (self.output_tokens - 1)

    @classmethod
    def solve(
        cls,
        latency_ms: dict[RoutingProfile, float],
        warm_ttft_ms: float,
        workers: int,
        questions: int,
        output_tokens: int,
        concurrency: int = 1,
    ) -> ServiceTimes:
        """From each profile's mean request latency (see the module's equations)."""
        spread = expected_cold_workers(workers, questions, concurrency)
        rr, aff = latency_ms[RR], latency_ms[AFF]
        warm = (spread * aff - rr) / (spread - 1)
        cold = questions * aff - (questions - 1) * warm
        if not warm_ttft_ms < warm < cold:
            raise ModelMismatch(
                f"mean latencies round robin {rr:.1f} ms and session affinity {aff:.1f} ms, with "
                f"TTFT {warm_ttft_ms:.1f} ms, give a warm request of {warm:.1f} ms and a cold one "
                f"of {cold:.1f} ms: the model needs TTFT < warm < cold"
            )
        return cls(
            warm_ms=warm, cold_ms=cold, warm_ttft_ms=warm_ttft_ms, output_tokens=output_tokens
        )

    @classmethod
    def of_row(
        cls, row: MeasuredRow, workers: int, questions: int, output_tokens: int
    ) -> ServiceTimes:
        """A published row: requests/s at concurrency c means a mean latency of c / (req/s)."""
        latency = {p: row.concurrency * 1000 / row.of(p).requests_per_second for p in (RR, AFF)}
        try:
            return cls.solve(
                latency,
                row.session_affinity.ttft_p50_ms,
                workers,
                questions,
                output_tokens,
                row.concurrency,
            )
        except ModelMismatch as error:
            raise ModelMismatch(
                f"{error} (is round robin slower than session affinity in this row, and are "
                "workers, questions and output tokens the ones it was measured with?)"
            ) from error

    def errors(self, target: ServiceTimes) -> dict[str, float]:
        """Relative error of each time against `target`'s."""
        return {
            "warm_ms": self.warm_ms / target.warm_ms - 1,
            "cold_extra_ms": self.cold_extra_ms / target.cold_extra_ms - 1,
            "warm_ttft_ms": self.warm_ttft_ms / target.warm_ttft_ms - 1,
        }
