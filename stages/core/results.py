"""Benchmark results as typed data: one level, one profile's sweep, the host around a local run.

`results.json` is input as much as output: `report` reads it from a file or an archived run, and
its numbers decide the A/B verdict. So every model here checks range, type and consistency on the
way in (the validators below); a file that breaks any of it is a `ResultsError` naming the file,
the field and what is wrong (`stages.core.typed_files.refusal`). AIPerf's export is read into a
`LevelResult` by `stages.core.aiperf_export`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field, ValidationError, model_validator

from common.input_files import (
    MAX_RECORD_BYTES,
    InputFileError,
    parsed_json,
    read_text,
)
from components.config_rules import MAX_WORKER_REPLICAS, shown
from components.routing import RECIPE_AFFINITY_TTL_SECONDS, RoutingProfile, routing_for
from stages.core.graph_metrics import GraphCounts
from stages.core.routing_probe import RoutingProbe
from stages.core.typed_files import CHECKED, refusal, write_model
from stages.core.workload import PerfWorkload
from stages.errors import StageFailed

MAX_MEASURE = 10**15
"""The largest number a level holds (ms, tokens, requests/s, tokens/s): no run comes near it (a
30-day run lasts 2.6e9 ms). A number far above it is a corrupt file, and near the float limit the
report's chart cannot even be drawn."""
Amount = Annotated[float, Field(ge=0, le=MAX_MEASURE, strict=True)]
"""A rate, a duration, a mean: a number (an integer will do; a string or a boolean will not),
0 to `MAX_MEASURE`; finite where the model says `allow_inf_nan=False`, as every model here does."""
Count = Annotated[int, Field(ge=0, le=MAX_MEASURE, strict=True)]
"""Requests or tokens: a whole number, 0 to `MAX_MEASURE`."""


class ResultsError(StageFailed):
    """An AIPerf export or a results file that cannot be read as a benchmark result."""


class LevelResult(BaseModel):
    """One concurrency level of one profile."""

    model_config = CHECKED

    concurrency: int = Field(gt=0, strict=True)
    requests_per_second: Amount
    ttft_p50_ms: Amount
    ttft_p95_ms: Amount
    request_latency_p50_ms: Amount
    output_tokens_per_second: Amount
    request_count: Count
    """Requests that completed (AIPerf's `request_count` counts the valid ones only)."""
    error_count: Count
    output_tokens_mean: Amount
    prompt_tokens: Count
    cached_prompt_tokens: Count
    request_latency_mean_ms: Amount | None = None
    """None in results written before it was recorded; the lab's predictions need it."""
    error_kinds: list[str] = []
    """Why requests failed, one line per kind as AIPerf groups them: `<count> x <code> <type>:
    <message>` (the message shortened). Empty when none failed."""
    graph: GraphCounts | None = None
    """What the graph's own /metrics counted during the level (None: not read, as in the lab's
    stand-alone stages, or written before it was recorded)."""

    @model_validator(mode="after")
    def _consistent(self) -> LevelResult:
        if self.cached_prompt_tokens > self.prompt_tokens:
            raise ValueError(
                f"cached_prompt_tokens ({self.cached_prompt_tokens}) is more than prompt_tokens "
                f"({self.prompt_tokens}): a cache-hit ratio above 100%"
            )
        if self.ttft_p50_ms > self.ttft_p95_ms:
            raise ValueError(
                f"ttft_p50_ms ({self.ttft_p50_ms:g}) is above ttft_p95_ms ({self.ttft_p95_ms:g})"
            )
        return self

    @property
    def cache_hit_ratio(self) -> float:
        """Share of prompt tokens the engine found in its prefix cache."""
        return self.cached_prompt_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def rescaled(self, time_scale: float) -> LevelResult:
        """This level, measured `time_scale` times slower than real time, in real time: every
        duration divided by it, every rate multiplied (counts and tokens are unchanged)."""
        latency_mean = self.request_latency_mean_ms
        return self.model_copy(
            update={
                "requests_per_second": self.requests_per_second * time_scale,
                "output_tokens_per_second": self.output_tokens_per_second * time_scale,
                "ttft_p50_ms": self.ttft_p50_ms / time_scale,
                "ttft_p95_ms": self.ttft_p95_ms / time_scale,
                "request_latency_p50_ms": self.request_latency_p50_ms / time_scale,
                "request_latency_mean_ms": None
                if latency_mean is None
                else latency_mean / time_scale,
            }
        )


QUIET_OTHERS_CORES = 0.25
"""Other processes demanding less than a quarter of a core leave a run undisturbed."""
TIME_SCALE_TOLERANCE = 1.25
"""A run is still corrected when the host needed up to 25% more dilation than it got."""


class HostLoad(BaseModel):
    """The machine over a window of a local run (`stages.local.host_load`), in cores: what other
    processes demanded (ran or waited to run), what the run's own processes ran, and how long
    its threads waited for a CPU."""

    model_config = CHECKED

    seconds: float = Field(ge=0, strict=True)
    cores: int = Field(gt=0, strict=True)
    others_cores: float = Field(ge=0, strict=True)
    own_cores: float = Field(ge=0, strict=True)
    own_wait_cores: float = Field(ge=0, strict=True)

    @property
    def fair_share_cores(self) -> float:
        """The cores a run that wants them all gets beside the others' demand (the scheduler's
        fair share): every core when the host is quiet, half of two when two loops spin."""
        return self.cores * self.cores / (self.cores + self.others_cores)

    def needed_time_scale(self, reference_cores: float) -> float:
        """How much slower than real time a graph that needs `reference_cores` must run for
        its share of this host to keep up with it (1: real time)."""
        return max(1.0, reference_cores / self.fair_share_cores)

    @property
    def quiet(self) -> bool:
        return self.others_cores < QUIET_OTHERS_CORES


class RunConditions(BaseModel):
    """How a local graph's sweep was run: its time scale, why, and the host around it."""

    model_config = CHECKED

    time_scale: float = Field(default=1.0, gt=0, strict=True)
    """The graph ran this many times slower than real time (its engine, the pauses between
    questions, the affinity TTL); the levels are given back in real time (`LevelResult.rescaled`).
    Below 1 (a prediction's choice): faster."""
    chosen_by: str
    """Where the time scale came from: the host probe's numbers, or the command line."""
    reference_cores: float = Field(gt=0, strict=True)
    """The cores the graph needs at time scale 1 (the idle host its numbers were checked on)."""
    probe: HostLoad | None = None
    """The host just before the graphs started, as the probe that chose the time scale saw it."""
    sweep: HostLoad | None = None
    """The host during this sweep."""

    @property
    def needed_time_scale(self) -> float | None:
        """The time scale the sweep's host needed; None when it was not measured."""
        return None if self.sweep is None else self.sweep.needed_time_scale(self.reference_cores)

    @property
    def disturbed(self) -> str | None:
        """Why the host made this sweep's numbers untrustworthy, or None when it did not: other
        processes demanded more than the time scale made room for."""
        needed = self.needed_time_scale
        if self.sweep is None or self.sweep.quiet or needed is None:
            return None
        if needed <= self.time_scale * TIME_SCALE_TOLERANCE:
            return None
        return (
            f"other processes demanded {self.sweep.others_cores:.2f} of {self.sweep.cores} cores "
            f"during the sweep: it needed {needed:.1f}x dilation and ran at {self.time_scale:g}x"
        )


class ProfileResults(BaseModel):
    """A whole sweep of one routing profile against one deployment."""

    model_config = CHECKED

    profile: RoutingProfile
    target: Literal["cluster", "lab"]
    graph_name: str = Field(min_length=1, max_length=253)
    """The graph's name: a Kubernetes object's, 253 characters at most."""
    workers: int = Field(gt=0, le=MAX_WORKER_REPLICAS, strict=True)
    session_header: str | None
    workload: PerfWorkload
    levels: list[LevelResult] = Field(min_length=1)
    complete: bool = Field(default=True, strict=True)
    """False when the sweep stopped part-way: `levels` are the ones it finished."""
    failure: str | None = None
    """Why an incomplete sweep stopped."""
    conditions: RunConditions | None = None
    """A local graph's time scale and host load (None: a cluster's, or written before them)."""
    routing: RoutingProbe | None = None
    """Where the smoke stage's routing probe went (None: written before the probe, or no smoke)."""

    @model_validator(mode="after")
    def _consistent(self) -> ProfileResults:
        # Any TTL will do: the header a profile sends does not depend on it.
        header = routing_for(self.profile, RECIPE_AFFINITY_TTL_SECONDS).session_header
        if self.session_header != header:
            expected = repr(header) if header else "none (null)"
            got = shown(self.session_header) if self.session_header is not None else "none"
            raise ValueError(
                f"session_header: a {self.profile.value} result runs with session header "
                f"{expected}, got {got}"
            )
        if self.routing is not None and self.routing.session_header != header:
            raise ValueError(
                f"routing.session_header: a {self.profile.value} probe sends "
                f"{header or 'no header'}, like its sweep"
            )
        if not self.complete and not self.failure:
            raise ValueError("failure: an incomplete sweep (complete: false) says why it stopped")
        problems = self._level_problems()
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def _level_problems(self) -> list[str]:
        """Levels that are not distinct levels of the workload, that count more requests than a
        level sends, or a complete sweep without one of its levels."""
        problems, seen = [], set()
        sent = self.workload.requests_per_level
        for index, level in enumerate(self.levels):
            where = f"levels[{index}]"
            if level.concurrency in seen:
                problems.append(f"{where}.concurrency: level {level.concurrency} appears twice")
            elif level.concurrency not in self.workload.concurrencies:
                problems.append(
                    f"{where}.concurrency: level {level.concurrency} is not one of the "
                    f"workload's concurrencies {list(self.workload.concurrencies)}"
                )
            seen.add(level.concurrency)
            if level.request_count + level.error_count > sent:
                problems.append(
                    f"{where}: request_count {level.request_count} + error_count "
                    f"{level.error_count} is more than the {sent} requests a level sends "
                    "(workload.videos x workload.questions)"
                )
        missing = [c for c in self.workload.concurrencies if c not in seen]
        if self.complete and missing:
            problems.append(
                f"levels: a complete sweep (complete: true) has every level of its workload; "
                f"it lacks {', '.join(f'c{c}' for c in missing)}"
            )
        return problems

    @property
    def cache_hit_ratio(self) -> float:
        prompt = sum(level.prompt_tokens for level in self.levels)
        cached = sum(level.cached_prompt_tokens for level in self.levels)
        return cached / prompt if prompt else 0.0

    def level(self, concurrency: int) -> LevelResult | None:
        return next((lvl for lvl in self.levels if lvl.concurrency == concurrency), None)

    def save(self, path: Path) -> Path:
        return write_model(self, path)

    @classmethod
    def load(cls, path: Path) -> ProfileResults:
        """A results.json: a regular UTF-8 file (`common.input_files`) of this model."""
        try:
            text = read_text(path, "results file", MAX_RECORD_BYTES)
            parsed_json(text, str(path), "results file")  # syntax and nesting, before the model
        except InputFileError as error:
            raise ResultsError(str(error)) from None
        try:
            return cls.model_validate_json(text)
        except ValidationError as error:
            raise ResultsError(
                f"results file {path} is not a profile result: {refusal(error)}"
            ) from None
