"""Parsing a real AIPerf 0.13.0 JSON export into typed results."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from components.routing import RoutingProfile
from lab.workload import LAB_WORKLOAD
from stages.core.results import ProfileResults, ResultsError, parse_level, read_level
from stages.core.verdicts import check_level
from tests.stages.support import FIXTURES

FIXTURE_WORKLOAD = LAB_WORKLOAD.model_copy(
    update={
        "videos": 3,
        "questions": 3,
        "output_tokens": 8,
        "concurrencies": (1, 2),
        "prefix_tokens": 300,
    }
)


def test_a_real_export_parses_into_the_level(aiperf_export: dict[str, Any]) -> None:
    level = parse_level(aiperf_export)

    assert level.concurrency == 2
    assert level.requests_per_second == pytest.approx(18.0211, abs=1e-4)
    assert level.ttft_p50_ms == pytest.approx(34.2312, abs=1e-4)
    assert level.ttft_p95_ms == pytest.approx(49.3662, abs=1e-4)
    assert level.request_latency_p50_ms == pytest.approx(55.5654, abs=1e-4)
    assert level.output_tokens_per_second == pytest.approx(144.1689, abs=1e-4)
    assert level.request_count == 9
    assert level.error_count == 0
    assert level.output_tokens_mean == 8
    assert (level.prompt_tokens, level.cached_prompt_tokens) == (2988, 1280)
    assert level.cache_hit_ratio == pytest.approx(1280 / 2988)


def test_the_real_export_keeps_the_workloads_promises(aiperf_export: dict[str, Any]) -> None:
    assert check_level(parse_level(aiperf_export), FIXTURE_WORKLOAD) == []


def test_failed_requests_are_counted_and_break_the_promise(aiperf_export: dict[str, Any]) -> None:
    export = copy.deepcopy(aiperf_export)
    export["error_request_count"] = {"unit": "requests", "avg": 2.0}

    level = parse_level(export)

    assert level.error_count == 2
    assert check_level(level, FIXTURE_WORKLOAD) == ["concurrency 2: 2 requests failed"]


def test_the_failure_says_why_each_kind_of_request_failed(aiperf_export: dict[str, Any]) -> None:
    # The shape AIPerf 0.13.0 exports (`ErrorDetailsCount.model_dump(mode="json")`).
    reset = {"code": None, "type": "ServerDisconnectedError", "message": "Server\n disconnected"}
    export = copy.deepcopy(aiperf_export) | {
        "error_request_count": {"unit": "requests", "avg": 3.0},
        "error_summary": [
            {"error_details": reset | {"cause": None}, "count": 1},
            {
                "error_details": {"code": 503, "type": "Service Unavailable", "message": "x" * 900},
                "count": 2,
            },
        ],
    }

    problems = check_level(parse_level(export), FIXTURE_WORKLOAD)

    assert problems == [
        "concurrency 2: 3 requests failed",
        "  1 x ServerDisconnectedError: Server disconnected",
        "  2 x 503 Service Unavailable: " + "x" * 200,
    ]


def test_a_short_answer_breaks_the_exact_length_promise(aiperf_export: dict[str, Any]) -> None:
    workload = FIXTURE_WORKLOAD.model_copy(update={"output_tokens": 128})

    (problem,) = check_level(parse_level(aiperf_export), workload)

    assert "exactly 128 expected" in problem


def test_a_cancelled_run_is_not_a_result(aiperf_export: dict[str, Any]) -> None:
    with pytest.raises(ResultsError, match="cancelled"):
        parse_level(aiperf_export | {"was_cancelled": True})


def test_a_missing_metric_is_named(aiperf_export: dict[str, Any]) -> None:
    export = {k: v for k, v in aiperf_export.items() if k != "time_to_first_token"}

    with pytest.raises(ResultsError, match="time_to_first_token.p50"):
        parse_level(export)


def test_an_artifact_dir_without_export_says_so(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="AIPerf wrote no"):
        read_level(tmp_path)


def test_profile_results_round_trip_through_json(
    aiperf_export: dict[str, Any], tmp_path: Path
) -> None:
    results = ProfileResults(
        profile=RoutingProfile.SESSION_AFFINITY,
        target="lab",
        graph_name="cosmos3-nano-reasoner-lab-session-affinity",
        workers=4,
        session_header="X-Dynamo-Session-ID",
        workload=FIXTURE_WORKLOAD,
        levels=[parse_level(aiperf_export)],
    )

    loaded = ProfileResults.load(results.save(tmp_path / "results.json"))

    assert loaded == results
    assert json.loads((tmp_path / "results.json").read_text())["profile"] == "session-affinity"
    assert loaded.level(2) == results.levels[0] and loaded.level(16) is None


def test_the_real_round_robin_export_ran_without_a_session_header() -> None:
    export = json.loads((FIXTURES / "aiperf-round-robin-c1.json").read_text())

    level = parse_level(export)

    assert "session_header" not in export["input_config"]["endpoint"]
    assert (level.concurrency, level.request_count, level.cached_prompt_tokens) == (1, 9, 0)
    assert level.cache_hit_ratio == 0.0  # 3 questions per video met 3 different workers


def test_the_real_affinity_export_ran_with_the_session_header(
    aiperf_export: dict[str, Any],
) -> None:
    assert aiperf_export["input_config"]["endpoint"]["session_header"] == "X-Dynamo-Session-ID"
    assert aiperf_export["input_config"]["endpoint"]["extra"] == {
        "ignore_eos": True,
        "min_tokens": 8,
    }
