"""What the smoke and perf programs share: config, the frontend gate, videos, the media server,
and how a program's outcome becomes its last line and exit status.

Standard library only: the pod runs this with the image's bare Python (see the package docstring).
"""

from __future__ import annotations

import functools
import gzip
import http.client
import http.server
import json
import os
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

EXIT_FAILED = 1
EXIT_FRONTEND_NOT_READY = 3
"""The pod's exit status when the frontend never listed the model (the stage's exit code too)."""
EXIT_INTERRUPTED = 130

FRONTEND_NOT_READY = "Frontend not ready:"
"""Prefix of the log line that says the frontend did not list the model in time."""


HTTP_TIMEOUT_SECONDS = 10.0


class PodFailure(RuntimeError):
    """The pod cannot pass; the message is the reason printed as the pod's verdict."""


class PodFrontendNotReady(PodFailure):
    """The frontend did not list the served model within the wait."""


REQUEST_ERRORS = (OSError, ValueError, http.client.HTTPException)
"""What a request to a server can raise: a refused or cut connection, an answer cut short
(`IncompleteRead`) or garbled (`BadStatusLine`), a body that is not JSON."""


def say(message: str) -> None:
    """One log line, flushed at once so `kubectl logs -f` and the stage see it immediately."""
    print(message, flush=True)


# --- the frontend gate --------------------------------------------------------------------------


def _poll(attempt: Callable[[], str | None], timeout_seconds: float, interval: float) -> str | None:
    """Call `attempt` until it finds nothing missing (None), bounded; otherwise what it said was
    missing (or the error it raised) the last time."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        try:
            missing = attempt()
        except REQUEST_ERRORS as error:
            missing = f"{type(error).__name__}: {error}"
        if missing is None or time.monotonic() + interval > deadline:
            return missing
        time.sleep(interval)


def wait_for_model(config: dict[str, Any], interval: float = 5.0) -> None:
    """Poll the config's `models_url` (`/v1/models`) until it lists its `served_model`, like the
    recipes' readiness gate; bounded by its `model_wait_seconds`."""
    models_url, model = config["models_url"], config["served_model"]
    timeout_seconds = float(config["model_wait_seconds"])

    def listed() -> str | None:
        with urllib.request.urlopen(models_url, timeout=HTTP_TIMEOUT_SECONDS) as response:
            body = json.loads(response.read())
        data = body.get("data", [])
        models = {str(entry.get("id")) for entry in data if isinstance(entry, dict)}
        return None if model in models else f"it lists {sorted(models) or 'no model'}"

    missing = _poll(listed, timeout_seconds, interval)
    if missing:
        raise PodFrontendNotReady(
            f"{models_url} did not list {model} within {timeout_seconds:.0f} s ({missing})"
        )
    say(f"frontend lists {model}")


# --- videos ------------------------------------------------------------------------------------


def ffmpeg_executable(configured: str | None) -> str:
    """FFmpeg from the config, else $FFMPEG (the Job sets it from imageio-ffmpeg), else PATH."""
    found = configured or os.environ.get("FFMPEG") or shutil.which("ffmpeg")
    if not found:
        raise PodFailure("no FFmpeg: set FFMPEG or put ffmpeg on PATH")
    return found


def make_video(ffmpeg: str, args: Sequence[str], out: Path) -> None:
    """Run FFmpeg with the stage's arguments (they name `out`); PodFailure with its message."""
    out.parent.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        [ffmpeg, *args], capture_output=True, text=True, timeout=300, check=False
    )
    if result.returncode != 0 or not out.is_file() or out.stat().st_size == 0:
        raise PodFailure(f"FFmpeg could not write {out}: {result.stderr.strip()[-500:]}")


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


@contextmanager
def serving(config: dict[str, Any], check_url: str) -> Iterator[None]:
    """The config's `media_dir` served over HTTP for the block (the workers fetch the videos
    through the media Service), proven fetchable at `check_url` before the block runs."""
    handler = functools.partial(_MediaHandler, directory=config["media_dir"])
    server = http.server.ThreadingHTTPServer(
        (config["listen_host"], config["listen_port"]), handler
    )
    thread = threading.Thread(target=server.serve_forever, name="media-server", daemon=True)
    thread.start()
    say(f"serving {config['media_dir']} on {config['listen_host']}:{server.server_address[1]}")
    try:
        wait_until_served(check_url, float(config["media_wait_seconds"]))
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def wait_until_served(url: str, timeout_seconds: float, interval: float = 2.0) -> None:
    """Fetch `url` until it answers 200 with content.

    In the cluster the URL goes through the media Service, so this also waits until the Service
    routes to this pod (the pod must be Ready and the endpoints propagated): what the workers will
    fetch is proven fetchable before the first request.
    """

    def fetched() -> str | None:
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_SECONDS) as response:
            size = len(response.read())
        if size:
            say(f"{url} serves {size} bytes")
        return None if size else "an empty body"

    missing = _poll(fetched, timeout_seconds, interval)
    if missing:
        raise PodFailure(f"{url} was not served within {timeout_seconds:.0f} s ({missing})")


def run_pod_program(
    argv: list[str],
    usage: str,
    program: Callable[[dict[str, Any]], str],
    failed: str,
) -> int:
    """Run a pod program on its config file and turn its outcome into the last line and status.

    `program` returns the success line; a frontend that never lists the model exits 3, any other
    failure (including an unreadable or incomplete config) prints `<failed> <reason>` and exits 1.
    SIGTERM (a deleted pod, a stopped local run) and Ctrl-C unwind the program like an exception,
    so the children it started (AIPerf) are stopped before it exits with 130.
    """
    from stages.incluster.processes import signals_as_keyboard_interrupt

    if len(argv) != 1:
        say(f"usage: {usage}")
        return 2
    try:
        with signals_as_keyboard_interrupt():
            path = Path(argv[0])
            raw = path.read_bytes()  # JSON, gzipped as `.gz` (the perf plan is large)
            success_line = program(
                json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)
            )
    except KeyboardInterrupt:
        say(f"{failed} interrupted; everything the program started was stopped")
        return EXIT_INTERRUPTED
    except PodFrontendNotReady as error:
        say(f"{FRONTEND_NOT_READY} {error}")
        return EXIT_FRONTEND_NOT_READY
    except PodFailure as error:
        say(f"{failed} {error}")
        return EXIT_FAILED
    except (*REQUEST_ERRORS, KeyError) as error:
        say(f"{failed} {type(error).__name__}: {error}")
        return EXIT_FAILED
    say(success_line)
    return 0
