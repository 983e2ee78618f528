"""Day two on the real engine: the changes and failures of docs/day-two.md, through `pulumi`, on
the session's cluster (kwok: no process matters here; the lab controller's tests run the ones where
processes do: replicas, a graph that cannot start, a rotation's restart).

Each flow ends by checking that nothing deployed is lost: every object in every stack's state
exists in the cluster (`assert_state_is_in_the_cluster`), and the layer's objects are there.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from pulumi import automation

from testenv import cluster as local
from testenv.cluster import objects
from testenv.engine import Engine
from testenv.local_stacks import LAYER_SITE, SITE, LocalStacks
from tests.real.support import (
    LAYER_SECRETS,
    assert_state_is_in_the_cluster,
    exists,
    layer_up,
    paused_kwok,
    wait_until,
)

NAMESPACE = "cosmos3-nano-reasoner"
JOB = "cosmos3-nano-reasoner-model-download"
GUARD = "cosmos3-nano-reasoner-layer-guard"
PROFILES = ("round-robin", "session-affinity")
LAYER_OBJECTS = (
    f"namespace/{NAMESPACE}",
    "persistentvolumeclaim/shared-model-cache",
    "secret/ngc-api-secret",
    f"job.batch/{JOB}",
    f"configmap/{GUARD}",
)


def text(result: subprocess.CompletedProcess[str]) -> str:
    """What a command printed, its lines joined (the CLI wraps long ones)."""
    return " ".join((result.stdout + result.stderr).split())


def layer_left(cluster: local.LocalCluster) -> set[str]:
    names = cluster.kubectl("get", "pvc,secret,job,configmap", "-n", NAMESPACE, "-o", "name")
    namespace = cluster.kubectl("get", "namespace", NAMESPACE, "-o", "name", check=False)
    return {*names.split(), *(f"namespace/{n.split('/')[1]}" for n in namespace.split())}


def graphs(cluster: local.LocalCluster) -> set[str]:
    listed = cluster.kubectl("get", "dgd", "-n", NAMESPACE, "-o", "name").split()
    return {name.rpartition("/")[2] for name in listed}


def nothing_lost(stacks: LocalStacks, cluster: local.LocalCluster, *stack_names: str) -> None:
    assert set(LAYER_OBJECTS) <= layer_left(cluster)
    for stack in stack_names:
        assert_state_is_in_the_cluster(stacks, cluster, stack)


def job_uid(cluster: local.LocalCluster) -> str:
    return cluster.kubectl("get", "job", JOB, "-n", NAMESPACE, "-o", "jsonpath={.metadata.uid}")


@contextmanager
def running(stacks: LocalStacks, *args: str) -> Iterator[subprocess.Popen[str]]:
    """`pulumi <args>` in the background, leading a process group of its own (a terminal's Ctrl-C
    reaches the CLI's whole group); killed if the block leaves it running."""
    process = subprocess.Popen(
        ["pulumi", *args, "--non-interactive", "--color=never"],
        cwd=stacks.project,
        env=stacks.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        process_group=0,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate(timeout=60)


# --- nothing lost, whatever the destroy ---------------------------------------------------------


def test_no_destroy_of_the_layer_deletes_anything_under_a_running_graph(
    stacks: LocalStacks, local_cluster: local.LocalCluster, engine: Engine
) -> None:
    layer_up(stacks, *PROFILES)

    with_preview = stacks.run("destroy", "--yes", "--stack", "shared", check=False)
    assert with_preview.returncode != 0 and "cannot be deleted because it is protected" in text(
        with_preview
    )
    skipped = stacks.run("destroy", "--yes", "--skip-preview", "--stack", "shared", check=False)
    assert skipped.returncode != 0
    assert re.search(r"ConfigMap::cosmos3-layer-guard\" cannot be deleted", text(skipped))
    assert "deleted" not in re.sub(r"cannot be deleted", "", text(skipped)), text(skipped)

    # The Automation API always destroys without a preview.
    cli = automation.PulumiCommand(root=str(engine.root), skip_version_check=True)
    options = automation.LocalWorkspaceOptions(pulumi_command=cli, env_vars=stacks.env)
    shared = automation.select_stack("shared", work_dir=str(stacks.project), opts=options)
    with pytest.raises(automation.errors.CommandError, match="cannot be deleted"):
        shared.destroy()

    assert graphs(local_cluster) == {f"cosmos3-nano-reasoner-agg-h200-{p}" for p in PROFILES}
    nothing_lost(stacks, local_cluster, "shared", *PROFILES)
    for stack in ("shared", *PROFILES):
        stacks.run("preview", "--expect-no-changes", "--stack", stack)


def test_a_profile_destroy_leaves_the_other_profile_untouched(
    stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    layer_up(stacks, *PROFILES)
    before = local_cluster.kubectl(
        "get", "dgd", "cosmos3-nano-reasoner-agg-h200-session-affinity", "-n", NAMESPACE,
        "-o", "jsonpath={.metadata.uid}/{.metadata.generation}",
    )  # fmt: skip

    stacks.run("destroy", "--yes", "--stack", "round-robin")

    assert graphs(local_cluster) == {"cosmos3-nano-reasoner-agg-h200-session-affinity"}
    after = local_cluster.kubectl(
        "get", "dgd", "cosmos3-nano-reasoner-agg-h200-session-affinity", "-n", NAMESPACE,
        "-o", "jsonpath={.metadata.uid}/{.metadata.generation}",
    )  # fmt: skip
    assert after == before
    stacks.run("preview", "--expect-no-changes", "--stack", "session-affinity")
    nothing_lost(stacks, local_cluster, "shared", "session-affinity")


def test_a_kept_cache_survives_every_destroy_of_the_stack_that_reads_it(
    stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    """The recipe's "if it exists, keep it": a namespace and claim made beforehand, read by a
    stack with `modelCacheMode: existing` and the default `createNamespace: true`."""
    local_cluster.kubectl("create", "namespace", NAMESPACE)
    claim = {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "shared-model-cache", "namespace": NAMESPACE},
        "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": objects.RWX_CLASS,
                 "resources": {"requests": {"storage": "10Gi"}}},
    }  # fmt: skip
    local_cluster.kubectl("apply", "-f", "-", stdin=json.dumps(claim))
    uid = local_cluster.kubectl(
        "get", "pvc", "shared-model-cache", "-n", NAMESPACE, "-o", "jsonpath={.metadata.uid}"
    )
    stacks.configure("shared", SITE | {"modelCacheMode": "existing"}, LAYER_SECRETS)
    stacks.run("up", "--yes", "--stack", "shared")

    for skip in ([], ["--skip-preview"]):
        refused = stacks.run("destroy", "--yes", *skip, "--stack", "shared", check=False)
        assert refused.returncode != 0 and "because it is protected" in text(refused)

    still = local_cluster.kubectl(
        "get", "pvc", "shared-model-cache", "-n", NAMESPACE, "-o", "jsonpath={.metadata.uid}"
    )
    assert still == uid, "the claim (and the weights in it) is the one made beforehand"
    nothing_lost(stacks, local_cluster, "shared")


# --- changes reviewed as previews, then applied ------------------------------------------------


def test_an_image_bump_shows_every_stacks_diff_and_is_applied_layer_first(
    stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    layer_up(stacks, "round-robin")
    old_job = job_uid(local_cluster)
    image = "nvcr.io/nim/nvidia/cosmos3:2.2.0"
    for stack in ("shared", "round-robin"):
        stacks.run("config", "set", "workerImage", image, "--stack", stack)

    layer = text(stacks.run("preview", "--diff", "--stack", "shared"))
    assert "+-kubernetes:batch/v1:Job: (replace)" in layer
    assert re.search(rf'image\s*:\s*"nvcr.io/nim/nvidia/cosmos3:2.1.0" => "{image}"', layer)
    profile = text(stacks.run("preview", "--diff", "--stack", "round-robin"))
    assert "warning:" in profile and "filled the model cache with" in profile
    assert re.search(rf'image\s*:\s*"nvcr.io/nim/nvidia/cosmos3:2.1.0" => "{image}"', profile)

    refused = stacks.run("up", "--yes", "--stack", "round-robin", check=False)
    assert refused.returncode != 0
    assert "`pulumi up --stack organization/cosmos3-nano-reasoner/shared` (it downloads" in text(
        refused
    )
    stacks.run("up", "--yes", "--stack", "shared")
    assert job_uid(local_cluster) != old_job, "the download ran again, for the new image"
    assert stacks.outputs("shared")["workerImage"] == image
    stacks.run("up", "--yes", "--stack", "round-robin")
    worker = json.loads(local_cluster.kubectl("get", "dgd", "-n", NAMESPACE, "-o", "json"))[
        "items"
    ][0]["spec"]["components"][1]
    assert worker["podTemplate"]["spec"]["containers"][0]["image"] == image
    nothing_lost(stacks, local_cluster, "shared", "round-robin")


def test_a_mirror_then_a_placement_change_reach_the_download_and_the_graph(
    stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    layer_up(stacks, "round-robin")
    stacks.run("config", "set", "registryServer", "mirror.example:5000", "--stack", "shared")
    stacks.run("config", "set", "registryUsername", "robot", "--stack", "shared")
    password = "mirror-" + "password-0123456789"
    stacks.run("config", "set", "--secret", "registryPassword", password, "--stack", "shared")

    layer = text(stacks.run("preview", "--diff", "--stack", "shared"))
    assert (
        "+ kubernetes:core/v1:Secret: (create)" in layer
        and "+-kubernetes:batch/v1:Job: (replace)" in layer
    )
    stacks.run("up", "--yes", "--stack", "shared")
    assert stacks.outputs("shared")["registryPullSecret"] == "registry-pull-secret"
    profile = text(stacks.run("preview", "--diff", "--stack", "round-robin"))
    assert profile.count('+ imagePullSecrets: [ + [0]: { + name: "registry-pull-secret" } ]') == 2
    assert "credentials-digest" in profile, "the workers restart with the mirror's credentials"
    stacks.run("up", "--yes", "--stack", "round-robin")

    for stack in ("shared", "round-robin"):
        stacks.run("config", "set", "--path", "workerNodeSelector[0]",
                   f"nvidia.com/gpu.product={objects.GPU_PRODUCT}", "--stack", stack)  # fmt: skip
        stacks.run("config", "set", "--path", "workerTolerations[0]", "nvidia.com/gpu:NoSchedule",
                   "--stack", stack)  # fmt: skip
    layer = text(stacks.run("preview", "--diff", "--stack", "shared"))
    assert "+-kubernetes:batch/v1:Job: (replace)" in layer and "1 to replace" in layer
    stacks.run("up", "--yes", "--stack", "shared")
    profile = text(stacks.run("preview", "--diff", "--stack", "round-robin"))
    assert "~ kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment: (update)" in profile
    assert "+ nodeSelector" in profile and "+ tolerations" in profile
    stacks.run("up", "--yes", "--stack", "round-robin")

    for stack in ("shared", "round-robin"):
        assert password not in stacks.run("stack", "export", "--stack", stack).stdout
    nothing_lost(stacks, local_cluster, "shared", "round-robin")


def test_a_layer_key_on_a_profile_stack_is_refused_naming_it_and_its_stack(
    stacks: LocalStacks,
) -> None:
    layer_up(stacks)
    stacks.configure("round-robin", SITE | {"modelCacheSize": "1Ti", "namespace": "elsewhere"})

    refused = stacks.run("preview", "--stack", "round-robin", check=False)

    assert refused.returncode != 0
    for key in ("modelCacheSize", "namespace"):
        assert (
            f"cosmos3-nano-reasoner:{key} is set on a stack that reads its layer from "
            f"cosmos3-nano-reasoner:sharedStack=shared, where it changes nothing: set it on shared"
        ) in text(refused)


def test_refresh_after_the_cluster_wrote_status_then_no_change_on_every_stack(
    stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    layer_up(stacks, *PROFILES)
    # Status, a finalizer and a label written by others (the operator, a team): none is the program's.
    graph = "dgd/cosmos3-nano-reasoner-agg-h200-round-robin"
    local_cluster.kubectl("label", graph, "-n", NAMESPACE, "team=inference")
    local_cluster.kubectl("patch", graph, "-n", NAMESPACE, "--type=merge",
                          "-p", '{"metadata": {"finalizers": ["example.com/hold"]}}')  # fmt: skip
    for stack in ("shared", *PROFILES):
        stacks.run("refresh", "--yes", "--stack", stack)
        stacks.run("preview", "--expect-no-changes", "--diff", "--stack", stack)
    local_cluster.kubectl("patch", graph, "-n", NAMESPACE, "--type=merge",
                          "-p", '{"metadata": {"finalizers": null}}')  # fmt: skip
    nothing_lost(stacks, local_cluster, "shared", *PROFILES)


def test_a_renamed_layer_stack_is_found_again_by_its_new_name(
    stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    layer_up(stacks, "round-robin")

    stacks.run("stack", "rename", "layer", "--stack", "shared")

    lost = stacks.run("preview", "--stack", "round-robin", check=False)
    assert lost.returncode != 0 and "organization/cosmos3-nano-reasoner/shared" in text(lost)
    stacks.run("config", "set", "sharedStack", "layer", "--stack", "round-robin")
    stacks.run("preview", "--expect-no-changes", "--stack", "round-robin")
    stacks.run("preview", "--expect-no-changes", "--stack", "layer")
    exported = stacks.run("stack", "export", "--stack", "layer").stdout
    assert "urn:pulumi:layer::" in exported and "urn:pulumi:shared::" not in exported
    nothing_lost(stacks, local_cluster, "layer", "round-robin")


# --- failures, and their recovery ---------------------------------------------------------------


def test_an_unschedulable_download_fails_at_its_deadline_and_a_re_run_recovers(
    stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    stacks.configure("shared", LAYER_SITE | {"modelDownloadTimeoutSeconds": "15"}, LAYER_SECRETS)
    stacks.run("config", "set", "--path", "workerNodeSelector[0]", "pool=gpu-h200",
               "--stack", "shared")  # fmt: skip

    began = time.monotonic()
    failed = stacks.run("up", "--yes", "--stack", "shared", check=False)
    took = time.monotonic() - began

    assert failed.returncode != 0
    said = text(failed)
    assert f"the model download Job {NAMESPACE}/{JOB} failed: DeadlineExceeded" in said, said
    assert "its deadline: 15 s from its start" in said
    assert "Unschedulable" in said and "didn't match Pod's node affinity/selector" in said
    assert "compare workerNodeSelector and workerTolerations" in said
    assert took < 15 + 120, f"{took:.0f} s: within the deadline and a bounded margin"
    failed_uid = job_uid(local_cluster)

    try:
        local_cluster.kubectl("label", "node", "kwok-h200-0", "pool=gpu-h200")
        preview = text(stacks.run("preview", "--diff", "--stack", "shared"))
        assert "+-kubernetes:batch/v1:Job: (replace)" in preview
        assert f'rerun-of-failed-job: "{failed_uid}"' in preview
        assert "failed (DeadlineExceeded" in preview and "this update runs it again" in preview
        stacks.run("up", "--yes", "--stack", "shared")
    finally:
        local_cluster.kubectl("label", "node", "kwok-h200-0", "pool-")

    assert job_uid(local_cluster) != failed_uid
    assert stacks.outputs("shared")["modelCacheReady"] is True
    stacks.run("preview", "--expect-no-changes", "--stack", "shared")
    nothing_lost(stacks, local_cluster, "shared")


def test_a_download_interrupted_or_killed_is_waited_for_never_restarted(
    stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    stacks.configure("shared", LAYER_SITE, LAYER_SECRETS)
    stacks.run("config", "set", "--path", "workerNodeSelector[0]", "pool=gpu-h200",
               "--stack", "shared")  # fmt: skip

    with running(stacks, "up", "--yes", "--stack", "shared") as up:
        wait_until(lambda: exists(local_cluster, f"job/{JOB}", NAMESPACE), "the Job exists", 60)
        uid = job_uid(local_cluster)
        time.sleep(2)  # the program is waiting for it
        os.killpg(up.pid, signal.SIGINT)
        assert up.wait(timeout=120) != 0
    preview = text(stacks.run("preview", "--diff", "--stack", "shared"))
    assert "is still running" in preview and "waits for it and does not restart it" in preview
    assert "replace" not in preview

    with running(stacks, "up", "--yes", "--stack", "shared") as up:
        time.sleep(8)
        os.killpg(up.pid, signal.SIGKILL)
        up.wait(timeout=60)
    locked = stacks.run("up", "--yes", "--stack", "shared", check=False)
    assert locked.returncode != 0 and "`pulumi cancel`" in text(locked)
    stacks.run("cancel", "--yes", "--stack", "shared")

    try:
        with running(stacks, "up", "--yes", "--stack", "shared") as up:
            time.sleep(5)
            local_cluster.kubectl("label", "node", "kwok-h200-0", "pool=gpu-h200")
            out, _ = up.communicate(timeout=300)
            assert up.returncode == 0, out
    finally:
        local_cluster.kubectl("label", "node", "kwok-h200-0", "pool-")
    assert job_uid(local_cluster) == uid, "the same download, never deleted"
    exported = json.loads(stacks.run("stack", "export", "--stack", "shared").stdout)
    assert not exported["deployment"].get("pending_operations")
    stacks.run("preview", "--expect-no-changes", "--stack", "shared")
    nothing_lost(stacks, local_cluster, "shared")


def test_a_graph_never_ready_fails_at_its_timeout_with_its_reason_and_a_re_run_waits_again(
    stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    layer_up(stacks)
    stacks.configure("round-robin", SITE | {"graphReadyTimeoutSeconds": "10"})

    with paused_kwok(local_cluster):
        began = time.monotonic()
        failed = stacks.run("up", "--yes", "--stack", "round-robin", check=False)
        took = time.monotonic() - began

    assert failed.returncode != 0
    said = text(failed)
    assert re.search(
        r"DynamoGraphDeployment \S+/cosmos3-nano-reasoner-agg-h200-round-robin is not Ready "
        r"after 10 s \(cosmos3-nano-reasoner:graphReadyTimeoutSeconds\): no Ready condition yet",
        said,
    ), said
    assert "kubectl describe dynamographdeployment" in said and took < 60
    assert "frontendUrl" not in stacks.outputs("round-robin"), "no outputs for a graph not Ready"

    stacks.run("up", "--yes", "--stack", "round-robin")  # kwok runs again: Ready
    assert (
        stacks.outputs("round-robin")["graphName"] == "cosmos3-nano-reasoner-agg-h200-round-robin"
    )
    nothing_lost(stacks, local_cluster, "shared", "round-robin")
