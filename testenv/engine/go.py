"""The `go` client as the engine's build uses it: its version, its settings, and one step at a
time with its output in a log, a progress line while it runs and one line when it fails."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from common.input_files import read_tail
from testenv.engine.pins import KUBERNETES_VERSION

MINIMUM_GO = (1, 26)
HEARTBEAT_SECONDS = 30.0


class EngineError(Exception):
    """A build that cannot go on; the message is the one line the user sees."""


def go_version(environ: Mapping[str, str] = os.environ) -> str:
    go = shutil.which("go", path=environ.get("PATH"))
    if go is None:
        raise EngineError(
            "engine: the Go toolchain (`go`) is not on PATH; install Go 1.26 or newer "
            "(Debian: golang from backports, or the machine's own) and run `make engine` again"
        )
    found = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=False)
    version = found.stdout.strip()
    match = re.match(r"go(\d+)\.(\d+)", version)
    if found.returncode != 0 or match is None:
        raise EngineError(f"engine: `go env GOVERSION` failed: {found.stderr.strip() or version}")
    if (int(match[1]), int(match[2])) < MINIMUM_GO:
        raise EngineError(
            f"engine: {version} is too old; k8s.io/kubernetes v{KUBERNETES_VERSION} needs Go "
            f"{MINIMUM_GO[0]}.{MINIMUM_GO[1]} or newer"
        )
    return version


def go_environment(home: Path, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The go client's settings: caches under `home`, no toolchain download, no VCS stamping."""
    env = dict(environ)
    env.update(
        GOMODCACHE=str(home / "go" / "mod"),
        GOCACHE=str(home / "go" / "build"),
        GOFLAGS="-buildvcs=false -trimpath",
        GOTOOLCHAIN="local",
        GOWORK="off",
        CGO_ENABLED="0",
    )
    env.setdefault("GOPROXY", "https://proxy.golang.org,direct")
    return env


class Builder:
    """Runs go commands with their output in a log, a progress line every HEARTBEAT_SECONDS."""

    def __init__(self, home: Path, env: Mapping[str, str], out: Callable[[str], None]) -> None:
        self.home = home
        self.env = dict(env)
        self.out = out
        self.logs = home / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)

    def run(
        self, what: str, argv: Sequence[str], cwd: Path, extra_env: Mapping[str, str] = {}
    ) -> str:
        log = self.logs / f"{what.split()[0]}.log"
        started = time.monotonic()
        done = threading.Event()

        def heartbeat() -> None:
            while not done.wait(HEARTBEAT_SECONDS):
                self.out(f"engine:   {what} ... {elapsed(time.monotonic() - started)}")

        ticker = threading.Thread(target=heartbeat, daemon=True)
        ticker.start()
        try:
            with log.open("a") as sink:
                sink.write(f"\n$ (cd {cwd}) {' '.join(argv)}\n")
                sink.flush()
                result = subprocess.run(
                    argv,
                    cwd=cwd,
                    env={**self.env, **extra_env},
                    stdout=subprocess.PIPE,
                    stderr=sink,
                    text=True,
                    check=False,
                )
                sink.write(result.stdout)
        finally:
            done.set()
        if result.returncode != 0:
            raise EngineError(_failure_line(what, log, self.env.get("GOPROXY", "")))
        return result.stdout


def _failure_line(what: str, log: Path, proxy: str) -> str:
    tail = read_tail(log).strip().splitlines()[-12:]
    text = "\n".join(tail)
    if re.search(r"dial tcp|no such host|connection refused|i/o timeout|TLS handshake", text):
        return f"engine: the Go module proxy ({proxy}) could not be reached while {what}; see {log}"
    if "not available" in text or "410 Gone" in text or "404 Not Found" in text:
        return (
            f"engine: the Go module proxy ({proxy}) refused a pinned module while {what}; see {log}"
        )
    return f"engine: {what} failed; the last lines of {log}:\n{text}"


def say(line: str) -> None:
    print(line, flush=True)


def elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
