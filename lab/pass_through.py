"""The lab's loopback TCP pass-through in front of its frontends: it holds every new connection
for a fixed time, and, in front of several frontends, gives each connection to one of them.

    python -S -E -B lab/pass_through.py <port file> <delay ms> <hash|random> <frontend port>...

The delay is the lab's stand-in for the work a real worker does before its engine (HTTP, fetching
and looking up the video in the processor cache), which delays a request's first token but, unlike
engine time, does not hold up the other requests on the worker.

Several frontends: Dynamo's session affinity lives in each frontend process (ai-dynamo/dynamo
#11035), so a video's questions keep their worker only if they all reach one frontend. `hash`
chooses the frontend by a hash of the request's `X-Dynamo-Session-ID` (what a consistent-hashing
load balancer in front of the cluster's frontend replicas does; a request without it goes in
turn); `random` gives each connection to a frontend at random, as a plain Service does
(kube-proxy's default iptables mode picks an endpoint at random; a seeded choice here, so runs
repeat). The choice is made per connection, on its first request's head: the lab's clients open a connection per request
(AIPerf with `never` reuse, the smoke probe), so every request is chosen for.

Listens on 127.0.0.1 (a free port, written to <port file> once listening). Standard library only:
it runs under the lab's process guard like the frontends and the workers, and is stopped with
them. `forward_connections` is the pass-through itself, on a listening socket the caller gives;
`lab up` uses it with no delay to reach a graph in its own network namespace from the machine's
loopback.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import socket
import sys
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

LOOPBACK = "127.0.0.1"
CHUNK_BYTES = 65536
MAX_HEAD_BYTES = 65536
SESSION_HEADER = b"x-dynamo-session-id"
"""components.routing.SESSION_HEADER, lower-cased (this file runs without the project's imports)."""


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK_BYTES):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


def loopback_listener(port: int = 0) -> socket.socket:
    """A TCP socket listening on 127.0.0.1 only (never every interface), at `port` or a free one."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((LOOPBACK, port))
    listener.listen(128)
    return listener


def session_id(head: bytes) -> bytes | None:
    """The session header's value in an HTTP request head, or None."""
    for line in head.split(b"\r\n")[1:]:
        name, colon, value = line.partition(b":")
        if colon and name.strip().lower() == SESSION_HEADER:
            return value.strip()
    return None


class FrontendChoice:
    """Which frontend a connection goes to: by the hash of its session (`hashing`; a request
    without one in turn), else at random (seeded)."""

    def __init__(self, ports: Sequence[int], hashing: bool, seed: int = 0) -> None:
        self.ports = list(ports)
        self.hashing = hashing
        self._turns = itertools.cycle(self.ports)
        self._random = random.Random(seed)

    def choose(self, head: bytes) -> int:
        if not self.hashing:
            return self._random.choice(self.ports)
        session = session_id(head)
        if session is None:
            return next(self._turns)
        return self.ports[zlib.crc32(session) % len(self.ports)]  # the same on every run


async def forward_connections(
    listener: socket.socket,
    upstream_port: int | FrontendChoice,
    delay_seconds: float = 0.0,
    listening: Callable[[int], None] | None = None,
) -> None:
    """Accept on `listener` until cancelled; each connection goes after `delay_seconds` to
    127.0.0.1:`upstream_port`, or to the frontend a `FrontendChoice` chooses from its first
    request's head. `listening` is told the port once connections are accepted."""

    async def forward(
        client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter
    ) -> None:
        await asyncio.sleep(delay_seconds)
        head = b""
        port = upstream_port
        if isinstance(port, FrontendChoice):
            try:
                head = await client_reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                client_writer.close()
                return
            port = port.choose(head)
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(LOOPBACK, port)
        except OSError:
            client_writer.close()
            return
        upstream_writer.write(head)
        await asyncio.gather(
            _pipe(client_reader, upstream_writer), _pipe(upstream_reader, client_writer)
        )

    server = await asyncio.start_server(forward, sock=listener, limit=MAX_HEAD_BYTES)
    if listening is not None:
        listening(int(listener.getsockname()[1]))
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] not in ("hash", "random"):
        print(__doc__, file=sys.stderr)
        return 2
    port_file, delay_ms, choice = Path(argv[0]), float(argv[1]), argv[2]
    ports = [int(port) for port in argv[3:]]
    upstream = ports[0] if len(ports) == 1 else FrontendChoice(ports, hashing=choice == "hash")

    def announce(port: int) -> None:
        partial = port_file.with_suffix(".partial")
        partial.write_text(f"{port}\n")
        partial.replace(port_file)  # whole or absent: the lab reads it as soon as it exists

    asyncio.run(forward_connections(loopback_listener(), upstream, delay_ms / 1000, announce))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
