"""A loopback TCP pass-through that holds every new connection for a fixed time: the lab's
stand-in for the work a real worker does before its engine (HTTP, fetching and looking up the
video in the processor cache), which delays a request's first token but, unlike engine time,
does not hold up the other requests on the worker.

    python -S -E -B lab/delay_proxy.py <upstream port> <delay ms> <port file>

Listens on 127.0.0.1 (a free port, written to <port file> once listening) and forwards each
connection to 127.0.0.1:<upstream port> after <delay ms>. The lab's AIPerf opens a connection
per request, so every request waits once. Standard library only: it runs under the lab's
process guard like the frontend and the workers, and is stopped with them.

`forward_connections` is the pass-through itself, on a listening socket the caller gives; `lab up`
uses it with no delay to reach a graph in its own network namespace from the machine's loopback.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import Callable
from pathlib import Path

LOOPBACK = "127.0.0.1"
CHUNK_BYTES = 65536


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


async def forward_connections(
    listener: socket.socket,
    upstream_port: int,
    delay_seconds: float = 0.0,
    listening: Callable[[int], None] | None = None,
) -> None:
    """Accept on `listener` until cancelled; each connection goes to 127.0.0.1:`upstream_port`
    after `delay_seconds`. `listening` is told the port once connections are accepted."""

    async def forward(
        client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter
    ) -> None:
        await asyncio.sleep(delay_seconds)
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(
                LOOPBACK, upstream_port
            )
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(
            _pipe(client_reader, upstream_writer), _pipe(upstream_reader, client_writer)
        )

    server = await asyncio.start_server(forward, sock=listener)
    if listening is not None:
        listening(int(listener.getsockname()[1]))
    async with server:
        await server.serve_forever()


async def serve(upstream_port: int, delay_seconds: float, port_file: Path) -> None:
    def announce(port: int) -> None:
        partial = port_file.with_suffix(".partial")
        partial.write_text(f"{port}\n")
        partial.replace(port_file)  # whole or absent: the lab reads it as soon as it exists

    await forward_connections(loopback_listener(), upstream_port, delay_seconds, announce)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    upstream_port, delay_ms, port_file = int(argv[0]), float(argv[1]), Path(argv[2])
    asyncio.run(serve(upstream_port, delay_ms / 1000, port_file))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
