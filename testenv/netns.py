"""Run a command in a network namespace of its own: its only interface is its own loopback.

    python -m testenv.netns -- COMMAND [ARG...]

`make real` runs the real tier this way. Everything the tier starts (the control plane, the
`pulumi` CLI, its language host, provider and policy pack) then listens where nothing else on the
machine or the network can reach it, and the tier proves by passing that it needs nothing beyond
this machine: a connection to any other address fails at once. Where the machine allows no
unprivileged user namespace (some CI runners), it says so and runs the command as it is.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import struct
import subprocess
import sys
from collections.abc import Sequence

INSIDE_ENV = "COSMOS3_NETWORK_NAMESPACE"
UNSHARE = ("unshare", "--user", "--map-root-user", "--net")
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_IFREQ = "16sH22x"  # struct ifreq: the name, the flags, padding to 40 bytes


def can_isolate() -> bool:
    """True when `unshare` exists and this user may make a user and network namespace."""
    if shutil.which(UNSHARE[0]) is None:
        return False
    probe = subprocess.run([*UNSHARE, "true"], capture_output=True, timeout=10, check=False)
    return probe.returncode == 0


def loopback_up() -> None:
    """`ip link set lo up`, without needing iproute2: a new namespace's loopback starts down."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        request = struct.pack(_IFREQ, b"lo", 0)
        flags = struct.unpack(_IFREQ, fcntl.ioctl(probe, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(probe, _SIOCSIFFLAGS, struct.pack(_IFREQ, b"lo", flags | _IFF_UP))


def main(argv: Sequence[str] | None = None) -> int:
    command = list(sys.argv[1:] if argv is None else argv)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        print("usage: python -m testenv.netns -- COMMAND [ARG...]", file=sys.stderr)
        return 2
    if os.environ.get(INSIDE_ENV) == "inside":
        loopback_up()
        os.execvp(command[0], command)
    if not can_isolate():
        print(
            "testenv.netns: this machine allows no user network namespace; running "
            f"{command[0]} on the machine's network (loopback only by configuration)",
            file=sys.stderr,
        )
        os.execvp(command[0], command)
    inner = [sys.executable, "-m", "testenv.netns", "--", *command]
    os.execvpe(UNSHARE[0], [*UNSHARE, "--", *inner], os.environ | {INSIDE_ENV: "inside"})


if __name__ == "__main__":
    sys.exit(main())
