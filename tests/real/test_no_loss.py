"""No change the program can make deletes what it just created (provider 4.25.0, decision 0011).

pulumi-kubernetes 4.25.0 upserts on create, so a create-then-delete of one object (a logical name
changed without an alias, or a named object replaced create-first) would delete the live object it
had just taken over, leaving state that points at nothing. The program's logical names are fixed
(no config changes one; `manifests/engine/<stack>.urns.txt` catches a code change), and the provider
replaces a named object delete-first. Here every config change that renames, moves or replaces an
object runs on the real engine, and afterwards every Kubernetes resource in the stack's state
exists in the cluster.
"""

from __future__ import annotations

import pytest

from testenv import cluster as local
from testenv.local_stacks import LAYER_SITE, LocalStacks
from tests.real.support import LAYER_SECRETS, assert_state_is_in_the_cluster


@pytest.mark.parametrize(
    ("key", "value", "changes"),
    [
        ("workerMemory", "80Gi", "replaces the download Job (its pod template is immutable)"),
        ("profile", "session-affinity", "renames the graph"),
    ],
)
def test_a_replacing_change_leaves_every_object_in_place(
    key: str, value: str, changes: str, stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    stacks.configure("dev", LAYER_SITE, LAYER_SECRETS)
    stacks.deploy("dev")
    before = assert_state_is_in_the_cluster(stacks, local_cluster, "dev")

    stacks.run("config", "set", key, value, "--stack", "dev")
    stacks.run("up", "--yes", "--stack", "dev")

    after = assert_state_is_in_the_cluster(stacks, local_cluster, "dev")
    assert len(after) == len(before), changes


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("namespace", "cosmos3-moved"),
        ("modelCacheClaim", "another-cache"),
        ("createNamespace", "false"),
    ],
)
def test_a_change_that_would_delete_the_cache_is_refused_and_loses_nothing(
    key: str, value: str, stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    stacks.configure("dev", LAYER_SITE, LAYER_SECRETS)
    stacks.deploy("dev")
    before = assert_state_is_in_the_cluster(stacks, local_cluster, "dev")

    stacks.run("config", "set", key, value, "--stack", "dev")
    refused = stacks.run("up", "--yes", "--stack", "dev", check=False)

    assert refused.returncode != 0
    text = " ".join((refused.stdout + refused.stderr).split())  # the CLI wraps long lines
    # A replacement is refused "... as it is currently marked for protection", a deletion
    # "... cannot be deleted because it is protected".
    assert "marked for protection" in text or "because it is protected" in text, text
    assert assert_state_is_in_the_cluster(stacks, local_cluster, "dev") == before
