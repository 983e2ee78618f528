"""Child processes: interrupts held while one is started or stopped; each dies with its parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from common import REPO_ROOT
from stages.incluster.processes import (
    deferred_interrupts,
    group_members,
    signals_as_keyboard_interrupt,
    start_group_process,
)


def test_a_sigterm_during_the_block_is_raised_only_after_it_completes() -> None:
    finished = False
    raised = pytest.raises(KeyboardInterrupt, match=f"signal {int(signal.SIGTERM)}")
    with raised, signals_as_keyboard_interrupt(), deferred_interrupts():
        os.kill(os.getpid(), signal.SIGTERM)
        finished = True
    assert finished


def test_ctrl_c_is_held_too_and_handlers_are_restored() -> None:
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt), deferred_interrupts():
        os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is before


def test_no_interrupt_no_exception() -> None:
    with deferred_interrupts():
        value = 1
    assert value == 1


def test_ctrl_c_raises_even_when_inherited_as_ignored() -> None:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a background job of a shell
    try:
        with pytest.raises(KeyboardInterrupt), signals_as_keyboard_interrupt():
            os.kill(os.getpid(), signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


# --- children die with their parent --------------------------------------------------------------

DRIVER = """
import sys, time
from pathlib import Path
from stages.incluster.processes import start_group_process
tmp = Path(sys.argv[1])
script = "import subprocess, time; subprocess.Popen(['sleep', '600']); time.sleep(600)"
child = start_group_process("child", [sys.executable, "-c", script], {}, tmp / "child.log", tmp)
print(child.pgid, flush=True)
time.sleep(600)
"""


def wait_until(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def test_a_sigkilled_parent_leaves_no_child_behind(tmp_path: Path) -> None:
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(tmp_path)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
        process_group=0,
    )
    try:
        assert driver.stdout is not None
        pgid = int(driver.stdout.readline())
        assert wait_until(lambda: len(group_members(pgid)) >= 3, 10)  # guard, child, grandchild

        driver.kill()  # SIGKILL: the driver runs no cleanup at all
        driver.wait()

        assert wait_until(lambda: group_members(pgid) == [], 15), group_members(pgid)
    finally:
        driver.kill()


def test_the_guard_reports_the_childs_exit_status(tmp_path: Path) -> None:
    child = start_group_process(
        "exits-3", [sys.executable, "-c", "raise SystemExit(3)"], {}, tmp_path / "log", tmp_path
    )
    assert child.popen.wait(timeout=30) == 3


def test_a_regular_stop_still_stops_the_whole_group(tmp_path: Path) -> None:
    script = "import subprocess, time; subprocess.Popen(['sleep', '600']); time.sleep(600)"
    child = start_group_process(
        "child", [sys.executable, "-c", script], {}, tmp_path / "log", tmp_path
    )
    assert wait_until(lambda: len(group_members(child.pgid)) == 3, 10)

    child.stop()

    assert group_members(child.pgid) == []


def test_a_child_leads_its_own_group_in_our_session(tmp_path: Path) -> None:
    """A group, never a session: the kernel schedules each session as a unit of its own
    (autogroup), so a child in a new session would take the CPU share of everything in ours."""
    child = start_group_process(
        "sleeper", [sys.executable, "-c", "import time; time.sleep(600)"], {}, tmp_path / "log",
        tmp_path,
    )  # fmt: skip
    try:
        assert os.getpgid(child.popen.pid) == child.popen.pid != os.getpgrp()
        assert os.getsid(child.popen.pid) == os.getsid(0)
    finally:
        child.stop()
