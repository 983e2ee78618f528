"""`python -m lab` against hostile input and a second run (issue 20), without starting Dynamo:
every command's `--out` is the lab's own folder, one command at a time (a second `lab up`
refuses while one serves); `lab up` listens on 127.0.0.1 only, in a network namespace of its own
when the machine allows one, forwarded from the machine's loopback; a process that dies says why
(a full disk is not "exit 0"); absurd fleets are refused by option.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import threading
import time
from collections import namedtuple
from pathlib import Path
from typing import Any, ClassVar, Self

import pytest

import lab.__main__ as lab_cli
import testenv
from common import REPO_ROOT
from common.output_folders import claimed_folder
from components.routing import RoutingProfile, routing_for
from lab import isolation
from lab.__main__ import WRITER
from lab.environment import dynamo_environment
from lab.graph import GraphSpec, LabGraph, lab_outputs
from lab.pass_through import LOOPBACK, loopback_listener
from stages.incluster import exit_causes
from testenv.netns import UNSHARE
from tests.tally import flag, record, run_command


def lab_main(argv: list[str]) -> int:
    return lab_cli.main(argv)


# --- one run per folder, and a second `lab up` -------------------------------------------------


@pytest.fixture
def no_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test that must never reach a lab graph fails the moment one would start."""

    def refuse(self: LabGraph) -> None:
        pytest.fail("a lab graph was started")

    monkeypatch.setattr(LabGraph, "start", refuse)


@pytest.mark.usefixtures("no_graph")
@pytest.mark.parametrize("command", [["up"], ["up", "--profile", "session-affinity"], ["ab"]])
def test_a_second_lab_command_on_a_served_folder_refuses_to_start(
    tmp_path: Path, command: list[str]
) -> None:
    with claimed_folder(tmp_path / "lab", WRITER, command=f"{WRITER} up"):  # a `lab up` there
        status, _, err = run_command(
            "one run per folder", lab_main, [*command, "--out", str(tmp_path / "lab")]
        )

    assert status == 2
    assert f"is in use by PID {os.getpid()} (python -m lab up, since " in err
    assert "wait for it to finish or choose another --out" in err


@pytest.mark.usefixtures("no_graph")
@pytest.mark.parametrize("names", [["report.md"], ["Pulumi.yaml", "summary.json"], ["notes/x.txt"]])
def test_the_lab_never_writes_a_folder_holding_a_users_files(
    tmp_path: Path, names: list[str]
) -> None:
    out = tmp_path / "mine"
    for name in names:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(f"the user's {name}\n")
    before = {n: hashlib.sha256((out / n).read_bytes()).hexdigest() for n in names}

    for command in (["ab"], ["up"], ["calibrate"], ["predict"], ["report"]):
        status, _, err = run_command("user files (lab)", lab_main, [*command, "--out", str(out)])
        changed = [
            n for n in names if hashlib.sha256((out / n).read_bytes()).hexdigest() != before[n]
        ]
        flag("user files (lab)", "deleted", len(changed))
        assert status == 2 and f"--out {out} holds files `python -m lab` did not write" in err
        assert changed == []


def test_the_committed_prediction_is_the_labs_own_folder() -> None:
    docs = REPO_ROOT / "docs" / "lab-prediction"
    with claimed_folder(docs, WRITER, command=f"{WRITER} report"):
        pass
    assert not (docs / ".run.lock").exists()


# --- numbers ----------------------------------------------------------------------------------


@pytest.mark.usefixtures("no_graph")
@pytest.mark.parametrize("workers", ["0", "-1", "129", "100000", "1e308", "8.5", ""])
@pytest.mark.parametrize("command", ["ab", "up"])
def test_an_absurd_fleet_is_refused_naming_the_option(
    tmp_path: Path, command: str, workers: str
) -> None:
    status, _, err = run_command(
        "numbers (lab)", lab_main, [command, "--workers", workers, "--out", str(tmp_path)]
    )
    assert status == 2 and "--workers must be a positive integer up to 128" in err


def test_a_graph_spec_of_an_absurd_fleet_is_refused() -> None:
    with pytest.raises(ValueError, match="1 to 128 workers"):
        GraphSpec(routing=routing_for(RoutingProfile.ROUND_ROBIN, 0), workers=100_000)


# --- lab up listens on 127.0.0.1 only ---------------------------------------------------------


def test_everything_the_lab_configures_listens_on_loopback(tmp_path: Path) -> None:
    spec = GraphSpec(routing=routing_for(RoutingProfile.SESSION_AFFINITY, 300))
    env = dynamo_environment(tmp_path, {})
    hosts = {key: value for key, value in env.items() if key.endswith("_HOST")}

    assert set(hosts.values()) == {"127.0.0.1"}, hosts
    outputs = lab_outputs(spec, 1234)
    assert outputs is not None and outputs.frontend_url == "http://127.0.0.1:1234"
    with loopback_listener() as listener:
        assert listener.getsockname()[0] == "127.0.0.1"


def test_lab_up_is_run_in_its_own_network_namespace_with_a_loopback_listener_passed_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[str, list[str], dict[str, str]]] = []
    made: list[socket.socket] = []  # held here: the real exec never returns to drop it

    def listener_held() -> socket.socket:
        made.append(loopback_listener())
        return made[0]

    monkeypatch.setattr(isolation, "loopback_listener", listener_held)
    monkeypatch.delenv(isolation.ISOLATED_ENV, raising=False)
    monkeypatch.delenv(testenv.ENV_CLUSTER, raising=False)
    monkeypatch.setattr(isolation, "can_isolate", lambda: True)
    monkeypatch.setattr(os, "execvpe", lambda file, argv, env: calls.append((file, argv, env)))

    isolation.run_isolated(["up", "--profile", "round-robin"], forward=True)

    ((file, argv, env),) = calls
    descriptor = int(env[isolation.FORWARD_FD_ENV])
    (listener,) = made
    try:
        assert descriptor == listener.fileno()
        assert file == "unshare" and argv[:4] == list(UNSHARE)
        assert argv[-3:] == ["up", "--profile", "round-robin"]
        assert os.get_inheritable(descriptor)  # survives the exec into the namespace
        assert listener.getsockname()[0] == "127.0.0.1"  # the machine's loopback, nothing else
    finally:
        listener.close()


def test_on_a_cluster_named_by_kubeconfig_the_lab_stays_on_the_machines_network_and_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The namespace's only interface is its own loopback: a cluster on the machine's could not
    be reached from it."""
    (tmp_path / "kubeconfig").write_text("apiVersion: v1\n")
    monkeypatch.setenv(testenv.ENV_CLUSTER, str(tmp_path / "kubeconfig"))
    monkeypatch.delenv(isolation.ISOLATED_ENV, raising=False)
    monkeypatch.setattr(isolation, "can_isolate", lambda: True)
    calls: list[str] = []
    monkeypatch.setattr(os, "execvpe", lambda file, argv, env: calls.append(file))

    isolation.run_isolated(["ab"])

    assert calls == []
    assert "the lab runs outside a network namespace of its own, to reach the cluster " \
        "$COSMOS3_CLUSTER names" in capsys.readouterr().err  # fmt: skip


def test_inside_the_namespace_the_listener_is_taken_and_no_child_inherits_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    listener = loopback_listener()
    listener.set_inheritable(True)
    monkeypatch.setenv(isolation.ISOLATED_ENV, "inside")
    monkeypatch.setenv(isolation.FORWARD_FD_ENV, str(listener.fileno()))

    taken = isolation.forwarded_listener()

    assert taken is not None and taken.fileno() == listener.detach()
    assert not os.get_inheritable(taken.fileno())
    taken.close()
    monkeypatch.setenv(isolation.ISOLATED_ENV, "off")
    assert isolation.forwarded_listener() is None


def test_the_forward_reaches_the_frontend_from_the_machines_loopback() -> None:
    upstream = loopback_listener()

    def echo() -> None:
        connection, _ = upstream.accept()
        with connection:
            connection.sendall(connection.recv(100).upper())

    threading.Thread(target=echo, daemon=True).start()
    port = isolation.port_forward(loopback_listener(), upstream.getsockname()[1])

    with socket.create_connection((LOOPBACK, port), timeout=10) as client:
        client.sendall(b"models?")
        assert client.recv(100) == b"MODELS?"
    upstream.close()


class FakeGraph:
    """What `_up` uses of a LabGraph: outputs, publish, the processes `watch` reads."""

    published: ClassVar[list[int]] = []

    def __init__(self, spec: GraphSpec, run_dir: Path) -> None:
        self.spec, self.outputs_path = spec, run_dir / "outputs.json"
        self.outputs = lab_outputs(spec, 45678)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def publish(self, port: int) -> None:
        self.published.append(port)
        self.outputs = lab_outputs(self.spec, port)


def test_lab_up_in_a_namespace_publishes_the_forwarded_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    listener = loopback_listener()
    monkeypatch.setattr(lab_cli, "LabGraph", FakeGraph)
    monkeypatch.setattr(lab_cli, "forwarded_listener", lambda: listener)
    monkeypatch.setattr(lab_cli, "watch", lambda graph: 0)

    status, _, err = run_command("bind address (lab)", lab_main, ["up", "--out", str(tmp_path)])

    assert status == 0
    assert FakeGraph.published == [listener.getsockname()[1]]
    assert f"serving at http://127.0.0.1:{listener.getsockname()[1]}" in err
    assert isolation.ZMQ_WARNING not in err  # nothing listens on another interface
    listener.close()


# --- a process that dies says why -------------------------------------------------------------

Usage = namedtuple("Usage", "total used free")


class DeadProcess:
    def __init__(self, name: str, status: int, log: str, log_path: Path) -> None:
        self.name, self.status, self.log, self.log_path = name, status, log, log_path

    def exit_code(self) -> int:
        return self.status

    def log_tail(self, lines: int = 25) -> str:
        return self.log


@pytest.mark.parametrize(
    ("status", "log", "free", "cause"),
    [
        (0, "", 0, "exit status 0; the disk holding {run} is full (0 MiB free)"),
        (
            1,
            "OSError: [Errno 28] No space left on device",
            2**30,
            "exit status 1; the disk is full",
        ),
        (
            1,
            "PermissionError: [Errno 13] Permission denied: '/x'",
            2**30,
            "exit status 1; permission denied",
        ),
        (137, "", 2**30, "killed (SIGKILL: the kernel's out-of-memory killer, or a kill -9)"),
        (-9, "", 2**30, "killed (SIGKILL"),
        (-11, "", 2**30, "crashed (SIGSEGV)"),
        (1, "MemoryError", 2**30, "exit status 1; it ran out of memory"),
        (2, "", 2**30, "exit status 2"),
    ],
)
def test_a_dying_worker_says_why(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    status: int,
    log: str,
    free: int,
    cause: str,
) -> None:
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(2**40, 2**40 - free, free))
    graph = LabGraph(
        GraphSpec(routing=routing_for(RoutingProfile.ROUND_ROBIN, 0), workers=2), tmp_path
    )
    frontend = DeadProcess("frontend", None, "", tmp_path / "frontend.log")  # type: ignore[arg-type]
    worker = DeadProcess("worker-0", status, log, tmp_path / "worker-0.log")
    graph.processes = [frontend, worker]  # type: ignore[list-item]
    monkeypatch.setattr(time, "sleep", lambda seconds: None)  # lab.__main__'s time module
    calls = iter([[worker], KeyboardInterrupt()])

    def exited() -> Any:
        step = next(calls)
        if isinstance(step, BaseException):
            raise step
        return step

    monkeypatch.setattr(graph, "exited", exited)

    with pytest.raises(KeyboardInterrupt):
        lab_cli.watch(graph)

    record("causes (lab)")
    message = capsys.readouterr().err
    assert f"lab up: worker-0 exited ({cause.format(run=graph.run_dir)}" in message
    assert "1 workers still serve" in message


def test_a_start_up_failure_on_a_full_disk_names_the_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(2**40, 2**40, 0))

    cause = exit_causes.exit_cause(0, "", tmp_path)

    record("causes (lab)")
    assert cause == f"exit status 0; the disk holding {tmp_path} is full (0 MiB free)"
