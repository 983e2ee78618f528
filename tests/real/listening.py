"""The TCP sockets a process tree listens on, read from /proc: for "nothing listens off loopback".

/proc/<pid>/net/tcp and tcp6 list the sockets of that process's network namespace (the lab runs
its graphs in one of its own, `lab.isolation`), one per row: the local address in hex, the state
(0A: LISTEN) and the socket's inode, which /proc/<pid>/fd links name as `socket:[inode]`.
/proc/<pid>/net/dev lists that namespace's interfaces: a socket bound to every interface (Dynamo's
ZMQ publishers bind 0.0.0.0, `lab.isolation`) is reachable only on loopback when `lo` is the
namespace's only one.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

from stages.local.host_load import descendants, process_parents

PROC = Path("/proc")
LISTEN = "0A"


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    # The kernel prints each 32-bit word in host order (little-endian here): reverse per word.
    raw = bytes.fromhex(hex_address)
    ordered = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    address = ipaddress.ip_address(ordered)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _listening_sockets(pid: int) -> dict[int, str]:
    """inode -> `address:port` of every listening TCP socket in that process's network
    namespace (none once it has gone)."""
    found = {}
    for table in ("tcp", "tcp6"):
        try:
            rows = (PROC / str(pid) / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            local, state, inode = fields[1], fields[3], int(fields[9])
            if state == LISTEN:
                hex_address, hex_port = local.split(":")
                found[inode] = f"{_address(hex_address)}:{int(hex_port, 16)}"
    return found


def _socket_inodes(pid: int) -> set[int]:
    inodes: set[int] = set()
    try:
        fds = os.listdir(PROC / str(pid) / "fd")
    except OSError:
        return inodes
    for fd in fds:
        try:
            target = os.readlink(PROC / str(pid) / "fd" / fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[len("socket:[") : -1]))
    return inodes


def _interfaces(pid: int) -> list[str]:
    try:
        rows = (PROC / str(pid) / "net" / "dev").read_text().splitlines()[2:]
    except OSError:
        return []
    return [row.split(":", 1)[0].strip() for row in rows]


def listening(root: int) -> dict[str, list[str]]:
    """`address:port` -> the processes (`pid name [interfaces]`) of `root`'s tree that hold it
    listening, with the interfaces of their network namespace."""
    held: dict[str, list[str]] = {}
    for pid in descendants(root, process_parents()):
        sockets = _listening_sockets(pid)
        for inode in _socket_inodes(pid) & set(sockets):
            try:
                name = (PROC / str(pid) / "comm").read_text().strip()
            except OSError:
                name = "?"
            interfaces = ",".join(_interfaces(pid))
            held.setdefault(sockets[inode], []).append(f"{pid} {name} [{interfaces}]")
    return held


def reachable_off_loopback(held: dict[str, list[str]]) -> dict[str, list[str]]:
    """Those of `listening`'s sockets another interface than loopback can reach: bound to an
    address that is not a loopback one, in a namespace with an interface besides `lo`."""
    exposed = {}
    for where, holders in held.items():
        if ipaddress.ip_address(where.rsplit(":", 1)[0]).is_loopback:
            continue
        reachable = [holder for holder in holders if not holder.endswith("[lo]")]
        if reachable:
            exposed[where] = reachable
    return exposed
