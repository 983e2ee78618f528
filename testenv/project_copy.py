"""A copy of the project as a fresh clone would have it: tracked files plus untracked ones that are
not ignored, with their modification times (so `make` sees a copied venv stamp as up to date).

The real tier runs `pulumi` in such a copy, because `pulumi config set` rewrites stack files, and
the lab's benchmark times `make lab` in one.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from common import REPO_ROOT


def project_files(root: Path = REPO_ROOT) -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [name for name in listed.split("\0") if name and (root / name).is_file()]


def copy_project(destination: Path, root: Path = REPO_ROOT) -> Path:
    for name in project_files(root):
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)
    return destination
