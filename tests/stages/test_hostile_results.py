"""`python -m stages report` and `perf` against hostile results (issue 30, family "results").

Results files and AIPerf exports out of range or of the wrong type (NaN, Infinity, negative or
absurd numbers, more requests than a level sends, levels twice, a header that is not the
profile's, a missing field, a part of the wrong shape) end with the command's documented status
and a message naming the file and the field: `report --results` 2 (bad input, nothing written),
`report` from the archive and `perf` 1 (the stage failed), never a traceback, never a verdict.
Legal results at the edges (0 errors, every request failed, one level, the largest numbers) still
make a report, and text from input (graph names, why a sweep stopped, who chose a time scale) is
escaped in `report.md`, with a planted credential never written. Cases are counted through
`tests/tally.py` under the families `results: ...`.
"""

from __future__ import annotations

import functools
import json
import math
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.config_rules import MAX_WORKER_REPLICAS
from components.routing import SESSION_HEADER, RoutingProfile
from stages import cli
from stages.cluster import run as cluster
from stages.core.markdown import markdown_text
from stages.core.results import MAX_MEASURE
from stages.incluster.log_exports import Export, export_lines
from tests.stages.cluster.fakes import FakeCluster, cluster_outputs, succeeded
from tests.stages.support import FIXTURES
from tests.support import LOCAL_TOOLS as LOCAL
from tests.tally import flag, run_command

# Hundreds of generated cases, each a whole command (the legal ones draw a chart): a minute or two.
pytestmark = pytest.mark.slow

PROPERTIES = settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
REPORTS = settings(PROPERTIES, max_examples=30)
"""Cases that get as far as a report and its chart (about a second each, more on a busy host;
pytest-timeout allows a test 120 s)."""

Data = dict[str, Any]
Mutation = tuple[Callable[[Data], None], list[str]]
"""A change to a parsed file, and what the refusal must name."""


def stages_main(argv: list[str]) -> int:
    return cli.main(argv, local=LOCAL)


def fixture(name: str) -> Data:
    data: Data = json.loads((FIXTURES / name).read_text())
    return data


def setter(path: tuple[str | int, ...], value: Any) -> Callable[[Data], None]:
    def change(data: Data) -> None:
        target: Any = data
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value

    return change


def remover(path: tuple[str | int, ...]) -> Callable[[Data], None]:
    def change(data: Data) -> None:
        target: Any = data
        for part in path[:-1]:
            target = target[part]
        del target[path[-1]]

    return change


def field_path(path: tuple[str | int, ...]) -> str:
    """`levels[1].ttft_p50_ms`, as a refusal names it."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).removeprefix(".")


# --- hostile values ------------------------------------------------------------------------------

NOT_FINITE = st.sampled_from([math.nan, math.inf, -math.inf])
NEGATIVE = st.floats(max_value=-1e-9, allow_nan=False, allow_infinity=False) | st.integers(
    max_value=-1
)
TOO_LARGE = st.floats(min_value=MAX_MEASURE * 1.01, allow_nan=False, allow_infinity=False) | (
    st.integers(min_value=MAX_MEASURE + 1, max_value=10**400)
)
NOT_A_NUMBER = st.sampled_from(["9", "", "nan", True, False, [], {}, [1], {"avg": 1}])
BAD_AMOUNT = NOT_FINITE | NEGATIVE | TOO_LARGE | NOT_A_NUMBER
"""Never a rate, a duration or a mean."""
FRACTION = st.floats(min_value=0.01, max_value=1e6).filter(lambda x: not x.is_integer())
BAD_COUNT = BAD_AMOUNT | FRACTION
"""Never a count of requests or tokens."""
BAD_OBJECT = st.sampled_from([1, "x", [], [1, 2], True])
"""Never a JSON object."""
BAD_LIST = st.sampled_from([1, "x", {}, {"kind": "profiling"}, True])
"""Never a JSON array."""


# --- results files -------------------------------------------------------------------------------

AMOUNTS = (
    "requests_per_second",
    "ttft_p50_ms",
    "ttft_p95_ms",
    "request_latency_p50_ms",
    "output_tokens_per_second",
    "output_tokens_mean",
)
COUNTS = ("request_count", "error_count", "prompt_tokens", "cached_prompt_tokens")
REQUIRED = ("profile", "target", "graph_name", "workers", "session_header", "workload", "levels")


def _level_amount(draw: st.DrawFn, data: Data, index: int) -> Mutation:
    name = draw(st.sampled_from((*AMOUNTS, "request_latency_mean_ms")))
    return setter(("levels", index, name), draw(BAD_AMOUNT)), [f"levels[{index}].{name}"]


def _level_count(draw: st.DrawFn, data: Data, index: int) -> Mutation:
    name = draw(st.sampled_from(COUNTS))
    return setter(("levels", index, name), draw(BAD_COUNT)), [f"levels[{index}].{name}"]


def _level_missing(draw: st.DrawFn, data: Data, index: int) -> Mutation:
    name = draw(st.sampled_from(AMOUNTS + COUNTS))
    return remover(("levels", index, name)), [f"levels[{index}].{name}: Field required"]


def _concurrency_not_positive(draw: st.DrawFn, data: Data, index: int) -> Mutation:
    value = draw(st.integers(max_value=0) | FRACTION | NOT_A_NUMBER)
    return setter(("levels", index, "concurrency"), value), [f"levels[{index}].concurrency"]


def _concurrency_twice(draw: st.DrawFn, data: Data, index: int) -> Mutation:
    first = data["levels"][0]["concurrency"]
    return setter(("levels", 1, "concurrency"), first), [
        f"levels[1].concurrency: level {first} appears twice"
    ]


def _concurrency_not_in_workload(draw: st.DrawFn, data: Data, index: int) -> Mutation:
    value = draw(st.integers(1, 10**6).filter(lambda c: c not in data["workload"]["concurrencies"]))
    return setter(("levels", index, "concurrency"), value), [
        f"levels[{index}].concurrency: level {value} is not one of the workload's concurrencies"
    ]


def _more_requests_than_sent(draw: st.DrawFn, data: Data, index: int) -> Mutation:
    sent = data["workload"]["videos"] * data["workload"]["questions"]
    completed = draw(st.integers(0, sent))
    failed = sent - completed + draw(st.integers(1, 10**6))
    change = setter(
        ("levels", index),
        data["levels"][index] | {"request_count": completed, "error_count": failed},
    )
    return change, [f"levels[{index}]: request_count {completed} + error_count {failed}"]


def _more_cached_than_prompt(draw: st.DrawFn, data: Data, index: int) -> Mutation:
    cached = data["levels"][index]["prompt_tokens"] + draw(st.integers(1, 10**6))
    return setter(("levels", index, "cached_prompt_tokens"), cached), [
        f"levels[{index}]: cached_prompt_tokens ({cached}) is more than prompt_tokens"
    ]


def _p95_below_p50(draw: st.DrawFn, data: Data, index: int) -> Mutation:
    p95 = draw(st.floats(0, data["levels"][index]["ttft_p50_ms"], exclude_max=True))
    return setter(("levels", index, "ttft_p95_ms"), p95), [f"levels[{index}]: ttft_p50_ms"]


def _workers(draw: st.DrawFn, data: Data, index: int) -> Mutation:
    absurd = st.integers(max_value=0) | st.integers(min_value=MAX_WORKER_REPLICAS + 1)
    return setter(("workers",), draw(absurd | FRACTION | NOT_A_NUMBER | st.none())), ["workers"]


def _header_not_the_profiles(draw: st.DrawFn, data: Data, index: int) -> Mutation:
    if data["profile"] == RoutingProfile.SESSION_AFFINITY:
        others = st.sampled_from([None, "x-dynamo-session-id", f"{SESSION_HEADER}\n", "X-Session"])
        header = draw(others | st.text(max_size=40).filter(lambda h: h != SESSION_HEADER))
    else:
        header = draw(st.text(max_size=40))
    return setter(("session_header",), header), [
        f"session_header: a {data['profile']} result runs with session header"
    ]


def _top_level(draw: st.DrawFn, data: Data, index: int) -> Mutation:
    name, values = draw(
        st.sampled_from(
            [
                ("profile", st.text(max_size=20).filter(lambda t: t not in set(RoutingProfile))),
                ("target", st.text(max_size=20).filter(lambda t: t not in {"cluster", "lab"})),
                ("graph_name", st.sampled_from(["", "g" * 254, 7, None, ["g"]])),
                ("levels", st.sampled_from([[], {}, "levels", None, [1]])),
                ("workload", BAD_OBJECT | st.none()),
                ("complete", st.sampled_from(["yes", None, [], 2])),
            ]
        )
    )
    return setter((name,), draw(values)), [name]


def _incomplete_without_failure(draw: st.DrawFn, data: Data, index: int) -> Mutation:
    return setter(("complete",), False), ["failure: an incomplete sweep"]


def _workload(draw: st.DrawFn, data: Data, index: int) -> Mutation:
    name = draw(st.sampled_from(["videos", "questions", "output_tokens"]))
    return setter(("workload", name), draw(st.integers(max_value=0))), [f"workload.{name}"]


def _conditions(draw: st.DrawFn, data: Data, index: int) -> Mutation:
    scale = draw(NOT_FINITE | NEGATIVE | st.just(0))
    conditions = {"time_scale": scale, "chosen_by": "the host probe", "reference_cores": 2.0}
    return setter(("conditions",), conditions), ["conditions.time_scale"]


def _missing(draw: st.DrawFn, data: Data, index: int) -> Mutation:
    name = draw(st.sampled_from(REQUIRED))
    return remover((name,)), [f"{name}: Field required"]


RESULTS_MUTATIONS = [
    _level_amount,
    _level_count,
    _level_missing,
    _concurrency_not_positive,
    _concurrency_twice,
    _concurrency_not_in_workload,
    _more_requests_than_sent,
    _more_cached_than_prompt,
    _p95_below_p50,
    _workers,
    _header_not_the_profiles,
    _top_level,
    _incomplete_without_failure,
    _workload,
    _conditions,
    _missing,
]


@st.composite
def hostile_results(draw: st.DrawFn) -> tuple[RoutingProfile, Data, list[str]]:
    """A fixture result of either profile with one thing wrong, and what its refusal names."""
    profile = draw(st.sampled_from(list(RoutingProfile)))
    data = fixture(f"results-{profile.value}.json")
    index = draw(st.sampled_from(range(len(data["levels"]))))
    change, named = draw(st.sampled_from(RESULTS_MUTATIONS))(draw, data, index)
    change(data)
    return profile, data, named


def report_of(tmp: Path, profile: RoutingProfile, data: Data) -> tuple[Path, list[str]]:
    """`data` as one profile's results.json beside the other's fixture: the file and `report`'s
    command line."""
    path = tmp / "results.json"
    path.write_text(json.dumps(data))
    other = FIXTURES / f"results-{next(p for p in RoutingProfile if p != profile).value}.json"
    results = (
        [str(path), str(other)]
        if profile is RoutingProfile.ROUND_ROBIN
        else [str(other), str(path)]
    )
    return path, ["report", "--results", *results, "--out", str(tmp / "report")]


@PROPERTIES
@given(case=hostile_results())
def test_a_results_file_out_of_range_is_refused_naming_the_field(
    tmp_path_factory: pytest.TempPathFactory, case: tuple[RoutingProfile, Data, list[str]]
) -> None:
    profile, data, named = case
    tmp = tmp_path_factory.mktemp("results")
    path, argv = report_of(tmp, profile, data)

    status, out, err = run_command("results: results files", stages_main, argv)

    assert status == 2, (status, err)
    assert f"--results: results file {path} is not a profile result: " in err
    assert all(name in err for name in named), (named, err)
    assert "verdict" not in out and not (tmp / "report" / "report.md").exists()


# --- AIPerf exports ------------------------------------------------------------------------------

EXPORT_FILE = "profile_export_aiperf.json"
DISTRIBUTIONS = ("time_to_first_token", "request_latency")
AVERAGES = ("request_throughput", "output_token_throughput", "output_sequence_length")
COUNTERS = ("request_count",)
OPTIONAL_COUNTERS = (
    "total_usage_prompt_tokens",
    "total_usage_prompt_cache_read_tokens",
    "error_request_count",
)
REQUIRED_METRICS = DISTRIBUTIONS + AVERAGES + COUNTERS


def _metric_value(draw: st.DrawFn, export: Data) -> Mutation:
    metric = draw(st.sampled_from(REQUIRED_METRICS + OPTIONAL_COUNTERS))
    stat = draw(st.sampled_from(["avg", "p50", "p95"])) if metric in DISTRIBUTIONS else "avg"
    counter = metric in COUNTERS + OPTIONAL_COUNTERS
    value = draw(BAD_COUNT if counter else BAD_AMOUNT | st.none())
    base = export.get(metric, {"unit": "requests"})
    return setter((metric,), base | {stat: value}), [f"{metric}.{stat}"]


def _metric_shape(draw: st.DrawFn, export: Data) -> Mutation:
    metric = draw(st.sampled_from(REQUIRED_METRICS + OPTIONAL_COUNTERS))
    value = draw(BAD_OBJECT | (st.none() if metric in REQUIRED_METRICS else BAD_OBJECT))
    return setter((metric,), value), [metric]


def _metric_missing(draw: st.DrawFn, export: Data) -> Mutation:
    metric = draw(st.sampled_from(REQUIRED_METRICS))
    return remover((metric,)), [f"{metric}: Field required"]


def _percentiles_crossed(draw: st.DrawFn, export: Data) -> Mutation:
    metric = draw(st.sampled_from(DISTRIBUTIONS))
    p95 = draw(st.floats(0, export[metric]["p50"], exclude_max=True))
    return setter((metric, "p95"), p95), [f"{metric}: p50", "is above p95"]


def _cache_above_prompt(draw: st.DrawFn, export: Data) -> Mutation:
    prompt = export["total_usage_prompt_tokens"]["avg"]
    cached = prompt + draw(st.integers(1, 10**6))
    return setter(("total_usage_prompt_cache_read_tokens", "avg"), cached), [
        "total_usage_prompt_cache_read_tokens.avg",
        "is more than total_usage_prompt_tokens.avg",
    ]


def _error_summary(draw: st.DrawFn, export: Data) -> Mutation:
    kind = {"error_details": {"code": 503, "type": "Service Unavailable"}, "count": 1}
    name, value = draw(
        st.sampled_from(
            [
                ("error_summary", st.sampled_from([1, "x", {}, True])),
                ("error_summary[0]", BAD_OBJECT.map(lambda bad: [bad])),
                ("error_summary[0].count", BAD_COUNT.map(lambda bad: [kind | {"count": bad}])),
                (
                    "error_summary[0].error_details",
                    BAD_OBJECT.map(lambda b: [kind | {"error_details": b}]),
                ),
                (
                    "error_summary[0].error_details.code",
                    st.sampled_from(["503", 5.5, True, []]).map(
                        lambda bad: [kind | {"error_details": {"code": bad}}]
                    ),
                ),
            ]
        )
    )
    return setter(("error_summary",), draw(value)), [name]


def _input_config(draw: st.DrawFn, export: Data) -> Mutation:
    phase = export["input_config"]["phases"][0]
    name, value = draw(
        st.sampled_from(
            [
                ("input_config", BAD_OBJECT | st.none()),
                ("input_config.phases", BAD_LIST.map(lambda bad: {"phases": bad})),
                (
                    "input_config.phases[0].concurrency",
                    (st.integers(max_value=0) | FRACTION | NOT_A_NUMBER).map(
                        lambda bad: {"phases": [phase | {"concurrency": bad}]}
                    ),
                ),
                (
                    "input_config: no profiling phase",
                    st.sampled_from(
                        [[], [phase | {"kind": "warmup"}], [{"kind": "profiling"}]]
                    ).map(lambda phases: {"phases": phases}),
                ),
            ]
        )
    )
    return setter(("input_config",), draw(value)), [name]


def _cancelled(draw: st.DrawFn, export: Data) -> Mutation:
    value: object = draw(st.sampled_from([True, "yes", 1, None, []]))
    return setter(("was_cancelled",), value), ["cancelled" if value is True else "was_cancelled"]


def _export_more_requests_than_sent(draw: st.DrawFn, export: Data) -> Mutation:
    completed = float(export["request_count"]["avg"] + draw(st.integers(1, 10**6)))
    return setter(("request_count", "avg"), completed), ["levels[0]: request_count"]


EXPORT_MUTATIONS = [
    _metric_value,
    _metric_shape,
    _metric_missing,
    _percentiles_crossed,
    _cache_above_prompt,
    _error_summary,
    _input_config,
    _cancelled,
    _export_more_requests_than_sent,
]
WHOLE_FILES = [b"[1, 2]", b'"export"', b"null", b"1e400", b"{", b"", b"[" * 5000, b"\xff\xfe{}"]
"""Exports that are not a JSON object at all: the refusal can only name the file."""


@st.composite
def hostile_exports(draw: st.DrawFn) -> tuple[bytes, list[str]]:
    """The real export of concurrency 2 with one thing wrong, and what its refusal names."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from(WHOLE_FILES)), []
    export = fixture("aiperf-session-affinity-c2.json")
    change, named = draw(st.sampled_from(EXPORT_MUTATIONS))(draw, export)
    change(export)
    return json.dumps(export).encode(), named


PERF_WORKLOAD = ["--videos", "3", "--questions", "3", "--output-tokens", "8", "--concurrency", "2"]
"""The workload the real export ran."""


def perf_with_export(tmp: Path, export: bytes) -> tuple[int, str, str]:
    """`perf` on a cluster whose pod's log carries `export` as the level's AIPerf export."""
    outputs = tmp / "outputs.json"
    outputs.write_text(json.dumps(cluster_outputs(RoutingProfile.SESSION_AFFINITY).to_json_dict()))
    log = [*export_lines(Export(2, EXPORT_FILE, export)), "Perf sweep finished: 1 levels"]
    fake = FakeCluster([succeeded("\n".join(log) + "\n")])
    argv = ["perf", "--outputs", str(outputs), "--out", str(tmp / "perf"), *PERF_WORKLOAD]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cluster, "connect", lambda outputs, options: fake)
        return run_command("results: AIPerf exports", stages_main, argv)


@PROPERTIES
@given(case=hostile_exports())
def test_a_malformed_aiperf_export_fails_perf_naming_the_field(
    tmp_path_factory: pytest.TempPathFactory, case: tuple[bytes, list[str]]
) -> None:
    export, named = case
    tmp = tmp_path_factory.mktemp("export")

    status, out, err = perf_with_export(tmp, export)

    assert status == 1, (status, err)
    where = tmp / "perf" / "c2" / "aiperf" / EXPORT_FILE  # an export, or the sweep of them
    assert str(where) in err or f"export: {tmp / 'perf'}/c<N>/aiperf/" in err, err
    assert all(name in err for name in named), (named, err)
    assert "perf results:" not in out and not (tmp / "perf" / "results.json").exists()


# --- legal results at the edges ------------------------------------------------------------------

MEASURE = st.floats(0, MAX_MEASURE) | st.sampled_from([0.0, float(MAX_MEASURE), 1e-300])
WORKLOAD = fixture("results-round-robin.json")["workload"]
SENT = WORKLOAD["videos"] * WORKLOAD["questions"]


@st.composite
def legal_level(draw: st.DrawFn, concurrency: int) -> Data:
    """A level anywhere in range: from nothing completed to every request failed, 0 to the
    largest numbers, no cache hit to every prompt token cached."""
    completed = draw(st.integers(0, SENT) | st.sampled_from([0, SENT]))
    failed = draw(st.integers(0, SENT - completed) | st.sampled_from([0, SENT - completed]))
    prompt = draw(st.integers(0, MAX_MEASURE) | st.sampled_from([0, MAX_MEASURE]))
    p50, p95 = sorted([draw(MEASURE), draw(MEASURE)])
    return {
        "concurrency": concurrency,
        "requests_per_second": draw(MEASURE),
        "ttft_p50_ms": p50,
        "ttft_p95_ms": p95,
        "request_latency_p50_ms": draw(MEASURE),
        "request_latency_mean_ms": draw(st.none() | MEASURE),
        "output_tokens_per_second": draw(MEASURE),
        "request_count": completed,
        "error_count": failed,
        "output_tokens_mean": draw(MEASURE),
        "prompt_tokens": prompt,
        "cached_prompt_tokens": draw(st.integers(0, prompt) | st.sampled_from([0, prompt])),
    }


@st.composite
def legal_results(draw: st.DrawFn, profile: RoutingProfile, shared: list[int]) -> Data:
    incomplete = draw(st.booleans())
    extra = draw(st.sets(st.sampled_from(WORKLOAD["concurrencies"])))
    finished = set(shared) | extra if incomplete else set(WORKLOAD["concurrencies"])
    levels = draw(st.permutations(sorted(finished)))  # a complete sweep has every level
    return {
        "profile": profile.value,
        "target": draw(st.sampled_from(["cluster", "lab"])),
        "graph_name": draw(st.text(min_size=1, max_size=253)),
        "workers": draw(
            st.integers(1, MAX_WORKER_REPLICAS) | st.sampled_from([1, MAX_WORKER_REPLICAS])
        ),
        "session_header": SESSION_HEADER if profile is RoutingProfile.SESSION_AFFINITY else None,
        "workload": WORKLOAD,
        "levels": [draw(legal_level(c)) for c in levels],
        "complete": not incomplete,
        "failure": draw(st.text(min_size=1, max_size=200)) if incomplete else None,
    }


@st.composite
def legal_pairs(draw: st.DrawFn) -> tuple[Data, Data]:
    shared = draw(st.lists(st.sampled_from(WORKLOAD["concurrencies"]), min_size=1, unique=True))
    return (
        draw(legal_results(RoutingProfile.ROUND_ROBIN, shared)),
        draw(legal_results(RoutingProfile.SESSION_AFFINITY, shared)),
    )


@REPORTS
@given(pair=legal_pairs())
def test_legal_results_at_the_edges_are_still_reported(
    tmp_path_factory: pytest.TempPathFactory, pair: tuple[Data, Data]
) -> None:
    tmp = tmp_path_factory.mktemp("legal")
    paths = [tmp / "rr.json", tmp / "aff.json"]
    for path, data in zip(paths, pair, strict=True):
        path.write_text(json.dumps(data))
    argv = ["report", "--results", *map(str, paths), "--out", str(tmp / "report")]

    status, out, err = run_command("results: legal edges", stages_main, argv)

    assert status == 0, err
    assert (tmp / "report" / "report.md").read_text().startswith("# A/B")
    verdict = next(line for line in out.splitlines() if line.startswith("verdict: "))
    failed = any(lvl["error_count"] for data in pair for lvl in data["levels"])
    stopped = not all(data["complete"] for data in pair)
    if failed or stopped:
        assert verdict.startswith("verdict: inconclusive: ")


# --- text from input in report.md ----------------------------------------------------------------

CANARY = "Cn7f3a9d2e41b8c6Zq"
HOSTILE_TEXT = st.lists(
    st.sampled_from(
        [
            "<img src=x onerror=alert(1)>",
            "<script>alert(1)</script>",
            "](javascript:alert(1))",
            "[click](https://evil.example/)",
            "![x](https://evil.example/x.png)",
            "| col | col |",
            "`code`",
            "```",
            "\n# heading\n",
            "\r\n- item",
            "\n1. item",
            "*bold* _em_ ~~gone~~",
            "&lt;b&gt;",
            "\\",
            "\u202e\u2028\x00\x1b[31m",
            f"https://ci:{CANARY}@mirror.example.com/simple",
            f"nvapi-{CANARY}{CANARY}",
        ]
    )
    | st.text(max_size=20),
    min_size=1,
    max_size=6,
).map(" ".join)
"""Pieces of Markdown, HTML, control characters and credentials, apart: the masker finds a URL
only at a word's start (`0https://user:password@host` is not masked, by it or on stdout)."""


def with_text(data: Data, graph_name: str, failure: str, chosen_by: str) -> Data:
    """`data` (a fixture result) carrying input text wherever the report writes some."""
    conditions = {"time_scale": 1.0, "chosen_by": chosen_by, "reference_cores": 2.0}
    return data | {
        "graph_name": graph_name[:253] or "g",
        "complete": False,
        "failure": failure or "f",
        "conditions": conditions,
    }


def results_files(folder: Path, graph_name: str, failure: str, chosen_by: str) -> list[str]:
    """Both fixture results carrying the three texts, as files in `folder`."""
    paths = []
    for profile in RoutingProfile:
        data = fixture(f"results-{profile.value}.json")
        path = folder / f"{profile.value}.json"
        path.write_text(json.dumps(with_text(data, graph_name, failure, chosen_by)))
        paths.append(str(path))
    return paths


@functools.cache
def plain_report() -> str:
    """report.md of the same results with plain texts: the shape a hostile one must keep."""
    with tempfile.TemporaryDirectory() as folder:
        argv = ["report", "--results", *results_files(Path(folder), "graph", "stopped", "probe")]
        assert stages_main([*argv, "--out", f"{folder}/r"]) == 0
        return (Path(folder) / "r" / "report.md").read_text()


def unescaped_pipes(markdown: str) -> list[int]:
    """Column separators of each table row: the report's table shapes."""
    rows = [line for line in markdown.splitlines() if line.startswith("| ")]
    return [len(re.findall(r"(?<!\\)\|", row)) for row in rows]


@REPORTS
@given(texts=st.tuples(HOSTILE_TEXT, HOSTILE_TEXT, HOSTILE_TEXT))
def test_text_from_the_results_is_written_escaped_and_masked(
    tmp_path_factory: pytest.TempPathFactory, texts: tuple[str, str, str]
) -> None:
    tmp = tmp_path_factory.mktemp("markdown")
    argv = ["report", "--results", *results_files(tmp, *texts), "--out", str(tmp / "report")]
    expected = plain_report()

    status, out, err = run_command("results: Markdown", stages_main, argv)

    markdown = (tmp / "report" / "report.md").read_text()
    leaks = sum(CANARY in text for text in (out, err, markdown))
    flag("results: Markdown", "secret", leaks)
    assert status == 0, err
    assert leaks == 0
    assert len(markdown.splitlines()) == len(expected.splitlines())
    assert markdown.count("<") == expected.count("<") and markdown.count(">") == expected.count(">")
    assert unescaped_pipes(markdown) == unescaped_pipes(expected)
    for text in texts:
        assert markdown_text(text[:253] or "g") in markdown


# --- results pulled from the archive -------------------------------------------------------------

ARCHIVED = {
    "NaN throughput": (
        ("levels", 0, "requests_per_second"),
        math.nan,
        "levels[0].requests_per_second",
    ),
    "negative latency": (("levels", 1, "ttft_p95_ms"), -1, "levels[1].ttft_p95_ms"),
    "no workers": (("workers",), 0, "workers"),
    "more errors than sent": (("levels", 0, "error_count"), 10**6, "levels[0]: request_count"),
    "header of the other profile": (("session_header",), "X-Dynamo-Session-ID", "session_header"),
}


def push(tmp: Path, archive: Path, profile: RoutingProfile, data: Data) -> None:
    """`archive push --stage perf` of a folder holding `data` as results.json."""
    folder = tmp / profile.value
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps(data))
    outputs = tmp / f"outputs-{profile.value}.json"
    outputs.write_text(json.dumps(cluster_outputs(profile).to_json_dict()))
    argv = ["archive", "push", "--stack", profile.value, "--outputs", str(outputs)]
    argv += ["--stage", "perf", "--dir", str(folder), "--bucket", "lab"]
    assert stages_main([*argv, "--endpoint-url", f"file://{archive}"]) == 0


@pytest.mark.parametrize("case", sorted(ARCHIVED))
def test_an_archived_result_out_of_range_fails_the_report_naming_the_field(
    tmp_path: Path, case: str
) -> None:
    path, value, named = ARCHIVED[case]
    archive = tmp_path / "archive"
    hostile = fixture("results-round-robin.json")
    setter(path, value)(hostile)
    push(tmp_path, archive, RoutingProfile.ROUND_ROBIN, hostile)
    push(
        tmp_path, archive, RoutingProfile.SESSION_AFFINITY, fixture("results-session-affinity.json")
    )
    argv = ["report", "--archive-bucket", "lab", "--archive-endpoint", f"file://{archive}"]
    argv += ["--stacks", "round-robin", "session-affinity", "--out", str(tmp_path / "report")]

    status, out, err = run_command("results: archived", stages_main, argv)

    assert status == 1, err
    assert "holds no usable results.json" in err and "is not a profile result: " in err
    assert named in err
    assert "verdict" not in out and not (tmp_path / "report" / "report.md").exists()
