"""The routing probe (issue 31): the smoke program's probe against a stand-in frontend, how a
response names its worker, the probe's validation, the A/B's check of its mechanism (99% of
affinity's videos on one worker, or no gain is reported) and the report's routing section."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import ValidationError

from components.routing import SESSION_HEADER, RoutingProfile
from stages.core.ab_verdict import ABPair, ReportError, mechanism_failure, verdict_line
from stages.core.pod_plans import PROBE_MAX_TOKENS, PodPlace, smoke_pod_config
from stages.core.report import ROUTING_CHART_FILE, write_report
from stages.core.results import ProfileResults
from stages.core.routing_probe import MAX_PROBE_VIDEOS, RoutingProbe, routing_section
from stages.core.verdicts import PodRun, smoke_verdict
from stages.errors import StageFailed
from stages.incluster.smoke_pod import ROUTING_PROBE, probe_routing, worker_of
from tests.stages.core.support import AFFINITY, ROUND_ROBIN
from tests.stages.support import lab_outputs_for, observed_probe
from tests.support import StandInHandler, stand_in_server

WORKERS = 4


class _Frontend(StandInHandler):
    """Dynamo's frontend as the probe sees it: round robin over 4 workers, a session (the
    `X-Dynamo-Session-ID` header) pinned to the worker its first request reached, and the worker
    in `nvext.worker_id.decode_worker_id` when asked for (unless `with_nvext` is off)."""

    with_nvext: ClassVar[bool] = True
    requests: ClassVar[list[tuple[dict[str, str], dict[str, Any]]]] = []
    counter: ClassVar[list[int]] = [0]
    pinned: ClassVar[dict[str, int]] = {}

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Frontend.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
        session = self.headers.get(SESSION_HEADER)
        worker = self.counter[0] % WORKERS
        self.counter[0] += 1
        if session is not None:
            worker = self.pinned.setdefault(session, worker)
        reply: dict[str, Any] = {"choices": [{"message": {"content": "hi"}}]}
        if self.with_nvext and "worker_id" in body.get("nvext", {}).get("extra_fields", []):
            reply["nvext"] = {"worker_id": {"decode_worker_id": 4925587171139913851 + worker}}
        self.send_json(reply)


@pytest.fixture
def frontend() -> Iterator[str]:
    _Frontend.requests.clear()
    _Frontend.pinned.clear()
    _Frontend.counter[0] = 0
    _Frontend.with_nvext = True
    with stand_in_server(_Frontend) as port:
        yield f"http://127.0.0.1:{port}/v1/chat/completions"


def probe_config(header: str | None, videos: int = 12, questions: int = 3) -> dict[str, Any]:
    return {
        "model": "tiny-llama",
        "videos": videos,
        "questions": questions,
        "max_tokens": PROBE_MAX_TOKENS,
        "session_header": header,
    }


def test_the_smoke_config_carries_the_profiles_session_header() -> None:
    place = PodPlace(work_dir="/w", listen_host="127.0.0.1")
    for profile, header in (
        (RoutingProfile.ROUND_ROBIN, None),
        (RoutingProfile.SESSION_AFFINITY, SESSION_HEADER),
    ):
        config = smoke_pod_config(lab_outputs_for(profile), "http://m", place, 60)
        assert config["routing_probe"] == probe_config(header)


@pytest.mark.parametrize(
    ("reply", "worker"),
    [
        (
            {"nvext": {"worker_id": {"decode_worker_id": 4925587171139913851}}},
            "4925587171139913851",
        ),
        ({"nvext": {"worker_id": {"decode_worker_id": "w-7"}}}, "w-7"),
        ({"nvext": {"worker_id": {"prefill_worker_id": 3}}}, None),
        ({"nvext": {"worker_id": {"decode_worker_id": True}}}, None),
        ({"nvext": {"worker_id": {"decode_worker_id": ""}}}, None),
        ({"nvext": {"timing": {}}}, None),
        ({"nvext": "dropped"}, None),
        ({"choices": []}, None),
    ],
)
def test_a_response_names_its_worker_or_none(reply: dict[str, Any], worker: str | None) -> None:
    assert worker_of(reply) == worker


def test_with_the_header_each_video_stays_on_one_worker(frontend: str) -> None:
    result = probe_routing(frontend, probe_config(SESSION_HEADER), 10)

    probe = RoutingProbe.model_validate(result)
    assert probe.observable and probe.kept_share == 1.0 and probe.spread_videos == 0
    assert sum(probe.requests_per_worker().values()) == 36
    sessions = [headers.get(SESSION_HEADER.lower()) for headers, _ in _Frontend.requests]
    assert len(set(sessions)) == 12 and all(sessions)  # one session per video, all sent
    assert sessions[0] == sessions[2] != sessions[3]
    body = _Frontend.requests[0][1]
    assert body["nvext"] == {"extra_fields": ["worker_id"]} and body["max_tokens"] == 1


def test_without_the_header_the_videos_spread_and_the_check_fails(frontend: str) -> None:
    # The header dropped on the way: the affinity profile's probe, sent without its header.
    result = probe_routing(frontend, probe_config(None), 10) | {"session_header": SESSION_HEADER}

    probe = RoutingProbe.model_validate(result)
    assert probe.spread_videos == 12 and probe.workers_per_video() == [3] * 12
    assert not any(SESSION_HEADER.lower() in headers for headers, _ in _Frontend.requests)
    affinity = AFFINITY.model_copy(update={"routing": probe})
    assert mechanism_failure(ABPair.of(ROUND_ROBIN, affinity)) == (
        "session affinity's run did not keep videos on one worker (12 of 12 videos reached "
        "several workers): the session header did not reach the router"
    )


def test_a_frontend_that_drops_nvext_is_unobservable(frontend: str) -> None:
    _Frontend.with_nvext = False

    probe = RoutingProbe.model_validate(probe_routing(frontend, probe_config(None, 2, 2), 10))

    assert not probe.observable and probe.workers == []
    assert "not observable" in probe.summary()


def a_probe(workers: list[list[str | int]], header: str | None = SESSION_HEADER) -> RoutingProbe:
    return observed_probe(workers, header)


def with_routing(kept: int, spread: int) -> ABPair:
    workers: list[list[str | int]] = [["a", "a" if i < kept else "b"] for i in range(kept + spread)]
    probe = a_probe(workers)
    return ABPair.of(ROUND_ROBIN, AFFINITY.model_copy(update={"routing": probe}))


def test_99_percent_of_videos_on_one_worker_pass_and_98_fail() -> None:
    assert mechanism_failure(with_routing(kept=99, spread=1)) is None
    assert verdict_line(with_routing(99, 1)).startswith("verdict: session affinity +76.2% req/s")

    failure = mechanism_failure(with_routing(kept=98, spread=2))
    assert failure is not None and "(2 of 100 videos reached several workers)" in failure
    assert verdict_line(with_routing(98, 2)) == f"verdict: {failure}"  # no gain reported


def test_an_unobservable_or_missing_probe_checks_nothing() -> None:
    unseen = RoutingProbe(videos=12, questions=3, session_header=SESSION_HEADER, observable=False)
    pair = ABPair.of(ROUND_ROBIN, AFFINITY.model_copy(update={"routing": unseen}))

    assert mechanism_failure(pair) is None
    assert mechanism_failure(ABPair.of(ROUND_ROBIN, AFFINITY)) is None
    assert "session affinity (12 videos x 3 questions): not observable" in "\n".join(
        routing_section(None, unseen, None)
    )


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"videos": 0}, "videos"),
        ({"videos": MAX_PROBE_VIDEOS + 1}, "videos"),
        ({"questions": -1}, "questions"),
        ({"videos": 3}, "workers: 2 videos, 3 expected"),
        ({"workers": [["a", "a"], ["a"]]}, "workers[1]: 1 answers, 2 expected"),
        ({"workers": [["a", 1.5], ["a", "a"]]}, "workers"),
        ({"workers": [["a", -1], ["a", "a"]]}, "workers"),
        ({"workers": [["a", "x" * 65], ["a", "a"]]}, "workers"),
        ({"workers": [["a", ""], ["a", "a"]]}, "workers"),
        ({"observable": False}, "an unobservable probe (observable: false) has none"),
        ({"observable": "yes"}, "observable"),
    ],
)
def test_a_probe_out_of_bounds_is_refused(change: dict[str, Any], complaint: str) -> None:
    fields = a_probe([["a", "a"], ["b", "b"]]).model_dump() | change

    with pytest.raises(ValidationError, match=re.escape(complaint)):
        RoutingProbe.model_validate(fields)


def test_ids_may_be_numbers_and_a_results_file_keeps_the_probe(tmp_path: Path) -> None:
    probe = a_probe([[4925587171139913851, "4925587171139913851"], [1, 2]])
    results = AFFINITY.model_copy(update={"routing": probe})

    loaded = ProfileResults.load(results.save(tmp_path / "results.json"))

    assert loaded.routing == probe and probe.workers_per_video() == [1, 2]


def test_a_probe_with_another_profiles_header_is_refused(tmp_path: Path) -> None:
    text = ROUND_ROBIN.model_copy(update={"routing": a_probe([["a"]])}).model_dump_json()

    with pytest.raises(ValidationError, match="a round-robin probe sends no header"):
        ProfileResults.model_validate_json(text)


def test_the_smoke_verdict_reads_the_probe_line() -> None:
    line = json.dumps(a_probe([["a", "a"]]).model_dump())
    log = f"frontend lists m\n{ROUTING_PROBE} {line}\nSmoke test passed: a box\n"

    result = smoke_verdict(PodRun("the local program", True, log))

    assert result.answer == "a box" and result.routing == a_probe([["a", "a"]])
    assert smoke_verdict(PodRun("p", True, "Smoke test passed: a box\n")).routing is None
    broken = f'{ROUTING_PROBE} {{"videos": 0}}\nSmoke test passed: a box\n'
    with pytest.raises(StageFailed, match="is not a routing probe: videos"):
        smoke_verdict(PodRun("the local program", True, broken))


def test_the_report_shows_each_profiles_routing_and_its_chart(tmp_path: Path) -> None:
    rr = ROUND_ROBIN.model_copy(update={"routing": a_probe([["a", "b"], ["c", "d"]], None)})
    hostile = "<img src=x onerror=alert(1)>|"
    aff = AFFINITY.model_copy(update={"routing": a_probe([["a", "a"], [hostile, hostile]])})

    markdown = write_report(rr, aff, tmp_path)

    assert (
        "- round robin (2 videos x 2 questions): videos on one worker 0%, 2.00 workers per video"
        in markdown
    )
    assert (
        "- session affinity (2 videos x 2 questions): videos on one worker 100%, 1.00" in markdown
    )
    assert "requests per worker: &lt;img src=x onerror=alert\\(1\\)&gt;\\|: 2, a: 2" in markdown
    assert hostile not in markdown
    assert f"![Workers per video]({ROUTING_CHART_FILE})" in markdown
    assert (tmp_path / ROUTING_CHART_FILE).read_bytes().startswith(b"\x89PNG")
    assert "| Concurrency |" in markdown  # everything the report had stays


def test_results_without_probes_have_no_routing_section(tmp_path: Path) -> None:
    markdown = write_report(ROUND_ROBIN, AFFINITY, tmp_path)

    assert "Routing" not in markdown and not (tmp_path / ROUTING_CHART_FILE).exists()


def test_a_report_whose_affinity_spread_is_written_then_fails(tmp_path: Path) -> None:
    spread = AFFINITY.model_copy(update={"routing": a_probe([["a", "b"], ["c", "c"]])})

    with pytest.raises(ReportError, match="1 of 2 videos reached several workers"):
        write_report(ROUND_ROBIN, spread, tmp_path)

    written = (tmp_path / "report.md").read_text()
    assert "verdict: session affinity's run did not keep videos on one worker" in written
    assert "+76.2%" not in written.splitlines()[2]
