"""Output folders a command owns: it writes only its own files, and one run at a time.

Every command that writes a folder (`--out`, `--dest`) claims it first (`claimed_folder`):

- a new or empty folder becomes the command's: it gets `.written-files.json`, which names the
  writer and, for a command that tracks its files (the offline render, the golden manifests), the
  files it wrote;
- a folder with that marker from the same writer is the command's again;
- anything else is refused before anything is written, with a message naming the option: a file
  where the folder should be, the project's own folder or one above it, a folder holding files the
  command did not write, a folder another command owns.

While the command runs it holds the folder's lock (`common.run_lock`): a second run on the same
folder is refused, naming the first. A tracking command replaces its files with `replace_files`,
which removes a file it no longer writes only when its marker lists it. Nothing else is ever
deleted.

Standard library only: the tools, the stages and the lab all use it.
"""

from __future__ import annotations

import errno
import json
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from common.run_lock import LOCK_FILE, FolderInUse, RunLock, acquire

MARKER_FILE = ".written-files.json"
OWNERSHIP_FILES = frozenset({MARKER_FILE, LOCK_FILE})
"""The files a claim adds to a folder: never results, never archived."""
from common import REPO_ROOT

SHOWN_NAMES = 3

_REASONS = {
    errno.ENOSPC: "the disk is full (no space left on device)",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "the file system is read-only",
}


class OutputFolderError(ValueError):
    """A folder a command may not write, or cannot; the message names the option and the fix."""


def os_error_reason(error: OSError) -> str:
    """What went wrong, in words a user acts on: a full disk, no permission, ..."""
    return _REASONS.get(error.errno or 0) or error.strerror or type(error).__name__


@dataclass
class OwnedFolder:
    """A folder this run owns and has locked."""

    path: Path
    writer: str
    listed: frozenset[str] | None
    """The files the marker lists (a tracking writer), or None: the whole folder is the writer's."""
    lock: RunLock

    def replace_files(self, files: Mapping[str, bytes]) -> list[Path]:
        """Write `files` (name -> content) and remove the listed files no longer among them;
        each write replaces the name whole, never through a link that stands there."""
        written = [write_whole(self.path / name, content) for name, content in files.items()]
        for stale in sorted((self.listed or frozenset()) - set(files)):
            (self.path / stale).unlink(missing_ok=True)
        self.listed = frozenset(files)
        _write_marker(self.path, self.writer, self.listed)
        return written


@contextmanager
def claimed_folder(
    folder: Path,
    writer: str,
    option: str = "--out",
    tracks_files: bool = False,
    command: str | None = None,
) -> Iterator[OwnedFolder]:
    """`folder`, claimed for `writer` and locked for the block; `OutputFolderError` (nothing
    written) when it may not be.

    `tracks_files`: the marker lists what the writer writes, so that it can replace them.
    `command` is what a second run is told holds the folder (default: the writer).
    """
    listed = _claimable(folder, writer, option, tracks_files)
    made = [path for path in (folder, *folder.parents) if not path.exists()]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock = acquire(folder, command or writer)
    except FolderInUse as error:
        raise OutputFolderError(
            f"{option} {folder}: {error}; wait for it to finish or choose another {option}"
        ) from None
    except OSError as error:
        _remove_empty(made)
        raise OutputFolderError(
            f"{option} {folder}: cannot write there ({os_error_reason(error)})"
        ) from None
    try:
        if lock.previous_owner:
            taken = f"took over the lock of {lock.previous_owner}, which is gone"
            print(f"{option} {folder}: {taken}", file=sys.stderr)
        if not (folder / MARKER_FILE).is_file():
            _write_marker(folder, writer, listed)
        for parent in made[1:]:  # made for this folder: the writer's too (`build/lab` of
            _write_marker(parent, writer, None)  # `build/lab/predict`), so it may claim them
        yield OwnedFolder(folder, writer, listed, lock)
    except BaseException:
        lock.release()
        _remove_empty(made)  # refused before it wrote anything: leave no trace of the claim
        raise
    lock.release()


def _remove_empty(made: list[Path]) -> None:
    """The folders a claim made, innermost first, while they hold nothing but its marker."""
    for path in made:
        if not path.exists():
            continue
        try:
            if any(child.name not in OWNERSHIP_FILES for child in path.iterdir()):
                return
            (path / MARKER_FILE).unlink(missing_ok=True)
            path.rmdir()
        except OSError:
            return


def _claimable(
    folder: Path,
    writer: str,
    option: str,
    tracks_files: bool,
) -> frozenset[str] | None:
    """What the marker lists (or will list) when `writer` may claim `folder`; else raises."""
    where = f"{option} {folder}"
    resolved = folder.resolve()
    if resolved == REPO_ROOT or resolved in REPO_ROOT.parents:
        above = "" if resolved == REPO_ROOT else " or above it"
        raise OutputFolderError(
            f"{where} is the project's own folder{above}: its files are not this command's to "
            "replace; write under build/ instead"
        )
    if folder.exists() and not folder.is_dir():
        raise OutputFolderError(f"{where} is a file, not a folder: choose a folder")
    if not folder.exists():
        return frozenset() if tracks_files else None
    try:
        marker = _read_marker(folder)
        names = sorted(p.name for p in folder.iterdir() if p.name not in OWNERSHIP_FILES)
    except OSError as error:
        raise OutputFolderError(f"{where} cannot be read ({os_error_reason(error)})") from None
    if marker is not None and marker[0] != writer:
        raise OutputFolderError(
            f"{where} holds the output of `{marker[0]}`, not of `{writer}`: choose another {option}"
        )
    # Without a marker every file is someone else's: a name alone cannot tell (a user's
    # outputs.json or report.md looks like ours), so nothing is taken over by its name.
    listed = marker[1] if marker is not None else frozenset()
    foreign = [n for n in names if listed is not None and n not in listed]
    if marker is not None and not tracks_files:
        foreign = []
    if foreign:
        shown = ", ".join(foreign[:SHOWN_NAMES]) + (", ..." if len(foreign) > SHOWN_NAMES else "")
        raise OutputFolderError(
            f"{where} holds files `{writer}` did not write ({len(foreign)}: {shown}); it writes "
            f"only into a new or empty folder, or one it wrote before: choose another {option}, "
            "or move those files away (an older version's output carries no marker: remove it)"
        )
    return listed if tracks_files else None


def _read_marker(folder: Path) -> tuple[str, frozenset[str] | None] | None:
    path = folder / MARKER_FILE
    if not path.is_file():
        return None
    try:
        marker = json.loads(path.read_text())
        files = marker.get("files")
        listed = None if files is None else frozenset(str(name) for name in files)
        return str(marker["writer"]), listed
    except (ValueError, KeyError, TypeError, AttributeError):
        return "an unknown command (its .written-files.json is unreadable)", None


def _write_marker(folder: Path, writer: str, listed: frozenset[str] | None) -> None:
    files = None if listed is None else sorted(listed)
    content = json.dumps({"writer": writer, "files": files}, indent=2) + "\n"
    write_whole(folder / MARKER_FILE, content.encode())


def write_whole(path: Path, content: bytes) -> Path:
    """`content` under `path`, all or nothing: a temporary file renamed over the name."""
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".partial-", delete=False) as tmp:
        try:
            tmp.write(content)
        except BaseException:
            os.unlink(tmp.name)
            raise
    try:
        os.replace(tmp.name, path)
    except BaseException:
        os.unlink(tmp.name)
        raise
    os.chmod(path, 0o644)
    return path
