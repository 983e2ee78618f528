"""Pure builder for the DynamoGraphDeployment (nvidia.com/v1beta1) of one routing profile.

Component 0 is the Frontend and component 1 the Worker, in that order, as Dynamo's aggregate
recipes require (the recipe's cluster patches address `spec.components[1]`). The two profiles'
graphs differ only in their name and in the frontend's routing arguments.
"""

from __future__ import annotations

from dataclasses import dataclass

from components import names
from components.args import GraphArgs, WorkerArgs
from components.layer_manifests import (
    Manifest,
    SharedLayer,
    cache_mount,
    cache_volume,
    kube_object,
    nim_selection_env,
    pod_placement,
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


@dataclass(frozen=True)
class ExistingGraph:
    """What the builder needs of the graph the cluster already holds (None: there is none)."""

    kept_worker_replicas: int | None = None
    """The Worker's live count while only this program's field manager owns it: a graph switched
    to autoscaling keeps it until an autoscaler first sets one (the operator's webhook refuses a
    change of replicas once the adapter is on, a removal included)."""


def graph_deployment(
    args: GraphArgs, layer: SharedLayer, existing: ExistingGraph | None = None
) -> Manifest:
    """The graph; `existing` says what the cluster holds of it, which decides the two fields the
    program writes only to a graph that exists: `spec.restart` and a kept worker count."""
    spec: Manifest = {
        "backendFramework": "vllm",
        "components": [frontend(args, layer), scaled(worker(args.worker, layer), args, existing)],
    }
    if args.restart_id and existing is not None:
        # The CRD's CEL rule refuses spec.restart on create: only a graph that exists restarts.
        spec["restart"] = {"id": args.restart_id, "strategy": {"type": args.restart_strategy}}
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
        "podTemplate": {
            "spec": {
                **pull_secrets(layer),
                **pod_placement(args.frontend_placement),
                "containers": [container],
            }
        },
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


def scaled(worker: Manifest, args: GraphArgs, existing: ExistingGraph | None) -> Manifest:
    """The Worker as autoscaling makes it: `scalingAdapter: {}` (v1beta1 opts in with the bare
    object) and no `replicas`, which then belong to the operator's adapter and the autoscaler
    behind it; server-side apply leaves a field alone that the applied object does not set and
    another manager owns, so no `up` resets their count, and no preview shows it."""
    if not args.autoscaling:
        return worker
    adapted = {key: value for key, value in worker.items() if key != "replicas"}
    kept = existing.kept_worker_replicas if existing is not None else None
    if kept is not None:
        adapted["replicas"] = kept
    adapted["scalingAdapter"] = {}
    return adapted


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
                **pull_secrets(layer),
                **pod_placement(args.placement),
                "terminationGracePeriodSeconds": 60,
                "volumes": [cache_volume(layer)],
                "containers": [container],
            },
        },
    }
