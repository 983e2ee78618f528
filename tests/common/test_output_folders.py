"""Output folders (`common.output_folders`): a command writes only its
own files, refuses a folder holding anyone else's, and runs once per folder at a time.

Generated folder states (a user's files among a writer's, a foreign marker, links that point out
of the folder, nested folders) are claimed by a tracking writer (it replaces its own files) or a
whole-folder writer; afterwards every file the writer did not write has its bytes, and a refusal
names the option. The lock is taken by other processes, alive and killed.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common import REPO_ROOT, confined_paths
from common.output_folders import (
    LOCK_FILE,
    MARKER_FILE,
    OutputFolderError,
    claimed_folder,
)
from tests.tally import flag, record

FAMILY = "user files (output folders)"
WRITER = "python -m tools.example"
OWN_NAMES = ("01-namespace-a.yaml", "02-secret-b.yaml", "outputs.json")
USER_NAMES = ("Pulumi.yaml", "Pulumi.dev.yaml", "notes.txt", "deploy.yaml", "outputs.json.bak")


def snapshot(folder: Path) -> dict[str, str]:
    """Every file below `folder` (links as links), by relative name: its sha256."""
    found = {}
    for path in sorted(folder.rglob("*")) if folder.exists() else []:
        name = path.relative_to(folder).as_posix()
        if path.is_symlink():
            found[name] = "link:" + os.readlink(path)
        elif path.is_file():
            found[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


class FolderState(TypedDict):
    """A generated folder: its files, its marker, and how the writer claims it."""

    user: list[str]
    own: list[str]
    nested: bool
    marker: str | None
    link_out: bool
    tracking: bool
    writes: list[str]


states = st.builds(
    FolderState,
    user=st.lists(st.sampled_from(USER_NAMES), unique=True, max_size=3),
    own=st.lists(st.sampled_from(OWN_NAMES), unique=True, max_size=3),
    nested=st.booleans(),
    marker=st.sampled_from([None, "ours", "ours-listing-none", "other", "garbage"]),
    link_out=st.booleans(),
    tracking=st.booleans(),
    writes=st.lists(st.sampled_from(OWN_NAMES), unique=True, min_size=1, max_size=3),
)


def lay_out(folder: Path, outside: Path, state: FolderState) -> None:
    folder.mkdir(parents=True)
    for name in state["user"]:
        (folder / name).write_text(f"user's {name}\n")
    for name in state["own"]:
        (folder / name).write_text(f"written before: {name}\n")
    if state["nested"]:
        (folder / "mine").mkdir()
        (folder / "mine" / "keep.yaml").write_text("user's nested file\n")
    if state["link_out"]:
        (folder / "01-namespace-a.yaml").unlink(missing_ok=True)
        (folder / "01-namespace-a.yaml").symlink_to(outside)
    markers: dict[str | None, dict[str, object]] = {
        "ours": {"writer": WRITER, "files": state["own"]},
        "ours-listing-none": {"writer": WRITER, "files": None},
        "other": {"writer": "python -m lab", "files": None},
    }
    marker = markers.get(state["marker"])
    if marker is not None:
        (folder / MARKER_FILE).write_text(json.dumps(marker))
    elif state["marker"] == "garbage":
        (folder / MARKER_FILE).write_text("\x00not json")


@pytest.mark.slow
@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(state=states)
def test_a_writer_never_changes_a_file_it_did_not_write(
    tmp_path_factory: pytest.TempPathFactory, state: FolderState
) -> None:
    root = tmp_path_factory.mktemp("folder")
    outside = root / "outside.txt"
    outside.write_text("a file outside the folder\n")
    folder = root / "out"
    lay_out(folder, outside, state)
    before = snapshot(folder)
    theirs = {name for name in before if name.split("/")[0] not in OWN_NAMES}
    theirs -= {MARKER_FILE}
    outside_bytes = outside.read_bytes()

    try:
        with claimed_folder(folder, WRITER, tracks_files=state["tracking"]) as owned:
            if state["tracking"]:
                owned.replace_files({name: b"new\n" for name in state["writes"]})
            else:
                for name in state["writes"]:
                    (folder / name).unlink(missing_ok=True)  # as a whole-folder writer replaces
                    (folder / name).write_bytes(b"new\n")
        refused = None
    except OutputFolderError as error:
        refused = str(error)

    after = snapshot(folder)
    changed = [name for name in theirs if after.get(name) != before[name]]
    record(FAMILY)
    flag(FAMILY, "deleted", len(changed) + (outside.read_bytes() != outside_bytes))
    assert changed == [] and outside.read_bytes() == outside_bytes, (state, refused)
    foreign_marker = state["marker"] in {"other", "garbage"}
    if foreign_marker or (state["marker"] is None and theirs):
        assert refused is not None and refused.startswith(f"--out {folder}"), state
    if refused is None:
        assert not (folder / LOCK_FILE).exists()  # released and removed
        assert json.loads((folder / MARKER_FILE).read_text())["writer"] == WRITER


@pytest.mark.parametrize(
    ("where", "message"),
    [
        (lambda tmp: REPO_ROOT, "is the project's own folder"),
        (lambda tmp: REPO_ROOT.parent, "is the project's own folder or above it"),
        (lambda tmp: Path("/"), "is the project's own folder or above it"),
        (lambda tmp: tmp / "a-file", "is a file, not a folder"),
        (lambda tmp: tmp / "a-file" / "below", "cannot write there"),
    ],
)
def test_refused_folders_name_the_option_and_leave_no_trace(
    tmp_path: Path, where: Callable[[Path], Path], message: str
) -> None:
    (tmp_path / "a-file").write_text("x")
    before = snapshot(tmp_path)
    folder = where(tmp_path)

    with (
        pytest.raises(OutputFolderError, match=message) as refused,
        claimed_folder(folder, WRITER, option="--dest"),
    ):
        pytest.fail("claimed")

    record(FAMILY)
    assert str(refused.value).startswith(f"--dest {folder}")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (errno.ENOSPC, "the disk is full"),
        (errno.EACCES, "permission denied"),
        (errno.EROFS, "the file system is read-only"),
    ],
)
def test_an_unwritable_or_full_folder_is_refused_saying_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, words: str
) -> None:
    def refuse(self: Path, *args: object, **kw: object) -> None:
        raise OSError(code, os.strerror(code), str(self))

    monkeypatch.setattr(Path, "mkdir", refuse)
    with (
        pytest.raises(
            OutputFolderError, match=f"--out {tmp_path / 'out'}: cannot write there \\({words}"
        ),
        claimed_folder(tmp_path / "out", WRITER),
    ):
        pytest.fail("claimed")
    record(FAMILY)


def test_a_claim_refused_by_the_command_leaves_no_new_folder(tmp_path: Path) -> None:
    folder = tmp_path / "new" / "out"
    with pytest.raises(RuntimeError), claimed_folder(folder, WRITER):
        raise RuntimeError("the command refused its input before writing")
    record(FAMILY)
    assert not (tmp_path / "new").exists()


def test_a_command_that_failed_before_writing_leaves_an_empty_folder_as_it_was(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    with pytest.raises(RuntimeError), claimed_folder(folder, WRITER):
        raise RuntimeError("the command failed before writing")
    record(FAMILY)
    assert list(folder.iterdir()) == []
    with pytest.raises(RuntimeError), claimed_folder(folder, WRITER) as owned:
        owned.replace_files({"a.yaml": b"1"})
        raise RuntimeError("the command failed after writing")
    assert sorted(p.name for p in folder.iterdir()) == [MARKER_FILE, "a.yaml"]
    parent = tmp_path / "parent"
    with claimed_folder(parent / "sub", WRITER) as owned:  # a folder of the writer's below
        owned.replace_files({"b.yaml": b"2"})
    with pytest.raises(RuntimeError), claimed_folder(parent, WRITER):
        raise RuntimeError("the command failed before writing")
    assert [p.name for p in parent.iterdir()] == ["sub"]


def test_a_listed_file_no_longer_written_is_removed_and_nothing_else(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    with claimed_folder(folder, WRITER, tracks_files=True) as owned:
        owned.replace_files({"a.yaml": b"1", "b.yaml": b"2"})
    (folder / "theirs.txt").write_text("a user's file, added later")
    with (
        pytest.raises(OutputFolderError, match="theirs.txt"),
        claimed_folder(folder, WRITER, tracks_files=True),
    ):
        pass
    (folder / "theirs.txt").unlink()
    with claimed_folder(folder, WRITER, tracks_files=True) as owned:
        owned.replace_files({"a.yaml": b"3"})
    assert sorted(p.name for p in folder.iterdir()) == [MARKER_FILE, "a.yaml"]


def test_a_write_that_failed_halfway_leaves_the_folder_the_writers_to_write_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "out"
    with claimed_folder(folder, WRITER, tracks_files=True) as owned:
        owned.replace_files({"a.yaml": b"1"})
    write_inside = confined_paths.write_inside

    def full_disk_at_the_second(root: Path, name: str, content: bytes) -> Path:
        if name == "c.yaml":
            raise OSError(errno.ENOSPC, "No space left on device")
        return write_inside(root, name, content)

    with monkeypatch.context() as patched:
        patched.setattr("common.output_folders.write_inside", full_disk_at_the_second)
        with (
            pytest.raises(OSError, match="No space"),
            claimed_folder(folder, WRITER, tracks_files=True) as owned,
        ):
            owned.replace_files({"b.yaml": b"2", "c.yaml": b"3"})
    assert (folder / "b.yaml").exists()  # written before the disk filled

    with claimed_folder(folder, WRITER, tracks_files=True) as owned:  # its own again
        owned.replace_files({"b.yaml": b"2", "c.yaml": b"3"})
    assert sorted(p.name for p in folder.iterdir()) == [MARKER_FILE, "b.yaml", "c.yaml"]


def test_a_folder_holding_only_the_writers_output_folders_is_its_to_claim(tmp_path: Path) -> None:
    """The folder a claim makes on the way carries no marker (tests/common/test_hostile_owned.py),
    yet the writer may claim it while it holds nothing but the writer's own output."""
    with claimed_folder(tmp_path / "lab" / "predict", "python -m lab"):
        pass
    with claimed_folder(tmp_path / "lab", "python -m lab"):  # `lab ab` after `lab predict`
        pass
    with (
        pytest.raises(OutputFolderError, match="holds the output of `python -m lab`"),
        claimed_folder(tmp_path / "lab", "python -m stages report"),
    ):
        pass
    record(FAMILY)


# --- one run per folder --------------------------------------------------------------------------

HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from common.output_folders import claimed_folder
    with claimed_folder(Path(sys.argv[1]), "python -m lab", command="python -m lab up"):
        print("held", flush=True)
        time.sleep(120)
    """
)


def hold(folder: Path) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(folder)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def test_a_second_run_is_refused_naming_the_first_then_takes_over_a_dead_ones_lock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "lab"
    holder = hold(folder)
    try:
        with (
            pytest.raises(OutputFolderError) as refused,
            claimed_folder(folder, "python -m lab", command="python -m lab up"),
        ):
            pytest.fail("two runs on one folder")
        message = str(refused.value)
        assert f"is in use by PID {holder.pid} (python -m lab up, since " in message
        assert "wait for it to finish or choose another --out" in message
    finally:
        holder.send_signal(signal.SIGKILL)  # no cleanup at all: the lock file stays behind
        holder.wait()
    assert (folder / LOCK_FILE).exists()

    with claimed_folder(folder, "python -m lab"):
        pass

    record("one run per folder")
    record("one run per folder")
    assert f"took over the lock of PID {holder.pid} (python -m lab up" in capsys.readouterr().err
    assert not (folder / LOCK_FILE).exists()


def test_two_claims_in_one_process_exclude_each_other_too(tmp_path: Path) -> None:
    with claimed_folder(tmp_path / "out", WRITER):
        started = time.monotonic()
        with (
            pytest.raises(OutputFolderError, match=f"in use by PID {os.getpid()}"),
            claimed_folder(tmp_path / "out", WRITER),
        ):
            pass
        assert time.monotonic() - started < 5  # refused at once, never waits
    record("one run per folder")
