"""`python -m lab ab` (what `make lab` runs) through `pulumi up`, on the real tier.

The whole A/B from the command line: its own local cluster, the lab controller, `pulumi up` of the
layer and of each profile stack through the Automation API, smoke and perf against the frontends
the controller runs, `pulumi destroy`, the report. Then nothing of it may still run, after a pass,
a failure and a Ctrl-C; and while it runs, nothing of it listens where another interface than
loopback reaches it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from common import REPO_ROOT
from stages.archive import ArchiveLocation, list_runs
from tests.real.listening import reachable_off_loopback, tree_listening
from tests.real.support import wait_until

# `make real` shares tests out one by one (--dist loadgroup); these three stay together, one after
# another on one worker: each runs whole lab A/Bs, whose graphs two at once would slow each other.
pytestmark = pytest.mark.xdist_group("test_lab_through_pulumi")

WORKLOAD = [
    "--videos", "2", "--questions", "2", "--output-tokens", "8", "--concurrency", "1",
    "--prefix-tokens", "64", "--turn-jitter-ms", "0",
]  # fmt: skip
NAMESPACE = "cosmos3-nano-reasoner"


def lab_ab(out: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "lab", "ab", "--workers", "2", "--time-scale", "2",
        "--out", str(out), *WORKLOAD, *extra,
    ]  # fmt: skip


def processes_of(out: Path) -> list[tuple[int, list[bytes]]]:
    """The processes that refer to `out` (the cluster's folder is in its components' command
    lines, the graphs' folder in their processes' environment): pid and argv."""
    marker = str(out.resolve()).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in cmdline or marker in environ:
            found.append((int(entry.name), cmdline.split(b"\0")))
    return found


def left_running(out: Path) -> list[str]:
    """`processes_of(out)`, each as `pid: command line`."""
    return [f"{pid}: {b' '.join(argv).decode(errors='replace')}" for pid, argv in processes_of(out)]


def test_the_ab_runs_what_pulumi_up_deployed_and_leaves_nothing_running(tmp_path: Path) -> None:
    out = tmp_path / "lab"
    project_on_path = os.environ | {"PYTHONPATH": str(REPO_ROOT)}

    ab = subprocess.run(  # `--out lab`, relative, like `make lab`'s default build/lab
        lab_ab(Path("lab")),
        cwd=tmp_path,
        env=project_on_path,
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )

    said = ab.stderr
    assert ab.returncode == 0, ab.stdout[-3000:] + said[-6000:]
    closing = ab.stdout.splitlines()
    assert "round-robin: passed" in closing and "session-affinity: passed" in closing, closing[-6:]
    for profile in ("round-robin", "session-affinity"):
        assert f"{profile}: deploying {profile} (pulumi up --refresh)" in said
        assert f"{profile}: destroying" in said
        graph = f"cosmos3-nano-reasoner-agg-h200-{profile}"
        assert f"lab controller: {NAMESPACE}/{graph} (generation 1): starting `python3 -m " in said
        assert (out / "runs" / NAMESPACE / graph / "logs" / "frontend.log").is_file()
    assert "--router-session-affinity-ttl-secs 600`" in said, "the TTL at the time scale (2 x 300)"
    assert "| Concurrency |" in (out / "report.md").read_text()
    archive = ArchiveLocation(bucket="lab", endpoint_url=f"file://{out / 'archive'}")
    records = {(r.stack, r.stage.value): r for r in list_runs(archive, stage=None)}
    assert {("round-robin", "perf"), ("session-affinity", "perf")} <= set(records)
    archived = records[("session-affinity", "perf")].stack_outputs()
    assert archived.target == "cluster", "the stack's own outputs are archived, unedited"
    assert archived.frontend_url.endswith(".svc.cluster.local:8000")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["peak_rss_bytes"] > 0
    wait_until(lambda: left_running(out) == [], "nothing of the run still runs", 20)


def serving(lab: subprocess.Popen[str]) -> list[str]:
    """`lab`'s output up to the line where the controller says its first graph serves."""
    assert lab.stdout is not None
    lines = []
    for line in lab.stdout:
        lines.append(line)
        if "lab controller:" in line and "serves at" in line:
            return lines
    raise AssertionError("the run ended before a graph served:\n" + "".join(lines[-40:]))


def frontend_of(out: Path) -> int:
    """The pid of the run's frontend, not of the process runner that started it
    (`stages/incluster/processes.py`, which names it too)."""
    for pid, argv in processes_of(out):
        if argv[1:3] == [b"-m", b"dynamo.frontend"]:
            return pid
    raise AssertionError(f"no frontend of {out} runs")


def test_a_failed_profile_leaves_nothing_running_and_nothing_listened_beyond_loopback(
    tmp_path: Path,
) -> None:
    out = tmp_path / "lab"
    lab = subprocess.Popen(
        lab_ab(out), cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines = serving(lab)
    held = tree_listening(lab.pid)
    frontend = frontend_of(out)

    os.kill(frontend, signal.SIGKILL)  # the graph breaks before its smoke stage
    rest, _ = lab.communicate(timeout=600)

    said = "".join(lines) + rest
    holders = [holder for held_by in held.values() for holder in held_by]
    assert any(holder.startswith(f"{frontend} ") for holder in holders), held
    assert reachable_off_loopback(held) == {}, held
    assert lab.returncode not in (0, 130), said
    assert "round-robin: failed" in rest and "session-affinity: not run" in rest, said
    assert "round-robin: destroyed" in said, said
    wait_until(lambda: left_running(out) == [], "nothing of the run still runs", 20)


def test_ctrl_c_during_a_deployment_stops_the_graphs_and_the_cluster(tmp_path: Path) -> None:
    out = tmp_path / "lab"
    lab = subprocess.Popen(
        lab_ab(out), cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines = serving(lab)
    time.sleep(2)

    lab.send_signal(signal.SIGINT)
    rest, _ = lab.communicate(timeout=300)

    assert lab.returncode == 130, "".join(lines) + rest
    assert "lab: interrupted; every lab process was stopped" in rest
    wait_until(lambda: left_running(out) == [], "nothing of the run still runs", 20)
