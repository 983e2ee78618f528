"""Helpers for the tests that start lab processes: find them by a marker in their environment
(every child inherits it, even one that retitles itself), and kill whatever a test leaves."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator

import pytest

from tests.lab.support import processes_with


@pytest.fixture
def reap_marked() -> Iterator[list[str]]:
    """Markers of processes a test started; whatever still carries one after the test (its
    assertions already made) is killed by PID, so a failing test leaves nothing running."""
    markers: list[str] = []
    yield markers
    for marker in markers:
        for pid in processes_with(marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
