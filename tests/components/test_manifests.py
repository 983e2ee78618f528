"""Pure builders: the DynamoGraphDeployment and the layer objects, from their arguments (built
from a stack's settings as `components.recipe` builds them)."""

import base64
import json
from typing import Any

from components import graph_manifest, layer_manifests
from components.layer_manifests import SharedLayer
from components.recipe_args import cache_args, download_args, graph_args, own_layer, worker_args
from components.settings import StackSettings
from tests.support import stack_settings
from tools.stack_files import placeholder_secrets

P = "cosmos3-nano-reasoner"


def settings(stack: str = "round-robin", **overrides: Any) -> StackSettings:
    return stack_settings(stack, placeholder_secrets(stack), **overrides)


def layer(**kwargs: Any) -> SharedLayer:
    return SharedLayer(namespace="team-ns", model_cache_claim="shared-model-cache", **kwargs)


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_graph_is_frontend_then_worker_with_main_containers() -> None:
    dgd = graph_manifest.graph_deployment(graph_args(settings()), layer())
    assert dgd["apiVersion"] == "nvidia.com/v1beta1" and dgd["kind"] == "DynamoGraphDeployment"
    assert dgd["spec"]["backendFramework"] == "vllm"
    frontend, worker = dgd["spec"]["components"]
    assert (frontend["name"], frontend["type"], frontend["replicas"]) == ("Frontend", "frontend", 1)
    assert (worker["name"], worker["type"], worker["replicas"]) == ("Worker", "worker", 8)
    for component in (frontend, worker):
        assert [c["name"] for c in component["podTemplate"]["spec"]["containers"]] == ["main"]


def test_worker_runs_the_nim_entrypoint_with_the_recipe_environment() -> None:
    worker = graph_manifest.graph_deployment(graph_args(settings()), layer())["spec"]["components"][
        1
    ]
    main = worker["podTemplate"]["spec"]["containers"][0]
    assert main["image"] == "nvcr.io/nim/nvidia/cosmos3:2.1.0"
    assert main["imagePullPolicy"] == "IfNotPresent"
    assert "exec /opt/nim/start_server.sh" in main["args"][0]
    env = env_of(main)
    assert env["NIM_MODEL_TYPE"] == "reasoner" and env["NIM_MODEL_SIZE"] == "nano"
    assert env["NIM_PRECISION"] == "fp8" and env["NIM_DYNAMO_WORKER"] == "true"
    assert env["NIM_DISCOVERY_BACKEND"] == "kubernetes"
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "video,compute,utility"
    assert env["DYN_MM_ALLOW_INTERNAL"] == "1"
    assert env["NGC_API_KEY"] == {"secretKeyRef": {"name": "ngc-api-secret", "key": "NGC_API_KEY"}}
    assert env["NIM_CACHE_PATH"] == main["volumeMounts"][0]["mountPath"] == "/shared-model-cache"
    assert main["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert main["resources"]["requests"] == main["resources"]["limits"]
    assert worker["runtimeVersionOverride"] == "1.5.0"
    assert worker["sharedMemorySize"] == "64Gi"


def test_cache_volume_comes_first_and_names_the_layers_claim() -> None:
    worker = graph_manifest.graph_deployment(graph_args(settings()), layer())["spec"]["components"][
        1
    ]
    volumes = worker["podTemplate"]["spec"]["volumes"]
    assert volumes[0] == {
        "name": "shared-model-cache",
        "persistentVolumeClaim": {"claimName": "shared-model-cache"},
    }


def test_cluster_settings_apply_to_the_worker_and_the_mirror_to_both() -> None:
    s = settings(
        workerNodeSelector=["nvidia.com/gpu.product=NVIDIA-H200"],
        workerTolerations=["nvidia.com/gpu:NoSchedule", "dedicated=inference:NoExecute"],
    )
    frontend, worker = graph_manifest.graph_deployment(
        graph_args(s), layer(registry_pull_secret="registry-pull-secret")
    )["spec"]["components"]
    pod = worker["podTemplate"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H200"}
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Equal", "value": "inference", "effect": "NoExecute"},
    ]
    assert pod["imagePullSecrets"] == [{"name": "registry-pull-secret"}]
    assert frontend["podTemplate"]["spec"]["imagePullSecrets"] == [{"name": "registry-pull-secret"}]
    assert "nodeSelector" not in frontend["podTemplate"]["spec"]


def test_no_placement_or_pull_secret_by_default() -> None:
    pod = graph_manifest.graph_deployment(graph_args(settings()), layer())["spec"]["components"][1][
        "podTemplate"
    ]["spec"]
    assert not {"nodeSelector", "tolerations", "imagePullSecrets"} & set(pod)


def test_extra_env_overrides_in_place_and_appends_new_names() -> None:
    s = settings(workerExtraEnv=["NIM_PRECISION=bf16", "NIM_LOG_LEVEL=DEBUG"])
    main = graph_manifest.worker(worker_args(s), layer())["podTemplate"]["spec"]["containers"][0]
    names = [e["name"] for e in main["env"]]
    assert env_of(main)["NIM_PRECISION"] == "bf16" and names.count("NIM_PRECISION") == 1
    assert names[-1] == "NIM_LOG_LEVEL"


def test_download_job_uses_the_workers_image_selection_and_cache() -> None:
    s = settings("dev")
    job = layer_manifests.model_download_job(download_args(s), own_layer(s))
    worker = graph_manifest.worker(worker_args(s), own_layer(s))["podTemplate"]["spec"]
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert job["metadata"]["name"] == "cosmos3-nano-reasoner-model-download"
    assert "pulumi.com/replaceUnready" not in job["metadata"]["annotations"]
    assert "annotations" not in job["spec"]["template"]["metadata"], "no re-run of a failed Job"
    assert container["image"] == worker["containers"][0]["image"]
    assert container["command"] == ["/bin/bash", "-lc", "download-to-cache"]
    selection = {
        "NIM_MODEL_TYPE",
        "NIM_MODEL_SIZE",
        "NIM_PRECISION",
        "NIM_CACHE_PATH",
        "NGC_API_KEY",
    }
    assert {k: v for k, v in env_of(container).items() if k in selection} == {
        k: v for k, v in env_of(worker["containers"][0]).items() if k in selection
    }
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert job["spec"]["template"]["spec"]["volumes"] == worker["volumes"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"


def test_download_job_without_gpu_requests_none() -> None:
    s = settings("dev", modelDownloadGpus=0)
    container = layer_manifests.model_download_job(download_args(s), own_layer(s))["spec"][
        "template"
    ]["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in container["resources"]["limits"]


def test_model_cache_claim_is_read_write_many_with_the_configured_class() -> None:
    claim = layer_manifests.model_cache_claim(cache_args(settings("dev")))
    assert claim["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "storageClassName": "rwx-nfs",
        "resources": {"requests": {"storage": "200Gi"}},
    }


def test_docker_config_json_matches_kubectl_create_secret_docker_registry() -> None:
    config = json.loads(layer_manifests.docker_config_json("mirror.example:5000", "robot", "pa:ss"))
    entry = config["auths"]["mirror.example:5000"]
    assert entry["username"] == "robot" and entry["password"] == "pa:ss"
    assert base64.b64decode(entry["auth"]).decode() == "robot:pa:ss"


def test_layer_outputs_and_the_download_export_exactly_the_declared_keys() -> None:
    from components import outputs

    names = tuple(outputs.layer_outputs(own_layer(settings("dev"))))
    download = (outputs.WORKER_IMAGE_KEY, *outputs.SELECTED_BY_KEYS, outputs.CACHE_READY_KEY)
    secrets = (outputs.CREDENTIALS_DIGEST_KEY,)
    assert names + download + secrets == outputs.LAYER_OUTPUT_KEYS


def test_short_and_qualified_stack_names() -> None:
    from components.settings import qualified_stack_name

    assert qualified_stack_name("shared", "acme", "proj") == "acme/proj/shared"
    assert qualified_stack_name("org/p/s", "acme", "proj") == "org/p/s"
