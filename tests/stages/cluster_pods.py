"""Running the in-cluster pod program here, the way the Job runs it: from the ConfigMap's files.

The ConfigMap the stage would submit is laid out in a directory exactly as the Job's volume
mounts it under /config; only the config (or plan) is rebuilt, by the same builder, for loopback
(frontend, media host and paths). The program then runs with `python -S -E` (no site-packages,
no PYTHON* variables) and a bare environment: it proves it needs nothing but the standard library
and the mounted files.
"""

from __future__ import annotations

import gzip
import json
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stages.cluster_jobs import PERF_PLAN, SMOKE_CONFIG, Manifest, pod_files


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass(frozen=True)
class PodRun:
    status: int
    log: str

    @property
    def last_line(self) -> str:
        lines = [line for line in self.log.splitlines() if line.strip()]
        return lines[-1] if lines else ""


def lay_out(config_map: Manifest, root: Path, config: dict[str, Any]) -> Path:
    """The pod's /config in `root`, with the loopback config; returns the config's path."""
    for relative, data in pod_files(config_map).items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_bytes(data)
    if (root / PERF_PLAN).exists():
        (root / PERF_PLAN).write_bytes(gzip.compress(json.dumps(config).encode()))
        return root / PERF_PLAN
    (root / SMOKE_CONFIG).write_text(json.dumps(config))
    return root / SMOKE_CONFIG


def run_pod(module: str, config: Path, home: Path, timeout: float = 300) -> PodRun:
    """`python -m <module> <config>` from the laid-out /config, as the Job's last line does."""
    home.mkdir(parents=True, exist_ok=True)
    # TMPDIR as in the Job (/tmp): AIPerf's ZMQ socket paths below it must stay under 108 bytes.
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "TMPDIR": "/tmp"}
    result = subprocess.run(
        [sys.executable, "-S", "-E", "-m", module, str(config)],
        cwd=config.parent, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    return PodRun(result.returncode, result.stdout + result.stderr)
