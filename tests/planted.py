"""A user's files outside every folder a command owns, for the family "own only what you wrote"
(issue 30): a home with an SSH key, a shell's rc file and a folder of notes. The hostile cases
point links, marker entries and lock files at them; afterwards every one must hold its bytes
(`changed`, counted as `deleted` in tests/tally.py).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from tests.tally import flag

FAMILY = "owned"
"""The family's name in the tally (issue 30 item 1)."""

HOME_FILES = {
    ".ssh/id_ed25519": b"-----BEGIN OPENSSH PRIVATE KEY-----\nplanted, never to change\n",
    ".bashrc": b"export PS1='planted> '\n",
    "notes/plan.txt": b"the user's plan, planted\n",
}


def snapshot(root: Path) -> dict[str, str]:
    """Every entry below `root`, by relative name: a file's sha256, a link's target, a folder."""
    found = {}
    for path in sorted(root.rglob("*")) if root.exists() else []:
        name = path.relative_to(root).as_posix()
        if path.is_symlink():
            found[name] = "link:" + os.readlink(path)
        elif path.is_dir():
            found[name] = "folder"
        elif path.is_file():
            found[name] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            found[name] = "other"
    return found


class UserHome:
    """The user's home, planted beside the folders a test hands a command."""

    def __init__(self, root: Path) -> None:
        self.root = root / "home"
        for name, content in HOME_FILES.items():
            (self.root / name).parent.mkdir(parents=True, exist_ok=True)
            (self.root / name).write_bytes(content)
        self.before = snapshot(self.root)

    @property
    def key(self) -> Path:
        return self.root / ".ssh" / "id_ed25519"

    @property
    def rc(self) -> Path:
        return self.root / ".bashrc"

    @property
    def notes(self) -> Path:
        return self.root / "notes"

    def changed(self) -> list[str]:
        """What a command changed, removed or added in the home."""
        after = snapshot(self.root)
        return sorted(
            n for n in self.before.keys() | after.keys() if self.before.get(n) != after.get(n)
        )

    def counted(self) -> list[str]:
        """`changed`, counted as `deleted` for the family's case just recorded."""
        changed = self.changed()
        flag(FAMILY, "deleted", len(changed))
        return changed
