"""`stages.ab.pulumi_stacks` against the real CLI: what the A/B asks of the engine.

Outputs as `pulumi stack output --json` prints them, progress relayed as it comes, the layer always
brought up to date (a new output reaches the profiles although no resource changes), every `up`
refreshed (a graph deleted out of band comes back), a destroy that meets a lock retried, and
every failure a `DeployError` naming the stack and ending with pulumi's own words.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from stages.ab.cluster_target import ClusterAbTarget
from stages.ab.pulumi_stacks import DeployError, PulumiStacks
from stages.cluster.run import ClusterOptions
from testenv import cluster as local
from testenv.engine import Engine
from testenv.local_stacks import LAYER_SITE, SITE, LocalStacks
from tests.real.support import LAYER_SECRETS, exists, layer_up, paused_kwok, wait_until

ORG = "organization"
LAYER = f"{ORG}/cosmos3-nano-reasoner/shared"
GRAPH = "dgd/cosmos3-nano-reasoner-agg-h200-round-robin"
NAMESPACE = "cosmos3-nano-reasoner"


@pytest.fixture
def said() -> list[str]:
    return []


@pytest.fixture
def pulumi_stacks(
    stacks: LocalStacks, engine: Engine, said: list[str], monkeypatch: pytest.MonkeyPatch
) -> PulumiStacks:
    """PulumiStacks in this process, the CLI's environment the project copy's."""
    for name, value in stacks.env.items():
        monkeypatch.setenv(name, value)
    return PulumiStacks(stacks.project, said.append, pulumi_root=engine.root, organization=ORG)


def test_up_returns_what_stack_output_prints_and_relays_progress(
    stacks: LocalStacks, pulumi_stacks: PulumiStacks, said: list[str]
) -> None:
    stacks.configure("shared", LAYER_SITE, LAYER_SECRETS)

    outputs = pulumi_stacks.up("shared")

    assert outputs == stacks.outputs("shared")
    assert f"shared: deploying {LAYER} (pulumi up --refresh)" in said
    assert any(line.startswith("shared | ") and "created" in line for line in said)
    assert said[-1] == "shared: deployed (13 create)"


def test_a_new_layer_output_reaches_the_profiles_though_no_resource_changes(
    stacks: LocalStacks, pulumi_stacks: PulumiStacks, said: list[str]
) -> None:
    layer_up(stacks)
    program = stacks.project / "__main__.py"
    program.write_text(program.read_text() + '\npulumi.export("layerRevision", 2)\n')
    target = ClusterAbTarget(stacks=pulumi_stacks, cluster=ClusterOptions(), gpus=8)

    target.prepare(said.append)

    assert stacks.outputs("shared")["layerRevision"] == 2


def test_a_graph_deleted_out_of_band_is_created_again(
    stacks: LocalStacks, pulumi_stacks: PulumiStacks, local_cluster: local.LocalCluster
) -> None:
    stacks.configure("shared", LAYER_SITE, LAYER_SECRETS)
    stacks.configure("round-robin", SITE)
    pulumi_stacks.up("shared")
    pulumi_stacks.up("round-robin")
    local_cluster.kubectl("delete", GRAPH, "-n", NAMESPACE, "--wait=true")

    pulumi_stacks.up("round-robin")

    assert exists(local_cluster, GRAPH, NAMESPACE)


def test_a_failed_up_names_the_stack_and_ends_with_pulumis_words(
    stacks: LocalStacks, pulumi_stacks: PulumiStacks
) -> None:
    stacks.configure("round-robin", SITE)

    with pytest.raises(DeployError) as failed:
        pulumi_stacks.up("round-robin")

    message = str(failed.value)
    assert message.startswith(
        f"`pulumi up` of stack {ORG}/cosmos3-nano-reasoner/round-robin failed; its errors:\n"
    )
    errors = message.split("its errors:\n", 1)[1].split("the end of its output:")[0]
    # The engine's own words, even when the tail holds the program's cancelled traceback.
    assert f'unknown stack "{LAYER}"' in errors
    assert "\nthe end of its output:\n" in message


def test_a_missing_stack_says_how_to_create_it(pulumi_stacks: PulumiStacks) -> None:
    with pytest.raises(DeployError, match=r"create it with `pulumi stack init .*/round-robin`"):
        pulumi_stacks.outputs("round-robin")


def test_a_stack_is_made_and_set_its_secret_encrypted_and_made_once(
    stacks: LocalStacks, pulumi_stacks: PulumiStacks
) -> None:
    """`create`, the lab's only way to set a stack: values as `pulumi config set` writes them, a
    secret as `--secret` does (ciphertext in the stack file), a second create refused."""
    pulumi_stacks.create("shared", LAYER_SITE, LAYER_SECRETS)

    shown = stacks.run(
        "config", "--json", "--show-secrets", "--stack", f"{ORG}/cosmos3-nano-reasoner/shared"
    )
    config = json.loads(shown.stdout)
    for key, value in LAYER_SITE.items():
        assert config[f"cosmos3-nano-reasoner:{key}"] == {"value": value, "secret": False}
    ((key, secret),) = LAYER_SECRETS.items()
    assert config[f"cosmos3-nano-reasoner:{key}"] == {"value": secret, "secret": True}
    assert secret not in (stacks.project / "Pulumi.shared.yaml").read_text()
    with pytest.raises(DeployError, match="already exists"):
        pulumi_stacks.create("shared", LAYER_SITE)


def test_without_an_organization_names_go_as_given(
    stacks: LocalStacks, pulumi_stacks: PulumiStacks, said: list[str]
) -> None:
    stacks.configure("shared", LAYER_SITE, LAYER_SECRETS)
    pulumi_stacks.organization = None

    pulumi_stacks.up("shared")

    assert "shared: deploying shared (pulumi up --refresh)" in said


def test_a_folder_without_a_project_is_a_deploy_error(
    pulumi_stacks: PulumiStacks, tmp_path: Path
) -> None:
    pulumi_stacks.work_dir = tmp_path / "empty"
    pulumi_stacks.work_dir.mkdir()

    with pytest.raises(DeployError, match="no Pulumi project"):
        pulumi_stacks.up("shared")


def test_every_update_runs_the_policy_pack(
    stacks: LocalStacks, pulumi_stacks: PulumiStacks, said: list[str]
) -> None:
    stacks.configure("shared", LAYER_SITE, LAYER_SECRETS)
    pulumi_stacks.policy_packs = ("policy/analyzer",)

    pulumi_stacks.up("shared")

    assert any("cosmos3-nano-reasoner-guardrails@v0.1.0" in line for line in said)


def test_a_destroy_that_meets_a_lock_is_retried(
    stacks: LocalStacks,
    pulumi_stacks: PulumiStacks,
    local_cluster: local.LocalCluster,
    said: list[str],
) -> None:
    stacks.configure("shared", LAYER_SITE, LAYER_SECRETS)
    stacks.configure("round-robin", SITE)
    stacks.deploy("shared")
    with paused_kwok(local_cluster):
        holder = subprocess.Popen(
            ["pulumi", "up", "--yes", "--stack", "round-robin", "--non-interactive"],
            cwd=stacks.project,
            env=stacks.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            process_group=0,
        )
        wait_until(
            lambda: exists(local_cluster, GRAPH, NAMESPACE), "the graph is created, then awaited"
        )
        # The update holds the stack's lock while it waits; it ends once the destroy met the lock
        # (or after 120 s, when the destroy never said so, which fails the test below).
        retrying = "locked by an update still ending; trying again"
        ender = _once(
            lambda: any(retrying in line for line in said), holder.send_signal, signal.SIGINT
        )
        pulumi_stacks.destroy("round-robin")
        ender.join()
        holder.wait(timeout=60)

    assert any(retrying in line for line in said)
    assert not exists(local_cluster, GRAPH, NAMESPACE)


def _once(
    condition: Callable[[], bool], action: Callable[..., object], *args: object
) -> threading.Thread:
    """`action(*args)` in a thread, as soon as `condition()` holds or after 120 s."""

    def later() -> None:
        deadline = time.monotonic() + 120
        while not condition() and time.monotonic() < deadline:
            time.sleep(0.1)
        action(*args)

    thread = threading.Thread(target=later, daemon=True)
    thread.start()
    return thread
