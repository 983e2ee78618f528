"""Where `lab/setup.sh` installs the lab, whether it is complete, and the environment its
Dynamo processes run in.

The lab runs Dynamo and AIPerf from their own virtual environments under `.lab/` (both pin
packages that conflict with the project's venvs), plus a tiny tokenizer model. The orchestrator
runs in `.venv-dev` and launches them by path.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from common import REPO_ROOT
from common.ports import LOOPBACK
from stages.errors import StageFailed

DEFAULT_LAB_HOME = REPO_ROOT / os.environ.get("LAB_HOME", ".lab")
"""`LAB_HOME` (relative to the repository, as in setup.sh) moves the whole lab install."""
MODEL_NAME = "tiny-llama"
READY_STAMP = ".installed"
"""Written by setup.sh into each venv after its packages install and check cleanly."""

# Python variables that would let the main venv leak into the Dynamo venv's interpreter.
_INHERITED_PYTHON_VARIABLES = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")


class LabNotInstalled(StageFailed):
    """The lab environment is missing or incomplete."""


@dataclass(frozen=True)
class LabInstall:
    home: Path = DEFAULT_LAB_HOME

    @property
    def dynamo_venv(self) -> Path:
        return self.home / "dynamo-venv"

    @property
    def aiperf_venv(self) -> Path:
        return self.home / "aiperf-venv"

    @property
    def dynamo_python(self) -> Path:
        return self.dynamo_venv / "bin" / "python"

    @property
    def aiperf_executable(self) -> Path:
        return self.aiperf_venv / "bin" / "aiperf"

    @property
    def model_dir(self) -> Path:
        return self.home / "model"

    def missing(self) -> list[str]:
        """What setup.sh has not (fully) installed yet; empty when the lab is ready."""
        checks = {
            "Dynamo venv": self.dynamo_venv / READY_STAMP,
            "AIPerf venv": self.aiperf_venv / READY_STAMP,
            "tiny model": self.model_dir / "tokenizer_config.json",
        }
        return [f"{what} ({path})" for what, path in checks.items() if not path.exists()]

    def require(self) -> LabInstall:
        missing = self.missing()
        if missing:
            raise LabNotInstalled(
                "the lab is not installed: missing "
                + ", ".join(missing)
                + "; run: bash lab/setup.sh"
            )
        return self


LOOPBACK_ONLY = {
    name: LOOPBACK
    for name in (
        "DYN_TCP_RPC_HOST",
        "DYN_TCP_RESPONSE_STREAM_HOST",
        "DYN_EVENT_PLANE_HOST",
        "DYN_SYSTEM_HOST",
    )
}
"""Where a graph process listens besides its HTTP port: set over any environment, a deployed
graph's object's too (the lab never listens beyond loopback)."""


def dynamo_environment(run_dir: Path, base: Mapping[str, str]) -> dict[str, str]:
    """Environment shared by the frontend and the workers: loopback only, state in `run_dir`."""
    env = {k: v for k, v in base.items() if k not in _INHERITED_PYTHON_VARIABLES}
    env.update(
        DYN_DISCOVERY_BACKEND="file",
        DYN_FILE_KV=str(run_dir / "discovery"),
        DYN_REQUEST_PLANE="tcp",
        DYN_EVENT_PLANE="zmq",
        **LOOPBACK_ONLY,
        DYN_SELF_HOST_METADATA="0",
        HF_HUB_OFFLINE="1",
        HOME=str(run_dir / "home"),
        TMPDIR=str(run_dir / "tmp"),
    )
    return env
