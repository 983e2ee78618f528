"""Secrets from the cluster's own store on the real engine (issue 32, part 3): a stack with no
`ngcApiKey` comes up on a Secret made beforehand with kubectl, its pods read the key from it, and
neither `pulumi up` nor the full tear-down (docs/day-two.md, "Tear down") changes or deletes it;
a stack naming a Secret that is not there is refused at preview, naming it, with nothing
created."""

from __future__ import annotations

import json
from typing import Any

from testenv import cluster as local
from testenv.local_stacks import LAYER_SITE, LocalStacks
from tests.support import NGC_KEY

NAMESPACE = "cosmos3-dev"
GRAPH = "cosmos3-nano-reasoner-agg-h200-round-robin"
USERS_SECRET = "synced-ngc-key"
EXISTING = LAYER_SITE | {"ngcApiKeyFrom": USERS_SECRET, "ngcApiKeyFromField": "token"}


def secret(cluster: local.LocalCluster) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(
        cluster.kubectl("get", "secret", USERS_SECRET, "-n", NAMESPACE, "-o", "json")
    )
    return found


def ngc_env(container: dict[str, Any]) -> dict[str, Any]:
    (entry,) = [e for e in container["env"] if e["name"] == "NGC_API_KEY"]
    return dict(entry)


def test_a_stack_without_a_key_comes_up_on_an_existing_secret_and_never_deletes_it(
    stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    local_cluster.kubectl("create", "namespace", NAMESPACE)
    local_cluster.kubectl(
        "create", "secret", "generic", USERS_SECRET, "-n", NAMESPACE,
        f"--from-literal=token={NGC_KEY}",
    )  # fmt: skip
    before = secret(local_cluster)["metadata"]
    stacks.configure("dev", EXISTING)  # no ngcApiKey at all

    stacks.run("up", "--yes", "--stack", "dev")

    graph = json.loads(local_cluster.kubectl("get", "dgd", GRAPH, "-n", NAMESPACE, "-o", "json"))
    worker = graph["spec"]["components"][1]["podTemplate"]["spec"]["containers"][0]
    expected = {"secretKeyRef": {"name": USERS_SECRET, "key": "token"}}
    assert ngc_env(worker)["valueFrom"] == expected
    created = local_cluster.kubectl("get", "secrets", "-n", NAMESPACE, "-o", "name").split()
    assert created == [f"secret/{USERS_SECRET}"], "the program created no Secret of its own"
    assert stacks.outputs("dev")["ngcSecret"] == USERS_SECRET

    # The full tear-down deletes everything the stack made, and nothing it did not.
    stacks.run("state", "unprotect", "--all", "--yes", "--stack", "dev")
    stacks.run("destroy", "--yes", "--stack", "dev")
    assert local_cluster.kubectl("get", "dgd", "-n", NAMESPACE, "-o", "name").strip() == ""
    after = secret(local_cluster)["metadata"]
    assert (after["uid"], after["resourceVersion"]) == (before["uid"], before["resourceVersion"])


def test_a_secret_that_is_not_there_is_refused_at_preview_naming_it(
    stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    stacks.configure("dev", EXISTING)

    for command in (["preview"], ["up", "--yes"]):
        refused = stacks.run(*command, "--stack", "dev", check=False)
        output = refused.stdout + refused.stderr
        assert refused.returncode != 0, output
        assert (
            f"cosmos3-nano-reasoner:ngcApiKeyFrom names the Secret {USERS_SECRET}, which "
            f"is not in namespace {NAMESPACE}"
        ) in output, output
        assert "Traceback" not in output
    namespaces = local_cluster.kubectl("get", "namespaces", "-o", "name").split()
    assert f"namespace/{NAMESPACE}" not in namespaces, "nothing created, not even the namespace"
