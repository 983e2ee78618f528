"""A measured A/B table, one row per concurrency level: the recipe's, or the user's own.

The recipe's table (`RECIPE_TABLE`) is copied from its "Measured performance" section (NVIDIA's
Dynamo docs, "Cosmos3 Nano Reasoner"; ai-dynamo/dynamo `recipes/cosmos3-nano-reasoner/`): eight H200
workers, 200 videos x 20 questions, 128 output tokens, one run. It publishes requests/s and TTFT p50
for every level, and TTFT p95, request-latency p50 and output tokens/s for concurrency 16 only. A
user's own table comes from the `results.json` files the perf stage wrote for both profiles
(`MeasuredTable.from_results`).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from components.routing import RoutingProfile
from stages.core.results import LevelResult, ProfileResults, ResultsError

RR = RoutingProfile.ROUND_ROBIN
AFF = RoutingProfile.SESSION_AFFINITY
METRICS = (
    "requests_per_second",
    "ttft_p50_ms",
    "ttft_p95_ms",
    "request_latency_p50_ms",
    "output_tokens_per_second",
)
"""The recipe's columns, in its order (the gain is derived from requests/s)."""


class LevelMetrics(BaseModel):
    """One profile at one concurrency level; what was not published is None."""

    model_config = ConfigDict(frozen=True)

    requests_per_second: float = Field(gt=0)
    ttft_p50_ms: float = Field(gt=0)
    ttft_p95_ms: float | None = None
    request_latency_p50_ms: float | None = None
    output_tokens_per_second: float | None = None

    @classmethod
    def of(cls, level: LevelResult) -> LevelMetrics:
        return cls(**{name: getattr(level, name) for name in METRICS})


class MeasuredRow(BaseModel):
    model_config = ConfigDict(frozen=True)

    concurrency: int = Field(gt=0)
    round_robin: LevelMetrics
    session_affinity: LevelMetrics

    def of(self, profile: RoutingProfile) -> LevelMetrics:
        return self.round_robin if profile is RR else self.session_affinity

    @property
    def gain(self) -> float:
        """Session affinity's requests/s over round robin's, minus one."""
        return self.session_affinity.requests_per_second / self.round_robin.requests_per_second - 1


class MeasuredTable(BaseModel):
    """Rows of one deployment and workload; `source` says where the numbers come from."""

    model_config = ConfigDict(frozen=True)

    source: str
    workers: int = Field(gt=1)
    questions: int = Field(gt=1)
    output_tokens: int = Field(gt=1)
    rows: tuple[MeasuredRow, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _distinct_levels(self) -> MeasuredTable:
        levels = [row.concurrency for row in self.rows]
        if len(set(levels)) != len(levels):
            raise ValueError(f"a table has one row per concurrency level, got {levels}")
        return self

    @property
    def concurrencies(self) -> tuple[int, ...]:
        return tuple(row.concurrency for row in self.rows)

    def row(self, concurrency: int) -> MeasuredRow:
        for row in self.rows:
            if row.concurrency == concurrency:
                return row
        raise KeyError(
            f"the measured table ({self.source}) has no concurrency {concurrency}; "
            f"it has {', '.join(map(str, self.concurrencies))}"
        )

    @classmethod
    def from_results(cls, round_robin: Path, session_affinity: Path) -> MeasuredTable:
        """Both profiles' `results.json` (the perf stage's) of one deployment and workload."""
        try:
            rr, aff = ProfileResults.load(round_robin), ProfileResults.load(session_affinity)
        except ResultsError as error:  # input to read, not a stage that failed: bad usage
            raise ValueError(str(error)) from None
        except OSError as error:  # a directory, no permission (a missing file is a ResultsError)
            reason = error.strerror or type(error).__name__
            raise ValueError(f"--results {error.filename} cannot be read ({reason})") from None
        if rr.workload != aff.workload or rr.workers != aff.workers:
            raise ValueError(
                f"{round_robin} and {session_affinity} ran different workloads or fleets; "
                "a table compares the same workload on the same workers"
            )
        rr_levels = {level.concurrency: level for level in rr.levels}  # distinct, by validation
        aff_levels = {level.concurrency: level for level in aff.levels}
        return cls(
            source=f"{round_robin} and {session_affinity}",
            workers=rr.workers,
            questions=rr.workload.questions,
            output_tokens=rr.workload.output_tokens,
            rows=tuple(
                MeasuredRow(
                    concurrency=c,
                    round_robin=LevelMetrics.of(rr_levels[c]),
                    session_affinity=LevelMetrics.of(aff_levels[c]),
                )
                for c in sorted(rr_levels.keys() & aff_levels.keys())
            ),
        )


def _row(concurrency: int, rr: tuple[float, ...], aff: tuple[float, ...]) -> MeasuredRow:
    """A published row: each profile's numbers in the recipe's column order (`METRICS`)."""
    return MeasuredRow(
        concurrency=concurrency,
        round_robin=LevelMetrics(**dict(zip(METRICS, rr, strict=False))),
        session_affinity=LevelMetrics(**dict(zip(METRICS, aff, strict=False))),
    )


RECIPE_TABLE = MeasuredTable(
    source="the recipe's measured table (eight H200 workers, one run per level)",
    workers=8,
    questions=20,
    output_tokens=128,
    rows=(
        _row(1, (1.91, 61), (2.60, 58)),
        _row(2, (3.90, 61), (5.46, 58)),
        _row(4, (7.71, 61), (10.86, 57)),
        _row(8, (14.38, 90), (21.44, 58)),
        _row(16, (21.39, 303, 760, 674, 2738), (37.68, 62, 134, 409, 4822)),
    ),
)
