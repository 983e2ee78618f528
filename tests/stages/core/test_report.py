"""The A/B report: gain arithmetic, formatting, the tables and the chart."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.routing import RoutingProfile
from stages.core.ab_verdict import ABPair, ReportError, gain_percent
from stages.core.markdown import markdown_text
from stages.core.report import (
    format_gain,
    headline_table,
    random_scatter_hit_ratio,
    render_markdown,
    write_report,
)
from stages.core.results import MAX_MEASURE
from tests.stages.core.support import AFFINITY, ROUND_ROBIN, level, results


@pytest.mark.parametrize(
    ("baseline", "candidate", "expected"),
    [(1.91, 2.60, "+36%"), (21.39, 37.68, "+76%"), (10.0, 9.6, "-4%"), (5.0, 5.0, "+0%")],
)
def test_gain_is_relative_to_round_robin(baseline: float, candidate: float, expected: str) -> None:
    assert format_gain(baseline, candidate) == expected


def test_a_zero_baseline_has_no_gain() -> None:
    with pytest.raises(ReportError):
        gain_percent(0.0, 3.0)


def test_random_scatter_reference() -> None:
    # 20 questions over 8 workers visit 8 * (1 - (7/8)^20) = 7.4463 distinct workers on average.
    assert random_scatter_hit_ratio(8, 20) == pytest.approx((20 - 7.4463) / 20, abs=1e-4)
    assert random_scatter_hit_ratio(1, 20) == pytest.approx(19 / 20)


def test_the_headline_rows_read_like_the_recipes_table() -> None:
    header, alignment, *rows = headline_table(ABPair.of(AFFINITY, ROUND_ROBIN))

    assert header.startswith("| Concurrency | Round-robin req/s | Affinity req/s | Throughput gain")
    assert alignment.count("---:") == 6
    assert rows == [
        "| 1 | 1.91 | 2.60 | +36% | 61 ms | 58 ms |",
        "| 16 | 21.39 | 37.68 | +76% | 303 ms | 62 ms |",
    ]


def test_the_report_names_the_engine_and_the_cache_limits() -> None:
    markdown = render_markdown(ABPair.of(ROUND_ROBIN, AFFINITY))

    assert "mock engine" in markdown and "not GPUs" in markdown
    assert "physical limit (questions-1)/questions = 95.0%" in markdown
    assert "- session affinity: 92.0%" in markdown  # (9,000 + 9,400) / 20,000
    assert "- round robin: 30.0%" in markdown
    assert "| 16 | 606 ms | 124 ms | 1,515 ms | 310 ms | 2,738 | 4,823 |" in markdown


def test_two_results_of_one_profile_cannot_be_compared() -> None:
    with pytest.raises(ReportError, match="one round-robin and one session-affinity"):
        ABPair.of(ROUND_ROBIN, ROUND_ROBIN)


def test_write_report_writes_markdown_and_a_png(tmp_path: Path) -> None:
    markdown = write_report(ROUND_ROBIN, AFFINITY, tmp_path)

    assert (tmp_path / "report.md").read_text() == markdown
    assert (tmp_path / "ab-chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --- input in the report (issue 30) ---------------------------------------------------------------

HOSTILE_NAME = "<img src=x onerror=alert(1)>|`x`\n](javascript:alert(1))"


def test_text_from_the_results_is_escaped_everywhere_the_report_writes_it() -> None:
    incomplete = {"complete": False, "failure": "<b>boom</b>\n# not a heading | cell"}
    pair = ABPair.of(
        ROUND_ROBIN.model_copy(update={"graph_name": HOSTILE_NAME} | incomplete), AFFINITY
    )
    plain = render_markdown(ABPair.of(ROUND_ROBIN.model_copy(update=incomplete), AFFINITY))

    markdown = render_markdown(pair)

    assert "<img" not in markdown and "<b>" not in markdown and "](javascript" not in markdown
    assert markdown_text(HOSTILE_NAME) in markdown
    assert markdown.count(markdown_text(incomplete["failure"])) == 2  # the verdict, the warning
    assert len(markdown.splitlines()) == len(plain.splitlines())


def test_a_round_robin_that_served_nothing_has_no_gain_and_no_verdict(tmp_path: Path) -> None:
    idle = [lvl.model_copy(update={"requests_per_second": 0.0}) for lvl in ROUND_ROBIN.levels]

    markdown = write_report(ROUND_ROBIN.model_copy(update={"levels": idle}), AFFINITY, tmp_path)

    assert "| 1 | 0.00 | 2.60 | n/a |" in markdown
    assert "verdict: inconclusive: round robin served 0 requests/s at c1" in markdown


def test_the_largest_numbers_a_result_holds_still_make_a_report(tmp_path: Path) -> None:
    largest = {
        "requests_per_second": float(MAX_MEASURE),
        "ttft_p50_ms": float(MAX_MEASURE),
        "ttft_p95_ms": float(MAX_MEASURE),
        "request_latency_p50_ms": float(MAX_MEASURE),
        "output_tokens_per_second": float(MAX_MEASURE),
    }
    huge = level(1, 1.0, 1.0).model_copy(update=largest)
    tiny = level(1, 1e-300, 0.0)
    rr = results(RoutingProfile.ROUND_ROBIN, [tiny])

    markdown = write_report(rr, results(RoutingProfile.SESSION_AFFINITY, [huge]), tmp_path)

    assert "verdict: inconclusive: round robin served 1e-300 requests/s at c1" in markdown
    assert (tmp_path / "ab-chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
