"""Own only what you wrote, by construction (issue 30, family `owned`): the output folders and
their lock (`common.output_folders`, `common.confined_paths`) against a
marker that lists names outside the folder, links where a writer writes, a lock file that is a
link, and a folder a claim made for a parent. A user's home is planted beside every folder
(`tests.planted`); afterwards each of its files has its bytes, and a refusal names the path.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.confined_paths import (
    inside,
    name_problem,
    remove_file,
    write_file,
    write_inside,
)
from common.output_folders import LOCK_FILE, MARKER_FILE, OutputFolderError, claimed_folder
from tests.planted import FAMILY, UserHome, snapshot
from tests.tally import no_hang, record

TRACKING = "python -m tools.example"
WHOLE = "python -m lab"
WRITES = {"01-namespace-a.yaml": b"kind: Namespace\n", "outputs.json": b"{}\n"}
PROPERTIES = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

# A marker entry, made for one folder and one home: each leads out of the folder, or is no
# plain file name, or stands for something that is not the writer's file.
ENTRIES: dict[str, Callable[[Path, UserHome], object]] = {
    "relative escape": lambda out, home: os.path.relpath(home.key, out),
    "absolute path": lambda out, home: str(home.key),
    "absolute folder": lambda out, home: str(home.notes),
    "escape through a subfolder": lambda out, home: "sub/../" + os.path.relpath(home.rc, out),
    "dot-dot": lambda out, home: "..",
    "dot": lambda out, home: ".",
    "empty": lambda out, home: "",
    "a subfolder's file": lambda out, home: "sub/kept.yaml",
    "the lock": lambda out, home: LOCK_FILE,
    "the marker": lambda out, home: MARKER_FILE,
    "NUL inside": lambda out, home: "a\x00b",
    "not a string": lambda out, home: 7,
    "a link to the key": lambda out, home: "link-to-key",
    "a link to the notes": lambda out, home: "link-to-notes",
}


def plant_folder(out: Path, home: UserHome, kinds: list[str]) -> None:
    """The writer's folder from an earlier run, and the links a chosen entry names."""
    out.mkdir(parents=True)
    for name, content in WRITES.items():
        (out / name).write_bytes(content)
    if "a link to the key" in kinds:
        (out / "link-to-key").symlink_to(home.key)
    if "a link to the notes" in kinds:
        (out / "link-to-notes").symlink_to(home.notes)


@PROPERTIES
@given(kinds=st.lists(st.sampled_from(sorted(ENTRIES)), min_size=1, max_size=4, unique=True))
def test_a_marker_entry_is_data_never_a_licence(
    tmp_path_factory: pytest.TempPathFactory, kinds: list[str]
) -> None:
    root = tmp_path_factory.mktemp("marker")
    home, out = UserHome(root), root / "out"
    plant_folder(out, home, kinds)
    entries = [ENTRIES[kind](out, home) for kind in kinds]
    (out / MARKER_FILE).write_text(json.dumps({"writer": TRACKING, "files": [*WRITES, *entries]}))
    before = snapshot(out)

    with (
        pytest.raises(OutputFolderError) as refused,
        no_hang(10),
        claimed_folder(out, TRACKING, tracks_files=True) as owned,
    ):
        owned.replace_files({"outputs.json": b"{}\n"})  # the rest is stale: removed

    record(FAMILY)
    assert home.counted() == [] and snapshot(out) == before, kinds
    assert str(refused.value).startswith(f"--out {out}"), refused.value


def test_the_issues_golden_marker_deletes_nothing(tmp_path: Path) -> None:
    """A pull request adds `../../.ssh/id_ed25519` to a committed marker: `--update` refuses it."""
    home = UserHome(tmp_path)
    out = tmp_path / "manifests" / "shared"
    out.mkdir(parents=True)
    for name, content in WRITES.items():
        (out / name).write_bytes(content)
    entry = os.path.relpath(home.key, out)
    (out / MARKER_FILE).write_text(json.dumps({"writer": TRACKING, "files": [*WRITES, entry]}))

    with (
        pytest.raises(OutputFolderError, match="lists '../../home/.ssh/id_ed25519'") as refused,
        claimed_folder(out, TRACKING, "golden manifests", tracks_files=True) as owned,
    ):
        owned.replace_files({"outputs.json": b"{}\n"})

    record(FAMILY)
    assert home.counted() == []
    assert "it has an empty, `.` or `..` part" in str(refused.value)
    assert "remove that entry from" in str(refused.value)
    assert (out / "01-namespace-a.yaml").read_bytes() == WRITES["01-namespace-a.yaml"]


# --- links where a writer writes -------------------------------------------------------------------

LINKED = ("01-namespace-a.yaml", "outputs.json", "results", MARKER_FILE)


@PROPERTIES
@given(
    links=st.lists(st.sampled_from(LINKED), min_size=1, max_size=3, unique=True),
    to_notes=st.booleans(),
    writer=st.sampled_from([TRACKING, WHOLE]),
)
def test_a_writer_never_writes_through_a_link(
    tmp_path_factory: pytest.TempPathFactory, links: list[str], to_notes: bool, writer: str
) -> None:
    root = tmp_path_factory.mktemp("links")
    home, out = UserHome(root), root / "out"
    tracking = writer == TRACKING
    with claimed_folder(out, writer, tracks_files=tracking) as owned:  # its output, made before
        if tracking:
            owned.replace_files(WRITES)
    for name in links:
        (out / name).unlink(missing_ok=True)
        (out / name).symlink_to(home.notes if to_notes or name == "results" else home.rc)

    with (
        pytest.raises(OutputFolderError) as refused,
        no_hang(10),
        claimed_folder(out, writer, tracks_files=tracking) as owned,
    ):
        if tracking:
            owned.replace_files(WRITES)
        else:  # a whole-folder writer's results, by path (as the stages and the lab write)
            write_file(out / "results" / "summary.json", "{}\n")
            for name, content in WRITES.items():
                write_file(out / name, content)

    record(FAMILY)
    assert home.counted() == [], (links, writer)
    assert str(out) in str(refused.value), refused.value


@pytest.mark.parametrize(
    "kind", ["link to the key", "dangling link", "hard link", "folder", "fifo"]
)
@pytest.mark.parametrize("writer", [TRACKING, WHOLE])
def test_a_lock_file_is_never_followed(tmp_path: Path, kind: str, writer: str) -> None:
    home, out = UserHome(tmp_path), tmp_path / "out"
    out.mkdir()
    lock = out / LOCK_FILE
    {
        "link to the key": lambda: lock.symlink_to(home.key),
        "dangling link": lambda: lock.symlink_to(tmp_path / "home" / ".profile"),
        "hard link": lambda: os.link(home.key, lock),
        "folder": lambda: lock.mkdir(),
        "fifo": lambda: os.mkfifo(lock),
    }[kind]()

    with (
        pytest.raises(OutputFolderError, match=f"--out {out}: {lock} is ") as refused,
        no_hang(10),
        claimed_folder(out, writer, tracks_files=writer == TRACKING),
    ):
        pytest.fail("claimed through a lock that is not its own")

    record(FAMILY)
    assert home.counted() == []
    assert "not a lock file of ours" in str(refused.value)
    assert not (tmp_path / "home" / ".profile").exists()  # a dangling link made nothing


# --- a folder made for a parent ----------------------------------------------------------------


@pytest.mark.parametrize("writer", [TRACKING, WHOLE])
def test_a_folder_made_for_a_parent_is_not_the_writers(tmp_path: Path, writer: str) -> None:
    tracking = writer == TRACKING
    with claimed_folder(tmp_path / "made" / "out", writer, tracks_files=tracking) as owned:
        if tracking:
            owned.replace_files(WRITES)
    user_file = tmp_path / "made" / "outputs.json"
    user_file.write_text("the user's own outputs\n")

    with (
        pytest.raises(OutputFolderError, match="did not write \\(1: outputs.json\\)"),
        claimed_folder(tmp_path / "made", writer, tracks_files=tracking) as owned,
    ):
        pytest.fail(f"claimed a folder made for {owned.path / 'out'}")

    record(FAMILY)
    assert user_file.read_text() == "the user's own outputs\n"
    assert not (tmp_path / "made" / MARKER_FILE).exists()


def test_an_older_parents_marker_gives_a_tracking_writer_nothing(tmp_path: Path) -> None:
    """What the claim wrote before for a parent (every file the writer's): a tracking writer now
    owns only what it lists, so a user's file there is refused, not replaced."""
    out = tmp_path / "render"
    out.mkdir()
    (out / MARKER_FILE).write_text(json.dumps({"writer": TRACKING, "files": None}))
    (out / "outputs.json").write_text("the user's\n")

    with (
        pytest.raises(OutputFolderError, match="did not write \\(1: outputs.json\\)"),
        claimed_folder(out, TRACKING, tracks_files=True) as owned,
    ):
        owned.replace_files(WRITES)

    record(FAMILY)
    assert (out / "outputs.json").read_text() == "the user's\n"


# --- the confined paths themselves -------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "it is empty"),
        ("/etc/passwd", "it is absolute"),
        ("../x", "`.` or `..` part"),
        ("a/../../x", "`.` or `..` part"),
        ("./x", "`.` or `..` part"),
        ("a//b", "an empty"),
        ("a/", "an empty"),
        ("a\x00b", "NUL"),
        ("c1/aiperf/profile_export.json", None),
        ("..hidden", None),
    ],
)
def test_a_plain_name_is_what_stays_inside(name: str, problem: str | None) -> None:
    found = name_problem(name)
    assert (found is None) if problem is None else (found is not None and problem in found)


def test_a_write_or_removal_outside_any_held_folder_still_refuses_a_link(tmp_path: Path) -> None:
    home = UserHome(tmp_path)
    (tmp_path / "report.md").symlink_to(home.rc)
    (tmp_path / "old.json").symlink_to(home.key)

    for action in (
        lambda: write_file(tmp_path / "report.md", "# report\n"),
        lambda: remove_file(tmp_path / "old.json"),
        lambda: remove_file(tmp_path / "home" / "notes"),
        lambda: write_inside(tmp_path, "home/.ssh/../.bashrc", "x"),
        lambda: inside(tmp_path, "report.md/x"),
    ):
        with pytest.raises(OutputFolderError):
            action()
        record(FAMILY)
    assert home.counted() == []
    assert (tmp_path / "report.md").is_symlink() and (tmp_path / "old.json").is_symlink()


def test_a_folder_named_through_a_linked_parent_is_checked_below_it_too(tmp_path: Path) -> None:
    """`--out ~/build/out` where `~/build` is a link to another disk: the user's choice, followed;
    below the folder, a link is refused however the stage names its files."""
    home = UserHome(tmp_path)
    (tmp_path / "disk").mkdir()
    (tmp_path / "build").symlink_to(tmp_path / "disk")
    out = tmp_path / "build" / "out"
    with claimed_folder(out, WHOLE):
        write_file(out / "results" / "summary.json", "{}\n")
    (tmp_path / "disk" / "out" / "results" / "summary.json").unlink()
    (tmp_path / "disk" / "out" / "results").rmdir()
    (tmp_path / "disk" / "out" / "results").symlink_to(home.notes)

    with claimed_folder(out, WHOLE), pytest.raises(OutputFolderError, match="is a symbolic link"):
        write_file(out / "results" / "plan.txt", "{}\n")  # the notes' own name

    record(FAMILY)
    assert home.counted() == []
