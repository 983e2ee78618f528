"""Benchmark results as typed data, parsed from AIPerf's JSON export.

`profile_export_aiperf.json` holds one object per metric (`{"unit", "avg", "p50", "p95", ...}`);
throughputs are derived metrics with `avg` only. The prefix-cache counters come from the server's
usage reports (`usage.prompt_tokens_details.cached_tokens`), which AIPerf sums as
`total_usage_prompt_cache_read_tokens`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from components.input_files import InputFileError, read_text
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
        """A results.json: a regular UTF-8 file (`components.input_files`) of this model."""
        try:
            text = read_text(path, "results file")
        except InputFileError as error:
            raise ResultsError(str(error)) from None
        try:
            return cls.model_validate_json(text)
        except ValueError as error:
            summary = " ".join(str(error).split())[:300]
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
        message = " ".join(str(details.get("message", "")).split())[:ERROR_MESSAGE_CHARS]
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
        export = json.loads(path.read_text())
    except FileNotFoundError as error:
        raise ResultsError(f"AIPerf wrote no {path}") from error
    except json.JSONDecodeError as error:
        raise ResultsError(f"{path} is not JSON: {error}") from error
    return parse_level(export)
