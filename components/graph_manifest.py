"""Pure builder for the DynamoGraphDeployment (nvidia.com/v1beta1) of one routing profile.

Component 0 is the Frontend and component 1 the Worker, in that order, as Dynamo's aggregate
recipes require (the recipe's cluster patches address `spec.components[1]`). The two profiles'
graphs differ only in their name and in the frontend's routing arguments.
"""

from __future__ import annotations

from components import names
from components.args import GraphArgs, WorkerArgs
from components.layer_manifests import (
    Manifest,
    SharedLayer,
    cache_mount,
    cache_volume,
    gpu_placement,
    kube_object,
    nim_selection_env,
    pull_secrets,
    with_extra_env,
)
from components.routing import frontend_args

API_VERSION = "nvidia.com/v1beta1"
KIND = "DynamoGraphDeployment"
NIM_ENTRYPOINT = "set -euo pipefail; exec /opt/nim/start_server.sh"

# The Cosmos cookbook's frontend sizing: routing and tokenisation only, no GPU.
FRONTEND_RESOURCES = {
    "requests": {"cpu": "4", "memory": "8Gi"},
    "limits": {"cpu": "8", "memory": "16Gi"},
}


def graph_deployment(args: GraphArgs, layer: SharedLayer) -> Manifest:
    spec = {
        "backendFramework": "vllm",
        "components": [frontend(args, layer), worker(args.worker, layer)],
    }
    name = names.graph_name(args.routing.profile)
    # The program waits for Ready itself (components/graph_deployment.py).
    annotations = names.object_annotations(skipAwait="true")
    return kube_object(
        API_VERSION, KIND, name, layer.namespace, "inference-graph", annotations, spec=spec
    )


def frontend(args: GraphArgs, layer: SharedLayer) -> Manifest:
    container = {
        "name": names.MAIN_CONTAINER,
        "image": args.frontend_image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python3"],
        "args": ["-m", "dynamo.frontend", *frontend_args(args.routing)],
        # The NIM workers answer on the TCP request plane; the frontend must use the same.
        "env": [{"name": "DYN_REQUEST_PLANE", "value": "tcp"}],
        "resources": FRONTEND_RESOURCES,
    }
    return {
        "name": names.FRONTEND_COMPONENT,
        "type": "frontend",
        "replicas": args.frontend_replicas,
        "podTemplate": {"spec": {**pull_secrets(layer), "containers": [container]}},
    }


def worker_env(worker: WorkerArgs, layer: SharedLayer) -> list[Manifest]:
    recipe_env = [
        *nim_selection_env(worker, layer),
        # Start dynamo.vllm as a Dynamo worker discovered through the Kubernetes API.
        {"name": "NIM_DYNAMO_WORKER", "value": "true"},
        {"name": "NIM_DISCOVERY_BACKEND", "value": "kubernetes"},
        {"name": "DYN_REQUEST_PLANE", "value": "tcp"},
        # NVDEC decodes the H.264 test videos; the image's own ENV is not reliably honoured.
        {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "video,compute,utility"},
        # The smoke and perf stages serve videos over plain http from an in-cluster Service,
        # which Dynamo's media fetch refuses unless internal URLs are allowed.
        {"name": "DYN_MM_ALLOW_INTERNAL", "value": "1"},
    ]
    return with_extra_env(recipe_env, worker.extra_env)


def _credentials_mark(layer: SharedLayer) -> Manifest:
    """The workers' pod template carries a digest of the credentials they read
    (components/credentials_digest.py): a rotated key changes the template, and the operator
    restarts every worker with it. Never the key itself."""
    if not layer.credentials_digest:
        return {}
    return {"metadata": {"annotations": {names.CREDENTIALS_ANNOTATION: layer.credentials_digest}}}


def worker(args: WorkerArgs, layer: SharedLayer) -> Manifest:
    sizing = {
        "cpu": args.cpu,
        "memory": args.memory,
        "nvidia.com/gpu": str(args.gpus),
    }
    container = {
        "name": names.MAIN_CONTAINER,
        "image": args.image,
        "imagePullPolicy": "IfNotPresent",
        "workingDir": "/opt/nim",
        "command": ["/bin/bash", "-lc"],
        "args": [NIM_ENTRYPOINT],
        "env": worker_env(args, layer),
        "resources": {"requests": sizing, "limits": sizing},
        "volumeMounts": [cache_mount()],
    }
    return {
        "name": names.WORKER_COMPONENT,
        "type": "worker",
        "replicas": args.replicas,
        # The NIM's tag (e.g. 2.1.0) is not a Dynamo version; without this the operator would
        # read the tag as the Dynamo runtime version.
        "runtimeVersionOverride": args.runtime_version,
        "sharedMemorySize": args.shared_memory,
        "podTemplate": {
            **_credentials_mark(layer),
            "spec": {
                **gpu_placement(args, layer),
                "terminationGracePeriodSeconds": 60,
                "volumes": [cache_volume(layer)],
                "containers": [container],
            },
        },
    }
