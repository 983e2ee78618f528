"""Why a child process ended (`stages.incluster.exit_causes`): the status, then what the disk
and the log tail say; a full disk is never just "exit status 0"."""

from __future__ import annotations

import shutil
from collections import namedtuple
from pathlib import Path

import pytest

from stages.incluster.exit_causes import exit_cause, signal_of, status_text
from tests.tally import record

Usage = namedtuple("Usage", "total used free")
ROOMY, FULL = 2**30, 3 * 2**20


@pytest.mark.parametrize(
    ("status", "log", "free", "expected"),
    [
        (0, "", FULL, "exit status 0; the disk holding {d} is full (3 MiB free)"),
        (0, "", ROOMY, "exit status 0"),
        (
            1,
            "OSError: [Errno 28] No space left on device: 'x'",
            FULL,
            "exit status 1; the disk holding {d} is full (3 MiB free)",
        ),
        (
            1,
            "OSError: [Errno 28] No space left on device: 'x'",
            ROOMY,
            "exit status 1; the disk is full (no space left on device)",
        ),
        (
            1,
            "OSError: [Errno 122] Disk quota exceeded",
            ROOMY,
            "exit status 1; the disk quota is exceeded",
        ),
        (
            1,
            "PermissionError: [Errno 13] Permission denied: '/run'",
            ROOMY,
            "exit status 1; permission denied",
        ),
        (
            1,
            "OSError: [Errno 30] Read-only file system",
            ROOMY,
            "exit status 1; the file system is read-only",
        ),
        (1, "OSError: [Errno 24] Too many open files", ROOMY, "exit status 1; too many open files"),
        (
            1,
            "OSError: [Errno 98] Address already in use",
            ROOMY,
            "exit status 1; its port was taken by another process",
        ),
        (137, "", ROOMY, "killed (SIGKILL: the kernel's out-of-memory killer, or a kill -9)"),
        (
            -9,
            "",
            FULL,
            "killed (SIGKILL: the kernel's out-of-memory killer, or a kill -9); the disk holding {d} is full (3 MiB free)",
        ),
        (139, "", ROOMY, "crashed (SIGSEGV)"),
        (-6, "", ROOMY, "aborted (SIGABRT)"),
        (143, "", ROOMY, "stopped (SIGTERM)"),
        (None, "", ROOMY, "still running"),
        (-64, "", ROOMY, "killed by SIGRTMAX"),
    ],
)
def test_a_process_end_names_its_cause(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    status: int | None,
    log: str,
    free: int,
    expected: str,
) -> None:
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(2**40, 2**40 - free, free))
    record("causes (processes)")
    assert exit_cause(status, log, tmp_path) == expected.format(d=tmp_path)


def test_an_unknown_disk_is_no_cause(tmp_path: Path) -> None:
    assert exit_cause(2, "", tmp_path / "gone") == "exit status 2"


def test_signals_are_read_from_either_convention() -> None:
    assert signal_of(-9) == signal_of(137) == 9
    assert signal_of(1) is None and signal_of(128) is None
    assert status_text(1) == "exit status 1"
