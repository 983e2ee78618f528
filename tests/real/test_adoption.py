"""Adopting a recipe deployed with kubectl: a plain `pulumi up` over the existing objects.

The pinned provider (4.25.0) creates with a server-side apply, so its first `up` takes the objects
kubectl made over; `pulumi.com/patchForce` settles the fields kubectl's managers hold. The one
object it cannot take over is a download Job whose pod template differs (immutable): README says
to delete it first, the model stays in the cache. Afterwards the stacks behave as if they had
made everything: a preview with no change, the claim protected, a profile destroy that removes its
graph only. (The other path, `pulumi import`, ends in a preview that plans to replace the
protected claim over the fields the API server set on it; docs/deploying.md.)
"""

from __future__ import annotations

import json
import re

import yaml

from common import REPO_ROOT
from testenv import cluster as local
from testenv.cluster import objects
from testenv.local_stacks import LAYER_SITE, SITE, LocalStacks
from tests.real.support import LAYER_SECRETS

NAMESPACE = "cosmos3-nano-reasoner"
JOB = "cosmos3-nano-reasoner-model-download"


def deployed_by_kubectl(cluster: local.LocalCluster) -> None:
    """The recipe's objects as a user following it would have them: applied with kubectl, with
    their own download Job (another command) and a label of their own on the graph."""
    for stack in ("shared", "round-robin"):
        for path in sorted((REPO_ROOT / "manifests" / stack).glob("*.yaml")):
            manifest = yaml.safe_load(path.read_text())
            manifest.get("metadata", {}).pop("annotations", None)  # kubectl's, not Pulumi's
            if manifest["kind"] == "PersistentVolumeClaim":
                manifest["spec"]["storageClassName"] = objects.RWX_CLASS
            if manifest["kind"] == "Job":
                manifest["spec"]["template"]["spec"]["containers"][0]["command"] = ["download"]
            if manifest["kind"] == "DynamoGraphDeployment":
                manifest["metadata"]["labels"]["team"] = "inference"
            cluster.kubectl("apply", "-f", "-", stdin=json.dumps(manifest))


def graph_labels(cluster: local.LocalCluster) -> dict[str, str]:
    graph = cluster.kubectl(
        "get", "dgd", "cosmos3-nano-reasoner-agg-h200-round-robin", "-n", NAMESPACE, "-o", "json"
    )
    labels: dict[str, str] = json.loads(graph)["metadata"]["labels"]
    return labels


def no_change(printed: str) -> bool:
    return re.search(r"Resources:\s+\d+ unchanged\s*$", printed.strip()) is not None


def test_a_plain_up_adopts_what_kubectl_deployed(
    stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    deployed_by_kubectl(local_cluster)
    stacks.configure("shared", LAYER_SITE, LAYER_SECRETS)
    stacks.configure("round-robin", SITE)

    refused = stacks.run("up", "--yes", "--stack", "shared", check=False)
    assert refused.returncode != 0
    assert "field is immutable" in " ".join((refused.stdout + refused.stderr).split())
    local_cluster.kubectl("delete", "job", JOB, "-n", NAMESPACE, "--wait=true")  # as README says
    stacks.run("up", "--yes", "--stack", "shared")
    assert no_change(stacks.run("preview", "--stack", "shared").stdout)

    stacks.run("up", "--yes", "--stack", "round-robin")
    assert no_change(stacks.run("preview", "--stack", "round-robin").stdout)
    graph = json.loads(
        local_cluster.kubectl(
            "get",
            "dgd",
            "cosmos3-nano-reasoner-agg-h200-round-robin",
            "-n",
            NAMESPACE,
            "-o",
            "json",
        )
    )
    assert graph["metadata"]["annotations"]["pulumi.com/patchForce"] == "true"

    exported = json.loads(stacks.run("stack", "export", "--stack", "shared").stdout)
    protected = {
        resource["type"]
        for resource in exported["deployment"]["resources"]
        if resource.get("protect")
    }
    assert protected == {
        "kubernetes:core/v1:PersistentVolumeClaim",
        "kubernetes:core/v1:Namespace",
        "kubernetes:core/v1:ConfigMap",
    }

    # kubectl's label is the program's no more: the first update of the graph removes it, and
    # every preview before it says so (pulumi-kubernetes hands kubectl's fields over, then applies).
    stacks.run("config", "set", "workerReplicas", "4", "--stack", "round-robin")
    warned = " ".join(stacks.run("preview", "--stack", "round-robin").stdout.split())
    assert re.search(r"kubectl set fields on DynamoGraphDeployment \S+ that this program does not "
                     r"set: metadata\.labels\.team\. The next update of it removes them", warned), warned  # fmt: skip
    stacks.run("up", "--yes", "--stack", "round-robin")
    assert "team" not in graph_labels(local_cluster)
    assert "kubectl set fields" not in stacks.run("preview", "--stack", "round-robin").stdout

    stacks.run("destroy", "--yes", "--stack", "round-robin")
    left = set(
        local_cluster.kubectl("get", "dgd,pvc,secret", "-n", NAMESPACE, "-o", "name").split()
    )
    assert left == {"persistentvolumeclaim/shared-model-cache", "secret/ngc-api-secret"}
    assert (
        local_cluster.kubectl("get", "configmap", "-n", NAMESPACE, "-o", "name")
        .split()
        .count("configmap/cosmos3-nano-reasoner-layer-guard")
        == 1
    )
