"""Files we read, checked before use: a regular file within the limit of its kind, UTF-8 text,
the shape asked for. Anything else is an `InputFileError` naming the file, what it is instead
and the limit it passed.

Why before: a device or a pipe (`/dev/zero`, a FIFO) would be read forever, a multi-GiB file would
fill the memory, a binary file or a JSON array where an object is expected would end in a
traceback from wherever the value is first used. Every file argument, every file a command finds
on disk (a calibration in its `--out`, a cluster's `cluster.json`, a stack file) and standard
input (`--outputs -`) is read through here; YAML is parsed on top, within a depth and alias
budget (`common.yaml_input`). Standard library only: `make lab` checks the CRD with it before any
venv exists.

The limits of every kind of file are below, in one place, each with why.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import IO, Any

MiB = 2**20

MAX_INPUT_BYTES = 64 * MiB
"""A file of a result folder (AIPerf's exports and per-request records, a stage's log): the
recipe's sweep writes a few MiB a level. Also the limit of a file no kind below names."""
MAX_RECORD_BYTES = 4 * MiB
"""A file of our own making, read back: a record (`results.json`, a calibration, a prediction, a
lab summary), a report, a golden manifest, a page of the docs: a few KiB each."""
MAX_OUTPUTS_BYTES = 4 * MiB
"""`pulumi stack output --json` (a file or standard input): this program's is under 2 KiB, and
Pulumi keeps a stack's outputs in its checkpoint, where a few MiB is already absurd."""
MAX_PULUMI_FILE_BYTES = 1 * MiB
"""`Pulumi.yaml` and `Pulumi.<stack>.yaml`: a few KiB, config values included."""
MAX_CRD_BYTES = 8 * MiB
"""The DGD CRD: NVIDIA's is 1.6 MB of YAML. An API server keeps a CRD in one etcd value (1.5 MiB
of JSON by default), so `kubectl get crd -o yaml` of one that installs is a few MiB at most."""
MAX_KUBECONFIG_BYTES = 16 * MiB
"""A kubeconfig: a few KiB a cluster with its certificates embedded; thousands of contexts fit."""
MAX_STATE_BYTES = 1 * MiB
"""A state file of a running thing (a local cluster's `cluster.json`, a port file): a few lines."""
MAX_LOG_TAIL_BYTES = 64 * 1024
"""The end of a log shown with an error: the last lines, never a whole log (which may be GiBs)."""
MAX_NESTING = 100
"""Levels of lists and mappings in a YAML or JSON file: the DGD CRD, the deepest file we read,
nests 34 deep. PyYAML composes and constructs by recursion and runs out of Python's stack near
450 levels, json near 1,000; yaml.v3 (the Pulumi CLI's) stops at 10,000."""
YAML_ALIAS_RATIO_LOW = 400_000
YAML_ALIAS_RATIO_HIGH = 4_000_000
"""yaml.v3's alias budget (`decode.go`, `allowedAliasRatio`), which the Pulumi CLI refuses a stack
file by ("document contains excessive aliasing"): up to 400,000 nodes, 99% of them may come from
aliases; from 4,000,000 on, 10%; in between, a straight line. A document of fewer than 1,000
nodes, or with at most 100 from aliases, always passes."""


class InputFileError(ValueError):
    """A file that cannot be used; the message names it and says what it is, or the limit."""


class InputFileMissing(InputFileError):
    """No file at the path: a caller may say how to make one."""


def check_regular_file(path: Path, what: str, max_bytes: int = MAX_INPUT_BYTES) -> None:
    """Refuse `path` unless it is a regular file of at most `max_bytes`, without opening it (a
    device's open may do something): before reading it, or before handing it to a program that
    would read it whole."""
    try:
        _check_regular(path, path.stat(), what, max_bytes)
    except FileNotFoundError:
        raise InputFileMissing(f"{what} {path} does not exist") from None
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise InputFileError(f"{what} {path} cannot be read ({reason})") from None


def read_bytes(path: Path, what: str, max_bytes: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of the regular file `path`, a `what` (e.g. "stack-outputs file"), at most
    `max_bytes` of them."""
    check_regular_file(path, what, max_bytes)
    try:
        # O_NONBLOCK: were it swapped for a FIFO since, the open returns instead of waiting for a
        # writer, and the check of what was opened refuses it.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(descriptor, "rb") as opened:
            _check_regular(path, os.fstat(descriptor), what, max_bytes)
            data = opened.read(max_bytes + 1)  # a file that grew since stops here too
    except FileNotFoundError:
        raise InputFileMissing(f"{what} {path} does not exist") from None
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise InputFileError(f"{what} {path} cannot be read ({reason})") from None
    if len(data) > max_bytes:
        raise InputFileError(_too_big(str(path), what, len(data), max_bytes))
    return data


def read_text(path: Path, what: str, max_bytes: int = MAX_INPUT_BYTES) -> str:
    """The UTF-8 text of the regular file `path` (see `read_bytes`)."""
    return decoded(read_bytes(path, what, max_bytes), str(path))


def read_stream(stream: IO[str], name: str, what: str, max_bytes: int = MAX_INPUT_BYTES) -> str:
    """At most `max_bytes` bytes of UTF-8 text from a stream (standard input), or an
    InputFileError: `< /dev/zero` ends at the limit, as a file would."""
    binary = getattr(stream, "buffer", None)  # sys.stdin; a StringIO (tests) has characters
    try:
        data = binary.read(max_bytes + 1) if binary is not None else stream.read(max_bytes + 1)
    except OSError as error:
        raise InputFileError(f"{what} {name} cannot be read ({error.strerror})") from None
    if len(data) > max_bytes:
        raise InputFileError(_too_big(name, what, None, max_bytes))
    return decoded(data if isinstance(data, bytes) else data.encode(errors="surrogatepass"), name)


def read_tail(path: Path, max_bytes: int = MAX_LOG_TAIL_BYTES) -> str:
    """The last `max_bytes` of a log (text, undecodable bytes replaced); "" for a log that is
    missing, not a regular file or unreadable: a log only ever explains an error already had."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    with os.fdopen(descriptor, "rb") as opened:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            return ""
        opened.seek(max(info.st_size - max_bytes, 0))
        return opened.read(max_bytes).decode(errors="replace")


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
    """The JSON value of `text`, nested at most MAX_NESTING deep, or an InputFileError naming
    where it breaks."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputFileError(f"{what} {name} is not JSON: {error}") from None
    except RecursionError:
        raise InputFileError(too_deep(name, what)) from None
    except ValueError as error:  # json refuses integers over 4,300 digits
        detail = f"{type(error).__name__}: {str(error)[:100]}"
        raise InputFileError(f"{what} {name} is not usable JSON ({detail})") from None
    if _json_depth_over(value, MAX_NESTING):
        raise InputFileError(too_deep(name, what))
    return value


def read_json_object(path: Path, what: str, max_bytes: int = MAX_INPUT_BYTES) -> dict[str, Any]:
    """The JSON object in `path`; a JSON array or scalar is refused by name."""
    value = parsed_json(read_text(path, what, max_bytes), str(path), what)
    if not isinstance(value, dict):
        kind = "an array" if isinstance(value, list) else f"a {type(value).__name__}"
        raise InputFileError(f"{what} {path} holds {kind}, not a JSON object")
    return value


def too_deep(name: str, what: str) -> str:
    return f"{what} {name} nests deeper than {MAX_NESTING} levels (the limit of a file we read)"


NOT_REGULAR = {
    stat.S_IFDIR: "a directory",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFLNK: "a symbolic link",
}


def _check_regular(path: Path, info: os.stat_result, what: str, max_bytes: int) -> None:
    kind = stat.S_IFMT(info.st_mode)
    if kind == stat.S_IFDIR:
        raise InputFileError(f"{path} is a directory, not a {what}")
    if kind != stat.S_IFREG:
        raise InputFileError(
            f"{path} is {NOT_REGULAR.get(kind, 'not a regular file')}, not a {what}: "
            "only a regular file is read (a device or a pipe may never end)"
        )
    if info.st_size > max_bytes:
        raise InputFileError(_too_big(str(path), what, info.st_size, max_bytes))


def _too_big(name: str, what: str, size: int | None, max_bytes: int) -> str:
    """`size` None: a stream, read up to the limit and no further."""
    measured = f"over {max_bytes / MiB:g}" if size is None else f"{size / MiB:.1f}"
    return (
        f"{what} {name} is {measured} MiB, more than one can be ({max_bytes / MiB:g} MiB at most)"
    )


def _json_depth_over(value: Any, limit: int) -> bool:
    """Whether lists and objects nest more than `limit` deep (without recursion)."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            if depth > limit:
                return True
            pending.extend((child, depth + 1) for child in item)
    return False
