"""The real tier on a cluster it did not start (`COSMOS3_CLUSTER=<kubeconfig>`,
testenv/cluster/existing.py): attached through the user's kubeconfig and context, refused where
it would do harm, and gone afterwards with everything it added and nothing of the owner's.

"Their" cluster is a control plane with the DGD CRD and no nodes (`up(..., gpu_nodes=False)`),
reached only through a kubeconfig of the user's: two contexts, the current one dead, the
certificates by relative paths."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import testenv
from testenv import cluster as local
from testenv.cluster import objects
from testenv.engine import Engine
from testenv.local_stacks import LocalStacks
from tests.real.support import delete_namespaces, layer_up, wait_until
from tests.support import NGC_KEY

THEIR_CONTEXT = "their-cluster"
THEIR_NAMESPACE = "their-team"
THEIR_VOLUME = "model-cache-0"
"""A volume of theirs under the name the tier gives its first one: the tier must pick another."""


@pytest.fixture
def theirs(engine: Engine, tmp_path: Path) -> Iterator[local.LocalCluster]:
    """A control plane with the DGD CRD, no nodes, and objects of its owner's."""
    started = local.up(tmp_path / "theirs", engine, die_with_parent=True, gpu_nodes=False)
    try:
        started.kubectl("create", "namespace", THEIR_NAMESPACE)
        started.kubectl("create", "configmap", "notes", "-n", THEIR_NAMESPACE, "--from-literal=a=b")
        volume = objects.volume(THEIR_VOLUME)
        volume["metadata"]["labels"] = {"owner": "them"}
        volume["spec"]["storageClassName"] = "their-class"
        started.create([volume])
        yield started
    finally:
        started.down()


def user_kubeconfig(cluster: local.LocalCluster, home: Path) -> Path:
    """Their cluster as a user's kubeconfig has it: its files beside it by relative paths, a dead
    context current."""
    ours = yaml.safe_load(cluster.kubeconfig.read_text())
    (home / "certs").mkdir(parents=True)
    entry = {**ours["clusters"][0]["cluster"]}
    user = {**ours["users"][0]["user"]}
    for body, field in [(entry, "certificate-authority"), (user, "client-certificate"),
                        (user, "client-key")]:  # fmt: skip
        shutil.copy(body[field], home / "certs" / Path(body[field]).name)
        body[field] = f"certs/{Path(body[field]).name}"
    dead = {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "theirs", "cluster": entry}, {"name": "dead", "cluster": dead}],
        "users": [{"name": "admin", "user": user}],
        "contexts": [
            {"name": THEIR_CONTEXT, "context": {"cluster": "theirs", "user": "admin"}},
            {"name": "dead", "context": {"cluster": "dead", "user": "admin"}},
        ],
        "current-context": "dead",
    }
    path = home / "config"
    path.write_text(yaml.safe_dump(config))
    return path


def environ(kubeconfig: Path, context: str) -> dict[str, str]:
    return {testenv.ENV_CLUSTER: str(kubeconfig), testenv.ENV_CONTEXT: context}


def names(cluster: local.LocalCluster, kind: str, *selection: str) -> list[str]:
    return cluster.kubectl("get", kind, *selection, "-o", "name").split()


def labelled_ours(cluster: local.LocalCluster) -> list[str]:
    return names(cluster, "nodes,persistentvolumes,storageclasses", "-l", local.MADE_BY_SELECTOR)


def their_volume(cluster: local.LocalCluster) -> dict[str, Any]:
    found = json.loads(cluster.kubectl("get", "pv", THEIR_VOLUME, "-o", "json"))
    return {"labels": found["metadata"]["labels"], "class": found["spec"]["storageClassName"]}


def test_the_tier_runs_on_a_cluster_it_did_not_start_and_leaves_only_what_was_there(
    theirs: local.LocalCluster, tmp_path: Path
) -> None:
    kubeconfig = user_kubeconfig(theirs, tmp_path / "user")
    written = kubeconfig.read_bytes()
    tier = tmp_path / "tier"

    attached = testenv.session_cluster(
        tier, environ(kubeconfig, THEIR_CONTEXT), die_with_parent=True
    )
    cluster, stop = attached
    try:
        assert stop, "the tier takes away what it added"
        assert [item.name for item in cluster.started] == ["kwok"]
        assert THEIR_NAMESPACE in cluster.kept_namespaces
        assert their_volume(cluster) == {"labels": {"owner": "them"}, "class": "their-class"}
        assert cluster.free_volumes() == 8  # the tier's own: theirs is not counted

        stacks = LocalStacks.create(tmp_path / "stacks", cluster, {"NGC_API_KEY": NGC_KEY})
        layer_up(stacks, "round-robin")
        ready = cluster.kubectl("get", "dgd", "-A", "-o", "jsonpath={.items[*].status.state}")
        assert ready == "successful"
        delete_namespaces(cluster)
        assert names(theirs, "namespaces").count(f"namespace/{THEIR_NAMESPACE}") == 1
    finally:
        cluster.down()

    assert not (tier / "kubeconfig").exists(), "the tier's copy of the user's credentials"
    assert kubeconfig.read_bytes() == written
    wait_until(lambda: labelled_ours(theirs) == [], "what the tier made is deleted")
    assert "configmap/notes" in names(theirs, "configmaps", "-n", THEIR_NAMESPACE)
    assert their_volume(theirs) == {"labels": {"owner": "them"}, "class": "their-class"}
    assert "cosmos3-nano-reasoner" not in theirs.kubectl("get", "namespaces", "-o", "name")


def test_a_missing_context_and_a_cluster_with_nodes_are_refused_before_anything_is_made(
    theirs: local.LocalCluster, tmp_path: Path
) -> None:
    kubeconfig = user_kubeconfig(theirs, tmp_path / "user")
    with pytest.raises(local.ClusterError) as refused:
        testenv.session_cluster(tmp_path / "tier", environ(kubeconfig, "kind-kind"))
    assert "has no context 'kind-kind' (it has ['dead', 'their-cluster'])" in str(refused.value)
    assert "COSMOS3_CLUSTER_CONTEXT" in str(refused.value)

    theirs.create([{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "their-node"}}])
    with pytest.raises(local.ClusterError) as refused:
        testenv.session_cluster(tmp_path / "tier", environ(kubeconfig, THEIR_CONTEXT))

    assert "has nodes the real tier did not make (their-node)" in str(refused.value)
    assert "tools.validate --kubeconfig" in str(refused.value)
    assert labelled_ours(theirs) == []
    assert not (tmp_path / "tier" / "kubeconfig").exists()
    assert not (tmp_path / "tier" / "cluster.json").exists(), "no kwok was started"
