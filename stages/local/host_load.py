"""How busy this machine was while a local run measured it: the run's own CPU, the time its threads
waited for a CPU, and the demand of every other process on the host.

A local graph runs in real time on shared cores, so another program's work shows up in its
latencies. Linux keeps, per thread, the CPU time it ran and the time it sat runnable waiting for a
CPU (`/proc/<pid>/task/<tid>/schedstat`: run ns, wait ns, timeslices). Sampling every thread on
the host once a second splits them into the run's (the sampling process and its descendants:
the graph, AIPerf) and everybody else's. "Demand" is run plus wait: a busy loop demands a whole
core whether or not it gets one, so it measures what competes with the run, not what the run left
over. A thread that starts and ends between two samples is missed; a thread's last partial
second is lost when it exits.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from stages.core.results import HostLoad
from stages.incluster.processes import proc_stat

PROC = Path("/proc")
SAMPLE_SECONDS = 1.0
NS = 1e9


@dataclass(frozen=True)
class _Thread:
    run_ns: int
    wait_ns: int
    own: bool


def _parent(pid: str) -> int | None:
    fields = proc_stat(pid)
    return None if fields is None else int(fields[1])


def process_parents() -> dict[int, int | None]:
    """Every process on the host now, with its parent (None once it has gone)."""
    return {int(pid): _parent(pid) for pid in os.listdir(PROC) if pid.isdigit()}


def descendants(root: int, parents: dict[int, int | None]) -> set[int]:
    """`root` and every process below it in `parents` (`process_parents`)."""
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        if parent is not None:
            children.setdefault(parent, []).append(pid)
    own, pending = set(), [root]
    while pending:
        pid = pending.pop()
        own.add(pid)
        pending += children.get(pid, [])
    return own


def snapshot(root: int) -> dict[tuple[int, int], _Thread]:
    """Every thread on the host now, keyed (pid, tid), marked own when `root` or a descendant
    of it runs it."""
    parents = process_parents()
    own = descendants(root, parents)
    threads = {}
    for pid in parents:
        try:
            tids = os.listdir(PROC / str(pid) / "task")
        except OSError:
            continue
        for tid in tids:
            try:
                run_ns, wait_ns, _ = (
                    (PROC / str(pid) / "task" / tid / "schedstat").read_text().split()
                )
            except (OSError, ValueError):
                continue
            threads[(pid, int(tid))] = _Thread(int(run_ns), int(wait_ns), pid in own)
    return threads


class HostSampler:
    """Context manager: samples the host in a background thread; `load()` is the mean so far.

    with HostSampler() as host:
        run_the_sweep()
    host.load()  # HostLoad(seconds=..., others_cores=..., own_cores=..., own_wait_cores=...)
    """

    def __init__(self, root: int | None = None, every: float = SAMPLE_SECONDS) -> None:
        self.root = os.getpid() if root is None else root
        self.every = every
        self.cores = os.cpu_count() or 1
        self._own_run = self._own_wait = self._others = 0.0
        self._seconds = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="host-load", daemon=True)
        self._last = snapshot(self.root)
        self._last_time = time.monotonic()

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._add(snapshot(self.root), time.monotonic())

    def _sample(self) -> None:
        while not self._stop.wait(self.every):
            self._add(snapshot(self.root), time.monotonic())

    def _add(self, now: dict[tuple[int, int], _Thread], at: float) -> None:
        zero = _Thread(0, 0, False)
        for key, thread in now.items():
            before = self._last.get(key, zero)  # not seen before: it started since
            ran = max(0, thread.run_ns - before.run_ns) / NS
            waited = max(0, thread.wait_ns - before.wait_ns) / NS
            if thread.own:
                self._own_run += ran
                self._own_wait += waited
            else:
                self._others += ran + waited
        self._seconds += at - self._last_time
        self._last, self._last_time = now, at

    def load(self) -> HostLoad:
        seconds = max(self._seconds, 1e-9)
        return HostLoad(
            seconds=round(self._seconds, 1),
            cores=self.cores,
            others_cores=round(self._others / seconds, 3),
            own_cores=round(self._own_run / seconds, 3),
            own_wait_cores=round(self._own_wait / seconds, 3),
        )
