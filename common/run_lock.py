"""One run per output folder: a lock file in the folder, held for as long as the command runs.

The lock is `flock` on `<folder>/.run.lock`, which holds the owner's PID, command and start time for
the message a second run gets. The kernel releases a flock when its owner dies, however it dies
(SIGKILL, a full disk, a closed terminal), so a lock file left behind by a process that is gone
locks nothing: the next run takes it over and says whose it was. The file is removed when the run
ends; a run that finds the file replaced under it takes the new one instead.

The lock file is the command's own, never a link: it is opened without following one
(`O_NOFOLLOW`), and a lock that is a link, not a regular file, or a file with another name too (a
hard link) is refused before a byte of it is changed, naming it. So a `.run.lock` planted as a
link to a user's file never truncates that file.

Standard library only. Used through `common.output_folders`, by every command that writes an
output folder.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

LOCK_FILE = ".run.lock"


class FolderInUse(ValueError):
    """Another run holds the folder's lock; the message names it."""


class ForeignLock(ValueError):
    """The lock file is a link, not a regular file, or linked elsewhere: not the command's own."""


@dataclass
class RunLock:
    """A held lock; `previous_owner` describes a dead run whose lock file this one took over."""

    path: Path
    descriptor: int
    previous_owner: str | None = None

    def release(self) -> None:
        if self.descriptor < 0:
            return
        try:
            if _same_file(self.descriptor, self.path):  # never a link put in its place
                self.path.unlink()  # while still held: nobody else can have it yet
        finally:
            os.close(self.descriptor)
            self.descriptor = -1


def owner_text(content: str) -> str | None:
    """`PID 123 (python -m lab up, since 2026-11-30 18:42 UTC)` from a lock file's content."""
    try:
        owner = json.loads(content)
        return f"PID {int(owner['pid'])} ({owner['command']}, since {owner['since']})"
    except (ValueError, KeyError, TypeError):
        return None


def acquire(folder: Path, command: str) -> RunLock:
    """The lock of `folder` (which exists), or `FolderInUse` naming the run that holds it.

    OSError (a read-only or full disk, no permission) reaches the caller, who names the option.
    """
    path = folder / LOCK_FILE
    while True:
        descriptor = _open_own(path)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = owner_text(_read(descriptor)) or "another run"
            os.close(descriptor)
            raise FolderInUse(f"{folder} is in use by {holder}") from None
        except BaseException:
            os.close(descriptor)
            raise
        if _same_file(descriptor, path):
            break
        os.close(descriptor)  # removed or replaced by the run that just ended: lock the new one
    try:
        previous = owner_text(_read(descriptor))
        since = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        content = json.dumps({"pid": os.getpid(), "command": command, "since": since}) + "\n"
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, content.encode(), 0)
    except BaseException:
        os.close(descriptor)
        raise
    return RunLock(path, descriptor, previous)


def _open_own(path: Path) -> int:
    """The lock file, opened (made when absent) only if it is a regular file of its own name."""
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        descriptor = os.open(path, flags, 0o644)
    except OSError as error:
        if error.errno == errno.EISDIR:
            raise ForeignLock(f"{path} is a folder, not a lock file of ours: remove it") from None
        if error.errno != errno.ELOOP:
            raise
        raise ForeignLock(
            f"{path} is a symbolic link (to {os.readlink(path)}), not a lock file of ours: it is "
            "never followed; remove the link"
        ) from None
    info = os.fstat(descriptor)
    problem = (
        "not a regular file (a folder, device, pipe or socket)"
        if not stat.S_ISREG(info.st_mode)
        else f"a file with {info.st_nlink} names (a hard link to another file)"
        if info.st_nlink != 1
        else None
    )
    if problem:
        os.close(descriptor)
        raise ForeignLock(f"{path} is {problem}, not a lock file of ours: remove it")
    return descriptor


def _read(descriptor: int) -> str:
    return os.pread(descriptor, 4096, 0).decode(errors="replace")


def _same_file(descriptor: int, path: Path) -> bool:
    """`path` itself (not a link's target) is the file open as `descriptor`."""
    try:
        held, named = os.fstat(descriptor), path.lstat()
    except FileNotFoundError:
        return False
    return (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)
