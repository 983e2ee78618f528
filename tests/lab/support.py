"""What the lab tests share: lab processes found by a marker in their environment (every child
inherits it, even one that retitles itself), and a mock worker's own request count."""

from __future__ import annotations

import sys
from pathlib import Path


def lab_ab_direct(out: Path, *options: str) -> list[str]:
    """`python -m lab ab --direct` on two workers into `out`, and `options`: the A/B as a user
    runs it, the graphs started directly."""
    return [
        sys.executable,
        "-m",
        "lab",
        "ab",
        "--direct",
        "--workers",
        "2",
        "--out",
        str(out),
        *options,
    ]


def served_requests(worker_metrics: str) -> int:
    """A mock worker's own count of the `generate` requests it served, from its /metrics text."""
    return int(
        sum(
            float(line.rsplit(" ", 1)[1])
            for line in worker_metrics.splitlines()
            if line.startswith("dynamo_component_requests_total{")
            and 'dynamo_endpoint="generate"' in line
        )
    )


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def processes_with(marker_text: str) -> list[int]:
    """PIDs of processes whose environment contains `marker_text` (children inherit it)."""
    marker = marker_text.encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found
