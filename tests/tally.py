"""The hostile-input families of issue 20, counted: each generated case, and each bad outcome.

Every family's tests run their cases through `run_command` (or `counted`), which fails the test
on a traceback (any exception but SystemExit escaping a command) or a hang (an alarm), and counts
the case with its outcomes. A test that checks a user's files or a planted canary records
`deleted` or `secret` itself. With `HOSTILE_TALLY=<file>` set, the counts are written there as JSON
when the session ends (run without xdist: `-p no:xdist`), for the issue's note.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import signal
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

TALLY: defaultdict[str, Counter[str]] = defaultdict(Counter)
HANG_SECONDS = 60


class Hang(Exception):
    """A command ran past its alarm."""


@contextlib.contextmanager
def no_hang(seconds: int = HANG_SECONDS) -> Iterator[None]:
    """Raise `Hang` in the block after `seconds` (main thread only, as pytest runs tests). The
    test's own time limit (pytest-timeout's alarm, the same timer) is set again afterwards, less
    the time the block took."""

    def alarm(signum: int, frame: object) -> None:
        raise Hang(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    outer, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    started = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:
            left = outer - (time.monotonic() - started)
            signal.setitimer(signal.ITIMER_REAL, max(left, 0.001))


def record(family: str, **outcomes: int) -> None:
    """Count one case of `family`, with its bad outcomes (traceback, hang, deleted, secret)."""
    TALLY[family]["cases"] += 1
    for name in ("traceback", "hang", "deleted", "secret"):
        TALLY[family][name] += outcomes.get(name, 0)


def flag(family: str, outcome: str, count: int = 1) -> None:
    """Add a bad outcome (`deleted`, `secret`) to the family's case just counted."""
    TALLY[family][outcome] += count


def run_command(
    family: str, main: Callable[[list[str]], int], argv: Sequence[str], seconds: int = 60
) -> tuple[int, str, str]:
    """`main(argv)` in this process: its exit status (argparse's exits too), stdout and stderr.
    A traceback or a hang is counted, then fails the test."""
    out, err = io.StringIO(), io.StringIO()
    traceback = hang = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), no_hang(seconds):
            try:
                status = main(list(argv))
            except SystemExit as exited:
                status = exited.code if isinstance(exited.code, int) else 2
    except Hang:
        hang = 1
        raise
    except Exception:
        traceback = 1
        raise
    finally:
        record(family, traceback=traceback, hang=hang)
    return status, out.getvalue(), err.getvalue()


def texts_below(folder: Path) -> str:
    """Every file below `folder` as text (bytes read as latin-1), for a canary search."""
    if not folder.exists():
        return ""
    return "\n".join(
        path.read_bytes().decode("latin-1") for path in sorted(folder.rglob("*")) if path.is_file()
    )


def _dump() -> None:
    target = os.environ.get("HOSTILE_TALLY")
    if target and TALLY:
        Path(target).write_text(json.dumps(TALLY, indent=2, sort_keys=True) + "\n")


atexit.register(_dump)
