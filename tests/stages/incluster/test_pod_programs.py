"""The pod programs without the lab: their failure verdicts and their export framing.

The smoke program runs as the local target runs it (`stages.local.run.run_locally`: the same
files as the Job's ConfigMap, `python -S -E`) against a frontend that is not there, and against a
stand-in frontend on loopback that answers with nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import imageio_ffmpeg  # type: ignore[import-untyped]
import pytest

from common.ports import free_port
from components.routing import SESSION_HEADER, RoutingProfile
from stages.core.pod_plans import PROBE_VIDEOS, SMOKE_CONFIG, PodPlace, smoke_pod_config
from stages.core.verdicts import PodRun, smoke_verdict
from stages.incluster import pod_common
from stages.incluster.log_exports import (
    EXPORT_LINE_WIDTH,
    Export,
    ExportFormatError,
    decode_exports,
    export_lines,
)
from stages.local import run as local_run
from stages.local.run import run_locally
from tests.stages.support import lab_outputs_for
from tests.support import StandInHandler, stand_in_server

MODEL = "tiny-llama"


class _EmptyAnswers(StandInHandler):
    """A frontend that lists the model and answers every chat request with empty content."""

    def do_GET(self) -> None:
        self.send_json({"data": [{"id": MODEL}]})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_json({"choices": [{"message": {"role": "assistant", "content": "  "}}]})


class _OneWorkerPerSession(StandInHandler):
    """A frontend that answers, naming as its worker the request's session (or `rr`)."""

    def do_GET(self) -> None:
        self.send_json({"data": [{"id": MODEL}]})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        worker = self.headers.get(SESSION_HEADER, "rr")
        reply = {"choices": [{"message": {"content": "a box"}}]}
        self.send_json(reply | {"nvext": {"worker_id": {"decode_worker_id": worker}}})


class _CutShort(StandInHandler):
    """A frontend restarting: every answer's body ends before its Content-Length."""

    requests = 0

    def do_GET(self) -> None:
        type(self).requests += 1
        self.send_response(200)
        self.send_header("Content-Length", "100")
        self.end_headers()
        self.wfile.write(b'{"data": [')


@pytest.fixture
def empty_frontend() -> Iterator[int]:
    with stand_in_server(_EmptyAnswers) as port:
        yield port


def run_smoke_program(
    tmp_path: Path,
    frontend_port: int,
    wait_seconds: float,
    profile: RoutingProfile = RoutingProfile.ROUND_ROBIN,
) -> PodRun:
    outputs = lab_outputs_for(profile, port=frontend_port)
    media_port = free_port()
    place = PodPlace(
        work_dir=str(tmp_path / "work"),
        listen_host="127.0.0.1",
        listen_port=media_port,
        ffmpeg=imageio_ffmpeg.get_ffmpeg_exe(),
    )
    config = smoke_pod_config(outputs, f"http://127.0.0.1:{media_port}", place, wait_seconds)
    return run_locally(
        "smoke_pod.py", (SMOKE_CONFIG, json.dumps(config).encode()), tmp_path, lambda _: None
    )


@pytest.mark.slow
def test_the_smoke_program_says_the_frontend_is_not_ready(tmp_path: Path) -> None:
    run = run_smoke_program(tmp_path, free_port(), wait_seconds=1)

    assert run.failure == f"exit status {pod_common.EXIT_FRONTEND_NOT_READY}", run.log
    assert run.last_line.startswith("Frontend not ready: ")
    assert "did not list tiny-llama within 1 s" in run.last_line


@pytest.mark.slow
def test_an_answer_cut_short_is_waited_out_as_a_frontend_not_ready(tmp_path: Path) -> None:
    with stand_in_server(_CutShort) as port:
        run = run_smoke_program(tmp_path, port, wait_seconds=6)

    assert run.failure == f"exit status {pod_common.EXIT_FRONTEND_NOT_READY}", run.log
    assert run.last_line.startswith("Frontend not ready: ") and "IncompleteRead" in run.last_line
    assert _CutShort.requests >= 2  # asked again, not given up at the first


@pytest.mark.slow
def test_the_smoke_program_fails_an_empty_answer_after_serving_the_video(
    tmp_path: Path, empty_frontend: int
) -> None:
    run = run_smoke_program(tmp_path, empty_frontend, wait_seconds=10)

    assert run.failure == "exit status 1", run.log
    assert run.last_line == "Smoke test FAILED: the model returned an empty answer"
    assert "/smoke.mp4 serves" in run.log
    assert "Smoke test passed" not in run.log


@pytest.mark.slow
def test_the_smoke_program_probes_the_routing_after_the_answer(tmp_path: Path) -> None:
    with stand_in_server(_OneWorkerPerSession) as port:
        run = run_smoke_program(tmp_path, port, 10, RoutingProfile.SESSION_AFFINITY)

    result = smoke_verdict(run)
    assert result.answer == "a box" and result.routing is not None
    assert result.routing.observable and result.routing.kept_share == 1.0
    assert len(result.routing.requests_per_worker()) == PROBE_VIDEOS  # one session per video


@pytest.mark.slow
def test_the_smoke_program_refuses_a_broken_config(tmp_path: Path) -> None:
    run = run_locally("smoke_pod.py", (SMOKE_CONFIG, b"{}"), tmp_path, lambda _: None)

    assert run.failure == "exit status 1"
    assert run.last_line.startswith("Smoke test FAILED: KeyError")


@pytest.mark.slow
def test_a_program_cannot_reach_site_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the pod's bare image enforces: a pod program that imported a third-party package would
    # fail here first (the local runs use `python -S -E`); yaml is in the project's venv.
    probe = {"stages/incluster/probe_pod.py": b"import json, sys\nimport yaml\n"}
    monkeypatch.setattr(local_run, "program_files", lambda entry: probe)

    run = run_locally("probe_pod.py", (SMOKE_CONFIG, b"{}"), tmp_path, lambda _: None)

    assert not run.succeeded and "No module named 'yaml'" in run.log


# --- exports in the log --------------------------------------------------------------------------


def test_exports_survive_the_log_and_are_found_among_other_lines() -> None:
    exports = [Export(1, "profile_export_aiperf.json", b'{"a": 1}' * 500), Export(16, "x.csv", b"")]
    lines = ["level 1 ...", *export_lines(exports[0]), "noise", *export_lines(exports[1]), "end"]

    assert decode_exports(lines) == exports
    assert max(len(line) for line in lines) <= 200 + EXPORT_LINE_WIDTH


def test_a_truncated_export_is_detected() -> None:
    lines = export_lines(Export(2, "profile_export_aiperf.json", b"{}" * 3000))

    with pytest.raises(ExportFormatError, match="truncated"):
        decode_exports(lines[:-1])


def test_a_changed_export_is_detected() -> None:
    lines = export_lines(Export(2, "profile_export_aiperf.json", b"{}"))
    header = lines[0].replace("size=2", "size=3")

    with pytest.raises(ExportFormatError, match="size and sha256"):
        decode_exports([header, *lines[1:]])


def test_windows_line_ends_do_not_break_the_framing() -> None:
    export = Export(4, "profile_export_aiperf.json", b"[1, 2, 3]")

    assert decode_exports([line + "\r" for line in export_lines(export)]) == [export]
