"""The log format that carries AIPerf's exports from the perf program back to the stage.

Standard library only: the program writes it, the stage (`stages.core.verdicts`) reads it, so
the format has one definition. Why the exports travel in the log: the stage already reads the
pod's log to decide pass or fail, a log needs no volume the stage could read (no PVC, no write
permission beyond creating the Job), and it survives the pod's exit for as long as the pod object
exists. Each file is gzipped, base64-encoded in short lines and framed by BEGIN/END lines that carry
its size and sha256, so a truncated or garbled log is detected instead of parsed.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

EXPORT_BEGIN = "===== BEGIN AIPERF EXPORT"
EXPORT_END = "===== END AIPERF EXPORT ====="
EXPORT_LINE_WIDTH = 1000
"""Short lines: container runtimes split very long log lines, which the framing would survive
only by luck."""
_BEGIN_LINE = re.compile(
    r"^===== BEGIN AIPERF EXPORT concurrency=(?P<concurrency>\d+) file=(?P<file>[\w.-]+) "
    r"size=(?P<size>\d+) sha256=(?P<sha256>[0-9a-f]{64}) =====$"
)


class ExportFormatError(ValueError):
    """A framed export in the log is truncated, garbled or does not match its digest."""


@dataclass(frozen=True)
class Export:
    """One AIPerf output file of one concurrency level, as carried in the log."""

    concurrency: int
    file: str
    data: bytes


def export_lines(export: Export) -> list[str]:
    """The framed, gzipped, base64 lines that carry one file in the log."""
    digest = hashlib.sha256(export.data).hexdigest()
    encoded = base64.b64encode(gzip.compress(export.data, mtime=0)).decode("ascii")
    body = [
        encoded[start : start + EXPORT_LINE_WIDTH]
        for start in range(0, len(encoded), EXPORT_LINE_WIDTH)
    ]
    begin = (
        f"{EXPORT_BEGIN} concurrency={export.concurrency} file={export.file} "
        f"size={len(export.data)} sha256={digest} ====="
    )
    return [begin, *body, EXPORT_END]


def decode_exports(lines: Iterable[str]) -> list[Export]:
    """Every framed export in a log, checked against its size and digest, in log order."""
    return list(_decoded(iter(lines)))


def _decoded(lines: Iterator[str]) -> Iterator[Export]:
    for line in lines:
        header = _BEGIN_LINE.match(line.rstrip("\r"))
        if line.startswith(EXPORT_BEGIN) and header is None:
            raise ExportFormatError(f"malformed export header: {line[:200]!r}")
        if header is not None:
            yield _read_block(header, lines)


def _read_block(header: re.Match[str], lines: Iterator[str]) -> Export:
    label = f"concurrency {header['concurrency']} {header['file']}"
    chunks: list[str] = []
    for line in lines:
        line = line.rstrip("\r")
        if line == EXPORT_END:
            return _checked(header, label, "".join(chunks))
        if line.startswith(EXPORT_BEGIN):
            break
        chunks.append(line.strip())
    raise ExportFormatError(f"the export of {label} is truncated (no END line)")


def _checked(header: re.Match[str], label: str, encoded: str) -> Export:
    try:
        data = gzip.decompress(base64.b64decode(encoded, validate=True))
    except (ValueError, OSError, EOFError) as error:
        raise ExportFormatError(f"the export of {label} does not decode: {error}") from error
    if len(data) != int(header["size"]) or hashlib.sha256(data).hexdigest() != header["sha256"]:
        raise ExportFormatError(f"the export of {label} does not match its size and sha256")
    return Export(int(header["concurrency"]), header["file"], data)
