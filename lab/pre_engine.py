"""Starting the lab's pre-engine delay (`lab/delay_proxy.py`) under the process guard."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from common import REPO_ROOT
from common.input_files import MAX_STATE_BYTES, read_text
from stages.errors import StageFailed
from stages.incluster.processes import GroupProcess, start_group_process

DELAY_PROXY = Path(__file__).resolve().parent / "delay_proxy.py"
START_SECONDS = 10.0
POLL_SECONDS = 0.05


def start_delay_proxy(
    run_dir: Path, upstream_port: int, delay_ms: float, env: dict[str, str]
) -> tuple[GroupProcess, int]:
    """The proxy in front of `upstream_port`, and the port clients use instead."""
    port_file = run_dir / "tmp" / "delay-proxy.port"
    port_file.unlink(missing_ok=True)
    # Laid out by hand (formatter skipped): a command line, the interpreter and its flags, then
    # the proxy's own arguments.
    argv = [
        sys.executable, "-S", "-E", "-B", str(DELAY_PROXY),
        str(upstream_port), f"{delay_ms}", str(port_file),
    ]  # fmt: skip
    log_path = run_dir / "logs" / "delay-proxy.log"
    proxy = start_group_process("delay-proxy", argv, env, log_path, REPO_ROOT)
    deadline = time.monotonic() + START_SECONDS
    while not port_file.exists():
        if proxy.exit_code() is not None or time.monotonic() > deadline:
            proxy.stop()
            raise StageFailed(
                f"the lab's delay proxy did not start\n---- {log_path} ----\n{proxy.log_tail(15)}"
            )
        time.sleep(POLL_SECONDS)
    return proxy, int(read_text(port_file, "delay proxy's port file", MAX_STATE_BYTES))
