"""The harness's loopback ports: reserved across processes, never one that is listened on, never
from the kernel's ephemeral range. Four real-tier workers starting clusters at once once gave two
components the same port; the cross-process test below is that race."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from common import REPO_ROOT, ports


def test_ports_come_from_below_the_ephemeral_range_and_fit_a_signed_16_bit_parser(
    tmp_path: Path,
) -> None:
    low = int(ports.EPHEMERAL_RANGE.read_text().split()[0])
    taken = [ports.free_port(tmp_path) for _ in range(30)]
    assert len(set(taken)) == 30
    assert all(ports.LOWEST <= port < min(low, 32768) for port in taken)  # Dynamo's DYN_SYSTEM_PORT
    assert {f"port-{port}" for port in taken} <= {marker.name for marker in tmp_path.iterdir()}


def test_a_port_something_listens_on_is_never_handed_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as listener:
        listener.bind((ports.LOOPBACK, 0))
        listener.listen()
        busy = listener.getsockname()[1]
        monkeypatch.setattr(ports, "_candidates", lambda: range(busy, busy + 2))
        assert {ports.free_port(tmp_path)} == {busy + 1}


def test_a_fresh_reservation_blocks_its_port_and_a_stale_one_is_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    start = _bindable_pair()
    monkeypatch.setattr(ports, "_candidates", lambda: range(start, start + 1))
    (tmp_path / f"port-{start}").touch()
    with pytest.raises(OSError, match=f"no free loopback port in {start}-{start}.*{tmp_path}"):
        ports.free_port(tmp_path)
    stale = time.time() - ports.RESERVE_SECONDS - 1
    os.utime(tmp_path / f"port-{start}", (stale, stale))
    assert ports.free_port(tmp_path) == start


def test_processes_racing_for_a_small_range_never_share_a_port(tmp_path: Path) -> None:
    start = _bindable_pair()
    take_ten = (
        "import sys; from pathlib import Path; from common import ports;"
        f" ports._candidates = lambda: range({start}, {start + 80});"
        " print(*(ports.free_port(Path(sys.argv[1])) for _ in range(10)))"
    )
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", take_ten, str(tmp_path)],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    taken = [int(port) for racer in racers for port in racer.communicate(timeout=60)[0].split()]
    assert all(racer.returncode == 0 for racer in racers)
    assert len(taken) == 40 and len(set(taken)) == 40


def _bindable_pair() -> int:
    """A port from the harness's range, with its neighbour, that nothing listens on right now."""
    for start in range(ports.LOWEST + 5000, ports.LOWEST + 6000, 2):
        if ports._bindable(start) and ports._bindable(start + 1):
            return start
    raise AssertionError("no two free neighbouring ports")
