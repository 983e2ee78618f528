"""Child processes that are always stopped: each in its own process group, stopped by group id.

Every child we start (the lab's frontend and workers, a pod program run locally, AIPerf inside a pod
program) leads a new process group, so its process group id is its PID and everything it forks stays
in that group. A group, not a new session: the kernel schedules each session as a unit of its own
(autogroup), so a session per child would give AIPerf's several processes together the CPU share of
one graph process, and starve the command that started them (seen in CI: a subprocess of the tests
ran 35 times slower beside the lab's and the clusters' sessions). Stopping the group by id ends the
process and its children without touching anything else on the machine (no kill by name). Interrupts
are held while a child is started or stopped, so one is never left half-recorded.

Children die with their parent, even a parent killed with SIGKILL, which runs no cleanup at all:
each child runs under a guard (this module run as a script) that leads its group and watches a
lifeline, a pipe whose only write end the parent holds. When the parent dies, however it dies, the
kernel closes that end; the guard sees the pipe's end, stops its group (SIGTERM, then SIGKILL) and
exits. Nested guards chain: a pod program's AIPerf dies with the pod program.

Standard library only: the pod programs ship this module to the cluster's pods too.
"""

from __future__ import annotations

import errno
import os
import select
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

STOP_GRACE_SECONDS = 5.0
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class GroupProcess:
    """A process started as the leader of its own process group, logging to a file."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    stopped: bool = False
    stop_grace_seconds: float = STOP_GRACE_SECONDS
    """How long the group gets after SIGTERM (each step) before whatever is left is killed."""

    @property
    def pgid(self) -> int:
        return self.popen.pid

    def exit_code(self) -> int | None:
        """None while running."""
        return self.popen.poll()

    def log_tail(self, lines: int = 25) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def request_stop(self) -> None:
        """SIGTERM the group without waiting (to stop several groups side by side)."""
        if not self._group_may_exist():
            return
        signal_group(self.pgid, signal.SIGTERM)

    def _group_may_exist(self) -> bool:
        # Once the leader is reaped and the group is empty, its id may be reused by someone else's
        # process group: never signal it then.
        if self.stopped:
            return False
        return self.popen.poll() is None or bool(group_members(self.pgid))

    def stop(self) -> None:
        """SIGTERM the group, wait a grace period, then SIGKILL whatever is left of it."""
        if self._group_may_exist():
            _stop_group(self.pgid, self.popen, self.stop_grace_seconds, alone=0)
            if self.popen.poll() is None:
                self.popen.wait(timeout=self.stop_grace_seconds)
        self.stopped = True


def _stop_group(pgid: int, leader: subprocess.Popen[bytes], grace: float, alone: int) -> None:
    """SIGTERM the group, give its `leader` then the rest `grace` seconds each to end (until no
    more than `alone` members are left: 1 when the caller is in it), then SIGKILL the group."""
    signal_group(pgid, signal.SIGTERM)
    try:
        leader.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        pass
    deadline = time.monotonic() + grace
    while len(group_members(pgid)) > alone and time.monotonic() < deadline:
        time.sleep(0.05)
    if alone or group_members(pgid):
        signal_group(pgid, signal.SIGKILL)  # the caller too, when it is in the group


def _fresh_log(path: Path) -> BinaryIO:
    """A new, empty log at `path`, replacing the last run's; a link or anything but a regular
    file there is refused (OSError naming it), never written through."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.ELOOP, "a link or not a regular file stands where a log goes", path)
        path.unlink()  # a hard-linked old log keeps its other name's content
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.fdopen(os.open(path, flags, 0o644), "wb")


def start_group_process(
    name: str, argv: Sequence[str], env: Mapping[str, str], log_path: Path, cwd: Path
) -> GroupProcess:
    """`argv` in a new process group (its guard leads it), logging to `log_path`; it and its
    children are stopped by the guard as soon as this process dies."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    lifeline = _lifeline()
    guarded = [sys.executable, "-S", "-E", str(Path(__file__).resolve()), str(lifeline), *argv]
    with _fresh_log(log_path) as log:
        popen = subprocess.Popen(
            guarded,
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            process_group=0,
            pass_fds=(lifeline,),
        )
    return GroupProcess(name=name, popen=popen, log_path=log_path)


_lifelines: dict[int, tuple[int, int]] = {}
"""This process's lifeline pipe (read end, write end), by pid: a forked child gets a new one."""


def _lifeline() -> int:
    """The read end of this process's lifeline; the write end stays here, never inherited (pipes
    are created non-inheritable, and only the read end is passed to a guard)."""
    pipe = _lifelines.get(os.getpid())
    if pipe is None:
        pipe = _lifelines[os.getpid()] = os.pipe()
    return pipe[0]


GUARD_POLL_SECONDS = 0.5


def guard(lifeline: int, argv: Sequence[str]) -> int:
    """Run `argv` in this (the guard's) process group until it exits; its exit status is ours.

    If the lifeline's writer (the guard's parent) dies first, stop the group and leave. SIGTERM
    and SIGINT, sent to the whole group by a regular stop, are caught (a caught signal reverts to
    its default in the child at exec), so the guard outlives its child and reports its status.
    """
    for signum in INTERRUPTS:
        signal.signal(signum, lambda signum, frame: None)
    child = subprocess.Popen(list(argv))
    while child.poll() is None:
        ready, _, _ = select.select([lifeline], [], [], GUARD_POLL_SECONDS)
        if ready and not os.read(lifeline, 1):  # end of pipe: the parent is gone
            _stop_group(os.getpgrp(), child, STOP_GRACE_SECONDS, alone=1)  # the guard catches TERM
            break
    status = child.wait()
    return status if status >= 0 else 128 - status


@contextmanager
def running_group(
    name: str, argv: Sequence[str], env: Mapping[str, str], log_path: Path, cwd: Path
) -> Iterator[GroupProcess]:
    """A child in its own process group for the block's duration: started and recorded with
    interrupts held, and stopped (the whole group) however the block ends."""
    with deferred_interrupts():
        process = start_group_process(name, argv, env, log_path, cwd)
    try:
        yield process
    finally:
        with deferred_interrupts():
            process.stop()


def signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass


def proc_stat(pid: int | str) -> list[str] | None:
    """The fields of `/proc/<pid>/stat` after the command name (state, ppid, pgrp, ...); None
    once the process has gone. The name is in parentheses and may hold spaces and parentheses, so
    the fields start after the last `)`."""
    try:
        text = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def group_members(pgid: int) -> list[int]:
    """PIDs whose process group is `pgid`, from /proc; zombies (already exited) excluded."""
    members = []
    for entry in Path("/proc").iterdir():
        fields = proc_stat(entry.name) if entry.name.isdigit() else None
        if fields and int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def rss_bytes(pid: int) -> int:
    """Resident set size of one process, 0 if it is gone."""
    try:
        resident_pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0
    return resident_pages * PAGE_SIZE


def groups_rss_bytes(pgids: Sequence[int]) -> int:
    """Total resident memory of every process in the given groups."""
    return sum(rss_bytes(pid) for pgid in pgids for pid in group_members(pgid))


INTERRUPTS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def _interrupt_handler(handler: Callable[[int, object], None]) -> Iterator[None]:
    """`handler` for Ctrl-C and SIGTERM inside the block; the previous handlers after it."""
    previous = {signum: signal.signal(signum, handler) for signum in INTERRUPTS}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


@contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM until the block is done, then raise KeyboardInterrupt if one came.

    Starting or stopping a child must not be cut in half: a child that Popen has forked but the
    caller has not recorded yet, or a group stopped halfway, would outlive the lab (seen: SIGTERM
    during Popen left AIPerf running). Signals reach only the main thread; elsewhere the block runs
    as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    with _interrupt_handler(lambda signum, frame: received.append(signum)):
        yield
    if received:
        raise KeyboardInterrupt(f"signal {received[0]} (held while starting or stopping a process)")


@contextmanager
def signals_as_keyboard_interrupt() -> Iterator[None]:
    """Treat SIGTERM and Ctrl-C as KeyboardInterrupt inside the block, so `with` blocks unwind and
    stop children.

    SIGINT is set explicitly too: a process started in the background by a non-interactive shell
    (as CI runners may) inherits SIGINT as ignored, and Python then never raises on Ctrl-C.
    """

    def _raise(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    with _interrupt_handler(_raise):
        yield


if __name__ == "__main__":  # the guard: `python processes.py LIFELINE_FD COMMAND...`
    sys.exit(guard(int(sys.argv[1]), sys.argv[2:]))
