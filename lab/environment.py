"""Where `lab/setup.sh` installs the lab, and whether it is complete.

The lab runs Dynamo and AIPerf from their own virtual environments under `.lab/` (both pin
packages that conflict with the project's venvs), plus a tiny tokenizer model. The orchestrator
runs in `.venv-dev` and launches them by path.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from stages.errors import StageFailed

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_LAB_HOME = REPO_ROOT / os.environ.get("LAB_HOME", ".lab")
"""`LAB_HOME` (relative to the repository, as in setup.sh) moves the whole lab install."""
MODEL_NAME = "tiny-llama"
READY_STAMP = ".installed"
"""Written by setup.sh into each venv after its packages install and check cleanly."""


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
