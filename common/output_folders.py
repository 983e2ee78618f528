"""Output folders a command owns: it writes only its own files, and one run at a time.

Every command that writes a folder (`--out`, `--dest`) claims it first (`claimed_folder`):

- a new or empty folder becomes the command's: it gets `.written-files.json`, which names the
  writer and, for a command that tracks its files (the offline render, the golden manifests), the
  files it wrote;
- a folder with that marker from the same writer is the command's again; so is one that holds
  nothing but folders with its marker (`build/lab` after `build/lab/predict`);
- anything else is refused before anything is written, with a message naming the option: a file
  where the folder should be, the project's own folder or one above it, a folder holding files the
  command did not write, a folder another command owns, a marker listing a name that is not a
  plain file name of the folder (`../`, an absolute path: a marker is data, never a licence).

A folder a claim makes on the way (`build/lab` for `build/lab/predict`) gets no marker: it is not
the command's, so a file a user puts there later is never replaced.

While the command runs it holds the folder's lock: `flock` on `.run.lock`, which holds the owner's
PID, command and start time, so a second run on the same folder is refused, naming the first.
The kernel releases a flock when its owner dies, however it dies, so a lock file left by a run
that is gone locks nothing: the next run takes it over and says whose it was. The lock file is
opened without following a link (`O_NOFOLLOW`), and one that is a link, not a regular file, or a
file with another name too (a hard link) is refused before a byte of it changes.

A tracking command replaces its files with `replace_files`, which removes a file it no longer
writes only when its marker lists it and it is still a regular file. Nothing else is ever
deleted. Every path below the folder is checked on the way (`common.confined_paths`): never
through a link, never out of the folder.

Over 300 lines: the claim, its marker and its lock are one mechanism (a claim refused leaves
no marker and no lock; a lock that is not a regular file of ours is refused as a marker is).

Standard library only: the tools, the stages and the lab all use it.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from common import REPO_ROOT
from common.confined_paths import (
    OutputFolderError,
    holding,
    inside,
    name_problem,
    remove_inside,
    write_inside,
)
from common.input_files import MAX_STATE_BYTES, NOT_REGULAR, read_json_object

__all__ = [
    "LOCK_FILE",
    "MARKER_FILE",
    "OWNERSHIP_FILES",
    "OutputFolderError",
    "OwnedFolder",
    "claimed_folder",
    "os_error_reason",
    "running_writer",
]

MARKER_FILE = ".written-files.json"
LOCK_FILE = ".run.lock"
OWNERSHIP_FILES = frozenset({MARKER_FILE, LOCK_FILE})
"""The files a claim adds to a folder: never results, never archived."""

SHOWN_NAMES = 3

_REASONS = {
    errno.ENOSPC: "the disk is full (no space left on device)",
    errno.EDQUOT: "the disk quota is exceeded",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "the file system is read-only",
}


def os_error_reason(error: OSError) -> str:
    """What went wrong, in words a user acts on: a full disk, no permission, ..."""
    return _REASONS.get(error.errno or 0) or error.strerror or type(error).__name__


@dataclass
class OwnedFolder:
    """A folder this run owns and has locked."""

    path: Path
    """The folder as the user named it (for messages and the paths a command prints)."""
    root: Path
    """The folder resolved once, at the claim: every path below it is checked from here."""
    writer: str
    listed: frozenset[str] | None
    """The files the marker lists (a tracking writer), or None: the whole folder is the writer's."""

    def replace_files(self, files: Mapping[str, bytes]) -> list[Path]:
        """Write `files` (name -> content) and remove the listed files no longer among them.

        Every name is a plain file name of the folder, checked before anything is written; each
        write replaces the name whole, never through a link; a listed file is removed only while
        it is a regular file (`common.confined_paths`)."""
        for name in files:
            if problem := _file_name_problem(name):
                raise OutputFolderError(
                    f"{self.path}: refused to write {name!r}, which is not a file name inside "
                    f"the folder ({problem}); nothing was written"
                )
            inside(self.root, name)  # no link or folder stands at the name
        # Listed first: a write that fails halfway (a full disk) leaves the files it made the
        # writer's, and the next run replaces them.
        if self.listed is not None:
            _write_marker(self.root, self.writer, self.listed | set(files))
        written = []
        for name, content in files.items():
            write_inside(self.root, name, content)
            written.append(self.path / name)
        for stale in sorted((self.listed or frozenset()) - set(files)):
            remove_inside(self.root, stale)
        self.listed = frozenset(files)
        _write_marker(self.root, self.writer, self.listed)
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
        root = folder.resolve()
        lock = root / LOCK_FILE
        descriptor, previous = _acquire(lock, command or writer, option)
    except (OSError, OutputFolderError) as error:
        _remove_empty(made)
        why = (
            f"cannot write there ({os_error_reason(error)})"
            if isinstance(error, OSError)
            else error
        )
        raise OutputFolderError(f"{option} {folder}: {why}") from None
    held_before: frozenset[str] | None = None  # what the folder held when this claim marked it
    try:
        if previous:
            taken = f"took over the lock of {previous}, which is gone"
            print(f"{option} {folder}: {taken}", file=sys.stderr)
        if _read_marker(root) is None:  # new, or holding only folders of the writer's
            held_before = _held(root)
            _write_marker(root, writer, listed)
        with holding(folder):  # by the name given and resolved: a stage writes by either
            yield OwnedFolder(folder, root, writer, listed)
    except BaseException:
        if held_before is not None:
            _unmark_if_unused(root, held_before)
        _release(descriptor, lock)
        _remove_empty(made)
        raise
    _release(descriptor, lock)


def _held(root: Path) -> frozenset[str]:
    """The names the folder holds, but the claim's own files."""
    return frozenset(child.name for child in root.iterdir()) - OWNERSHIP_FILES


def _unmark_if_unused(root: Path, held_before: frozenset[str]) -> None:
    """The marker a claim wrote, removed while the folder holds what it held before: the command
    failed before it wrote anything there, and the folder is left as it was before the claim."""
    try:
        if _held(root) == held_before:
            remove_inside(root, MARKER_FILE)
    except (OSError, OutputFolderError):
        pass  # the command's own failure is what its caller sees


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


def _claimable(folder: Path, writer: str, option: str, tracks_files: bool) -> frozenset[str] | None:
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
        if marker is not None and marker[0] == writer:
            _check_listing(folder, where, marker[1])
        # Without a marker every file is someone else's: a name alone cannot tell (a user's
        # outputs.json or report.md looks like ours), so nothing is taken over by its name. A
        # whole-folder writer's marker (no listing) makes every file its own; a tracking
        # writer's, only the regular files it lists.
        whole = marker is not None and marker[1] is None and not tracks_files
        listed = (marker[1] if marker is not None else None) or frozenset()
        foreign = [] if whole else [n for n in names if not _writers(folder / n, writer, listed)]
    except OSError as error:
        raise OutputFolderError(f"{where} cannot be read ({os_error_reason(error)})") from None
    if marker is not None and marker[0] != writer:
        raise OutputFolderError(
            f"{where} holds the output of `{marker[0]}`, not of `{writer}`: choose another {option}"
        )
    if foreign:
        shown = ", ".join(foreign[:SHOWN_NAMES]) + (", ..." if len(foreign) > SHOWN_NAMES else "")
        raise OutputFolderError(
            f"{where} holds files `{writer}` did not write ({len(foreign)}: {shown}); it writes "
            f"only into a new or empty folder, or one it wrote before: choose another {option}, "
            "or move those files away (an older version's output carries no marker: remove it)"
        )
    return listed if tracks_files else None


def _writers(path: Path, writer: str, listed: frozenset[str]) -> bool:
    """A regular file the marker lists, or a real folder with the writer's marker (its output,
    made before this one); a link, or anything else, is someone else's."""
    mode = path.lstat().st_mode
    if stat.S_ISREG(mode):
        return path.name in listed
    marker = _read_marker(path) if stat.S_ISDIR(mode) else None
    return marker is not None and marker[0] == writer


def _check_listing(folder: Path, where: str, listed: frozenset[str] | None) -> None:
    """Every name the marker lists is a plain file name of `folder`; else refused, naming it."""
    for name in sorted(listed or ()):
        if problem := _file_name_problem(name):
            raise OutputFolderError(
                f"{where}: its {MARKER_FILE} lists {name!r}, which is not a file name inside the "
                f"folder ({problem}); a marker lists only the files its writer wrote there, and "
                f"nothing is removed on its word: remove that entry from {folder / MARKER_FILE}"
            )


def _file_name_problem(name: str) -> str | None:
    """Why `name` is not a plain file name of a folder (a tracking writer writes no subfolder)."""
    if problem := name_problem(name):
        return problem
    if "/" in name:
        return "it names a file in a subfolder"
    return "it is the claim's own file" if name in OWNERSHIP_FILES else None


def _read_marker(folder: Path) -> tuple[str, frozenset[str] | None] | None:
    path = folder / MARKER_FILE
    if path.is_symlink():  # read through a link, it would be another folder's word
        return "an unknown command (its .written-files.json is a link)", None
    if not path.is_file():
        return None
    try:
        marker = read_json_object(path, "ownership marker", MAX_STATE_BYTES)
        files = marker.get("files")
        if files is not None and not all(isinstance(name, str) for name in files):
            raise TypeError("a listed name that is not a string")
        listed = None if files is None else frozenset(files)
        return str(marker["writer"]), listed
    except (ValueError, KeyError, TypeError, AttributeError):  # InputFileError too: past its limit
        return "an unknown command (its .written-files.json is unreadable)", None


def _write_marker(folder: Path, writer: str, listed: frozenset[str] | None) -> None:
    files = None if listed is None else sorted(listed)
    content = json.dumps({"writer": writer, "files": files}, indent=2) + "\n"
    write_inside(folder, MARKER_FILE, content)


def running_writer(folder: Path) -> str | None:
    """The run that holds `folder`'s lock now (`PID 123 (python -m stages perf, since ...)`, or
    "another run"), or None: no lock file, or one nobody holds. A probe for readers (`archive
    push` of a folder a stage may still write); it never creates, changes or keeps the lock."""
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        descriptor = os.open(folder / LOCK_FILE, flags)
    except OSError:
        return None  # absent, or not a file of ours: no claim holds it
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _owner(descriptor) or "another run"
    finally:
        os.close(descriptor)  # closing releases a lock the probe got
    return None


def _release(descriptor: int, lock: Path) -> None:
    try:
        if _same_file(descriptor, lock):  # never a link put in its place
            lock.unlink()  # while still held: nobody else can have it yet
    finally:
        os.close(descriptor)


def _owner(descriptor: int) -> str | None:
    """`PID 123 (python -m lab up, since 2026-11-30 18:42 UTC)` from a lock file's content."""
    try:
        owner = json.loads(os.pread(descriptor, 4096, 0).decode(errors="replace"))
        return f"PID {int(owner['pid'])} ({owner['command']}, since {owner['since']})"
    except (ValueError, KeyError, TypeError):
        return None


def _acquire(path: Path, command: str, option: str) -> tuple[int, str | None]:
    """The lock file `path` (in a folder that exists), held, and the dead run it took over
    from; OutputFolderError naming the run that holds it, or the lock file that is not ours.
    OSError (a read-only or full disk) reaches the caller."""
    while True:
        descriptor = _open_own(path)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _owner(descriptor) or "another run"
            os.close(descriptor)
            raise OutputFolderError(
                f"{path.parent} is in use by {holder}; wait for it to finish or choose another "
                f"{option}"
            ) from None
        except BaseException:
            os.close(descriptor)
            raise
        if _same_file(descriptor, path):
            break
        os.close(descriptor)  # removed or replaced by the run that just ended: lock the new one
    try:
        previous = _owner(descriptor)
        since = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        content = json.dumps({"pid": os.getpid(), "command": command, "since": since}) + "\n"
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, content.encode(), 0)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor, previous


def _open_own(path: Path) -> int:
    """The lock file, opened (made when absent) only if it is a regular file of its own name."""
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        descriptor = os.open(path, flags, 0o644)
    except OSError as error:
        if error.errno not in (errno.ELOOP, errno.EISDIR):
            raise
        what = f"a symbolic link (to {os.readlink(path)})" if path.is_symlink() else "a directory"
        raise OutputFolderError(f"{path} is {what}, not a lock file of ours: remove it") from None
    info = os.fstat(descriptor)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(descriptor)
        what = NOT_REGULAR.get(stat.S_IFMT(info.st_mode), "no file")
        if stat.S_ISREG(info.st_mode):
            what = f"a file with {info.st_nlink} names (a hard link to another file)"
        raise OutputFolderError(f"{path} is {what}, not a lock file of ours: remove it")
    return descriptor


def _same_file(descriptor: int, path: Path) -> bool:
    """`path` itself (not a link's target) is the file open as `descriptor`."""
    try:
        held, named = os.fstat(descriptor), path.lstat()
    except FileNotFoundError:
        return False
    return (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)
