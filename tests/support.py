"""What tests share beyond fixtures: test values and helpers that several test modules import.

Test modules import these from here, never from `conftest.py` or from one another.
"""

from __future__ import annotations

import asyncio
import http.server
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from components.config_parser import parse_stack_config
from components.settings import PROJECT, StackSettings
from lab.stage_tools import LAB_RECIPE_WORKLOAD, LAB_WORKLOAD
from lab.standin import VideoStandIn
from stages.local.run import LocalTools
from tools.stack_files import cli_config, example_site_for

NGC_KEY = "nvapi-" + "test-key-0123456789abcdefXYZ"
"""A fake NGC key; tests search rendered objects, outputs and logs for it. Assembled at run time so
that secret scanners of the repository do not report this test value."""

LOCAL_TOOLS = LocalTools(
    aiperf=Path("/opt/aiperf/bin/aiperf"),
    tokenizer="tok",
    media_for=lambda workload: VideoStandIn(workload.prefix_tokens),
    default_workload=LAB_WORKLOAD,
    recipe_workload=LAB_RECIPE_WORKLOAD,
    ffmpeg="/usr/bin/ffmpeg",
)
"""The lab's tools as a stage's local target sees them, at paths no test runs."""


def stack_settings(
    stack: str, secrets: dict[str, str] | None = None, **overrides: Any
) -> StackSettings:
    """`stack`'s settings as the program parses them: the project's defaults, the stack file, the
    example site, then `overrides` and `secrets` (keys without the project's prefix) as the CLI
    passes them; a refusal is `ConfigError`."""
    raw = cli_config(stack, example_site_for(stack) | overrides)
    secrets = secrets or {}
    raw |= {f"{PROJECT}:{key}": value for key, value in secrets.items()}
    return parse_stack_config(raw, secret_keys={f"{PROJECT}:{key}" for key in secrets})


def quiet_about_aborted_programs(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """An event loop's exception handler for Pulumi programs a test expects to fail (a refused
    config): they leave registrations behind, pending or failed, whose cause the test has already
    asserted; anything else is reported as usual."""
    expected = (
        "Future exception was never retrieved",
        "Task exception was never retrieved",
        "Task was destroyed but it is pending!",
    )
    if context.get("message") not in expected:
        loop.default_exception_handler(context)


class StandInHandler(http.server.BaseHTTPRequestHandler):
    """The base of the tests' stand-in HTTP servers (a frontend, a pod log): replies with a body
    of a given type, and no request lines on the test's stderr."""

    def send_body(self, code: int, content_type: str, data: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_json(self, body: Any, code: int = 200) -> None:
        self.send_body(code, "application/json", json.dumps(body).encode())

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def stand_in_server(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[int]:
    """`handler` served on a free port of 127.0.0.1 in a thread; yields the port, then stops."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


HOSTILE_SHAPES = (
    "/dev/zero",
    "fifo",
    "directory",
    "link to /dev/zero",
    "oversized",
    "alias bomb",
    "10,000 deep",
)
"""What a hostile tester hands a command for a file (issue 30, bounded reads): each would be read
forever, fill the memory, or recurse past the stack if it were read whole."""

ALIAS_BOMB = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]\n"
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True)
)
"""A billion laughs: 9 strings, each alias level nine times the one before: 9^9 once constructed."""


def hostile_file(folder: Path, shape: str, name: str = "input") -> Path:
    """A path of the `shape` in `folder` (or the device itself for `/dev/zero`)."""
    path = folder / name
    if shape == "/dev/zero":
        return Path("/dev/zero")
    if shape == "fifo":
        os.mkfifo(path)  # reading it waits for a writer forever
    elif shape == "directory":
        path.mkdir()
    elif shape == "link to /dev/zero":
        path.symlink_to("/dev/zero")
    elif shape == "oversized":
        with path.open("wb") as sparse:
            sparse.truncate(2**30)  # a GiB of nothing: over every limit, no disk used
    elif shape == "alias bomb":
        path.write_text(ALIAS_BOMB)
    elif shape == "10,000 deep":
        path.write_text("[" * 10_000 + "]" * 10_000)  # JSON and YAML alike
    else:
        raise ValueError(shape)
    return path
