"""The A/B's closing lines: one per profile, the report, and the verdict always last."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.routing import RoutingProfile
from lab.stage_tools import LAB_WORKLOAD
from stages.ab.cli import print_summary
from stages.ab.orchestrator import AbResult
from stages.ab.plan import AbRun, Outcome, ProfileOutcome
from stages.archive import ArchiveLocation

RUN = AbRun("run-7", LAB_WORKLOAD, Path("build"), ArchiveLocation(bucket="lab"))


def closing_lines(result: AbResult, capsys: pytest.CaptureFixture[str]) -> list[str]:
    print_summary(result, RUN)
    return capsys.readouterr().out.splitlines()


def passed() -> AbResult:
    outcomes = {p: ProfileOutcome(p, Outcome.PASSED) for p in RoutingProfile}
    return AbResult(outcomes=outcomes)


def test_the_reports_verdict_is_the_last_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report.md"
    report.write_text("# A/B\n\nverdict: session affinity +20.0% req/s at c16\n\n| table |\n")
    result = passed()
    result.report = report

    lines = closing_lines(result, capsys)

    assert lines[-2:] == [f"report: {report}", "verdict: session affinity +20.0% req/s at c16"]


def test_a_run_without_a_report_ends_inconclusive(capsys: pytest.CaptureFixture[str]) -> None:
    result = passed()
    result.outcomes[RoutingProfile.SESSION_AFFINITY] = ProfileOutcome(
        RoutingProfile.SESSION_AFFINITY, Outcome.FAILED, "lab process exited"
    )

    lines = closing_lines(result, capsys)

    assert lines[-1] == (
        "verdict: inconclusive: the A/B did not finish (continue with --run-id run-7)"
    )


def test_a_failed_report_is_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    result = passed()
    result.report_failure = "the two results share no concurrency level"

    assert closing_lines(result, capsys)[-1] == (
        "verdict: inconclusive: no report (the two results share no concurrency level)"
    )


def test_a_report_that_failed_the_ab_gives_its_own_verdict_last(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report.md"
    broken = "verdict: session affinity's run did not keep videos on one worker (2 of 3 videos)"
    report.write_text(f"# A/B\n\n{broken}\n")
    result = passed()
    result.report_failure, result.refused_report = "session affinity's run did not ...", report

    lines = closing_lines(result, capsys)

    assert lines[-2:] == ["report: failed (session affinity's run did not ...)", broken]
