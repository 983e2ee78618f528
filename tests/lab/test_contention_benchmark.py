"""The busy-host benchmark's comparison: a busy run gives the idle runs' answer, or says where not."""

from __future__ import annotations

from components.routing import RoutingProfile
from lab.contention_benchmark import AbMeasurement, compare, render
from stages.core.ab_verdict import ABPair
from tests.stages.core.support import level, results


def measured(name: str, affinity_rps: tuple[float, float]) -> AbMeasurement:
    rr = results(RoutingProfile.ROUND_ROBIN, [level(1, 10.0, 60), level(16, 100.0, 80)])
    aff = results(
        RoutingProfile.SESSION_AFFINITY,
        [level(1, affinity_rps[0], 30), level(16, affinity_rps[1], 40)],
    )
    return AbMeasurement(name, 100.0, ABPair.of(rr, aff))


IDLE = [measured("idle-1", (11.0, 110.0)), measured("idle-2", (11.4, 114.0))]  # +10..14%


def test_a_busy_run_within_the_tolerance_gives_the_same_answer() -> None:
    assert compare(IDLE, measured("busy", (11.6, 108.0))) == []  # +16%, +8%: within 5 points


def test_a_flipped_sign_or_a_far_gain_is_named() -> None:
    problems = compare(IDLE, measured("busy", (9.0, 125.0)))

    assert problems == [
        "c1: -10.0% against the idle +12.0% (sign)",
        "c16: +25.0% against the idle +12.0% (more than 5.0 points)",
    ]


def test_the_idle_spread_widens_the_tolerance() -> None:
    spread = [measured("idle-1", (11.0, 102.0)), measured("idle-2", (11.4, 120.0))]  # c16 18 pts

    assert compare(spread, measured("busy", (11.2, 125.0))) == []


def test_the_table_has_a_row_per_run_and_the_answer() -> None:
    text = render(IDLE, [measured("busy-1-auto", (9.0, 110.0))], loops=2)

    assert "| idle-1 | 100 s | 1x | not measured | +10.0% | +10.0% |" in text
    assert "- busy-1-auto against the idle runs: DIFFERS: c1: -10.0% against" in text
