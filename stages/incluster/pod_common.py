"""What the smoke and perf pods share: config, the frontend gate, videos, the media server, and
the log format that carries AIPerf's exports back to the stage.

Standard library only: the pod runs this with the image's bare Python (see the package docstring).
The stage imports the same module to read the pod's log, so the format has one definition.

Why the exports travel in the log: the stage already reads the pod's log to decide pass or fail,
a log needs no volume the stage could read (no PVC, no write permission beyond creating the Job),
and it survives the pod's exit for as long as the pod object exists. Each file is gzipped,
base64-encoded in short lines and framed by BEGIN/END lines that carry its size and sha256, so a
truncated or garbled log is detected instead of parsed.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import http.server
import json
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EXIT_FAILED = 1
EXIT_FRONTEND_NOT_READY = 3
"""The pod's exit status when the frontend never listed the model (the stage's exit code too)."""

FRONTEND_NOT_READY = "Frontend not ready:"
"""Prefix of the log line that says the frontend did not list the model in time."""

EXPORT_BEGIN = "===== BEGIN AIPERF EXPORT"
EXPORT_END = "===== END AIPERF EXPORT ====="
EXPORT_LINE_WIDTH = 1000
"""Short lines: container runtimes split very long log lines, which the framing would survive
only by luck."""
_BEGIN_LINE = re.compile(
    r"^===== BEGIN AIPERF EXPORT concurrency=(?P<concurrency>\d+) file=(?P<file>[\w.-]+) "
    r"size=(?P<size>\d+) sha256=(?P<sha256>[0-9a-f]{64}) =====$"
)

HTTP_TIMEOUT_SECONDS = 10.0


class PodFailure(RuntimeError):
    """The pod cannot pass; the message is the reason printed as the pod's verdict."""


class FrontendNotReady(PodFailure):
    """The frontend did not list the served model within the wait."""


class ExportFormatError(ValueError):
    """A framed export in the log is truncated, garbled or does not match its digest."""


def say(message: str) -> None:
    """One log line, flushed at once so `kubectl logs -f` and the stage see it immediately."""
    print(message, flush=True)


def load_config(path: Path) -> dict[str, Any]:
    """The pod's JSON config; `.gz` files are gzipped (the perf plan is large)."""
    raw = path.read_bytes()
    text = gzip.decompress(raw) if path.suffix == ".gz" else raw
    config: dict[str, Any] = json.loads(text)
    return config


# --- the frontend gate --------------------------------------------------------------------------


def listed_models(models_url: str) -> set[str]:
    """The model ids `/v1/models` lists; raises OSError or ValueError when it does not answer."""
    with urllib.request.urlopen(models_url, timeout=HTTP_TIMEOUT_SECONDS) as response:
        body = json.loads(response.read())
    return {str(entry.get("id")) for entry in body.get("data", []) if isinstance(entry, dict)}


def wait_for_model(
    models_url: str, model: str, timeout_seconds: float, interval: float = 5.0
) -> None:
    """Poll `/v1/models` until it lists `model`, like the recipes' readiness gate; bounded."""
    deadline = time.monotonic() + timeout_seconds
    last = "no answer yet"
    while True:
        try:
            models = listed_models(models_url)
            if model in models:
                say(f"frontend lists {model}")
                return
            last = f"it lists {sorted(models) or 'no model'}"
        except (OSError, ValueError) as error:
            last = f"{type(error).__name__}: {error}"
        if time.monotonic() + interval > deadline:
            raise FrontendNotReady(
                f"{models_url} did not list {model} within {timeout_seconds:.0f} s ({last})"
            )
        time.sleep(interval)


# --- videos ------------------------------------------------------------------------------------


def ffmpeg_executable(configured: str | None) -> str:
    """FFmpeg from the config, else $FFMPEG (the Job sets it from imageio-ffmpeg), else PATH."""
    found = configured or os.environ.get("FFMPEG") or shutil.which("ffmpeg")
    if not found:
        raise PodFailure("no FFmpeg: set FFMPEG or put ffmpeg on PATH")
    return found


def make_video(ffmpeg: str, args: Sequence[str], out: Path) -> Path:
    """Run FFmpeg with the stage's arguments (they name `out`); PodFailure with its message."""
    out.parent.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        [ffmpeg, *args], capture_output=True, text=True, timeout=300, check=False
    )
    if result.returncode != 0 or not out.is_file() or out.stat().st_size == 0:
        raise PodFailure(f"FFmpeg could not write {out}: {result.stderr.strip()[-500:]}")
    return out


# --- serving the videos ------------------------------------------------------------------------


class _MediaHandler(http.server.SimpleHTTPRequestHandler):
    """Files of one directory, plus `/healthz` for the readiness probe; no access log."""

    def do_GET(self) -> None:
        if self.path == "/healthz":
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")
            return
        super().do_GET()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@dataclass
class MediaServer:
    """A threaded HTTP server for the videos; the workers fetch them through the media Service."""

    server: http.server.ThreadingHTTPServer
    thread: threading.Thread

    @classmethod
    def start(cls, directory: Path, host: str, port: int) -> MediaServer:
        handler = functools.partial(_MediaHandler, directory=str(directory))
        server = http.server.ThreadingHTTPServer((host, port), handler)
        thread = threading.Thread(target=server.serve_forever, name="media-server", daemon=True)
        thread.start()
        say(f"serving {directory} on {host}:{server.server_address[1]}")
        return cls(server, thread)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def wait_until_served(url: str, timeout_seconds: float, interval: float = 2.0) -> int:
    """Fetch `url` until it answers 200 with content; returns its size.

    In the cluster the URL goes through the media Service, so this also waits until the Service
    routes to this pod (the pod must be Ready and the endpoints propagated): what the workers will
    fetch is proven fetchable before the first request.
    """
    deadline = time.monotonic() + timeout_seconds
    last = "no answer yet"
    while True:
        try:
            with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_SECONDS) as response:
                size = len(response.read())
            if size:
                say(f"{url} serves {size} bytes")
                return size
            last = "an empty body"
        except (OSError, ValueError) as error:
            last = f"{type(error).__name__}: {error}"
        if time.monotonic() + interval > deadline:
            raise PodFailure(f"{url} was not served within {timeout_seconds:.0f} s ({last})")
        time.sleep(interval)


# --- exports in the log ------------------------------------------------------------------------


@dataclass(frozen=True)
class Export:
    """One AIPerf output file of one concurrency level, as carried in the log."""

    concurrency: int
    file: str
    data: bytes


def export_lines(export: Export) -> list[str]:
    """The framed, gzipped, base64 lines that carry one file in the log."""
    digest = hashlib.sha256(export.data).hexdigest()
    encoded = base64.b64encode(gzip.compress(export.data, mtime=0)).decode("ascii")
    body = [
        encoded[start : start + EXPORT_LINE_WIDTH]
        for start in range(0, len(encoded), EXPORT_LINE_WIDTH)
    ]
    begin = (
        f"{EXPORT_BEGIN} concurrency={export.concurrency} file={export.file} "
        f"size={len(export.data)} sha256={digest} ====="
    )
    return [begin, *body, EXPORT_END]


def is_export_line(line: str) -> bool:
    """True for a BEGIN or END line (the stage hides the base64 between them)."""
    return line.startswith(EXPORT_BEGIN) or line == EXPORT_END


def decode_exports(lines: Iterable[str]) -> list[Export]:
    """Every framed export in a log, checked against its size and digest, in log order."""
    return list(_decoded(iter(lines)))


def _decoded(lines: Iterator[str]) -> Iterator[Export]:
    for line in lines:
        header = _BEGIN_LINE.match(line.rstrip("\r"))
        if line.startswith(EXPORT_BEGIN) and header is None:
            raise ExportFormatError(f"malformed export header: {line[:200]!r}")
        if header is not None:
            yield _read_block(header, lines)


def _read_block(header: re.Match[str], lines: Iterator[str]) -> Export:
    label = f"concurrency {header['concurrency']} {header['file']}"
    chunks: list[str] = []
    for line in lines:
        line = line.rstrip("\r")
        if line == EXPORT_END:
            return _checked(header, label, "".join(chunks))
        if line.startswith(EXPORT_BEGIN):
            break
        chunks.append(line.strip())
    raise ExportFormatError(f"the export of {label} is truncated (no END line)")


def _checked(header: re.Match[str], label: str, encoded: str) -> Export:
    try:
        data = gzip.decompress(base64.b64decode(encoded, validate=True))
    except (ValueError, OSError, EOFError) as error:
        raise ExportFormatError(f"the export of {label} does not decode: {error}") from error
    if len(data) != int(header["size"]) or hashlib.sha256(data).hexdigest() != header["sha256"]:
        raise ExportFormatError(f"the export of {label} does not match its size and sha256")
    return Export(int(header["concurrency"]), header["file"], data)


def run_pod_program(
    argv: list[str],
    usage: str,
    program: Callable[[dict[str, Any]], str],
    failed: str,
) -> int:
    """Run a pod program on its config file and turn its outcome into the last line and status.

    `program` returns the success line; a frontend that never lists the model exits 3, any other
    failure (including an unreadable or incomplete config) prints `<failed> <reason>` and exits 1.
    """
    if len(argv) != 1:
        say(f"usage: {usage}")
        return 2
    try:
        success_line = program(load_config(Path(argv[0])))
    except FrontendNotReady as error:
        say(f"{FRONTEND_NOT_READY} {error}")
        return EXIT_FRONTEND_NOT_READY
    except PodFailure as error:
        say(f"{failed} {error}")
        return EXIT_FAILED
    except (OSError, ValueError, KeyError) as error:
        say(f"{failed} {type(error).__name__}: {error}")
        return EXIT_FAILED
    say(success_line)
    return 0
