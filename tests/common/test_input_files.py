"""Files read within bounds (`common.input_files`): only a regular file, at most its kind's limit,
standard input too; the end of a log without reading the rest; JSON nested within the limit."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from common.input_files import (
    MAX_NESTING,
    InputFileError,
    InputFileMissing,
    MiB,
    check_regular_file,
    parsed_json,
    read_bytes,
    read_stream,
    read_tail,
    read_text,
)
from tests.support import hostile_file
from tests.tally import no_hang


def sparse(path: Path, size: int) -> Path:
    with path.open("wb") as grown:
        grown.truncate(size)
    return path


@pytest.mark.parametrize(
    ("shape", "kind"),
    [
        ("/dev/zero", "a character device"),
        ("directory", "a directory"),
        ("fifo", "a named pipe (FIFO)"),
        ("link to /dev/zero", "a character device"),
    ],
)
def test_only_a_regular_file_is_read_and_the_refusal_says_what_it_is(
    tmp_path: Path, shape: str, kind: str
) -> None:
    path = hostile_file(tmp_path, shape)
    with no_hang(10), pytest.raises(InputFileError) as refused:
        read_text(path, "test file")
    assert str(path) in str(refused.value) and f"is {kind}" in str(refused.value)


def test_a_file_swapped_for_a_fifo_after_its_check_is_refused_not_waited_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "swapped"
    path.write_text("{}")

    def swap(checked: Path, what: str, max_bytes: int) -> None:  # between the check and open
        checked.unlink()
        os.mkfifo(checked)

    monkeypatch.setattr("common.input_files.check_regular_file", swap)

    with no_hang(10), pytest.raises(InputFileError, match="is a named pipe"):
        read_bytes(path, "test file")


@pytest.mark.parametrize("limit", [1, 1024, MiB, 64 * MiB])
def test_a_file_over_its_limit_is_refused_naming_the_limit(tmp_path: Path, limit: int) -> None:
    path = sparse(tmp_path / "big", limit + 1)
    with pytest.raises(InputFileError) as refused:
        read_bytes(path, "test file", limit)
    assert str(path) in str(refused.value) and f"({limit / MiB:g} MiB at most)" in str(
        refused.value
    )
    assert read_bytes(sparse(tmp_path / "fits", limit), "test file", limit) == bytes(limit)


def test_a_missing_file_is_its_own_error(tmp_path: Path) -> None:
    with pytest.raises(InputFileMissing):
        read_text(tmp_path / "absent", "test file")
    with pytest.raises(InputFileMissing):
        check_regular_file(tmp_path / "absent", "test file")


def test_standard_input_stops_at_the_limit() -> None:
    with open("/dev/zero", "rb") as zeros, no_hang(10):
        stdin = io.TextIOWrapper(zeros)
        with pytest.raises(InputFileError, match=r"<stdin> is over 1 MiB, .*\(1 MiB at most\)"):
            read_stream(stdin, "<stdin>", "test input", MiB)
    assert read_stream(io.StringIO("{}"), "<stdin>", "test input", 2) == "{}"
    with pytest.raises(InputFileError, match="over"):
        read_stream(io.StringIO("{} "), "<stdin>", "test input", 2)


def test_standard_input_is_utf8_text_without_nul() -> None:
    for data, problem in [(b"\xff\xfe", "not UTF-8"), (b'{"a": "\x00"}', "NUL")]:
        with pytest.raises(InputFileError, match=problem):
            read_stream(io.TextIOWrapper(io.BytesIO(data)), "<stdin>", "test input")


def test_a_log_tail_is_its_end_only(tmp_path: Path) -> None:
    log = sparse(tmp_path / "huge.log", 2**40)  # a TiB of nothing, then the reason
    with log.open("ab") as more:
        more.write(b"\nthe last line\n")
    assert read_tail(log, 100).endswith("\nthe last line\n")
    assert len(read_tail(log, 100)) == 100


@pytest.mark.parametrize("path", ["/dev/zero", "absent", "fifo"])
def test_a_log_tail_of_something_else_is_empty(tmp_path: Path, path: str) -> None:
    if path == "fifo":
        os.mkfifo(tmp_path / "fifo")
    with no_hang(10):
        assert read_tail(tmp_path / path) == ""


@pytest.mark.parametrize("depth", [1, MAX_NESTING - 1, MAX_NESTING])
def test_json_nested_up_to_the_limit_is_read(depth: int) -> None:
    assert parsed_json("[" * depth + "]" * depth, "f", "test file") is not None
    assert parsed_json('{"a":' * depth + "1" + "}" * depth, "f", "test file") is not None


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 900, 10_000, 100_000])
def test_json_nested_past_the_limit_is_refused_naming_it(depth: int) -> None:
    for text in ["[" * depth + "]" * depth, '{"a":' * depth + "1" + "}" * depth]:
        with pytest.raises(InputFileError, match=f"f nests deeper than {MAX_NESTING} levels"):
            parsed_json(text, "f", "test file")
