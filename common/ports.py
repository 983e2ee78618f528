"""Loopback ports for the processes we start (control plane, S3 server, the lab's frontend),
reserved across processes.

Asking the OS for port 0 and closing the probe hands out a port that is free *now*; the process
binds it seconds later. Two things can take it in between, and on CI one did (a
kube-controller-manager died of "address already in use" while four real-tier workers started
clusters and `pulumi` plugins at once):
- another process of ours given the same port: each port is reserved by a file in one folder
  shared by every process of this user (controller-runtime's envtest does the same in
  pkg/internal/testing/addr), kept for RESERVE_SECONDS, long past any bind;
- a port the kernel hands out meanwhile, to a `pulumi` plugin listening on port 0 or as an
  outgoing connection's source port: it takes those from ip_local_port_range, so the ports
  handed out here come from below it, where it never looks.
"""

from __future__ import annotations

import errno
import os
import random
import socket
import time
from pathlib import Path

LOOPBACK = "127.0.0.1"
RESERVE_SECONDS = 300.0
LOWEST = 10000  # below: well-known services' habits (8080, 9090, ...)
SIGNED_16_BIT = 32768
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
ATTEMPTS = 200


def reservations() -> Path:
    """Per user, beside other caches: $XDG_CACHE_HOME/cosmos3-ports (~/.cache/cosmos3-ports)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cosmos3-ports"


def free_port(folder: Path | None = None) -> int:
    """A loopback port nothing listens on, outside the ephemeral range, reserved by this process."""
    folder = folder or reservations()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    _sweep(folder)
    candidates = _candidates()
    for _ in range(ATTEMPTS):
        port = random.choice(candidates)
        if _reserve(folder, port) and _bindable(port):
            return port
    raise OSError(
        errno.EADDRINUSE,
        f"no free loopback port in {candidates.start}-{candidates.stop - 1} after {ATTEMPTS}"
        f" tries; reservations older than {RESERVE_SECONDS:.0f} s in {folder} are reused",
    )


def _candidates() -> range:
    """Below the kernel's ephemeral range and below 32768: Dynamo 1.6.1 parses DYN_SYSTEM_PORT as
    a signed 16-bit number (should the ephemeral range start low, all of 10000-32767)."""
    try:
        low = int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = SIGNED_16_BIT
    top = min(low, SIGNED_16_BIT)
    return range(LOWEST, top) if top - LOWEST >= 1000 else range(LOWEST, SIGNED_16_BIT)


def _sweep(folder: Path) -> None:
    """Forget stale reservations, so the folder holds only the last few minutes' ports."""
    for marker in folder.glob("port-*"):
        try:
            if time.time() - marker.stat().st_mtime > RESERVE_SECONDS:
                marker.unlink()
        except FileNotFoundError:
            pass  # swept by another process


def _reserve(folder: Path, port: int) -> bool:
    """Create `port-<n>` exclusively (a stale one was swept before)."""
    flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW
    try:
        os.close(os.open(folder / f"port-{port}", flags, 0o600))
    except FileExistsError:
        return False  # reserved by another process, a minute ago or just now
    return True


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((LOOPBACK, port))
        except OSError:
            return False
    return True
