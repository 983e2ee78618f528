"""A loopback TCP pass-through that holds every new connection for a fixed time: the lab's
stand-in for the work a real worker does before its engine (HTTP, fetching and looking up the
video in the processor cache), which delays a request's first token but, unlike engine time,
does not hold up the other requests on the worker.

    python -S -E -B lab/delay_proxy.py <upstream port> <delay ms> <port file>

Listens on 127.0.0.1 (a free port, written to <port file> once listening) and forwards each
connection to 127.0.0.1:<upstream port> after <delay ms>. The lab's AIPerf opens a connection
per request, so every request waits once. Standard library only: it runs under the lab's
process guard like the frontend and the workers, and is stopped with them.
"""

from __future__ import annotations

import asyncio
import sys
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


async def serve(upstream_port: int, delay_seconds: float, port_file: Path) -> None:
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

    server = await asyncio.start_server(forward, LOOPBACK, 0)
    port = server.sockets[0].getsockname()[1]
    partial = port_file.with_suffix(".partial")
    partial.write_text(f"{port}\n")
    partial.replace(port_file)  # whole or absent: the lab reads it as soon as it exists
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    upstream_port, delay_ms, port_file = int(argv[0]), float(argv[1]), Path(argv[2])
    asyncio.run(serve(upstream_port, delay_ms / 1000, port_file))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
