"""Keep the lab's sockets off the machine's network: `lab ab` runs in a network namespace of its own.

Everything the lab starts listens on 127.0.0.1 except one thing we cannot configure: Dynamo 1.6.1's
ZMQ event plane binds its publishers to every interface (`tcp://0.0.0.0:0`, hard-coded in the
runtime; DYN_EVENT_PLANE_HOST only changes the address it advertises, and the only other event
plane is NATS). Four such sockets per mock worker. So `python -m lab ab`, which needs nothing from
outside the machine while it runs, re-executes itself under `unshare --user --map-root-user --net`:
a new network namespace whose only interface is its own loopback, brought up here. The frontend,
the workers, the stage programs and AIPerf all run inside it; nothing of the lab can be reached
from another host, or from this one outside the namespace.

Where the machine does not allow unprivileged user namespaces (some CI runners), the lab says so
and runs as before. `python -m lab up` stays on the machine's loopback (you talk to its frontend
from outside), and says what it cannot close.
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

ISOLATED_ENV = "LAB_NETWORK_NAMESPACE"
"""Set inside the namespace (also to `off` to opt out of isolating)."""
UNSHARE = ("unshare", "--user", "--map-root-user", "--net")
ZMQ_WARNING = (
    "lab: note: Dynamo's ZMQ event plane binds 4 sockets per worker on all interfaces (no setting "
    "in Dynamo 1.6.1); everything else listens on 127.0.0.1"
)
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_IFREQ = "16sH22x"  # struct ifreq: the name, the flags, padding to 40 bytes


def can_isolate() -> bool:
    """True when `unshare` exists and this user may make a user and network namespace."""
    if shutil.which(UNSHARE[0]) is None:
        return False
    probe = subprocess.run([*UNSHARE, "true"], capture_output=True, timeout=10, check=False)
    return probe.returncode == 0


def run_isolated(argv: Sequence[str]) -> None:
    """Re-execute `python -m lab argv` in a network namespace of its own, when possible; inside
    it, bring the loopback up and return. Returns too (after saying why) when it cannot isolate."""
    state = os.environ.get(ISOLATED_ENV)
    if state == "inside":
        loopback_up()
        return
    if state == "off":
        return
    if not can_isolate():
        print(f"{ZMQ_WARNING}; this machine allows no user network namespace to isolate them "
              f"(set {ISOLATED_ENV}=off to silence this)", file=sys.stderr)  # fmt: skip
        return
    env = os.environ | {ISOLATED_ENV: "inside"}
    command = [*UNSHARE, "--", sys.executable, "-m", "lab", *argv]
    os.execvpe(UNSHARE[0], command, env)


def loopback_up() -> None:
    """`ip link set lo up`, without needing iproute2: a new namespace's loopback starts down."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        request = struct.pack(_IFREQ, b"lo", 0)
        flags = struct.unpack(_IFREQ, fcntl.ioctl(probe, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(probe, _SIOCSIFFLAGS, struct.pack(_IFREQ, b"lo", flags | _IFF_UP))
