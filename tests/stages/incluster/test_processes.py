"""Interrupts are held while a child is started or stopped, then raised."""

from __future__ import annotations

import os
import signal

import pytest

from stages.incluster.processes import deferred_interrupts, signals_as_keyboard_interrupt


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
