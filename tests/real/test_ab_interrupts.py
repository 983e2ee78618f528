"""Ctrl-C and SIGTERM in `python -m stages ab` on the real CLI: no graph, lock, pending operation
or plugin process is left, and a re-run with the same id resumes.

- during `up`, while it waits for the graph's `Ready` (kwok paused, so it never comes): the CLI
  gets one SIGINT of its own, cancels, and the run takes the graph down; then SIGTERM does the
  same to the re-run;
- during `destroy` (held by a finalizer the test removes): the destroy is let finish;
- twice during `destroy`: the run exits at once with the command that recovers, and the CLI, in
  a process group of its own, still finishes the destroy.
Each interrupt goes to the run's whole process group, as a terminal's Ctrl-C does.
Interrupts during the stages themselves are the orchestrator's, tested with a scripted target
(tests/stages/ab/test_orchestrator.py): kwok's graphs serve no stage here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

from testenv import cluster as local
from testenv.engine import Engine
from testenv.local_stacks import LAYER_SITE, SITE, LocalStacks
from tests.real.support import LAYER_SECRETS, engine_processes, exists, paused_kwok, wait_until

NAMESPACE = "cosmos3-nano-reasoner"
GRAPH = "dgd/cosmos3-nano-reasoner-agg-h200-round-robin"
HOLD = "cosmos3.local/hold"
RUN_ID = "interrupted-run"
PROFILES = ("round-robin", "session-affinity")


class AbRun:
    """`python -m stages ab --rehearse` in the project copy, its stderr followed line by line."""

    def __init__(self, stacks: LocalStacks) -> None:
        argv = [sys.executable, "-m", "stages", "ab", "--rehearse", "--gpus", "8", "--org",
                "organization", "--run-id", RUN_ID, "--out", "build/ab"]  # fmt: skip
        self.process = subprocess.Popen(
            argv, cwd=stacks.project, env=stacks.env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, process_group=0,
        )  # fmt: skip
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line.rstrip())

    def saw(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def interrupt(self, signum: signal.Signals = signal.SIGINT) -> None:
        """`signum` to the run's process group: a Ctrl-C at the terminal reaches the foreground
        group, never a group of the run's own."""
        os.killpg(self.process.pid, signum)

    def wait_for(self, text: str, seconds: float = 120.0) -> None:
        wait_until(lambda: self.saw(text), f"`{text}` in the A/B's output", seconds)

    def finish(self, seconds: float = 300.0) -> tuple[int, str]:
        # Not communicate(): it would read stderr too, taking lines from the reader.
        self.process.wait(timeout=seconds)
        self._reader.join(timeout=10)
        assert self.process.stdout is not None
        return self.process.returncode, self.process.stdout.read()


def configured(stacks: LocalStacks) -> None:
    stacks.configure("shared", LAYER_SITE, LAYER_SECRETS)
    for profile in PROFILES:
        stacks.configure(profile, SITE)
    stacks.deploy("shared")


def assert_left_clean(stacks: LocalStacks, cluster: local.LocalCluster, engine: Engine) -> None:
    """No graph, no pending operation, no lock (a preview runs), no plugin process."""
    assert not exists(cluster, GRAPH, NAMESPACE)
    for profile in PROFILES:
        exported = json.loads(stacks.run("stack", "export", "--stack", profile).stdout)
        assert not exported["deployment"].get("pending_operations"), profile
        stacks.run("preview", "--stack", profile)  # a lock would fail it
    assert engine_processes(engine, stacks) == []


def resumes(stacks: LocalStacks) -> None:
    rerun = AbRun(stacks)
    status, stdout = rerun.finish()
    assert status == 0, "\n".join(rerun.lines[-30:])
    assert stdout.splitlines()[:2] == ["round-robin: passed", "session-affinity: passed"]


def interrupted_while_up(
    stacks: LocalStacks, cluster: local.LocalCluster, engine: Engine, signum: signal.Signals
) -> None:
    """A run interrupted by `signum` while its `up` waits for the graph's `Ready`: it cancels the
    `up`, takes the graph down and leaves the stacks clean."""
    with paused_kwok(cluster):
        ab = AbRun(stacks)
        ab.wait_for("DynamoGraphDeployment cosmos3-graph creating")
        time.sleep(2)  # well inside the provider's wait for Ready
        ab.interrupt(signum)
        status, stdout = ab.finish()

    assert status == 130, "\n".join(ab.lines[-30:])
    assert ab.saw("interrupted: `pulumi up` is cancelling"), "\n".join(ab.lines)
    assert ab.saw("round-robin: destroyed"), "\n".join(ab.lines)
    assert stdout.splitlines()[:2] == [
        "round-robin: failed (interrupted)",
        "session-affinity: not run",
    ]
    assert not ab.saw("Traceback"), "\n".join(ab.lines)
    assert_left_clean(stacks, cluster, engine)


def test_an_interrupt_while_up_awaits_the_graph_cancels_it_and_takes_the_graph_down(
    stacks: LocalStacks, local_cluster: local.LocalCluster, engine: Engine
) -> None:
    """SIGINT in the first run, then SIGTERM in its re-run (same id), each during `up`; a third
    run resumes. One chain rather than a test per signal: the re-run is a resume too, and each
    test of its own paid for the stacks and a whole pass of both profiles again (113 CPU-seconds
    for the two, 81 for the chain, measured alone)."""
    configured(stacks)
    for signum in (signal.SIGINT, signal.SIGTERM):
        interrupted_while_up(stacks, local_cluster, engine, signum)
    resumes(stacks)


def held_graph(stacks: LocalStacks, cluster: local.LocalCluster) -> None:
    """round-robin deployed with a finalizer of the test's: its destroy waits until it goes."""
    stacks.deploy("round-robin")
    patch = json.dumps({"metadata": {"finalizers": [HOLD]}})
    cluster.kubectl("patch", GRAPH, "-n", NAMESPACE, "--type=merge", "-p", patch)


def release(cluster: local.LocalCluster) -> None:
    cluster.kubectl("patch", GRAPH, "-n", NAMESPACE, "--type=json", "-p",
                    json.dumps([{"op": "remove", "path": "/metadata/finalizers"}]))  # fmt: skip


def test_an_interrupt_during_destroy_lets_it_finish(
    stacks: LocalStacks, local_cluster: local.LocalCluster, engine: Engine
) -> None:
    configured(stacks)
    held_graph(stacks, local_cluster)
    ab = AbRun(stacks)
    ab.wait_for("round-robin: destroying")
    time.sleep(2)
    ab.interrupt()
    ab.wait_for("interrupted: `pulumi destroy` is let finish")
    release(local_cluster)
    status, stdout = ab.finish()

    assert status == 130, "\n".join(ab.lines[-30:])
    assert stdout.splitlines()[:2] == ["round-robin: passed", "session-affinity: not run"]
    assert_left_clean(stacks, local_cluster, engine)
    resumes(stacks)


def test_a_second_interrupt_exits_at_once_with_the_command_that_recovers(
    stacks: LocalStacks, local_cluster: local.LocalCluster, engine: Engine
) -> None:
    configured(stacks)
    held_graph(stacks, local_cluster)
    ab = AbRun(stacks)
    ab.wait_for("round-robin: destroying")
    time.sleep(2)
    ab.interrupt()
    ab.wait_for("interrupted: `pulumi destroy` is let finish")
    ab.interrupt()
    status, _ = ab.finish(seconds=30)

    assert status == 130
    assert ab.saw(
        "abandoned at the second interrupt: once `pulumi` has exited, `pulumi destroy --yes "
        "--stack organization/cosmos3-nano-reasoner/round-robin` frees its GPUs"
    ), "\n".join(ab.lines[-20:])
    # The CLI leads a process group of its own, in the run's session (never a session of its own,
    # which the kernel would schedule apart): it still finishes the destroy, and lets go of the lock.
    [cli] = [int(p.split()[0]) for p in engine_processes(engine, stacks) if p.endswith("/pulumi")]
    assert os.getpgid(cli) == cli and os.getsid(cli) == os.getsid(0)
    release(local_cluster)
    wait_until(
        lambda: engine_processes(engine, stacks) == [], "the abandoned destroy's CLI ends", 120
    )
    assert_left_clean(stacks, local_cluster, engine)
