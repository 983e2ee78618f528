"""The recipe's layering on the real engine: `shared`, then the profile stacks through the real
StackReference, the handshake's refusals in the engine's words, and what the engine stored fed to
every stage (`pulumi stack output --json | python -m stages ... --outputs -`)."""

from __future__ import annotations

import json
import subprocess
import sys

import yaml

from testenv import cluster as local
from testenv.cluster import objects
from testenv.local_stacks import LAYER_SITE, SITE, LocalStacks
from tests.real.support import LAYER_SECRETS, layer_up

PROFILES = ("round-robin", "session-affinity")


def stage(cli: LocalStacks, profile: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """`pulumi stack output --json --stack <profile> | python -m stages <argv> --outputs -`."""
    printed = cli.run("stack", "output", "--json", "--stack", profile).stdout
    return subprocess.run(
        [sys.executable, "-m", "stages", *argv, "--outputs", "-"],
        cwd=cli.project,
        env=cli.env,
        input=printed,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_profile_stacks_stand_on_the_shared_layer(
    stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    layer_up(stacks, *PROFILES)

    graphs = local_cluster.kubectl(
        "get", "dynamographdeployments", "-n", "cosmos3-nano-reasoner", "-o", "name"
    ).split()
    assert sorted(graphs) == [
        f"dynamographdeployment.nvidia.com/cosmos3-nano-reasoner-agg-h200-{profile}"
        for profile in PROFILES
    ]
    affinity = stacks.outputs("session-affinity")
    assert affinity["sessionAffinityTtlSeconds"] == 300
    assert affinity["sessionHeader"] == "X-Dynamo-Session-ID"
    round_robin = stacks.outputs("round-robin")
    assert "sessionAffinityTtlSeconds" not in round_robin  # the SDK drops None before the engine
    assert "sessionHeader" not in round_robin

    destroyed = stacks.run("destroy", "--yes", "--stack", "round-robin").stdout
    assert "1 deleted" in destroyed or "deleted" in destroyed
    left = local_cluster.kubectl("get", "pvc,secret", "-n", "cosmos3-nano-reasoner", "-o", "name")
    assert "persistentvolumeclaim/shared-model-cache" in left.split()


def test_a_profile_stack_without_its_layer_is_refused_in_one_line(stacks: LocalStacks) -> None:
    stacks.configure("round-robin", SITE)
    missing = stacks.run("preview", "--stack", "round-robin", check=False)
    assert missing.returncode != 0
    text = missing.stdout + missing.stderr
    assert "organization/cosmos3-nano-reasoner/shared" in text, text

    stacks.configure("shared", LAYER_SITE, LAYER_SECRETS)
    stacks.run("up", "--yes", "--stack", "shared")
    stacks.run(
        "config", "set", "workerImage", "nvcr.io/nim/nvidia/cosmos3:9.9.9", "--stack", "round-robin"
    )
    # What only the order of updates settles: the preview warns and shows the diff, `up` refuses.
    warned = stacks.run("preview", "--stack", "round-robin")
    assert "warning:" in warned.stdout and "nvcr.io/nim/nvidia/cosmos3:9.9.9" in warned.stdout
    other_image = stacks.run("up", "--yes", "--stack", "round-robin", check=False)
    assert other_image.returncode != 0
    text = other_image.stdout + other_image.stderr
    assert "nvcr.io/nim/nvidia/cosmos3:9.9.9" in text and "workerImage" in text, text


def test_every_stage_takes_what_the_engine_stored(
    stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    layer_up(stacks, *PROFILES)
    for profile in PROFILES:
        smoke = stage(stacks, profile, "smoke", "--dry-run")
        assert smoke.returncode == 0, smoke.stderr
        jobs = list(yaml.safe_load_all(smoke.stdout))
        assert {item["kind"] for item in jobs} == {"ConfigMap", "Service", "Job"}
        # The stage's objects as the real API server takes them (a server-side dry run).
        local_cluster.kubectl(
            "apply", "--dry-run=server", "-f", "-", stdin=objects.as_json_stream(jobs)
        )
        perf = stage(stacks, profile, "perf", "--dry-run")
        assert perf.returncode == 0, perf.stderr
        local_cluster.kubectl(
            "apply",
            "--dry-run=server",
            "-f",
            "-",
            stdin=objects.as_json_stream(list(yaml.safe_load_all(perf.stdout))),
        )
    layer = stage(stacks, "shared", "smoke", "--dry-run")
    assert layer.returncode == 2 and "shared layer's" in layer.stderr
    assert json.loads(stacks.run("stack", "output", "--json", "--stack", "shared").stdout)[
        "modelCacheReady"
    ]
