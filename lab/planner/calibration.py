"""`lab calibrate`: tune the lab to one measured level of both profiles, check it, keep it.

From the reference row alone (`lab.planner.service_times`): a warm request's time, a cold one's and a
warm first token's. The lab's knobs follow (`lab.sweep.LabKnobs`):

- the engine's prefill speed: `warm_engine_ms`, the part of a warm first token spent in the
  engine, which holds up the worker's other requests (default: what the mock engine itself
  takes at speed 1, its own model of a GPU); the rest of the warm TTFT becomes the pre-engine
  delay, which holds up nothing else;
- the prefix length: its prefill at that speed costs what processing a video costs a cold
  request;
- the decode speed: a warm request's time after its first token over its output tokens.

Then the lab runs the reference level for both profiles and measures the same three times
(above concurrency 1, round robin's latency corrected for the lab's lockstep as a prediction
corrects it); each miss corrects its knob (the lab's own overhead is not in the formulas), until
every time is within `tolerance` or `max_runs` is spent. The file keeps the reference row, the
targets, the knobs and every check, so that a prediction can say what it stands on, and need not
run the last check's level again.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from components.routing import RoutingProfile
from lab.mocker_timing import BLOCK_SIZE, EngineSpeed, decode_ms, prefill_ms
from lab.planner.measured_table import AFF, RR, MeasuredRow, MeasuredTable
from lab.planner.service_times import (
    ModelMismatch,
    ServiceTimes,
    mean_latency_ms,
    scattered_latency_ms,
)
from lab.sweep import LabKnobs, LabSweep, Runner
from stages.core.results import LevelResult
from stages.core.typed_files import read_model

DEFAULT_QUESTION_TOKENS = 40
"""A first guess at a question's tokens after the prefix (the tiny tokenizer, the chat template);
the first check measures it."""
CHECK_WAVES = 2.0
"""Each check runs 2 x concurrency videos per profile, as a prediction does by default (so that it
can reuse the last check); at concurrency 1 every video repeats the same pattern."""
MAX_PREFIX_TOKENS = 200_000


class CalibrationError(ValueError):
    """A reference the lab cannot imitate, with what to change."""


class Check(BaseModel):
    """One run of the reference level in the lab, with what it measured."""

    model_config = ConfigDict(frozen=True)

    knobs: LabKnobs
    measured: ServiceTimes
    errors: dict[str, float]
    prompt_tokens: float
    round_robin: LevelResult
    session_affinity: LevelResult


class Calibration(BaseModel):
    """Everything `lab predict` needs, and where it came from."""

    model_config = ConfigDict(frozen=True)

    created_at: datetime
    source: str
    reference: MeasuredRow
    workers: int
    questions: int
    output_tokens: int
    targets: ServiceTimes
    knobs: LabKnobs
    slowdown: float = Field(gt=0)
    tolerance: float
    converged: bool
    checks: tuple[Check, ...]

    def checked_levels(
        self, sweep: LabSweep, slowdown: float
    ) -> dict[RoutingProfile, LevelResult] | None:
        """Both profiles' level from the last check, when `sweep` would run that level exactly
        as the check did (same fleet, workload, videos, knobs and slowdown): a prediction need
        not run it again. None otherwise."""
        last = self.checks[-1] if self.checks else None
        if last is None or last.knobs != self.knobs or slowdown != self.slowdown:
            return None
        concurrency = self.reference.concurrency
        if concurrency not in sweep.concurrencies:
            return None
        checked = check_sweep(self.workers, self.questions, self.output_tokens, concurrency)
        if sweep.level(concurrency) != checked.level(concurrency):
            return None
        return {RR: last.round_robin, AFF: last.session_affinity}

    @classmethod
    def load(cls, path: Path) -> Calibration:
        return read_model(
            cls, path, "lab calibration", "run `lab calibrate` first", CalibrationError
        )


def solve_prefix_tokens(engine_ms: float, question_tokens: int) -> int:
    """The prefix whose prefill (with the question, at speed 1) costs `engine_ms` more than a
    warm request's."""
    warm = prefill_ms(warm_new_tokens(question_tokens))
    low, high = 1, MAX_PREFIX_TOKENS
    if prefill_ms(high + question_tokens) - warm < engine_ms:
        raise CalibrationError(
            f"processing a video would need a prefix over {MAX_PREFIX_TOKENS} tokens; "
            "lower --warm-engine-ms (a slower engine needs a shorter prefix)"
        )
    while low < high:
        middle = (low + high) // 2
        if prefill_ms(middle + question_tokens) - warm < engine_ms:
            low = middle + 1
        else:
            high = middle
    return low


def warm_new_tokens(question_tokens: int) -> int:
    """What a warm request prefills: its question, and on average half a block of the prefix."""
    return question_tokens + BLOCK_SIZE // 2


def first_knobs(
    targets: ServiceTimes, question_tokens: int, warm_engine_ms: float | None
) -> LabKnobs:
    """The knobs the formulas give, before the lab has run (see the module docstring)."""
    warm_prefill = prefill_ms(warm_new_tokens(question_tokens))
    engine_ms = min(warm_engine_ms or warm_prefill, targets.warm_ttft_ms)
    speedup = warm_prefill / engine_ms
    prefix = solve_prefix_tokens(targets.cold_extra_ms * speedup, question_tokens)
    context = prefix + question_tokens + targets.output_tokens // 2
    decode_speedup = decode_ms(context) / (speedup * targets.itl_ms)
    return LabKnobs(
        speed=EngineSpeed(speedup=speedup, decode_speedup=decode_speedup),
        prefix_tokens=prefix,
        pre_engine_delay_ms=targets.warm_ttft_ms - engine_ms,
    )


def corrected(
    knobs: LabKnobs, targets: ServiceTimes, measured: ServiceTimes, question_tokens: int
) -> LabKnobs:
    """Each knob moved by its time's miss: delay by the TTFT's, decode speed by the
    inter-token gap's, prefix by the cold extra's (through the prefill polynomial)."""
    delay = max(0.0, knobs.pre_engine_delay_ms + targets.warm_ttft_ms - measured.warm_ttft_ms)
    decode_speedup = knobs.speed.decode_speedup * measured.itl_ms / targets.itl_ms
    warm = prefill_ms(warm_new_tokens(question_tokens))
    engine_extra = prefill_ms(knobs.prefix_tokens + question_tokens) - warm
    wanted = engine_extra * targets.cold_extra_ms / measured.cold_extra_ms
    return LabKnobs(
        speed=knobs.speed.model_copy(update={"decode_speedup": decode_speedup}),
        prefix_tokens=solve_prefix_tokens(wanted, question_tokens),
        pre_engine_delay_ms=delay,
    )


def measured_times(
    results: dict[str, LevelResult], sweep: LabSweep, cold_extra_ms: float
) -> ServiceTimes:
    """The lab's times at the reference level, from its mean latencies (already rescaled); above
    concurrency 1, round robin's as if it scattered (charging `cold_extra_ms` per extra hit)."""
    rr, aff = results[RR.value], results[AFF.value]
    (concurrency,) = sweep.concurrencies
    rr_mean = mean_latency_ms(rr)
    if concurrency > 1:  # at 1 round robin's spread is exact, in the lab too
        rr_mean = scattered_latency_ms(rr, sweep.workers, sweep.questions, cold_extra_ms)
    latency = {RR: rr_mean, AFF: mean_latency_ms(aff)}
    return ServiceTimes.solve(
        latency, aff.ttft_p50_ms, sweep.workers, sweep.questions, sweep.output_tokens, concurrency
    )


def calibrate(
    table: MeasuredTable,
    reference_concurrency: int,
    run: Runner,
    slowdown: float,
    warm_engine_ms: float | None = None,
    tolerance: float = 0.02,
    max_runs: int = 3,
    say: Callable[[str], None] = print,
) -> Calibration:
    """Reads `table`'s reference row and nothing else (the other rows are for `lab predict`)."""
    row = table.row(reference_concurrency)
    if reference_concurrency != 1:
        say(
            f"note: concurrency {reference_concurrency} as the reference: the first knobs read its "
            "queueing as service time and the checks at that level correct them; concurrency 1 "
            "is exact"
        )
    targets = ServiceTimes.of_row(row, table.workers, table.questions, table.output_tokens)
    question_tokens = DEFAULT_QUESTION_TOKENS
    knobs = first_knobs(targets, question_tokens, warm_engine_ms)
    sweep = check_sweep(table.workers, table.questions, table.output_tokens, reference_concurrency)
    checks: list[Check] = []
    while True:
        check = _check(knobs, targets, sweep, run, slowdown)
        checks.append(check)
        say(_describe(check, len(checks)))
        converged = all(abs(e) <= tolerance for e in check.errors.values())
        if converged or len(checks) >= max_runs:
            break
        question_tokens = max(1, round(check.prompt_tokens) - knobs.prefix_tokens)
        knobs = corrected(knobs, targets, check.measured, question_tokens)
    return Calibration(
        created_at=datetime.now(UTC),
        source=table.source,
        reference=row,
        workers=table.workers,
        questions=table.questions,
        output_tokens=table.output_tokens,
        targets=targets,
        knobs=checks[-1].knobs,
        slowdown=slowdown,
        tolerance=tolerance,
        converged=converged,
        checks=tuple(checks),
    )


def check_sweep(workers: int, questions: int, output_tokens: int, concurrency: int) -> LabSweep:
    """What each check runs: the reference level with the measured fleet and workload."""
    return LabSweep(
        workers=workers,
        questions=questions,
        output_tokens=output_tokens,
        concurrencies=(concurrency,),
        waves=CHECK_WAVES,
    )


def _check(
    knobs: LabKnobs, targets: ServiceTimes, sweep: LabSweep, run: Runner, slowdown: float
) -> Check:
    results = {p.value: run(p, knobs, sweep, slowdown)[0] for p in (RR, AFF)}
    try:
        measured = measured_times(results, sweep, targets.cold_extra_ms)
    except ModelMismatch as error:
        # The reference row solved (before any check ran), so it is the lab's own run that does
        # not fit: on a busy host, requests wait for a core at random, and with few of them
        # that can outweigh the gap between the profiles (CI, 2026-12-07, at --slowdown 1).
        raise CalibrationError(
            f"the lab's check at --slowdown {slowdown:g} does not fit the model: {error}. The "
            "reference row did; a busy host delays the lab's requests at random: run again on a "
            "quieter machine or with a larger --slowdown, which shrinks the lab's own delays"
        ) from error
    aff = results[AFF.value]
    return Check(
        knobs=knobs,
        measured=measured,
        errors=measured.errors(targets),
        prompt_tokens=aff.prompt_tokens / aff.request_count if aff.request_count else 0.0,
        round_robin=results[RR.value],
        session_affinity=results[AFF.value],
    )


def _describe(check: Check, number: int) -> str:
    errors = ", ".join(f"{name} {error:+.1%}" for name, error in check.errors.items())
    return f"check {number}: {errors}"
