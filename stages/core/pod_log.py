"""A pod program's run and its log, wherever it ran: a Job's pod on a cluster, or a local process.

The pod programs (`stages.incluster`) print progress lines, and for perf the AIPerf exports framed
in the log (`log_exports.export_lines`). Both targets read the same log the same way: `LogEcho`
shows it as it grows with each export as one line, and `PodRun` is how the run ended.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from stages.incluster.log_exports import EXPORT_BEGIN, EXPORT_END

LOG_TAIL_LINES = 25


@dataclass(frozen=True)
class PodRun:
    """How a pod program's run ended and what it printed."""

    what: str
    """Where it ran, for messages: `Job cosmos3-nano-reasoner-smoke`, `the local perf program`."""
    succeeded: bool
    log: str
    failure: str | None = None

    @property
    def lines(self) -> list[str]:
        return [line for line in self.log.splitlines() if line.strip()]

    @property
    def last_line(self) -> str:
        return self.lines[-1] if self.lines else ""

    def tail(self, count: int = LOG_TAIL_LINES) -> str:
        """The last log lines, without the exports' base64 bodies."""
        readable = without_export_bodies(self.lines)
        return "\n".join(readable[-count:]) or "(the program printed nothing)"


def without_export_bodies(lines: list[str]) -> list[str]:
    """The lines a reader wants: each framed export's BEGIN line stands for its whole block."""
    kept, in_export = [], False
    for line in lines:
        if line.startswith(EXPORT_BEGIN):
            kept.append(line)
            in_export = True
        elif line.rstrip("\r") == EXPORT_END:
            in_export = False
        elif not in_export:
            kept.append(line)
    return kept


def printer(prefix: str, stream: TextIO | None = None) -> Callable[[str], None]:
    """A stage's `say`: each line `[prefix] ...` on `stream` (stderr when None), flushed."""
    target = stream or sys.stderr

    def say(message: str) -> None:
        print(f"[{prefix}] {message}", file=target, flush=True)

    return say


class LogEcho:
    """Prints a growing log's new complete lines; an export shows as one line, not its base64."""

    def __init__(self, write: Callable[[str], None]) -> None:
        self.write = write
        self.printed = 0
        self.in_export = False

    def update(self, log: str, final: bool = False) -> None:
        lines = log.split("\n")
        complete = lines if final else lines[:-1]  # the last piece may still be growing
        if final and complete and complete[-1] == "":
            complete = complete[:-1]
        for line in complete[self.printed :]:
            self._echo(line)
        self.printed = max(self.printed, len(complete))

    def _echo(self, line: str) -> None:
        if line.startswith(EXPORT_BEGIN):
            self.in_export = True
            self.write("  pod| (export " + line.removeprefix(EXPORT_BEGIN).strip(" =") + ")")
        elif line == EXPORT_END:
            self.in_export = False
        elif not self.in_export:
            self.write(f"  pod| {line}")
