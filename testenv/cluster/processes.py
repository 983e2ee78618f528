"""The control plane's processes: started with their logs in the cluster folder, stopped by PID.

Each component leads a process group of its own, so a Ctrl-C in the terminal that ran `up` does not
reach it (a group, not a session, which the kernel would schedule as a unit of its own: see
`stages.incluster.processes`), and `down` (or the test fixture) stops it by the PID recorded at
start, after checking that the PID still runs the binary it started (a PID can be reused once its
process is gone). A fixture's components also die with the test process, however it dies: they
are started under util-linux's `setpriv --pdeathsig KILL`, the kernel's parent-death signal,
which even SIGKILL of pytest sets off (KILL, not TERM: a throwaway cluster needs no graceful
shutdown, and kube-apiserver's takes long).
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

STOP_GRACE_SECONDS = 10.0
KILLED_AT_ONCE = frozenset({"kube-apiserver", "weed"})
"""Stopped with SIGKILL, not SIGTERM. The API server's graceful shutdown waits for its clients'
watches to end (still running 30 s after SIGTERM, measured 2026-12-05), and it keeps nothing etcd
does not. The tests' S3 server (testenv/s3_server.py) winds its filer and master down for about
15 s, for data in a test's temporary folder that nothing reads again."""
DIE_WITH_PARENT = ("setpriv", "--pdeathsig", "KILL", "--")


@dataclass(frozen=True)
class Started:
    """What `down` needs to stop a component: its PID and the binary it runs."""

    name: str
    pid: int
    binary: str
    log: str

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Started:
        return cls(str(data["name"]), int(str(data["pid"])), str(data["binary"]), str(data["log"]))


def start(
    name: str,
    argv: Sequence[str],
    log: Path,
    env: Mapping[str, str],
    die_with_parent: bool,
) -> tuple[Started, subprocess.Popen[bytes]]:
    """`argv` in a process group of its own, stdout and stderr to `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    command = [*DIE_WITH_PARENT, *argv] if die_with_parent else list(argv)
    with log.open("ab") as sink:
        popen = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=dict(env),
            process_group=0,
        )
    return Started(name, popen.pid, str(Path(argv[0]).resolve()), str(log)), popen


@contextmanager
def held_interrupts() -> Iterator[None]:
    """Ctrl-C and SIGTERM held until the block is done, then raised as KeyboardInterrupt: a
    component forked but not yet recorded would outlive `down`. (The lab's graphs are held by
    `stages.incluster.processes.deferred_interrupts`, which this package may not import.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {
        signum: signal.signal(signum, lambda got, _: held.append(got)) for signum in signals
    }
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if held:
        raise KeyboardInterrupt(f"signal {held[0]}, held while a component started")


def runs(started: Started) -> bool:
    """True when the PID is alive and still runs the binary it was started with."""
    try:
        exe = os.readlink(f"/proc/{started.pid}/exe").removesuffix(" (deleted)")
    except OSError:
        return False
    return exe == started.binary or Path(exe).name == Path(started.binary).name


def running(item: Started, children: Mapping[int, subprocess.Popen[bytes]]) -> bool:
    """Alive: a child of this process by its exit status (under `setpriv` its binary is not yet
    the one it will exec), any other process by `runs`."""
    child = children.get(item.pid)
    if child is not None:
        return child.poll() is None
    return runs(item)


def stop_all(
    components: Sequence[Started],
    children: Mapping[int, subprocess.Popen[bytes]] | None = None,
    grace: float = STOP_GRACE_SECONDS,
) -> list[str]:
    """SIGTERM every component still running (last started first; `KILLED_AT_ONCE` SIGKILL),
    wait, SIGKILL what is left. `children` are the ones this process started itself, reaped here
    so none lingers as a zombie. Returns the names that needed SIGKILL after SIGTERM."""
    alive = functools.partial(running, children=children or {})
    live = [item for item in reversed(components) if alive(item)]
    for item in live:
        _signal(item.pid, signal.SIGKILL if item.name in KILLED_AT_ONCE else signal.SIGTERM)
    _wait(live, alive, grace)
    killed = [item.name for item in live if alive(item)]
    for item in live:
        if alive(item):
            _signal(item.pid, signal.SIGKILL)
    _wait(live, alive, 5.0)
    return killed


def _wait(items: Sequence[Started], alive: Callable[[Started], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while any(alive(item) for item in items) and time.monotonic() < deadline:
        time.sleep(0.05)


def _signal(pid: int, signum: signal.Signals) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass
