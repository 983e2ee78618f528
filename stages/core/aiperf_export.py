"""AIPerf 0.13.0's JSON export, checked on the way in and read as one level (`LevelResult`).

`profile_export_aiperf.json` holds one object per metric (`{"unit", "avg", "p50", "p95", ...}`);
throughputs are derived metrics with `avg` only; counters (`request_count`) are floats that hold
whole numbers (`9.0`). The prefix-cache counters come from the server's usage reports
(`usage.prompt_tokens_details.cached_tokens`), which AIPerf sums as
`total_usage_prompt_cache_read_tokens`. The CSV export beside it is archived, never read.

`AiperfExport` is the part of the export a level is made of, with the ranges a real run keeps;
an export that breaks them (or is not a JSON object) is a `ResultsError` naming the file and the
field, e.g. `request_count.avg: Input should be a finite number (got nan)`, before any number of
it reaches a result.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from common.credentials import mask
from common.input_files import InputFileError, read_text
from stages.core.results import Amount, Count, LevelResult, ResultsError
from stages.core.typed_files import refusal

AIPERF_EXPORT_FILE = "profile_export_aiperf.json"
ERROR_MESSAGE_CHARS = 200
PROFILING_PHASE = "profiling"


def _whole(value: float) -> float:
    if not value.is_integer():
        raise ValueError(f"a count is a whole number, got {value:g}")
    return value


Counter = Annotated[Amount, AfterValidator(_whole)]


class _Part(BaseModel):
    """A part of the export: the fields read, anything else AIPerf writes ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore", allow_inf_nan=False)


class Average(_Part):
    """A derived metric (a throughput, a mean length): its average."""

    avg: Amount


class Total(_Part):
    """A counter: requests or tokens, summed over the run."""

    avg: Counter


class Distribution(_Part):
    """A per-request metric (a latency): its average and percentiles."""

    avg: Amount
    p50: Amount
    p95: Amount

    @model_validator(mode="after")
    def _ordered(self) -> Distribution:
        if self.p50 > self.p95:
            raise ValueError(f"p50 ({self.p50:g}) is above p95 ({self.p95:g})")
        return self


class Phase(_Part):
    kind: str
    concurrency: int | None = Field(default=None, gt=0, strict=True)


class InputConfig(_Part):
    phases: list[Phase] = []

    @model_validator(mode="after")
    def _says_its_concurrency(self) -> InputConfig:
        if not self._profiling_concurrencies():
            raise ValueError("no profiling phase in its phases says which concurrency it ran")
        return self

    def _profiling_concurrencies(self) -> list[int]:
        return [
            phase.concurrency
            for phase in self.phases
            if phase.kind == PROFILING_PHASE and phase.concurrency is not None
        ]

    @property
    def concurrency(self) -> int:
        """The profiling phase's concurrency (the validator made sure there is one)."""
        return self._profiling_concurrencies()[0]


class ErrorDetails(_Part):
    code: int | None = Field(default=None, strict=True)
    type: str | None = None
    message: str | None = None


class ErrorKind(_Part):
    """One kind of failure and how many requests it failed (`ErrorDetailsCount`)."""

    error_details: ErrorDetails | None = None
    count: Count

    def line(self) -> str:
        """`<count> x <code> <type>: <message>`, the message on one line and shortened."""
        details = self.error_details or ErrorDetails()
        label = " ".join(str(part) for part in (details.code, details.type) if part)
        # Masked before it is shortened: a cut URL loses the `@host` that marks its password.
        message = " ".join(mask(details.message or "").split())[:ERROR_MESSAGE_CHARS]
        return f"{self.count} x {label or 'error'}: {message}"


class AiperfExport(_Part):
    """What one level is made of, as AIPerf 0.13.0 exports it."""

    request_throughput: Average
    time_to_first_token: Distribution
    request_latency: Distribution
    output_token_throughput: Average
    request_count: Total
    output_sequence_length: Average
    total_usage_prompt_tokens: Total | None = None
    total_usage_prompt_cache_read_tokens: Total | None = None
    error_request_count: Total | None = None
    """Present only when a request failed; `error_summary` lists them by kind."""
    error_summary: list[ErrorKind] | None = None
    input_config: InputConfig
    was_cancelled: bool = Field(default=False, strict=True)

    @model_validator(mode="after")
    def _consistent(self) -> AiperfExport:
        if self.cached_prompt_tokens > self.prompt_tokens:
            raise ValueError(
                f"total_usage_prompt_cache_read_tokens.avg ({self.cached_prompt_tokens}) is more "
                f"than total_usage_prompt_tokens.avg ({self.prompt_tokens})"
            )
        return self

    @property
    def prompt_tokens(self) -> int:
        total = self.total_usage_prompt_tokens
        return 0 if total is None else int(total.avg)

    @property
    def cached_prompt_tokens(self) -> int:
        total = self.total_usage_prompt_cache_read_tokens
        return 0 if total is None else int(total.avg)

    @property
    def error_count(self) -> int:
        if self.error_request_count is not None:
            return int(self.error_request_count.avg)
        return sum(kind.count for kind in self.error_summary or [])

    def level(self) -> LevelResult:
        return LevelResult(
            concurrency=self.input_config.concurrency,
            requests_per_second=self.request_throughput.avg,
            ttft_p50_ms=self.time_to_first_token.p50,
            ttft_p95_ms=self.time_to_first_token.p95,
            request_latency_p50_ms=self.request_latency.p50,
            request_latency_mean_ms=self.request_latency.avg,
            output_tokens_per_second=self.output_token_throughput.avg,
            request_count=int(self.request_count.avg),
            error_count=self.error_count,
            error_kinds=[kind.line() for kind in self.error_summary or []],
            output_tokens_mean=self.output_sequence_length.avg,
            prompt_tokens=self.prompt_tokens,
            cached_prompt_tokens=self.cached_prompt_tokens,
        )


def read_level(artifact_dir: Path) -> LevelResult:
    """One level from an AIPerf artifact directory."""
    path = artifact_dir / AIPERF_EXPORT_FILE
    if not path.exists():
        raise ResultsError(f"AIPerf wrote no {path}")
    try:
        export = AiperfExport.model_validate_json(read_text(path, "AIPerf export"))
        if export.was_cancelled:
            raise ResultsError(f"{path}: the AIPerf run was cancelled (was_cancelled: true)")
        return export.level()  # its sums are held to a level's bounds too
    except InputFileError as error:  # a directory, too big, not UTF-8
        raise ResultsError(str(error)) from None
    except ValidationError as error:  # not JSON, not an object, out of range
        raise ResultsError(f"{path} is not a usable AIPerf export: {refusal(error)}") from None
