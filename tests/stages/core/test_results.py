"""Parsing a real AIPerf 0.13.0 JSON export into typed results."""

from __future__ import annotations

import copy
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from components.routing import RoutingProfile
from lab.stage_tools import LAB_WORKLOAD
from stages.core.aiperf_export import AIPERF_EXPORT_FILE, read_level
from stages.core.results import MAX_MEASURE, LevelResult, ProfileResults, ResultsError
from stages.core.verdicts import PodRun, check_level, sweep_results
from stages.errors import StageFailed
from tests.stages.core.support import ROUND_ROBIN
from tests.stages.support import FIXTURES, lab_outputs_for

FIXTURE_WORKLOAD = LAB_WORKLOAD.model_copy(
    update={
        "videos": 3,
        "questions": 3,
        "output_tokens": 8,
        "concurrencies": (1, 2),
        "prefix_tokens": 300,
    }
)


def parse_level(export: Any) -> LevelResult:
    """One level from an export's content, read as the stages read it: from its file."""
    with tempfile.TemporaryDirectory() as artifact_dir:
        (Path(artifact_dir) / AIPERF_EXPORT_FILE).write_text(json.dumps(export))
        return read_level(Path(artifact_dir))


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


@pytest.mark.parametrize(
    ("counts", "named"),
    [
        ([MAX_MEASURE + 1], r"error_summary\[0\]\.count"),
        ([MAX_MEASURE, MAX_MEASURE], "error_count"),
    ],
)
def test_error_counts_past_a_levels_bound_are_refused_naming_the_field(
    aiperf_export: dict[str, Any], counts: list[int], named: str
) -> None:
    """Found by hypothesis: one kind's count past 10**15 ended in a raw pydantic error."""
    kinds = [{"error_details": {"code": 503}, "count": count} for count in counts]

    with pytest.raises(ResultsError, match=named):
        parse_level(aiperf_export | {"error_summary": kinds})


def test_a_missing_metric_is_named(aiperf_export: dict[str, Any]) -> None:
    export = {k: v for k, v in aiperf_export.items() if k != "time_to_first_token"}

    with pytest.raises(ResultsError, match="time_to_first_token: Field required"):
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
        workload=FIXTURE_WORKLOAD.model_copy(update={"concurrencies": (2,)}),
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


# --- checked on the way in (issue 30) -------------------------------------------------------------


def fixture_results() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / "results-session-affinity.json").read_text())
    return data


def changed(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """`data` with the value at a dotted path (`levels.0.ttft_p50_ms`) replaced."""
    data = copy.deepcopy(data)
    *parents, last = path.split(".")
    target: Any = data
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    target[int(last) if isinstance(target, list) else last] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        ("levels.0.requests_per_second", math.nan, "levels[0].requests_per_second"),
        ("levels.1.ttft_p50_ms", math.inf, "levels[1].ttft_p50_ms"),
        ("levels.0.request_latency_p50_ms", -5, "levels[0].request_latency_p50_ms"),
        ("levels.0.output_tokens_per_second", "144", "levels[0].output_tokens_per_second"),
        ("levels.0.request_count", True, "levels[0].request_count"),
        ("levels.0.concurrency", 0, "levels[0].concurrency"),
        ("levels.1.concurrency", 1, "levels[1].concurrency: level 1 appears twice"),
        ("levels.1.concurrency", 4, "levels[1].concurrency: level 4 is not one of"),
        ("levels.0.error_count", 1, "levels[0]: request_count 9 + error_count 1"),
        ("levels.0.cached_prompt_tokens", 9_999, "levels[0]: cached_prompt_tokens (9999)"),
        ("levels.0.cached_prompt_tokens", -6_000, "levels[0].cached_prompt_tokens"),
        ("levels.0.ttft_p95_ms", 1.0, "levels[0]: ttft_p50_ms (31.0927) is above"),
        ("workers", -3, "workers"),
        ("session_header", None, "session_header: a session-affinity result runs with"),
        ("complete", False, "failure: an incomplete sweep"),
        ("conditions", {"chosen_by": "x", "reference_cores": math.nan}, "conditions.reference"),
    ],
)
def test_a_results_file_out_of_range_is_refused_naming_the_field(
    tmp_path: Path, path: str, value: Any, named: str
) -> None:
    results = tmp_path / "results.json"
    results.write_text(json.dumps(changed(fixture_results(), path, value)))

    with pytest.raises(ResultsError) as refused:
        ProfileResults.load(results)

    assert f"results file {results} is not a profile result: " in str(refused.value)
    assert named in str(refused.value)


def test_a_round_robin_result_never_carries_a_session_header(tmp_path: Path) -> None:
    data = json.loads((FIXTURES / "results-round-robin.json").read_text())
    results = tmp_path / "results.json"
    results.write_text(json.dumps(data | {"session_header": "X-Dynamo-Session-ID"}))

    with pytest.raises(ResultsError, match="a round-robin result runs with session header none"):
        ProfileResults.load(results)


def test_a_credential_in_a_refused_field_is_not_shown(tmp_path: Path) -> None:
    planted = "https://ci:Cn7f3a9d2e41b8c6Zq@mirror.example.com/simple"
    results = tmp_path / "results.json"
    results.write_text(json.dumps(fixture_results() | {"session_header": planted}))

    with pytest.raises(ResultsError) as refused:
        ProfileResults.load(results)

    assert "Cn7f3a9d2e41b8c6Zq" not in str(refused.value)
    assert "got a value that holds a credential (not shown)" in str(refused.value)


@pytest.mark.parametrize(
    ("path", "value", "named"),
    [
        ("request_count.avg", math.nan, "request_count.avg: Input should be a finite number"),
        ("request_count.avg", 9.5, "request_count.avg: a count is a whole number, got 9.5"),
        ("request_throughput.avg", -1, "request_throughput.avg: Input should be greater"),
        ("time_to_first_token.p50", "34", "time_to_first_token.p50: Input should be a valid"),
        ("time_to_first_token.p95", 1.0, "time_to_first_token: p50 (34.2312) is above p95"),
        ("total_usage_prompt_cache_read_tokens.avg", 9e9, "is more than total_usage_prompt"),
        ("error_summary", 5, "error_summary: Input should be a valid array"),
        ("error_summary", [{"count": -1}], "error_summary[0].count"),
        ("error_summary", ["boom"], "error_summary[0]: Input should be an object"),
        ("input_config", [], "input_config: Input should be an object"),
        ("input_config.phases", {"kind": "profiling"}, "input_config.phases"),
        ("input_config.phases.0.concurrency", 0, "input_config.phases[0].concurrency"),
        ("input_config.phases.0.kind", "warmup", "input_config: no profiling phase"),
        ("was_cancelled", "no", "was_cancelled: Input should be a valid boolean"),
    ],
)
def test_a_malformed_aiperf_export_is_refused_naming_the_field(
    aiperf_export: dict[str, Any], tmp_path: Path, path: str, value: Any, named: str
) -> None:
    export = tmp_path / "c2" / "aiperf" / "profile_export_aiperf.json"
    export.parent.mkdir(parents=True)
    export.write_text(json.dumps(changed(aiperf_export, path, value)))

    with pytest.raises(ResultsError) as refused:
        read_level(export.parent)

    assert f"{export} is not a usable AIPerf export: " in str(refused.value)
    assert named in str(refused.value)


@pytest.mark.parametrize("content", ["[1, 2]", '"export"', "null", "{", "[" * 100_000])
def test_an_aiperf_export_that_is_no_object_is_refused_naming_the_file(
    tmp_path: Path, content: str
) -> None:
    export = tmp_path / "profile_export_aiperf.json"
    export.write_text(content)

    with pytest.raises(ResultsError, match="is not a usable AIPerf export"):
        read_level(tmp_path)


def test_legal_levels_at_the_edges_are_read(aiperf_export: dict[str, Any]) -> None:
    edges = changed(aiperf_export, "request_throughput.avg", 0)
    edges = changed(edges, "output_token_throughput.avg", MAX_MEASURE)
    edges = changed(edges, "total_usage_prompt_cache_read_tokens.avg", 2988.0)  # all cached
    edges = changed(edges, "error_request_count", {"unit": "requests", "avg": 9.0})

    level = parse_level(edges)

    assert (level.requests_per_second, level.output_tokens_per_second) == (0, MAX_MEASURE)
    assert (level.cache_hit_ratio, level.error_count, level.request_count) == (1.0, 9, 9)


def test_a_credential_in_an_error_message_is_masked_before_it_is_shortened(
    aiperf_export: dict[str, Any],
) -> None:
    url = "https://ci:Cn7f3a9d2e41b8c6Zq@mirror.example.com/" + "x" * 300
    kind = {"error_details": {"code": 401, "type": "Unauthorized", "message": url}, "count": 1}

    level = parse_level(aiperf_export | {"error_summary": [kind]})

    masked = "https://<secret>@mirror.example.com/" + "x" * 300
    assert level.error_kinds == [f"1 x 401 Unauthorized: {masked[:200]}"]


def test_a_complete_sweep_without_one_of_its_levels_is_refused_naming_it() -> None:
    one_level = ROUND_ROBIN.model_dump(mode="json") | {
        "levels": [ROUND_ROBIN.levels[0].model_dump()]
    }

    with pytest.raises(ValidationError, match="complete: true.* it lacks c16"):
        ProfileResults.model_validate(one_level)
    stopped = one_level | {"complete": False, "failure": "AIPerf failed at c16"}
    assert ProfileResults.model_validate(stopped).levels == ROUND_ROBIN.levels[:1]


def test_a_sweep_that_finished_no_level_leaves_no_earlier_runs_results(tmp_path: Path) -> None:
    out_dir = tmp_path / "perf"
    earlier = ProfileResults.load(FIXTURES / "results-round-robin.json")
    earlier.save(out_dir / "results.json")  # the last run's in the same --out
    failed = PodRun("the perf program", succeeded=False, log="", failure="exit status 1")

    with pytest.raises(StageFailed, match="exit status 1"):
        outputs = lab_outputs_for(RoutingProfile.ROUND_ROBIN)
        sweep_results(outputs, earlier.workload, failed, out_dir, out_dir / "program.log")

    assert not (out_dir / "results.json").exists()
