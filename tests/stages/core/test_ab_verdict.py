"""The one-line A/B verdict, and the report's account of a local run's time scale and host."""

from __future__ import annotations

import pytest

from components.routing import RoutingProfile
from stages.core.ab_verdict import ABPair, conditions_lines, verdict_line
from stages.core.report import render_markdown
from stages.core.results import HostLoad, ProfileResults, RunConditions
from tests.stages.core.support import AFFINITY, ROUND_ROBIN, level, results

QUIET = HostLoad(seconds=60, cores=2, others_cores=0.02, own_cores=1.2, own_wait_cores=0.1)
TWO_LOOPS = HostLoad(seconds=60, cores=2, others_cores=2.0, own_cores=0.9, own_wait_cores=0.6)


def timed(results: ProfileResults, scale: float, sweep: HostLoad | None) -> ProfileResults:
    conditions = RunConditions(
        time_scale=scale, chosen_by="the host probe", reference_cores=2.0, sweep=sweep
    )
    return results.model_copy(update={"conditions": conditions})


def test_the_verdict_names_the_level_with_the_largest_effect() -> None:
    line = verdict_line(ABPair.of(ROUND_ROBIN, AFFINITY))

    assert line == (
        "verdict: session affinity +76.2% req/s at c16 (TTFT p50 303 -> 62 ms); "
        "ahead at 2 of 2 levels (c1 +36.1%, c16 +76.2%)"
    )


def test_a_loss_is_the_answer_when_it_is_the_largest_effect() -> None:
    losing = results(RoutingProfile.SESSION_AFFINITY, [level(1, 2.0, 58), level(16, 15.0, 400)])

    line = verdict_line(ABPair.of(ROUND_ROBIN, losing))

    assert line.startswith("verdict: session affinity -29.9% req/s at c16 (TTFT p50 303 -> 400 ms)")
    assert "ahead at 1 of 2 levels" in line


def test_a_quiet_host_and_a_corrected_busy_one_still_give_a_verdict() -> None:
    quiet = verdict_line(ABPair.of(timed(ROUND_ROBIN, 1, QUIET), timed(AFFINITY, 1, QUIET)))
    busy = ABPair.of(timed(ROUND_ROBIN, 2, TWO_LOOPS), timed(AFFINITY, 2, TWO_LOOPS))

    assert quiet.endswith("; host quiet")
    assert verdict_line(busy).endswith(
        "; host busy, within what the time scale corrects, run 2x slower than real time"
    )
    assert "busy, within what 2x corrects (it needed 2.0x)" in "\n".join(conditions_lines(busy))


def test_a_host_busier_than_the_time_scale_corrects_is_inconclusive() -> None:
    pair = ABPair.of(timed(ROUND_ROBIN, 1, QUIET), timed(AFFINITY, 1, TWO_LOOPS))

    line = verdict_line(pair)
    markdown = render_markdown(pair, chart_name=None)

    assert line == (
        "verdict: inconclusive: a busy host during session-affinity's sweep: other processes "
        "demanded 2.00 of 2 cores during the sweep: it needed 2.0x dilation and ran at 1x"
    )
    assert line in markdown
    assert "session-affinity's sweep (60 s): other processes demanded 2.00 of 2 cores" in markdown
    assert "**DISTURBED**" in markdown


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"complete": False, "failure": "AIPerf failed"}, "round-robin's sweep stopped part-way"),
        (
            {
                "levels": [
                    level(1, 1.9, 61).model_copy(update={"error_count": 3}),
                    level(16, 21, 303),
                ]
            },
            "3 requests failed in round-robin's sweep",
        ),
        (
            {"workload": ROUND_ROBIN.workload.model_copy(update={"seed": 7})},
            "the two profiles ran different workloads",
        ),
        ({"workers": 4}, "the two graphs ran different worker counts (round robin 4, session "),
    ],
)
def test_numbers_that_cannot_carry_a_verdict_say_why(
    change: dict[str, object], reason: str
) -> None:
    line = verdict_line(ABPair.of(ROUND_ROBIN.model_copy(update=change), AFFINITY))

    assert line.startswith(f"verdict: inconclusive: {reason}")


def test_the_report_gives_a_dilated_runs_time_scale() -> None:
    pair = ABPair.of(timed(ROUND_ROBIN, 2, TWO_LOOPS), timed(AFFINITY, 2, TWO_LOOPS))

    lines = conditions_lines(pair)

    assert lines[0] == (
        "- Timing of round-robin: its graph ran 2x slower than real time (chosen by the host "
        "probe); every time and rate here is in real time."
    )
    assert conditions_lines(ABPair.of(ROUND_ROBIN, AFFINITY)) == []  # a cluster's: none


def test_two_time_scales_are_inconclusive() -> None:
    """A resumed lab run probes the host again: its second profile may run at another K."""
    pair = ABPair.of(timed(ROUND_ROBIN, 1, QUIET), timed(AFFINITY, 2.5, QUIET))

    assert verdict_line(pair) == (
        "verdict: inconclusive: the two profiles ran at different time scales (round robin 1x, "
        "affinity 2.5x)"
    )


def test_each_graphs_worker_count_is_reported_and_round_robins_is_its_reference() -> None:
    fewer = AFFINITY.model_copy(update={"workers": 4})

    markdown = render_markdown(ABPair.of(ROUND_ROBIN, fewer), chart_name=None)

    assert "round robin 8 workers, session affinity 4." in markdown
    assert "at random over 8 workers" in markdown
