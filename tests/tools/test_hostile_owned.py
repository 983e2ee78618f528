"""The user's tools own only what they wrote (issue 30, family `owned`): `tools.render`,
`tools.golden --update`, `tools.engine_goldens --update` and `tools.config_reference` against a
marker listing names outside their folder (the issue's golden marker with `../../.ssh/...`),
links where they write (a clone may carry any), a lock that is a link, and a folder the render
made for a parent. A user's home is planted beside each folder (`tests.planted`): afterwards it
has its bytes, the command exits 2 naming the path, and nothing ends in a traceback.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.planted import FAMILY, UserHome, snapshot
from tests.support import quiet_about_aborted_programs
from tests.tally import run_command
from tools import config_reference, engine_goldens, golden, render

# Generated hostile cases, each a whole render: seconds in all.
pytestmark = pytest.mark.slow

PROPERTIES = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
MARKER = ".written-files.json"


@pytest.fixture(autouse=True)
def quiet_aborted_programs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tools run each program on a new event loop; one a refusal aborted leaves futures
    behind whose error the test asserted already."""
    new_event_loop = asyncio.new_event_loop

    def quiet() -> asyncio.AbstractEventLoop:
        loop = new_event_loop()
        loop.set_exception_handler(quiet_about_aborted_programs)
        return loop

    monkeypatch.setattr(asyncio, "new_event_loop", quiet)


def render_main(out: Path) -> tuple[int, str]:
    argv = ["--stack", "dev", "--example-site", "--out", str(out)]
    status, _, err = run_command(FAMILY, render.main, argv)
    return status, err


# Marker entries a pull request or a hostile folder may carry, made for one folder and one home.
ENTRIES: dict[str, Callable[[Path, UserHome], object]] = {
    "relative escape": lambda out, home: os.path.relpath(home.key, out),
    "absolute path": lambda out, home: str(home.rc),
    "escape through a subfolder": lambda out, home: "x/../" + os.path.relpath(home.rc, out),
    "dot-dot": lambda out, home: "..",
    "dot": lambda out, home: ".",
    "empty": lambda out, home: "",
    "a subfolder's file": lambda out, home: "x/y.yaml",
    "the lock": lambda out, home: ".run.lock",
    "NUL inside": lambda out, home: "a\x00b",
    "not a string": lambda out, home: None,
    "a link to the key": lambda out, home: "99-configmap-key.yaml",
}


def earlier_render(out: Path, home: UserHome, kinds: list[str]) -> list[object]:
    """`out` as the render left it, with the chosen entries added to its marker."""
    assert render_main(out)[0] == 0
    if "a link to the key" in kinds:
        (out / "99-configmap-key.yaml").symlink_to(home.key)
    marker = json.loads((out / MARKER).read_text())
    entries = [ENTRIES[kind](out, home) for kind in kinds]
    marker["files"] += entries
    (out / MARKER).write_text(json.dumps(marker))
    return entries


@PROPERTIES
@given(kinds=st.lists(st.sampled_from(sorted(ENTRIES)), min_size=1, max_size=3, unique=True))
def test_the_render_never_follows_its_marker_out(
    tmp_path_factory: pytest.TempPathFactory, kinds: list[str]
) -> None:
    root = tmp_path_factory.mktemp("render")
    home, out = UserHome(root), root / "out"
    earlier_render(out, home, kinds)
    before = snapshot(out)

    status, err = render_main(out)

    assert home.counted() == [] and snapshot(out) == before, kinds
    assert status == 2 and f"--out {out}" in err, err


@pytest.mark.parametrize("kind", ["relative escape", "absolute path", "escape through a subfolder"])
def test_golden_update_deletes_nothing_a_marker_lists_outside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """The issue's case: a pull request adds a path to a committed golden marker."""
    home, copy = UserHome(tmp_path), tmp_path / "clone" / "manifests"
    shutil.copytree(golden.MANIFESTS / "shared", copy / "shared")
    monkeypatch.setattr(golden, "MANIFESTS", copy)
    marker = json.loads((copy / "shared" / MARKER).read_text())
    entry = ENTRIES[kind](copy / "shared", home)
    marker["files"].append(entry)
    (copy / "shared" / MARKER).write_text(json.dumps(marker, indent=2))
    before = snapshot(copy)

    status, _, err = run_command(FAMILY, golden.main, ["--update", "--stack", "shared"])

    assert home.counted() == [] and snapshot(copy) == before
    assert status == 2 and f"its {MARKER} lists {entry!r}" in err, err
    assert f"remove that entry from {copy / 'shared' / MARKER}" in err


def test_golden_update_never_writes_through_a_linked_stack_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, copy = UserHome(tmp_path), tmp_path / "clone" / "manifests"
    copy.mkdir(parents=True)
    (copy / "shared").symlink_to(home.notes)  # git keeps links: a clone may carry this one
    monkeypatch.setattr(golden, "MANIFESTS", copy)

    status, _, err = run_command(FAMILY, golden.main, ["--update", "--stack", "shared"])

    assert home.counted() == []
    assert status == 2 and f"{copy / 'shared'} is a symbolic link" in err, err


@pytest.mark.parametrize("linked", ["outputs.json", "50-added.yaml"])
def test_golden_check_never_reads_through_a_link_a_clone_carries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, linked: str
) -> None:
    """A pull request may add a link among the golden files: `--check` would print what it
    points at in its diff (a key, a token). It is refused, naming the link."""
    home, copy = UserHome(tmp_path), tmp_path / "clone" / "manifests"
    shutil.copytree(golden.MANIFESTS / "shared", copy / "shared")
    (copy / "shared" / linked).unlink(missing_ok=True)
    (copy / "shared" / linked).symlink_to(home.key)
    monkeypatch.setattr(golden, "MANIFESTS", copy)

    status, out, err = run_command(FAMILY, golden.main, ["--check", "--stack", "shared"])

    assert home.counted() == [] and "PRIVATE KEY" not in out + err
    assert status == 2 and f"{copy / 'shared' / linked} is a symbolic link" in err, err


@pytest.mark.parametrize("linked", ["outputs.json", "01-namespace-cosmos3-dev.yaml"])
@pytest.mark.parametrize("to", ["key", "notes"])
def test_the_render_never_writes_through_a_link_in_its_folder(
    tmp_path: Path, linked: str, to: str
) -> None:
    home, out = UserHome(tmp_path), tmp_path / "out"
    assert render_main(out)[0] == 0
    (out / linked).unlink()
    (out / linked).symlink_to(home.key if to == "key" else home.notes)

    status, err = render_main(out)

    assert home.counted() == [] and (out / linked).is_symlink()
    assert status == 2 and f"--out {out}" in err and linked in err, err


@pytest.mark.parametrize("kind", ["link", "hard link", "fifo"])
def test_the_render_never_follows_a_planted_lock(tmp_path: Path, kind: str) -> None:
    home, out = UserHome(tmp_path), tmp_path / "out"
    out.mkdir()
    lock = out / ".run.lock"
    {"link": lambda: lock.symlink_to(home.key), "hard link": lambda: os.link(home.key, lock)}.get(
        kind, lambda: os.mkfifo(lock)
    )()

    status, err = render_main(out)

    assert home.counted() == []
    assert status == 2 and f"--out {out}: {lock} is " in err and "not a lock file of ours" in err


def test_a_folder_the_render_made_for_a_parent_stays_the_users(tmp_path: Path) -> None:
    assert render_main(tmp_path / "build" / "render" / "dev")[0] == 0
    users = tmp_path / "build" / "render" / "outputs.json"
    users.write_text("the user's outputs, put here later\n")

    status, err = render_main(tmp_path / "build" / "render")

    assert users.read_text() == "the user's outputs, put here later\n"
    assert status == 2 and "did not write (1: outputs.json)" in err, err


def test_engine_goldens_never_write_through_a_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, clone = UserHome(tmp_path), tmp_path / "clone"
    (clone / "manifests" / "engine").mkdir(parents=True)
    golden_file = clone / "manifests" / "engine" / "dev.urns.txt"
    golden_file.symlink_to(home.rc)
    monkeypatch.setattr(engine_goldens, "REPO_ROOT", clone)
    monkeypatch.setattr(engine_goldens, "generate", lambda: {golden_file: "urn:pulumi:dev\n"})

    status, _, err = run_command(FAMILY, engine_goldens.main, ["--update"])

    assert home.counted() == [] and golden_file.is_symlink()
    assert status == 2 and f"{golden_file} is a symbolic link" in err, err


def test_the_config_reference_never_writes_through_a_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, clone = UserHome(tmp_path), tmp_path / "clone"
    (clone / "docs").mkdir(parents=True)
    page = clone / config_reference.PAGE
    home.rc.write_text(f"{config_reference.START}\nold\n{config_reference.END}\n")
    home.before = snapshot(home.root)
    page.symlink_to(home.rc)
    monkeypatch.setattr(config_reference, "REPO_ROOT", clone)
    monkeypatch.setattr(config_reference, "TARGET", page)

    status, _, err = run_command(FAMILY, config_reference.sync, [])

    assert home.counted() == [] and page.is_symlink()
    assert status == 2 and f"{page} is a symbolic link" in err, err
