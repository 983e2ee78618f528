"""Changes after the first `up`, on the real engine: drift made with kubectl, and a refused
storage class."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from testenv import cluster as local
from testenv.cluster import objects
from testenv.local_stacks import SITE, LocalStacks
from tests.real.support import LAYER_SECRETS, layer_up

GRAPH = "dynamographdeployment/cosmos3-nano-reasoner-agg-h200-session-affinity"
NAMESPACE = "cosmos3-nano-reasoner"
TTL_ARG = "/spec/components/0/podTemplate/spec/containers/0/args/5"


def live_ttl(cluster: local.LocalCluster) -> str:
    graph = json.loads(cluster.kubectl("get", GRAPH, "-n", NAMESPACE, "-o", "json"))
    args = graph["spec"]["components"][0]["podTemplate"]["spec"]["containers"][0]["args"]
    return str(args[args.index("--router-session-affinity-ttl-secs") + 1])


def test_a_ttl_changed_with_kubectl_shows_in_a_refreshed_preview_and_up_restores_it(
    stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    layer_up(stacks, "session-affinity")
    patch = [
        {"op": "test", "path": TTL_ARG, "value": "300"},
        {"op": "replace", "path": TTL_ARG, "value": "120"},
    ]
    local_cluster.kubectl("patch", GRAPH, "-n", NAMESPACE, "--type=json", "-p", json.dumps(patch))
    assert live_ttl(local_cluster) == "120"

    unrefreshed = stacks.run("preview", "--stack", "session-affinity").stdout
    assert re.search(r"Resources:\s+\d+ unchanged", unrefreshed), "the state still says 300"
    refreshed = stacks.run("preview", "--refresh", "--diff", "--stack", "session-affinity")
    assert re.search(r'"120"\s*=>\s*"300"', refreshed.stdout), refreshed.stdout

    stacks.run("up", "--refresh", "--yes", "--stack", "session-affinity")
    assert live_ttl(local_cluster) == "300"


@pytest.fixture
def other_class(local_cluster: local.LocalCluster) -> Iterator[str]:
    """A second ReadWriteMany class, new (never a cluster's own of that name) and gone after."""
    local_cluster.create([objects.storage_class("other-rwx")])
    yield "other-rwx"
    local_cluster.kubectl("delete", "storageclass", "other-rwx")


def test_a_new_storage_class_is_refused_at_preview(stacks: LocalStacks, other_class: str) -> None:
    layer_up(stacks)  # the class exists: only `protect` refuses
    stacks.run("config", "set", "modelCacheStorageClass", other_class, "--stack", "shared")

    refused = stacks.run("preview", "--stack", "shared", check=False)
    assert refused.returncode != 0
    text = refused.stdout + refused.stderr
    assert re.search(
        r"unable to replace resource \"urn:pulumi:shared::cosmos3-nano-reasoner::"
        r"[^\"]*kubernetes:core/v1:PersistentVolumeClaim::cosmos3-model-cache\"\s+"
        r"as it is currently marked for protection",
        text,
    ), text


def test_a_misspelt_storage_class_stops_the_first_up_before_any_claim_exists(
    stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    stacks.configure("shared", SITE | {"modelCacheStorageClass": "rwx-typo"}, LAYER_SECRETS)
    # A new stack's first preview cannot read through a provider that does not exist yet.
    stacks.run("preview", "--stack", "shared")

    failed = stacks.run("up", "--yes", "--stack", "shared", check=False)

    assert failed.returncode != 0
    text = " ".join((failed.stdout + failed.stderr).split())
    assert (
        "kubernetes:storage.k8s.io/v1:StorageClass (cosmos3-model-cache-storage-class): "
        "error: resource 'rwx-typo' does not exist"
    ) in text, text
    claims = local_cluster.kubectl("get", "pvc", "-A", "-o", "name")
    assert claims.strip() == "", "no claim was created on the misspelt class"
    exported = stacks.run("stack", "export", "--stack", "shared").stdout
    assert "PersistentVolumeClaim::" not in exported, "and none is in the state"
    again = stacks.run("preview", "--stack", "shared", check=False)  # the provider exists now
    assert again.returncode != 0 and "Preview failed: resource 'rwx-typo' does not exist" in (
        " ".join(again.stdout.split())
    )

    stacks.run("config", "set", "modelCacheStorageClass", objects.RWX_CLASS, "--stack", "shared")
    stacks.run("up", "--yes", "--stack", "shared")  # corrected, the same stack comes up
