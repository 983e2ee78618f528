"""The two profiles' sweeps of one A/B, matched level by level, and the gain between them."""

from __future__ import annotations

import math
from dataclasses import dataclass

from components.routing import RoutingProfile
from stages.core.results import LevelResult, ProfileResults
from stages.errors import StageFailed


class ReportError(StageFailed):
    """The results cannot be compared."""


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
