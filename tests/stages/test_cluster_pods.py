"""The in-cluster pod program without the lab: its failure verdicts and its export framing.

The smoke pod runs from the ConfigMap's files (see cluster_pods.py) against a frontend that is
not there, and against a stand-in frontend on loopback that answers with nothing.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import imageio_ffmpeg  # type: ignore[import-untyped]
import pytest

from components.routing import RoutingProfile
from stages.cluster_jobs import JobSettings, PodPlace, smoke_manifests, smoke_pod_config
from stages.incluster import pod_common
from stages.incluster.pod_common import Export, ExportFormatError, decode_exports, export_lines
from tests.stages.cluster_pods import free_port, lay_out, run_pod
from tests.stages.conftest import lab_outputs_for

MODEL = "tiny-llama"


class _EmptyAnswers(http.server.BaseHTTPRequestHandler):
    """A frontend that lists the model and answers every chat request with empty content."""

    def do_GET(self) -> None:
        self._json({"data": [{"id": MODEL}]})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self._json({"choices": [{"message": {"role": "assistant", "content": "  "}}]})

    def _json(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def empty_frontend() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _EmptyAnswers)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def smoke_config_dir(tmp_path: Path, frontend_port: int, wait_seconds: float) -> Path:
    outputs = lab_outputs_for(RoutingProfile.ROUND_ROBIN, port=frontend_port)
    media_port = free_port()
    place = PodPlace(
        work_dir=str(tmp_path / "work"),
        listen_host="127.0.0.1",
        listen_port=media_port,
        ffmpeg=imageio_ffmpeg.get_ffmpeg_exe(),
    )
    config = smoke_pod_config(outputs, f"http://127.0.0.1:{media_port}", place, wait_seconds)
    cluster_view = outputs.model_copy(update={"target": "cluster"})
    config_map = smoke_manifests(cluster_view, JobSettings(run_id="r1"))[0]
    return lay_out(config_map, tmp_path / "config", config)


def test_the_smoke_pod_says_the_frontend_is_not_ready(tmp_path: Path) -> None:
    config = smoke_config_dir(tmp_path, free_port(), wait_seconds=1)

    run = run_pod("stages.incluster.smoke_pod", config, tmp_path / "home", timeout=60)

    assert run.status == pod_common.EXIT_FRONTEND_NOT_READY == 3, run.log
    assert run.last_line.startswith("Frontend not ready: ")
    assert "did not list tiny-llama within 1 s" in run.last_line


def test_the_smoke_pod_fails_an_empty_answer_after_serving_the_video(
    tmp_path: Path, empty_frontend: int
) -> None:
    config = smoke_config_dir(tmp_path, empty_frontend, wait_seconds=10)

    run = run_pod("stages.incluster.smoke_pod", config, tmp_path / "home", timeout=120)

    assert run.status == 1, run.log
    assert run.last_line == "Smoke test FAILED: the model returned an empty answer"
    assert "/smoke.mp4 serves" in run.log
    assert "Smoke test passed" not in run.log


def test_the_smoke_pod_refuses_a_broken_config(tmp_path: Path) -> None:
    config = tmp_path / "config" / "smoke-config.json"
    config.parent.mkdir()
    config.write_text("{}")
    (tmp_path / "config" / "stages" / "incluster").mkdir(parents=True)
    for name in ("pod_common.py", "smoke_pod.py"):
        source = Path(pod_common.__file__).parent / name
        (tmp_path / "config" / "stages" / "incluster" / name).write_text(source.read_text())

    run = run_pod("stages.incluster.smoke_pod", config, tmp_path / "home", timeout=60)

    assert run.status == 1
    assert run.last_line.startswith("Smoke test FAILED: KeyError")


# --- exports in the log --------------------------------------------------------------------------


def test_exports_survive_the_log_and_are_found_among_other_lines() -> None:
    exports = [Export(1, "profile_export_aiperf.json", b'{"a": 1}' * 500), Export(16, "x.csv", b"")]
    lines = ["level 1 ...", *export_lines(exports[0]), "noise", *export_lines(exports[1]), "end"]

    assert decode_exports(lines) == exports
    assert max(len(line) for line in lines) <= 200 + pod_common.EXPORT_LINE_WIDTH


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
