"""Benchmark results as typed data, parsed from AIPerf's JSON export.

`profile_export_aiperf.json` holds one object per metric (`{"unit", "avg", "p50", "p95", ...}`);
throughputs are derived metrics with `avg` only. The prefix-cache counters come from the server's
usage reports (`usage.prompt_tokens_details.cached_tokens`), which AIPerf sums as
`total_usage_prompt_cache_read_tokens`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from common.credentials import mask
from common.input_files import (
    MAX_RECORD_BYTES,
    InputFileError,
    InputFileMissing,
    parsed_json,
    read_json_object,
    read_text,
)
from components.routing import RoutingProfile
from stages.core.model_files import write_model
from stages.core.workload import PerfWorkload
from stages.errors import StageFailed

AIPERF_EXPORT_FILE = "profile_export_aiperf.json"


class ResultsError(StageFailed):
    """An AIPerf export that cannot be read as a benchmark result."""


class LevelResult(BaseModel):
    """One concurrency level of one profile."""

    model_config = ConfigDict(frozen=True)

    concurrency: int
    requests_per_second: float
    ttft_p50_ms: float
    ttft_p95_ms: float
    request_latency_p50_ms: float
    output_tokens_per_second: float
    request_count: int
    error_count: int
    output_tokens_mean: float
    prompt_tokens: int
    cached_prompt_tokens: int
    request_latency_mean_ms: float | None = None
    """None in results written before it was recorded; the lab's predictions need it."""
    error_kinds: list[str] = []
    """Why requests failed, one line per kind as AIPerf groups them: `<count> x <code> <type>:
    <message>` (the message shortened). Empty when none failed."""

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

    model_config = ConfigDict(frozen=True)

    seconds: float = Field(ge=0)
    cores: int = Field(gt=0)
    others_cores: float = Field(ge=0)
    own_cores: float = Field(ge=0)
    own_wait_cores: float = Field(ge=0)

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

    model_config = ConfigDict(frozen=True)

    time_scale: float = Field(default=1.0, gt=0)
    """The graph ran this many times slower than real time (its engine, the pauses between
    questions, the affinity TTL); the levels are given back in real time (`LevelResult.rescaled`).
    Below 1 (a prediction's choice): faster."""
    chosen_by: str
    """Where the time scale came from: the host probe's numbers, or the command line."""
    reference_cores: float = Field(gt=0)
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

    model_config = ConfigDict(frozen=True)

    profile: RoutingProfile
    target: Literal["cluster", "lab"]
    graph_name: str
    workers: int
    session_header: str | None
    workload: PerfWorkload
    levels: list[LevelResult] = Field(min_length=1)
    complete: bool = True
    """False when the sweep stopped part-way: `levels` are the ones it finished."""
    failure: str | None = None
    """Why an incomplete sweep stopped."""
    conditions: RunConditions | None = None
    """A local graph's time scale and host load (None: a cluster's, or written before them)."""

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
        except ValueError as error:
            summary = " ".join(mask(str(error)).split())[:300]  # masked, then cut short
            raise ResultsError(f"results file {path} is not a profile result: {summary}") from None


def _metric(export: dict[str, Any], tag: str, stat: str, default: float | None = None) -> float:
    entry = export.get(tag)
    if isinstance(entry, dict) and isinstance(entry.get(stat), int | float):
        return float(entry[stat])
    if default is not None:
        return default
    raise ResultsError(f"AIPerf export has no {tag}.{stat}")


def _error_count(export: dict[str, Any]) -> int:
    # `error_request_count` appears only when a request failed; `error_summary` lists them by kind.
    if "error_request_count" in export:
        return int(_metric(export, "error_request_count", "avg"))
    return sum(int(item.get("count", 0)) for item in export.get("error_summary") or [])


ERROR_MESSAGE_CHARS = 200


def _error_kinds(export: dict[str, Any]) -> list[str]:
    kinds = []
    for item in export.get("error_summary") or []:
        details = item.get("error_details") or {}
        label = " ".join(str(details[key]) for key in ("code", "type") if details.get(key))
        message = " ".join(mask(str(details.get("message", ""))).split())[:ERROR_MESSAGE_CHARS]
        kinds.append(f"{item.get('count', '?')} x {label or 'error'}: {message}")
    return kinds


def _profiling_concurrency(export: dict[str, Any]) -> int:
    phases = (export.get("input_config") or {}).get("phases") or []
    for phase in phases:
        if phase.get("kind") == "profiling" and isinstance(phase.get("concurrency"), int):
            return int(phase["concurrency"])
    raise ResultsError("AIPerf export does not say which concurrency it ran")


def parse_level(export: dict[str, Any]) -> LevelResult:
    """One level from the parsed content of `profile_export_aiperf.json`."""
    if export.get("was_cancelled"):
        raise ResultsError("the AIPerf run was cancelled")
    return LevelResult(
        concurrency=_profiling_concurrency(export),
        requests_per_second=_metric(export, "request_throughput", "avg"),
        ttft_p50_ms=_metric(export, "time_to_first_token", "p50"),
        ttft_p95_ms=_metric(export, "time_to_first_token", "p95"),
        request_latency_p50_ms=_metric(export, "request_latency", "p50"),
        request_latency_mean_ms=_metric(export, "request_latency", "avg"),
        output_tokens_per_second=_metric(export, "output_token_throughput", "avg"),
        request_count=int(_metric(export, "request_count", "avg")),
        error_count=_error_count(export),
        error_kinds=_error_kinds(export),
        output_tokens_mean=_metric(export, "output_sequence_length", "avg"),
        prompt_tokens=int(_metric(export, "total_usage_prompt_tokens", "avg", default=0.0)),
        cached_prompt_tokens=int(
            _metric(export, "total_usage_prompt_cache_read_tokens", "avg", default=0.0)
        ),
    )


def read_level(artifact_dir: Path) -> LevelResult:
    """One level from an AIPerf artifact directory."""
    path = artifact_dir / AIPERF_EXPORT_FILE
    try:
        export = read_json_object(path, "AIPerf export")
    except InputFileMissing as error:
        raise ResultsError(f"AIPerf wrote no {path}") from error
    except InputFileError as error:
        raise ResultsError(str(error)) from error
    return parse_level(export)
