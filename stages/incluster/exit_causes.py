"""Why a child process ended, in words a user acts on: a full disk, no permission, no memory, a
signal, or else its own exit status.

A process that cannot write its files often exits with a status that says nothing (Dynamo's
mocker exits 0 when its disk is full), so the status alone is not the cause: this reads the
disk the process writes to and the tail of its log too. Standard library only: the lab, the local
stage runs and the pod programs share it.
"""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

FULL_DISK_BYTES = 64 * 2**20
"""Less free space than this on the disk a process writes to: it is the cause, whatever the
process said (Dynamo writes its model cards, discovery files and logs there)."""

_LOG_CAUSES = (
    ("No space left on device", "the disk is full (no space left on device)"),
    ("Disk quota exceeded", "the disk quota is exceeded"),
    ("Read-only file system", "the file system is read-only"),
    ("Permission denied", "permission denied"),
    ("Too many open files", "too many open files"),
    ("MemoryError", "it ran out of memory"),
    ("Cannot allocate memory", "it ran out of memory"),
    ("Address already in use", "its port was taken by another process"),
)
"""What a log says, as the cause it names (the first that a log's tail shows wins)."""
_SIGNAL_CAUSES = {
    signal.SIGKILL: "killed (SIGKILL: the kernel's out-of-memory killer, or a kill -9)",
    signal.SIGSEGV: "crashed (SIGSEGV)",
    signal.SIGABRT: "aborted (SIGABRT)",
    signal.SIGTERM: "stopped (SIGTERM)",
    signal.SIGINT: "interrupted (SIGINT)",
}


def signal_of(status: int) -> int | None:
    """The signal that ended a process: -N from Popen, 128+N from a shell or our guard."""
    if status < 0:
        return -status
    if 128 < status < 128 + 65:
        return status - 128
    return None


def status_text(status: int | None) -> str:
    if status is None:
        return "still running"
    number = signal_of(status)
    if number is None:
        return f"exit status {status}"
    try:
        name = signal.Signals(number)
    except ValueError:
        return f"killed by signal {number}"
    return _SIGNAL_CAUSES.get(name, f"killed by {name.name}")


def disk_cause(directory: Path) -> str | None:
    """`the disk holding X is full (N MiB free)` when it is; None otherwise (or unknown)."""
    try:
        free = shutil.disk_usage(directory).free
    except OSError:
        return None
    if free >= FULL_DISK_BYTES:
        return None
    return f"the disk holding {directory} is full ({free // 2**20} MiB free)"


def exit_cause(status: int | None, log_tail: str, directory: Path) -> str:
    """`exit status 0; the disk holding /x is full (0 MiB free)`: the status, then each cause
    found on the disk and in the log."""
    disk = disk_cause(directory)
    logged = next((cause for phrase, cause in _LOG_CAUSES if phrase in log_tail), None)
    if disk and logged and "disk" in logged:
        logged = None  # the disk check said it, with the numbers
    return "; ".join(cause for cause in (status_text(status), disk, logged) if cause)
