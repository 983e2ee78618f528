"""`python -m testenv.cluster down` and `up` own only a folder `up` made (issue 30, family
`owned`): `down` on a folder it did not make, or on a `cluster.json` that is not one `up` wrote,
stops nothing and removes nothing, with a message and never a traceback; neither command writes or
removes through a link in the folder. A user's process named in a planted `cluster.json` stays
alive; the planted home (`tests.planted`) and the folder's own files keep their bytes.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import testenv.cluster.__main__ as cluster_cli
from testenv import cluster
from testenv.engine import Engine
from tests.planted import FAMILY, UserHome, snapshot
from tests.tally import run_command

# Generated hostile cases, each a whole command (it never starts a component): seconds in all.
pytestmark = pytest.mark.slow

PROPERTIES = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(autouse=True)
def no_engine_needed(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command finds an engine (none of its tools ever runs), and never starts a component."""
    engine = Engine(tmp_path_factory.mktemp("engine"))
    monkeypatch.setattr(cluster_cli, "located", lambda home: engine)

    def refuse(*args: object) -> None:
        pytest.fail("a component was started")

    monkeypatch.setattr(cluster, "_start", refuse)


@pytest.fixture
def users_process() -> Iterator[subprocess.Popen[bytes]]:
    """A process of the user's that a planted `cluster.json` names."""
    process = subprocess.Popen(["sleep", "120"])
    yield process
    process.kill()
    process.wait()


def cluster_json(process: subprocess.Popen[bytes], **changes: object) -> str:
    """What `up` writes, but naming the user's process."""
    component = {
        "name": "etcd",
        "pid": process.pid,
        "binary": os.readlink(f"/proc/{process.pid}/exe"),
        "log": "/dev/null",
    }
    return json.dumps({"server": "https://127.0.0.1:6443", "components": [component], **changes})


def plant_cluster_folder(folder: Path, state: str, made_by_up: bool) -> None:
    """A folder with a `cluster.json` and an etcd data folder holding the user's data."""
    (folder / "etcd" / "member").mkdir(parents=True)
    (folder / "etcd" / "member" / "db").write_bytes(b"the user's etcd data\n")
    (folder / "cluster.json").write_text(state)
    if made_by_up:
        (folder / cluster.OWNER_MARK).write_text("made by python -m testenv.cluster up\n")


def down(folder: Path) -> tuple[int, str]:
    status, _, err = run_command(FAMILY, cluster_cli.main, ["down", "--out", str(folder)])
    return status, err


# A `cluster.json` that `up` never wrote: each is refused, and nothing is stopped on its word.
STATES: dict[str, Callable[[subprocess.Popen[bytes]], str]] = {
    "names the user's process": lambda p: cluster_json(p),
    "names a binary as etcd": lambda p: cluster_json(
        p, components=[{"name": "etcd", "pid": p.pid, "binary": "/bin/etcd-not", "log": ""}]
    ),
    "names a component up never starts": lambda p: cluster_json(
        p, components=[{"name": "sleep", "pid": p.pid, "binary": "/bin/sleep", "log": ""}]
    ),
    "PID -1 (every process)": lambda p: cluster_json(
        p, components=[{"name": "etcd", "pid": -1, "binary": "/e/etcd", "log": ""}]
    ),
    "PID 0 (the group)": lambda p: cluster_json(
        p, components=[{"name": "etcd", "pid": 0, "binary": "/e/etcd", "log": ""}]
    ),
    "a PID past any": lambda p: cluster_json(
        p, components=[{"name": "etcd", "pid": 10**30, "binary": "/e/etcd", "log": ""}]
    ),
    "a PID that is no number": lambda p: cluster_json(
        p, components=[{"name": "etcd", "pid": "one", "binary": "/e/etcd", "log": ""}]
    ),
    "components not a list": lambda p: cluster_json(p, components="etcd"),
    "a component not an object": lambda p: cluster_json(p, components=[7]),
    "no components": lambda p: json.dumps({"server": "x"}),
    "server not a string": lambda p: cluster_json(p, server=["x"]),
    "a JSON list": lambda p: "[]",
    "not JSON": lambda p: "\x00garbage{",
    "empty": lambda p: "",
    "too large": lambda p: " " * (2 << 20) + "{}",
}


@PROPERTIES
@given(state=st.sampled_from(sorted(STATES)), made_by_up=st.booleans())
def test_down_stops_and_removes_nothing_on_a_cluster_json_up_did_not_write(
    tmp_path_factory: pytest.TempPathFactory,
    users_process: subprocess.Popen[bytes],
    state: str,
    made_by_up: bool,
) -> None:
    root = tmp_path_factory.mktemp("down")
    home, folder = UserHome(root), root / "cluster"
    folder.mkdir()
    plant_cluster_folder(folder, STATES[state](users_process), made_by_up)
    before = snapshot(folder)

    status, err = down(folder)

    assert home.counted() == [] and snapshot(folder) == before, (state, err)
    assert users_process.poll() is None, f"{state}: the user's process was stopped"
    assert status == 1, err
    folder = folder.resolve()
    if made_by_up:
        said = ("is not a cluster.json that `up` wrote", "not what `testenv.cluster up` writes")
        assert str(folder / "cluster.json") in err and any(s in err for s in said), err
    else:
        assert f"--out {folder} was not made by `testenv.cluster up`" in err, err


@pytest.mark.parametrize(
    ("linked", "refusal"),
    [
        ("cluster.json", "cluster.json is a symbolic link"),
        ("etcd", "stopped, but left its state: {folder}/etcd is a symbolic link"),
        (cluster.OWNER_MARK, "was not made by `testenv.cluster up`"),
    ],
)
def test_down_never_removes_through_a_link(tmp_path: Path, linked: str, refusal: str) -> None:
    home, folder = UserHome(tmp_path), tmp_path / "cluster"
    folder.mkdir()
    targets = {"cluster.json": home.key, "etcd": home.notes, cluster.OWNER_MARK: home.rc}
    parts: dict[str, Callable[[Path], object]] = {
        "cluster.json": lambda path: path.write_text('{"server": "x", "components": []}'),
        "etcd": lambda path: path.mkdir(),
        cluster.OWNER_MARK: lambda path: path.write_text("made by python -m testenv.cluster up\n"),
    }
    for name, make in parts.items():
        if name == linked:
            (folder / name).symlink_to(targets[name])
        else:
            make(folder / name)

    status, err = down(folder)

    assert home.counted() == []
    assert (folder / linked).is_symlink()
    assert status == 1 and refusal.format(folder=folder.resolve()) in err, err


@pytest.mark.parametrize(
    "linked",
    ["kwok-stages.yaml", "kubeconfig", "env.sh", "logs", "logs/etcd.log", "pki", "etcd"],
)
def test_up_never_writes_or_removes_through_a_link(tmp_path: Path, linked: str) -> None:
    home, folder = UserHome(tmp_path), tmp_path / "cluster"
    (folder / "logs").mkdir(parents=True)
    (folder / cluster.OWNER_MARK).write_text("made by python -m testenv.cluster up\n")
    (folder / "logs" / "etcd.log").write_text("the last run's log\n")
    if linked == "logs":
        (folder / "logs" / "etcd.log").unlink()
        (folder / "logs").rmdir()
    folder_link = linked in {"logs", "pki", "etcd"}
    (folder / linked).unlink(missing_ok=True)
    (folder / linked).symlink_to(home.notes if folder_link else home.rc)

    status, _, err = run_command(FAMILY, cluster_cli.main, ["up", "--out", str(folder)])

    assert home.counted() == []
    assert status == 1 and f"{folder.resolve() / linked} is a symbolic link" in err, err
    assert (folder / linked).is_symlink()
