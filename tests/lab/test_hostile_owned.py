"""The lab owns only what it wrote (issue 30, family `owned`): `lab report --out` into a copy of
the committed `docs/lab-prediction/` (the lab's own folder, by its marker) where a clone carries
links at the names the report writes, or at its lock. It runs nothing of the lab: the report is
derived again from the saved prediction. A graph's reused run folder with a link where it clears
or makes its folders is refused before a process starts. A user's home is planted beside the folder
(`tests.planted`); afterwards it has its bytes, and the command exits 2 naming the link.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lab.__main__ as lab_cli
from common import REPO_ROOT
from common.output_folders import OutputFolderError, claimed_folder
from components.routing import routing_for
from lab.environment import LabInstall
from lab.graph import GraphSpec, LabGraph
from tests.planted import FAMILY, UserHome, snapshot
from tests.tally import record, run_command

# Generated hostile cases, each a whole `lab report` (no graph): seconds in all.
pytestmark = pytest.mark.slow

WRITTEN = ("prediction.md", "prediction.json", ".run.lock")


def lab_main(argv: list[str]) -> int:
    return lab_cli.main(argv)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    linked=st.lists(st.sampled_from(WRITTEN), min_size=1, max_size=3, unique=True),
    to=st.sampled_from(["key", "rc", "notes"]),
)
def test_lab_report_never_writes_through_a_link_a_clone_carries(
    tmp_path_factory: pytest.TempPathFactory, linked: list[str], to: str
) -> None:
    root = tmp_path_factory.mktemp("lab")
    home, out = UserHome(root), root / "lab-prediction"
    shutil.copytree(REPO_ROOT / "docs" / "lab-prediction", out)
    for name in linked:
        (out / name).unlink(missing_ok=True)
        (out / name).symlink_to({"key": home.key, "rc": home.rc, "notes": home.notes}[to])
    before = snapshot(out)

    status, _, err = run_command(FAMILY, lab_main, ["report", "--out", str(out)])

    after = snapshot(out)  # the lab's own files written before the refusal may be new
    assert home.counted() == [] and [after[n] for n in linked] == [before[n] for n in linked], err
    # Refused at the first link it meets: reading a prediction that is no prediction, or
    # writing where a link stands; the message names that file.
    assert status == 2 and any(f"{out / name} " in err for name in linked), err


def test_lab_report_rewrites_its_own_folder_as_before(tmp_path: Path) -> None:
    """The same command on the same copy without a link: the committed report, byte for byte."""
    out = tmp_path / "lab-prediction"
    shutil.copytree(REPO_ROOT / "docs" / "lab-prediction", out)

    status, _, err = run_command(FAMILY, lab_main, ["report", "--out", str(out)])

    assert status == 0, err
    committed = REPO_ROOT / "docs" / "lab-prediction" / "prediction.md"
    assert (out / "prediction.md").read_text() == committed.read_text()


@pytest.mark.parametrize("stale", ["discovery", "tmp", "logs", "home"])
def test_a_graphs_run_folder_is_never_cleared_through_a_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stale: str
) -> None:
    """A graph's run folder is reused; its `discovery/` and `tmp/` are cleared at the start, and
    its four folders made: a link at any of them is refused before a process starts."""
    home, run_dir = UserHome(tmp_path), tmp_path / "runs" / "round-robin"
    run_dir.mkdir(parents=True)
    (run_dir / stale).symlink_to(home.notes)
    monkeypatch.setattr(LabInstall, "require", lambda self: self)
    monkeypatch.setattr(LabGraph, "_start_frontend", lambda *a: pytest.fail("a process started"))
    graph = LabGraph(GraphSpec(routing=routing_for("round-robin", 300)), run_dir)

    with pytest.raises(OutputFolderError, match=f"{run_dir / stale} is a symbolic link"):
        graph.start()

    record(FAMILY)
    assert home.counted() == []


@pytest.mark.parametrize("linked", ["runs", "runs/round-robin"])
def test_a_link_on_the_way_to_a_graphs_run_folder_is_refused_before_anything_is_cleared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, linked: str
) -> None:
    """`lab up` and `lab ab` run a graph in a folder below the one the command holds: a link
    there (`OUT/up`, `OUT/runs/<profile>`) is refused, never resolved to the user's folders."""
    home, out = UserHome(tmp_path), tmp_path / "lab-out"
    users = tmp_path / "users-disk"
    (users / "round-robin" / "discovery").mkdir(parents=True)
    (users / "round-robin" / "discovery" / "notes").write_text("the user's\n")
    with claimed_folder(out, "python -m lab"):  # the lab's own folder, from an earlier run
        (out / linked).parent.mkdir(parents=True, exist_ok=True)
    (out / linked).symlink_to(users if linked == "runs" else users / "round-robin")
    monkeypatch.setattr(LabInstall, "require", lambda self: self)
    monkeypatch.setattr(LabGraph, "_start_frontend", lambda *a: pytest.fail("a process started"))

    with (
        claimed_folder(out, "python -m lab", command="python -m lab up"),
        pytest.raises(OutputFolderError, match=f"{out / linked} is a symbolic link"),
    ):
        LabGraph(GraphSpec(routing=routing_for("round-robin", 300)), out / "runs" / "round-robin")

    record(FAMILY)
    assert home.counted() == []
    assert (users / "round-robin" / "discovery" / "notes").read_text() == "the user's\n"
