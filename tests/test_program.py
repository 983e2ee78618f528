"""The real `__main__.py` for every shipped stack, under Pulumi mocks: resources, options, outputs."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from unittest import mock

import pytest
from pulumi import RunError
from pulumi.runtime import rpc

from components.contract import StackOutputs
from components.credentials_digest import credentials_digest
from components.live import KubernetesView, LiveReadError
from components.settings import PROJECT
from tests.support import NGC_KEY
from tools.offline import MockCluster, ProgramRun, shared_layer_outputs
from tools.stack_files import SHARED_STACK, SHIPPED_STACKS

RunStack = Callable[..., ProgramRun]

NS = "kubernetes:core/v1:Namespace"
SECRET = "kubernetes:core/v1:Secret"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
JOB = "kubernetes:batch/v1:Job"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
DGD = "kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment"
PDB = "kubernetes:policy/v1:PodDisruptionBudget"
STACK_REF = "pulumi:pulumi:StackReference"

LAYER_OBJECTS = [NS, SECRET, PVC, JOB, CONFIG_MAP]
EXPECTED_OBJECTS = {
    "dev": [*LAYER_OBJECTS, DGD, PDB],
    "shared": LAYER_OBJECTS,
    "round-robin": [DGD, PDB],
    "session-affinity": [DGD, PDB],
}


def object_types(run: ProgramRun) -> list[str]:
    return sorted(r.type for r in run.kubernetes_objects())


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_each_shipped_stack_creates_exactly_its_objects(run_stack: RunStack, stack: str) -> None:
    run = run_stack(stack)
    assert object_types(run) == sorted(EXPECTED_OBJECTS[stack])


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_every_object_goes_through_the_explicit_provider(run_stack: RunStack, stack: str) -> None:
    run = run_stack(stack)
    provider = run.one("pulumi:providers:kubernetes")
    assert provider.inputs["context"] == "h200-cluster"
    for obj in run.kubernetes_objects():
        assert obj.provider.startswith(provider.urn + "::"), f"{obj.name} uses {obj.provider!r}"


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_objects_are_children_of_the_recipe_components(run_stack: RunStack, stack: str) -> None:
    run = run_stack(stack)
    recipe = run.one("cosmos3:recipe:Recipe")
    assert recipe.parent.endswith(f"pulumi:pulumi:Stack::{PROJECT}-{stack}")
    for obj in run.kubernetes_objects():
        component = run.by_urn(obj.parent)
        assert component.type.startswith("cosmos3:recipe:") and not component.custom
        assert component.parent == recipe.urn
        assert obj.name.startswith(component.name), "child names derive from the component name"


def test_dev_stack_objects_names_and_namespaces(run_stack: RunStack) -> None:
    run = run_stack("dev")
    names = {r.type: r.inputs["metadata"]["name"] for r in run.kubernetes_objects()}
    assert names == {
        NS: "cosmos3-dev",
        SECRET: "ngc-api-secret",
        PVC: "shared-model-cache",
        JOB: "cosmos3-nano-reasoner-model-download",
        CONFIG_MAP: "cosmos3-nano-reasoner-layer-guard",
        DGD: "cosmos3-nano-reasoner-agg-h200-round-robin",
        PDB: "cosmos3-nano-reasoner-agg-h200-round-robin-worker",
    }
    for obj in run.kubernetes_objects():
        if obj.type != NS:
            assert obj.inputs["metadata"]["namespace"] == "cosmos3-dev"


def test_model_cache_is_protected_and_read_write_many(run_stack: RunStack) -> None:
    claim = run_stack("shared").one(PVC)
    assert claim.protect
    assert claim.inputs["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim.inputs["spec"]["storageClassName"] == "rwx-nfs"


def test_the_program_awaits_the_download_job_the_provider_does_not(run_stack: RunStack) -> None:
    cluster = MockCluster()
    run = run_stack("shared", {"modelDownloadTimeoutSeconds": 5400}, cluster=cluster)
    job = run.one(JOB)
    annotations = job.inputs["metadata"]["annotations"]
    assert annotations["pulumi.com/waitFor"] == "jsonpath={.metadata.uid}"
    assert (
        "pulumi.com/replaceUnready" not in annotations and "pulumi.com/skipAwait" not in annotations
    )
    assert job.inputs["spec"]["activeDeadlineSeconds"] == 5400
    assert job.custom_timeouts == {"create": "", "update": "", "delete": "600s"}
    assert ("Job", "cosmos3-nano-reasoner-model-download") in cluster.reads
    assert run.exports["modelCacheReady"] is True
    urns = {r.type: r.urn for r in run.kubernetes_objects()}
    assert {urns[NS], urns[SECRET], urns[PVC]} <= set(job.dependencies)


def test_the_program_awaits_the_graph_after_the_download(run_stack: RunStack) -> None:
    cluster = MockCluster()
    run = run_stack("dev", cluster=cluster)
    graph = run.one(DGD)
    assert graph.inputs["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
    assert "pulumi.com/waitFor" not in graph.inputs["metadata"]["annotations"]
    assert ("DynamoGraphDeployment", graph.inputs["metadata"]["name"]) in cluster.reads
    urns = {r.type: r.urn for r in run.kubernetes_objects()}
    assert urns[JOB] in graph.dependencies


def test_without_download_the_graph_does_not_wait_for_a_job(run_stack: RunStack) -> None:
    run = run_stack("dev", {"modelDownload": False})
    assert JOB not in object_types(run)
    assert run.one(PVC).urn in run.one(DGD).dependencies


def has_secret_envelope(value: Any) -> bool:
    if isinstance(value, dict):
        if value.get(rpc._special_sig_key) == rpc._special_secret_sig:
            return True
        return any(has_secret_envelope(item) for item in value.values())
    if isinstance(value, list):
        return any(has_secret_envelope(item) for item in value)
    return False


def test_ngc_key_is_a_secret_in_state_and_nowhere_in_plain_text(run_stack: RunStack) -> None:
    run = run_stack("dev")
    secret = run.one(SECRET)
    assert secret.inputs["stringData"] == {"NGC_API_KEY": NGC_KEY}
    assert has_secret_envelope(secret.raw_inputs["stringData"])
    for obj in run.resources:
        if obj is not secret:
            assert NGC_KEY not in json.dumps(obj.raw_inputs), f"{obj.type} {obj.name} holds the key"
    assert NGC_KEY not in json.dumps(run.exports)


def test_registry_mirror_creates_a_secret_pull_secret_used_by_both_components(
    run_stack: RunStack,
) -> None:
    run = run_stack(
        "dev",
        {"registryServer": "mirror.example:5000", "registryUsername": "robot"},
        secrets={"ngcApiKey": NGC_KEY, "registryPassword": "hunter2-registry"},
    )
    pull = next(
        s for s in run.of_type(SECRET) if s.inputs["type"] == "kubernetes.io/dockerconfigjson"
    )
    assert pull.inputs["metadata"]["name"] == "registry-pull-secret"
    assert has_secret_envelope(pull.raw_inputs["stringData"])
    docker_config = json.loads(pull.inputs["stringData"][".dockerconfigjson"])
    assert docker_config["auths"]["mirror.example:5000"]["password"] == "hunter2-registry"
    for component in run.one(DGD).inputs["spec"]["components"]:
        assert component["podTemplate"]["spec"]["imagePullSecrets"] == [
            {"name": "registry-pull-secret"}
        ]
    assert run.exports["registryPullSecret"] == "registry-pull-secret"
    assert "hunter2-registry" not in json.dumps(run.exports)


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_no_export_is_secret_or_holds_a_secret(run_stack: RunStack, stack: str) -> None:
    run = run_stack(stack)
    assert run.secret_exports == set()
    assert NGC_KEY not in json.dumps(run.exports)


@pytest.mark.parametrize("stack", ["dev", "round-robin", "session-affinity"])
def test_graph_stacks_export_the_stage_contract_as_the_engine_stores_it(
    run_stack: RunStack, stack: str
) -> None:
    exports = run_stack(stack).exports
    profile = "round-robin" if stack == "dev" else stack
    namespace = "cosmos3-dev" if stack == "dev" else PROJECT
    graph = f"cosmos3-nano-reasoner-agg-h200-{profile}"
    service = f"{graph}-frontend"
    url = f"http://{service}.{namespace}.svc.cluster.local:8000"
    contract = {
        "namespace": namespace,
        "profile": profile,
        "graphName": graph,
        "frontendService": service,
        "frontendPort": 8000,
        "frontendUrl": url,
        "modelsUrl": f"{url}/v1/models",
        "servedModel": "nvidia/cosmos3-nano-reasoner",
        "workerReplicas": 1 if stack == "dev" else 8,
        "workerGpus": 1,
        "modelCacheClaim": "shared-model-cache",
        "portForwardCommand": f"kubectl --context h200-cluster -n {namespace} port-forward "
        f"service/{service} 8000:8000",
        "kubeContext": "h200-cluster",
        "target": "cluster",
    }
    if profile == "session-affinity":
        contract |= {"sessionAffinityTtlSeconds": 300, "sessionHeader": "X-Dynamo-Session-ID"}
    # Round robin's None-valued keys never reach the engine: no key at all, not null.
    contract_keys = StackOutputs.keys()
    assert {key: exports[key] for key in contract_keys if key in exports} == contract
    assert StackOutputs.model_validate(exports).session_header == contract.get("sessionHeader")


def test_none_valued_exports_are_dropped_only_on_the_way_to_the_engine(run_stack: RunStack) -> None:
    run = run_stack("round-robin")
    assert run.python_exports["sessionHeader"] is None
    assert "sessionHeader" not in run.exports
    assert {k: v for k, v in run.python_exports.items() if v is not None} == run.exports


def test_shared_stack_exports_the_layer_for_profile_stacks(run_stack: RunStack) -> None:
    assert run_stack("shared").exports == {
        "namespace": PROJECT,
        "modelCacheClaim": "shared-model-cache",
        "ngcSecret": "ngc-api-secret",
        "ngcSecretField": "NGC_API_KEY",
        "workerImage": "nvcr.io/nim/nvidia/cosmos3:2.1.0",
        "workerMemory": "96Gi",
        "nimModelProfile": "",
        "nimSelectionEnv": [],
        "modelCacheReady": True,
        "credentialsDigest": credentials_digest(NGC_KEY, None),
    }


def test_the_mock_shared_layer_is_what_the_shipped_shared_stack_stores(run_stack: RunStack) -> None:
    stored = run_stack("shared").exports
    assert shared_layer_outputs(ngc_api_key=NGC_KEY) == {SHARED_STACK: stored}


def _graph_without_routing(run: ProgramRun) -> dict[str, Any]:
    graph: dict[str, Any] = json.loads(json.dumps(run.one(DGD).inputs))
    del graph["metadata"]["name"]
    args = graph["spec"]["components"][0]["podTemplate"]["spec"]["containers"][0]["args"]
    flag = "--router-session-affinity-ttl-secs"
    if flag in args:
        del args[args.index(flag) : args.index(flag) + 2]
    return graph


def test_profiles_differ_only_in_name_and_the_affinity_flag(run_stack: RunStack) -> None:
    round_robin = run_stack("round-robin")
    affinity = run_stack("session-affinity")
    rr_args = round_robin.one(DGD).inputs["spec"]["components"][0]["podTemplate"]["spec"][
        "containers"
    ][0]["args"]
    sa_args = affinity.one(DGD).inputs["spec"]["components"][0]["podTemplate"]["spec"][
        "containers"
    ][0]["args"]
    assert "--router-session-affinity-ttl-secs" not in rr_args
    assert sa_args[-2:] == ["--router-session-affinity-ttl-secs", "300"]
    assert _graph_without_routing(round_robin) == _graph_without_routing(affinity)
    assert (
        round_robin.one(DGD).inputs["metadata"]["name"]
        != affinity.one(DGD).inputs["metadata"]["name"]
    )


def test_profile_stacks_share_one_layer_read_from_the_shared_stack(run_stack: RunStack) -> None:
    layer = shared_layer_outputs(namespace="team-inference", pull_secret="registry-pull-secret")
    for stack in ("round-robin", "session-affinity"):
        run = run_stack(stack, stack_outputs=layer)
        reference = run.one(STACK_REF)
        assert reference.resource_id == SHARED_STACK
        graph = run.one(DGD).inputs
        assert graph["metadata"]["namespace"] == "team-inference"
        worker = graph["spec"]["components"][1]["podTemplate"]["spec"]
        assert worker["volumes"][0]["persistentVolumeClaim"]["claimName"] == "shared-model-cache"
        assert worker["imagePullSecrets"] == [{"name": "registry-pull-secret"}]
        assert not {NS, SECRET, PVC, JOB} & set(object_types(run)), (
            "a profile stack owns no layer object"
        )


def test_existing_namespace_and_cache_are_used_not_created(run_stack: RunStack) -> None:
    run = run_stack(
        "dev",
        {"createNamespace": False, "modelCacheMode": "existing", "modelCacheStorageClass": ""},
    )
    assert NS not in object_types(run) and PVC not in object_types(run)
    read = next(r for r in run.resources if r.type == PVC and r.resource_id)
    assert read.resource_id == "cosmos3-dev/shared-model-cache"
    assert run.one(DGD).inputs["metadata"]["namespace"] == "cosmos3-dev"


def test_bad_config_stops_before_any_resource_is_registered(run_stack: RunStack) -> None:
    from tools.offline import run_program

    with pytest.raises(RunError, match=f"{PROJECT}:workerReplicas") as caught:
        run_program(
            "dev",
            {"workerReplicas": 0, "kubeContext": "c", "modelCacheStorageClass": "x"},
            secrets={"ngcApiKey": NGC_KEY},
        )
    assert NGC_KEY not in str(caught.value)


def test_bad_config_registers_nothing(run_stack: RunStack) -> None:
    from tools.offline import run_program

    recorded: list[ProgramRun] = []
    from tools import offline

    original = offline.ProgramRun

    def recording() -> ProgramRun:
        run = original()
        recorded.append(run)
        return run

    with mock.patch.object(offline, "ProgramRun", recording), pytest.raises(RunError):
        run_program(
            "dev",
            {"profile": "nope", "kubeContext": "c", "modelCacheStorageClass": "x"},
            secrets={"ngcApiKey": NGC_KEY},
        )
    assert recorded and recorded[0].resources == []


# --- what the real engine and provider do differently from a naive mock (issue: engine truth) ---


def test_the_provider_never_copies_kubeconfig_from_the_environment(
    run_stack: RunStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given None, pulumi_kubernetes copies $KUBECONFIG verbatim, which the provider cannot parse
    # when it lists several files; "" makes it use client-go's loading rules instead.
    monkeypatch.setenv("KUBECONFIG", "/etc/kube/a:/etc/kube/b")
    provider = run_stack("dev").one("pulumi:providers:kubernetes").inputs
    assert provider["kubeconfig"] == ""
    assert provider["context"] == provider["clusterIdentifier"] == "h200-cluster"


def test_a_configured_kubeconfig_path_is_passed_as_is(run_stack: RunStack) -> None:
    provider = run_stack("dev", {"kubeconfigPath": "/etc/kube/h200"}).one(
        "pulumi:providers:kubernetes"
    )
    assert provider.inputs["kubeconfig"] == "/etc/kube/h200"


@pytest.mark.parametrize("stack", ["dev", "shared"])
def test_a_stack_that_creates_the_cache_protects_its_namespace(
    run_stack: RunStack, stack: str
) -> None:
    run = run_stack(stack)
    assert run.one(NS).protect and run.one(PVC).protect


@pytest.mark.parametrize("mode", ["create", "existing"])
def test_a_created_namespace_is_protected_and_never_deleted(run_stack: RunStack, mode: str) -> None:
    """An existing claim's namespace too: a destroy that deleted it would delete the claim."""
    overrides = {"modelCacheMode": mode} | (
        {"modelCacheStorageClass": ""} if mode == "existing" else {}
    )
    namespace = run_stack("dev", overrides).one(NS)
    assert namespace.protect and namespace.retain_on_delete


def test_the_layer_guard_is_protected_and_comes_after_everything_in_the_layer(
    run_stack: RunStack,
) -> None:
    run = run_stack("shared")
    guard = run.one(CONFIG_MAP)
    assert guard.protect
    urns = {r.type: r.urn for r in run.kubernetes_objects()}
    assert {urns[NS], urns[SECRET], urns[PVC], urns[JOB]} <= set(guard.dependencies)


def test_no_stack_references_itself(run_stack: RunStack) -> None:
    for stack in SHIPPED_STACKS:
        references = [r.resource_id for r in run_stack(stack).of_type(STACK_REF)]
        assert references == (
            [SHARED_STACK] if stack in {"round-robin", "session-affinity"} else []
        )


def test_the_download_job_runs_as_the_nim_user_and_stops_at_its_deadline(
    run_stack: RunStack,
) -> None:
    job = run_stack("shared", {"modelDownloadTimeoutSeconds": 5400}).one(JOB).inputs["spec"]
    assert job["activeDeadlineSeconds"] == 5400
    assert job["template"]["spec"]["securityContext"] == {
        "runAsUser": 1000,
        "runAsGroup": 1000,
        "fsGroup": 1000,
        "fsGroupChangePolicy": "OnRootMismatch",
    }


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {entry["name"]: entry.get("value") for entry in container["env"]}


def test_download_and_workers_select_the_same_nim_profile(run_stack: RunStack) -> None:
    run = run_stack("dev", {"workerMemory": "120Gi", "nimModelProfile": "abc123"})
    download = run.one(JOB).inputs["spec"]["template"]["spec"]["containers"][0]
    worker = run.one(DGD).inputs["spec"]["components"][1]["podTemplate"]["spec"]["containers"][0]
    assert download["resources"]["limits"]["memory"] == "120Gi"
    assert worker["resources"]["limits"]["memory"] == "120Gi"
    assert _env(download)["NIM_MODEL_PROFILE"] == _env(worker)["NIM_MODEL_PROFILE"] == "abc123"


def test_without_a_pinned_profile_no_nim_model_profile_is_set(run_stack: RunStack) -> None:
    run = run_stack("dev")
    download = run.one(JOB).inputs["spec"]["template"]["spec"]["containers"][0]
    assert "NIM_MODEL_PROFILE" not in _env(download)


def test_a_short_shared_stack_name_takes_this_stacks_organization(run_stack: RunStack) -> None:
    qualified = f"acme-inference/{PROJECT}/shared"
    layer = {qualified: shared_layer_outputs()[SHARED_STACK]}
    run = run_stack("round-robin", stack_outputs=layer, organization="acme-inference")
    assert run.one(STACK_REF).resource_id == qualified


def test_a_qualified_shared_stack_name_is_used_as_given(run_stack: RunStack) -> None:
    name = "platform/cosmos3-layer/prod-shared"
    run = run_stack(
        "round-robin",
        {"sharedStack": name},
        stack_outputs={name: shared_layer_outputs()[SHARED_STACK]},
    )
    assert run.one(STACK_REF).resource_id == name


@pytest.mark.parametrize(
    ("replaced", "message"),
    [
        (
            {"modelCacheReady": None, "workerImage": None},
            "has no output workerImage, modelCacheReady",
        ),
        ({"modelCacheReady": False}, "model download of organization/.+/shared has not completed"),
        ({"workerImage": "nvcr.io/nim/nvidia/cosmos3:2.0.0"}, "filled the model cache with"),
    ],
)
def test_a_profile_stack_refuses_a_layer_it_cannot_run_on(
    run_stack: RunStack, replaced: dict[str, Any], message: str
) -> None:
    with pytest.raises(RunError, match=message):
        run_stack("round-robin", stack_outputs=shared_layer_outputs(**replaced))


def test_a_shared_stack_that_was_never_deployed_is_refused_with_what_to_do(
    run_stack: RunStack,
) -> None:
    with pytest.raises(RunError, match=r"Deploy it first \(`pulumi up --stack organization/"):
        run_stack("session-affinity", stack_outputs={})


def test_without_a_download_the_layer_exports_nothing_the_profile_is_selected_by(
    run_stack: RunStack,
) -> None:
    exports = run_stack("shared", {"modelDownload": False}).exports
    assert not {"workerMemory", "nimModelProfile", "nimSelectionEnv"} & set(exports)


def test_the_layer_exports_the_extra_env_its_download_selected_by(run_stack: RunStack) -> None:
    extra = ["NIM_LOG_LEVEL=DEBUG", "NIM_PRECISION=bf16", "NIM_MODEL_SIZE=nano"]
    run = run_stack("shared", {"workerExtraEnv": extra})
    download = run.one(JOB).inputs["spec"]["template"]["spec"]["containers"][0]
    assert _env(download)["NIM_PRECISION"] == "bf16"
    assert run.exports["nimSelectionEnv"] == ["NIM_PRECISION=bf16"]  # nano: the recipe's own


def test_the_layer_reports_the_image_and_completion_of_its_download(run_stack: RunStack) -> None:
    exports = run_stack("shared", {"workerImage": "mirror.example/cosmos3:2.1.0"}).exports
    assert exports["workerImage"] == "mirror.example/cosmos3:2.1.0"
    assert exports["modelCacheReady"] is True


def test_without_a_download_the_layer_is_ready_for_the_configured_image(
    run_stack: RunStack,
) -> None:
    exports = run_stack("shared", {"modelDownload": False}).exports
    assert exports["workerImage"] == "nvcr.io/nim/nvidia/cosmos3:2.1.0"
    assert exports["modelCacheReady"] is True


# --- what a run decides from the live cluster (components/live.py) ------------------------------

JOB_NAME = "cosmos3-nano-reasoner-model-download"


def live_job(condition: str | None, uid: str = "failed-uid") -> dict[str, Any]:
    conditions = [{"type": condition, "status": "True", "reason": "DeadlineExceeded"}]
    return {
        "metadata": {"name": JOB_NAME, "uid": uid},
        "spec": {"template": {"metadata": {}}},
        "status": {"conditions": conditions if condition else []},
    }


def test_a_failed_download_is_run_again_by_a_mark_in_its_replacements_template(
    run_stack: RunStack,
) -> None:
    cluster = MockCluster({("Job", JOB_NAME): live_job("FailureTarget")})
    job = run_stack("shared", cluster=cluster, preview=True).one(JOB)
    template = job.inputs["spec"]["template"]["metadata"]
    assert template["annotations"] == {"cosmos3-nano-reasoner/rerun-of-failed-job": "failed-uid"}


def test_a_running_download_is_left_as_it_is(run_stack: RunStack) -> None:
    cluster = MockCluster({("Job", JOB_NAME): live_job(None)})
    job = run_stack("shared", cluster=cluster, preview=True).one(JOB)
    assert "annotations" not in job.inputs["spec"]["template"]["metadata"]


def test_a_download_that_fails_while_awaited_fails_the_run_saying_why(run_stack: RunStack) -> None:
    cluster = MockCluster({("Job", JOB_NAME): live_job("Failed", uid="new-uid")})
    with pytest.raises(RunError, match=r"failed: DeadlineExceeded(.|\n)*its deadline: 3600 s"):
        run_stack("shared", cluster=cluster)


def test_a_graph_that_says_failed_fails_the_run_with_its_reason(run_stack: RunStack) -> None:
    failed: dict[str, Any] = {
        "metadata": {"name": "cosmos3-nano-reasoner-agg-h200-round-robin", "generation": 1},
        "status": {
            "state": "failed",
            "conditions": [
                {"type": "Ready", "status": "False", "reason": "Broken", "message": "no workers"}
            ],
        },
    }
    cluster = MockCluster({("DynamoGraphDeployment", failed["metadata"]["name"]): failed})
    with (
        pytest.raises(
            RunError, match=r"cannot start(.|\n)*Ready=False \(Broken\)(.|\n)*no workers"
        ),
        mock.patch("components.graph_deployment.FAILED_GRACE_SECONDS", 0),
    ):
        run_stack("round-robin", cluster=cluster)


def test_a_preview_without_a_cluster_runs_and_changes_nothing(run_stack: RunStack) -> None:
    def refuse(*_: object) -> tuple[int, bytes]:
        raise LiveReadError("no credentials")

    quiet = run_stack("dev", preview=True)
    blind = run_stack("dev", cluster=KubernetesView("ctx", request=refuse), preview=True)

    def objects(run: ProgramRun) -> dict[str, Any]:
        return {r.type: r.inputs for r in run.kubernetes_objects()}

    assert objects(blind) == objects(quiet)
