"""`python -m stages ab` driving the real CLI through the Automation API, on the local cluster.

kwok's pods answer no requests, so the stages run as a rehearsal (`--rehearse`): each profile's
stack is really deployed and destroyed, in the recipe's order, and what its smoke and perf stages
would run is written instead of run. `--gpus 8` is the recipe's cluster: one graph at a time.
"""

from __future__ import annotations

import json
import subprocess
import sys

from testenv import cluster as local
from testenv.local_stacks import LAYER_SITE, SITE, LocalStacks
from tests.real.support import LAYER_SECRETS

PROFILES = ("round-robin", "session-affinity")


def test_a_whole_pass_deploys_rehearses_and_tears_down_each_profile_in_turn(
    stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    stacks.configure("shared", LAYER_SITE, LAYER_SECRETS)
    for profile in PROFILES:
        stacks.configure(profile, SITE)

    ab = subprocess.run(
        [
            sys.executable,
            "-m",
            "stages",
            "ab",
            "--rehearse",
            "--gpus",
            "8",
            "--org",
            "organization",
            "--policy-pack",
            "policy/analyzer",
            "--run-id",
            "real-tier",
            "--out",
            "build/ab",
        ],
        cwd=stacks.project,
        env=stacks.env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )

    assert ab.returncode == 0, ab.stdout + ab.stderr[-4000:]
    said = [line for line in ab.stderr.splitlines() if line.startswith("[ab] ") and "|" not in line]
    # A rehearsed stage's line ends with where it wrote what the stage would run.
    milestones = [line.partition(" (not run)")[0] for line in said if _is_milestone(line)]
    assert milestones == [
        "[ab] shared: bringing the shared layer up to date",
        *[
            step.format(profile=profile)
            for profile in PROFILES
            for step in (
                "[ab] {profile}: deploying its graph ({profile})",
                "[ab] {profile}: smoke rehearsed",
                "[ab] {profile}: perf rehearsed",
                "[ab] {profile}: taking its graph down",
            )
        ],
    ], "\n".join(said)
    assert ab.stdout.splitlines()[:2] == ["round-robin: passed", "session-affinity: passed"]
    graphs = local_cluster.kubectl("get", "dynamographdeployments", "-A", "-o", "name")
    assert graphs.strip() == "", "every graph the pass deployed is down"
    for profile in PROFILES:
        exported = json.loads(stacks.run("stack", "export", "--stack", profile).stdout)
        assert not exported["deployment"].get("pending_operations"), profile
        rehearsal = stacks.project / "build/ab/real-tier" / profile / "perf" / "rehearsal.txt"
        assert "aiperf" in rehearsal.read_text() or "kind: Job" in rehearsal.read_text()


def _is_milestone(line: str) -> bool:
    return any(
        marker in line
        for marker in (
            "bringing the shared layer up to date",
            "deploying its graph",
            "rehearsed (not run)",
            "taking its graph down",
        )
    ) and not line.startswith("[ab] run ")
