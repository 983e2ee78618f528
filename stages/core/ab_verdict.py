"""The two profiles' sweeps of one A/B matched level by level (`ABPair`), the gain between them,
the A/B in one line, and what the host did to a local run.

    verdict: session affinity +12.3% req/s at c16 (TTFT p50 306 -> 248 ms); ahead at 5 of 5
      levels (c1 +4.1%, ...); host quiet
    verdict: inconclusive: <reason>
    verdict: session affinity's run did not keep videos on one worker (...): the session header ...

The verdict checks the mechanism first: when the smoke stage's routing probe saw session
affinity's videos reach several workers (fewer than 99% on one), the gain is not reported, since it
would not be affinity's (`mechanism_failure`; the report stage then fails). A probe that could not
see the workers (`observable: false`) or none at all (older results) checks nothing.

The level named is the one with the largest effect either way, so the sign of the gain is the
answer. The verdict is inconclusive when the numbers cannot carry one: a sweep that stopped
part-way, failed requests, two different workloads, a level where round robin served nothing
(no gain to measure), or a local host that other processes kept busier than the run's time scale
corrects for (`RunConditions.disturbed`). Both lines are Markdown (the report's): text from the
results (why a sweep stopped, who chose a time scale) goes through `markdown_text`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from components.routing import RoutingProfile
from stages.core.markdown import markdown_text
from stages.core.results import LevelResult, ProfileResults, RunConditions
from stages.core.routing_probe import affinity_failure
from stages.errors import StageFailed

VERDICT_PREFIX = "verdict: "


class ReportError(StageFailed):
    """The results cannot be compared, or the report is written and says why the A/B failed
    (`written`: its path)."""

    def __init__(self, message: str, written: Path | None = None) -> None:
        super().__init__(message)
        self.written = written


@dataclass(frozen=True)
class ABPair:
    round_robin: ProfileResults
    affinity: ProfileResults

    @classmethod
    def of(cls, first: ProfileResults, second: ProfileResults) -> ABPair:
        by_profile = {first.profile: first, second.profile: second}
        if set(by_profile) != set(RoutingProfile):
            raise ReportError(
                f"need one round-robin and one session-affinity result, got {first.profile} and "
                f"{second.profile}"
            )
        return cls(
            by_profile[RoutingProfile.ROUND_ROBIN], by_profile[RoutingProfile.SESSION_AFFINITY]
        )

    @property
    def concurrencies(self) -> list[int]:
        """The levels both profiles ran, in order."""
        rr = {level.concurrency for level in self.round_robin.levels}
        return sorted(rr & {level.concurrency for level in self.affinity.levels})

    def levels(self, concurrency: int) -> tuple[LevelResult, LevelResult]:
        """(round robin, affinity) at one concurrency both ran."""
        rr, aff = self.round_robin.level(concurrency), self.affinity.level(concurrency)
        if rr is None or aff is None:
            raise ReportError(f"concurrency {concurrency} is missing from one of the profiles")
        return rr, aff


def gain_percent(baseline: float, candidate: float) -> float:
    """Relative change from baseline to candidate, in percent."""
    if baseline <= 0:
        raise ReportError(f"cannot compute a gain from a baseline of {baseline}")
    return (candidate - baseline) / baseline * 100


def measurable_gain(baseline: float, candidate: float) -> float | None:
    """The gain in percent, or None when the baseline is too small to measure one against: 0
    (round robin served nothing), or so near 0 that the gain is no number (infinite)."""
    if baseline <= 0:
        return None
    gain = gain_percent(baseline, candidate)
    return gain if math.isfinite(gain) else None


def mechanism_failure(pair: ABPair) -> str | None:
    """Why session affinity's run did not test affinity (`routing_probe.affinity_failure`)."""
    return affinity_failure(pair.affinity.routing)


def inconclusive_reason(pair: ABPair) -> str | None:
    """Why the pair cannot carry a verdict, or None."""
    baseline, candidate = pair.round_robin, pair.affinity
    if baseline.workload != candidate.workload:
        return "the two profiles ran different workloads"
    if baseline.workers != candidate.workers:
        counts = f"round robin {baseline.workers}, session affinity {candidate.workers}"
        return f"the two graphs ran different worker counts ({counts})"
    paces = [r.conditions.time_scale for r in (baseline, candidate) if r.conditions is not None]
    if len(paces) == 2 and paces[0] != paces[1]:
        scales = f"round robin {paces[0]:g}x, affinity {paces[1]:g}x"
        return f"the two profiles ran at different time scales ({scales})"
    for results in (pair.round_robin, pair.affinity):
        name = results.profile.value
        if not results.complete:
            return f"{name}'s sweep stopped part-way ({markdown_text(results.failure)})"
        errors = sum(level.error_count for level in results.levels)
        if errors:
            return f"{errors} requests failed in {name}'s sweep"
        disturbed = results.conditions.disturbed if results.conditions else None
        if disturbed:
            return f"a busy host during {name}'s sweep: {disturbed}"
    if not pair.concurrencies:
        return "the two profiles share no concurrency level"
    for c in pair.concurrencies:
        rr, aff = pair.levels(c)
        if measurable_gain(rr.requests_per_second, aff.requests_per_second) is None:
            served = f"{rr.requests_per_second:g} requests/s"
            return f"round robin served {served} at c{c}: too little to measure a gain against"
    return None


def _host_note(pair: ABPair) -> str | None:
    conditions = [
        r.conditions for r in (pair.round_robin, pair.affinity) if r.conditions is not None
    ]
    if not conditions:
        return None
    scale = max(c.time_scale for c in conditions)
    quiet = all(c.sweep is None or c.sweep.quiet for c in conditions)
    pace = "" if scale == 1 else f", run {scale:g}x slower than real time"
    return ("host quiet" if quiet else "host busy, within what the time scale corrects") + pace


def verdict_line(pair: ABPair) -> str:
    """`verdict: ...`: the A/B's answer, or why it has none."""
    broken = mechanism_failure(pair)
    if broken:
        return f"{VERDICT_PREFIX}{broken}"
    reason = inconclusive_reason(pair)
    if reason:
        return f"{VERDICT_PREFIX}inconclusive: {reason}"
    gains = {}
    for c in pair.concurrencies:
        rr, aff = pair.levels(c)
        gains[c] = gain_percent(rr.requests_per_second, aff.requests_per_second)
    largest = max(gains, key=lambda c: abs(gains[c]))
    rr, aff = pair.levels(largest)
    ahead = sum(1 for gain in gains.values() if gain > 0)
    levels = ", ".join(f"c{c} {gain:+.1f}%" for c, gain in gains.items())
    effect = (
        f"session affinity {gains[largest]:+.1f}% req/s at c{largest} "
        f"(TTFT p50 {rr.ttft_p50_ms:,.0f} -> {aff.ttft_p50_ms:,.0f} ms)"
    )
    parts = [effect, f"ahead at {ahead} of {len(gains)} levels ({levels})"]
    host = _host_note(pair)
    return VERDICT_PREFIX + "; ".join(parts + ([host] if host else []))


def verdict_in(report_markdown: str) -> str | None:
    """The verdict line of a written report (None in a report written before it had one)."""
    lines = report_markdown.splitlines()
    return next((line for line in lines if line.startswith(VERDICT_PREFIX)), None)


def _load_line(results: ProfileResults, conditions: RunConditions) -> str | None:
    load = conditions.sweep
    if load is None:
        return None
    needed = conditions.needed_time_scale or 1.0
    if load.quiet:
        state = "quiet"
    elif conditions.disturbed:
        state = f"**DISTURBED**: it needed {needed:.1f}x dilation"
    else:
        state = f"busy, within what {conditions.time_scale:g}x corrects (it needed {needed:.1f}x)"
    return (
        f"- Host during {results.profile.value}'s sweep ({load.seconds:.0f} s): other processes "
        f"demanded {load.others_cores:.2f} of {load.cores} cores; the run's own processes ran "
        f"{load.own_cores:.2f} cores and waited {load.own_wait_cores:.2f} for a CPU: {state}."
    )


def conditions_lines(pair: ABPair) -> list[str]:
    """How each local sweep was timed and what the host did meanwhile (none for a cluster)."""
    lines = []
    for results in (pair.round_robin, pair.affinity):
        conditions = results.conditions
        if conditions is None:
            continue
        scale = conditions.time_scale
        pace = "in real time" if scale == 1 else f"{scale:g}x slower than real time"
        lines.append(
            f"- Timing of {results.profile.value}: its graph ran {pace} (chosen by "
            f"{markdown_text(conditions.chosen_by)}); every time and rate here is in real time."
        )
        load = _load_line(results, conditions)
        if load:
            lines.append(load)
    return lines
