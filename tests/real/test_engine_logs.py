"""The engine's environment keeps the `pulumi` CLI's own logs small (docs/engine.md).

Each command lists and stats every log in PULUMI_HOME/logs before it starts, and the engine's
PULUMI_HOME is shared by every run: left to the CLI's default (500 MB), 40,000 logs cost each
command 0.3 CPU-seconds. The pinned CLI is what must honour the cap, so it runs here for real.
"""

from __future__ import annotations

import os
import subprocess
from datetime import datetime, timedelta
from pathlib import Path

from testenv.engine import Engine

PLANTED = 40
LOG_BYTES = 100_000


def test_a_command_trims_the_logs_to_the_engines_cap_oldest_first(
    engine: Engine, tmp_path: Path
) -> None:
    logs = tmp_path / "pulumi-home" / "logs"
    logs.mkdir(parents=True)
    now = datetime.now()  # the CLI names and ages its logs by local time
    planted = []
    for minutes in range(PLANTED, 0, -1):  # oldest first; all far younger than 7 days
        stamp = (now - timedelta(minutes=minutes)).strftime("%Y%m%dT%H%M%S")
        planted.append(logs / f"pulumi-{stamp}-{minutes}-stack_ls.log")
        planted[-1].write_bytes(os.urandom(LOG_BYTES))
    (tmp_path / "backend").mkdir()
    environment = engine.environment() | {
        "PULUMI_HOME": str(tmp_path / "pulumi-home"),
        "PULUMI_BACKEND_URL": f"file://{tmp_path / 'backend'}",
        "HOME": str(tmp_path),
        "PATH": os.environ["PATH"],
    }

    subprocess.run(
        [str(engine.tool("pulumi")), "stack", "ls", "--all"],
        env=environment,
        cwd=tmp_path,
        capture_output=True,
        check=True,
        timeout=60,
    )

    kept = [path for path in planted if path.exists()]
    assert 0 < len(kept) * LOG_BYTES <= 1024 * 1024, "at most 1 MB of logs is kept"
    assert kept == planted[-len(kept) :], "the newest logs are the ones kept"
