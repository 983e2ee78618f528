"""What processes listen on, read from /proc: for "loopback only" and "nothing listens off loopback".

/proc/<pid>/net/{tcp,tcp6,udp,udp6} list the sockets of that process's network namespace (the lab
runs its graphs in one of its own, `lab.isolation`), one per row: the local address in hex, the
state (0A: a listening TCP socket) and the socket's inode, which /proc/<pid>/fd links name as
`socket:[inode]`. /proc/<pid>/net/dev lists the namespace's interfaces: a socket bound to every
interface (Dynamo's ZMQ publishers bind 0.0.0.0) is reachable only on loopback when `lo` is the
namespace's only one.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

from stages.local.host_load import descendants, process_parents

PROC = Path("/proc")
_LISTEN = "0A"


def listening(pid: int) -> list[str]:
    """The addresses a process listens on (TCP and UDP, IPv4 and IPv6); none once it has gone."""
    try:
        return _listening(pid)
    except OSError:  # it exited while being read
        return []


def _listening(pid: int) -> list[str]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("tcp", "tcp6", "udp", "udp6"):
        for row in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = row.split()
            tcp_listen = table.startswith("tcp") and fields[3] == _LISTEN
            if fields[9] in inodes and (tcp_listen or table.startswith("udp")):
                found.append(_address(fields[1]))
    return found


def _address(hex_address: str) -> str:
    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    # /proc prints each 32-bit word in host (little-endian) order.
    ordered = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return f"{ipaddress.ip_address(ordered)}:{int(port, 16)}"


def _interfaces(pid: int) -> list[str]:
    try:
        rows = (PROC / str(pid) / "net" / "dev").read_text().splitlines()[2:]
    except OSError:
        return []
    return [row.split(":", 1)[0].strip() for row in rows]


def tree_listening(root: int) -> dict[str, list[str]]:
    """`address:port` -> the processes of `root`'s tree that listen there, as `pid name
    [interfaces of its network namespace]`."""
    held: dict[str, list[str]] = {}
    for pid in descendants(root, process_parents()):
        addresses = listening(pid)
        if not addresses:
            continue
        try:
            name = (PROC / str(pid) / "comm").read_text().strip()
        except OSError:
            name = "?"
        holder = f"{pid} {name} [{','.join(_interfaces(pid))}]"
        for address in addresses:
            held.setdefault(address, []).append(holder)
    return held


def _loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address.rsplit(":", 1)[0])
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


def reachable_off_loopback(held: dict[str, list[str]]) -> dict[str, list[str]]:
    """Those of `tree_listening`'s sockets another interface than loopback can reach: bound to
    an address that is not a loopback one, in a namespace with an interface besides `lo`."""
    exposed = {}
    for where, holders in held.items():
        reachable = [holder for holder in holders if not holder.endswith("[lo]")]
        if reachable and not _loopback(where):
            exposed[where] = reachable
    return exposed
