"""File arguments, checked before use: a regular file of a sane size, UTF-8 text, the shape asked
for. Anything else is an `InputFileError` naming the file and what it is instead.

Why before: a device or a pipe (`/dev/zero`, a FIFO) would be read forever, a multi-GiB file would
fill the memory, a binary file or a JSON array where an object is expected would end in a
traceback from wherever the value is first used. Standard library only: the program's contract,
the tools, the stages and the lab read their files through it.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import IO, Any

MAX_INPUT_BYTES = 64 * 1024 * 1024
"""The largest file argument of ours: AIPerf's exports and a CRD are a few MiB at most."""


class InputFileError(ValueError):
    """A file argument that cannot be used; the message names it and says what it is."""


def read_text(path: Path, what: str, max_bytes: int = MAX_INPUT_BYTES) -> str:
    """The text of the regular file `path`, a `what` (e.g. "stack-outputs file")."""
    try:
        info = path.stat()
        if stat.S_ISDIR(info.st_mode):
            raise InputFileError(f"{path} is a directory, not a {what}")
        if not stat.S_ISREG(info.st_mode):
            raise InputFileError(
                f"{path} is not a regular file (a device, pipe or socket), not a {what}"
            )
        if info.st_size > max_bytes:
            raise InputFileError(_too_big(path, what, info.st_size, max_bytes))
        with path.open("rb") as opened:
            data = opened.read(max_bytes + 1)  # a file that grew since stat() stops here too
    except FileNotFoundError:
        raise InputFileError(f"{what} {path} does not exist") from None
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise InputFileError(f"{what} {path} cannot be read ({reason})") from None
    if len(data) > max_bytes:
        raise InputFileError(_too_big(path, what, len(data), max_bytes))
    return decoded(data, str(path))


def read_stream(stream: IO[str], name: str, what: str, max_bytes: int = MAX_INPUT_BYTES) -> str:
    """At most `max_bytes` of text from a stream (stdin), or an InputFileError."""
    try:
        text = stream.read(max_bytes + 1)
    except UnicodeDecodeError:
        raise InputFileError(f"{name} is not UTF-8 text (a binary file?)") from None
    except OSError as error:
        raise InputFileError(f"{what} {name} cannot be read ({error.strerror})") from None
    if len(text) > max_bytes:
        raise InputFileError(f"{what} {name} is more than {max_bytes // 2**20} MiB")
    return text


def decoded(data: bytes, name: str) -> str:
    """UTF-8 text without NUL characters (which no text file of ours holds)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputFileError(f"{name} is not UTF-8 text (a binary file?)") from None
    if "\0" in text:
        raise InputFileError(f"{name} holds NUL bytes: a binary file, not text")
    return text


def parsed_json(text: str, name: str, what: str) -> Any:
    """The JSON value of `text`, or an InputFileError naming where it breaks."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InputFileError(f"{what} {name} is not JSON: {error}") from None
    except (RecursionError, ValueError) as error:
        # json refuses integers over 4,300 digits (ValueError) and nests by recursion.
        detail = f"{type(error).__name__}: {str(error)[:100]}"
        raise InputFileError(f"{what} {name} is not usable JSON ({detail})") from None


def read_json_object(path: Path, what: str, max_bytes: int = MAX_INPUT_BYTES) -> dict[str, Any]:
    """The JSON object in `path`; a JSON array or scalar is refused by name."""
    value = parsed_json(read_text(path, what, max_bytes), str(path), what)
    if not isinstance(value, dict):
        kind = "an array" if isinstance(value, list) else f"a {type(value).__name__}"
        raise InputFileError(f"{what} {path} holds {kind}, not a JSON object")
    return value


def _too_big(path: Path, what: str, size: int, max_bytes: int) -> str:
    return (
        f"{what} {path} is {size / 2**20:.1f} MiB, more than one can be "
        f"({max_bytes / 2**20:g} MiB at most)"
    )
