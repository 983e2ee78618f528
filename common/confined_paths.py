"""The paths a command deletes or overwrites, confined to its folder: it owns only what it wrote.

Every file a command of ours replaces or removes goes through here (`common.output_folders` for
the folders a command claims, the archive's pull, the engine goldens, the local cluster):

- a name read from anywhere (a marker, an archive manifest, a stack's object names) is data, never
  a licence: it must be a plain relative name inside the folder (not absolute, no `..`, no empty
  or `.` part), or it is refused, naming it;
- every part of the path below the folder is looked at without following it: a symbolic link, or
  a file where a folder should be, is refused, naming the path and what stands there, before
  anything is touched;
- a file is written whole (a temporary file renamed over the name), so a write never lands in
  another file, whether a link stands at the name or the file is hard-linked elsewhere;
- a file is removed only when it is a regular file: never a link, a folder or anything else.

The folder itself is the user's choice (the option they typed, or the project's own folder): it is
resolved once, when the command claims it, and every path below it is checked from there. While a
command holds a folder (`holding`), `write_file` and `remove_file` find it themselves, so the
stages and the lab write their results by path without carrying the folder along.

Standard library only.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from common.input_files import NOT_REGULAR

_HELD: list[Path] = []
"""The folders this process's commands hold now (as given, absolute, and resolved)."""


class OutputFolderError(ValueError):
    """A folder a command may not write, or a path in it it may not touch; the message names the
    option or the path, and the fix."""


def name_problem(name: str) -> str | None:
    """Why `name` is not a plain relative path inside a folder, or None when it is one."""
    if not name:
        return "it is empty"
    if "\x00" in name:
        return "it holds a NUL character"
    path = PurePosixPath(name)
    if path.is_absolute():
        return "it is absolute"
    if any(part in {"", ".", ".."} for part in name.split("/")):
        return "it has an empty, `.` or `..` part"
    return None


def inside(folder: Path, relative: str) -> Path:
    """`folder / relative`, checked: a plain relative name, and no link or file on the way."""
    if problem := name_problem(relative):
        raise OutputFolderError(
            f"{folder}: refused the name {relative!r}: {problem}; a command writes and removes "
            "only plain names inside its folder"
        )
    path = folder
    parts = relative.split("/")
    for index, part in enumerate(parts):
        path = path / part
        try:
            info = path.lstat()
        except FileNotFoundError:
            return folder / relative  # the rest does not exist yet: nothing to pass through
        if stat.S_ISLNK(info.st_mode):
            raise OutputFolderError(
                f"{path} is a symbolic link (to {os.readlink(path)}): a command never writes or "
                "removes through a link; remove the link, or choose another folder"
            )
        if index < len(parts) - 1 and not stat.S_ISDIR(info.st_mode):
            raise OutputFolderError(f"{path} is a file where a folder should be: move it away")
    return path


def write_inside(folder: Path, relative: str, content: bytes | str, mode: int = 0o644) -> Path:
    """`content` as the file `relative` of `folder`, replaced whole; its folders are made."""
    path = inside(folder, relative)
    _regular_file(path, "move it away")
    path.parent.mkdir(parents=True, exist_ok=True)
    inside(folder, relative)  # the folders just made are folders: nothing stood in their place
    return _replace_whole(path, content.encode() if isinstance(content, str) else content, mode)


def remove_inside(folder: Path, relative: str) -> bool:
    """Remove the regular file `relative` of `folder`; False when it is absent."""
    path = inside(folder, relative)
    if not _regular_file(path, "it is not removed"):
        return False
    path.unlink()
    return True


def remove_tree_inside(folder: Path, relative: str) -> bool:
    """Remove the folder (or file) `relative` of `folder` and all it holds; a link at it, or on
    the way to it, is refused. Links inside are removed as links, never followed. False when
    absent."""
    path = inside(folder, relative)
    if path.is_dir():
        shutil.rmtree(path)
        return True
    return remove_inside(folder, relative)


def no_link_below(folder: Path, relative: str) -> Path:
    """`folder / relative`, checked as `inside` does and, when it is a folder, every entry below
    it: for a program of ours that writes there by itself (it cannot check each of its writes)."""
    path = inside(folder, relative)
    for parent, folders, files in os.walk(path):  # never follows a link
        for name in [*folders, *files]:
            if os.path.islink(os.path.join(parent, name)):
                inside(folder, Path(parent, name).relative_to(folder).as_posix())  # raises
    return path


@contextmanager
def holding(folder: Path) -> Iterator[None]:
    """`folder` is this command's for the block: `write_file` and `remove_file` check from it."""
    forms = {Path(os.path.abspath(folder)), folder.resolve()}
    _HELD.extend(forms)
    try:
        yield
    finally:
        for form in forms:
            _HELD.remove(form)


def write_file(path: Path, content: bytes | str, mode: int = 0o644) -> Path:
    """`content` as `path`, replaced whole, its folders made; checked from the held folder that
    holds it (every part below it), or at its last part only outside every held folder."""
    return write_inside(*_held_folder(path), content, mode)


def checked_folder(path: Path) -> Path:
    """The folder `path` (it may not exist yet), checked as `write_file` checks a file: no link
    or file on the way from the held folder that holds it; for a program that writes inside it
    by itself."""
    return inside(*_held_folder(path))


def remove_file(path: Path) -> bool:
    """Remove the regular file `path` (never a link or a folder); False when it is absent."""
    return remove_inside(*_held_folder(path))


def _held_folder(path: Path) -> tuple[Path, str]:
    """The innermost held folder that holds `path` (by name), and `path` relative to it; outside
    every held folder, its parent and its name."""
    absolute = Path(os.path.abspath(path))
    for folder in sorted(_HELD, key=lambda held: len(held.parts), reverse=True):
        if absolute != folder and absolute.is_relative_to(folder):
            return folder, absolute.relative_to(folder).as_posix()
    return path.parent, path.name


def _regular_file(path: Path, fix: str) -> bool:
    """Whether `path` (no link: `inside` refused it) is a regular file; False when absent, and
    anything else there refused."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(mode):
        raise OutputFolderError(
            f"{path} is {NOT_REGULAR.get(stat.S_IFMT(mode), 'no file')}, not a file: {fix}"
        )
    return True


def _replace_whole(path: Path, content: bytes, mode: int) -> Path:
    """A temporary file beside `path`, renamed over it: all or nothing, never through a link."""
    descriptor, name = tempfile.mkstemp(dir=path.parent, prefix=".partial-")
    try:
        with os.fdopen(descriptor, "wb") as tmp:
            tmp.write(content)
            os.fchmod(tmp.fileno(), mode)
        os.replace(name, path)
    except BaseException:
        Path(name).unlink(missing_ok=True)  # gone when the interrupt came after the rename
        raise
    return path
