"""Names of the Kubernetes objects, fixed by the recipe and the Dynamo operator's conventions."""

from __future__ import annotations

from components.routing import RoutingProfile

APP = "cosmos3-nano-reasoner"
NGC_SECRET = "ngc-api-secret"
NGC_SECRET_KEY = "NGC_API_KEY"
REGISTRY_PULL_SECRET = "registry-pull-secret"
MODEL_DOWNLOAD_JOB = f"{APP}-model-download"
CACHE_VOLUME = "shared-model-cache"
CACHE_MOUNT_PATH = "/shared-model-cache"
"""Dynamo recipes mount the canonical cache volume here; NIM_CACHE_PATH points the NIM at it."""

LAYER_GUARD = f"{APP}-layer-guard"
"""The protected ConfigMap that no destroy gets past (components/layer_guard.py)."""
RERUN_ANNOTATION = f"{APP}/rerun-of-failed-job"
"""On the download Job's pod template: the uid of the failed Job it runs again (a changed template
is what makes the provider replace a Job; components/model_download.py)."""
CREDENTIALS_ANNOTATION = f"{APP}/credentials-digest"
"""On the workers' pod template: a digest of the credentials they read, so that a rotated key
restarts them (components/credentials_digest.py)."""

FRONTEND_COMPONENT = "Frontend"
WORKER_COMPONENT = "Worker"
MAIN_CONTAINER = "main"
"""The operator merges its defaults into the container named `main` and refuses a new component
without one; the checks and the lab's controller read pod templates by it too."""
FRONTEND_PORT = 8000
"""The operator gives a frontend component's Service port `http` 8000."""
WORKER_SYSTEM_PORT = 9090
"""The operator gives a worker's container the port `system` 9090, where its /metrics is
(the operator's `component_worker.go` and `consts.go`)."""
GRAPH_LABEL = "nvidia.com/dynamo-graph-deployment-name"
COMPONENT_TYPE_LABEL = "nvidia.com/dynamo-component-type"
"""Two of the labels the operator puts on a graph's pods: the graph's name, and `frontend` or
`worker` (the operator's `consts.go` and `graph.go` `generateLabels`)."""
SERVED_MODEL = "nvidia/cosmos3-nano-reasoner"
"""The model id the Cosmos3 NIM serves for the Nano Reasoner, so what the frontend lists in
/v1/models: the recipe's "Verify" step says the response lists it (NVIDIA's Dynamo docs, "Cosmos3
Nano Reasoner"), as do the reasoner 1.7.0 docs. No source shows a way to rename it (no NIM env var,
no NIM_DYNAMO_ARGS key for it), so it is no config; the stages still read it from the outputs."""


def graph_name(profile: RoutingProfile) -> str:
    return f"{APP}-agg-h200-{profile.value}"


def frontend_service(graph: str) -> str:
    """The Service the operator creates for component `Frontend`: `<dgd>-<lower(component)>`."""
    return f"{graph}-{FRONTEND_COMPONENT.lower()}"


def scaling_adapter(graph: str) -> str:
    """The DynamoGraphDeploymentScalingAdapter the operator creates for the Worker when its
    `scalingAdapter` is set: `<dgd>-<lower(component)>` (Dynamo's autoscaling guide)."""
    return f"{graph}-{WORKER_COMPONENT.lower()}"


def frontend_public_service(graph: str) -> str:
    """The Service this program adds with `frontendExposure` service: the operator's name plus
    `-public` (63 characters for the session-affinity graph, a Service name's limit)."""
    return f"{frontend_service(graph)}-public"


PATCH_FORCE = "pulumi.com/patchForce"
PROVIDER_WAIT_ENDS_AT_ONCE = {"waitFor": "jsonpath={.metadata.uid}"}
"""The provider's own wait ends as soon as the object exists: the program waits itself, in its own
words (components/readiness.py). Not `skipAwait`, which for a Job also skips waiting for its
deletion, so that a replacement would create the new Job while the old one is still being deleted
(pulumi-kubernetes `allowsSkipAwaitWithDelete`)."""


def object_annotations(**pulumi_annotations: str) -> dict[str, str]:
    """Every object's annotations: `pulumi.com/patchForce` and the object's own Pulumi ones.

    The provider writes with server-side apply. Without force, a field someone changed with
    kubectl (`kubectl patch` becomes that field's manager) stops the next preview and `up` with
    "Server-Side Apply field conflict detected" instead of setting the field back, as seen on
    the real tier. The program owns every field it sets, so its apply takes them back.
    """
    return {
        PATCH_FORCE: "true",
        **{f"pulumi.com/{key}": value for key, value in pulumi_annotations.items()},
    }


def labels(component: str) -> dict[str, str]:
    """Recommended labels, so `kubectl get all -l app.kubernetes.io/part-of=...` finds everything."""
    return {
        "app.kubernetes.io/name": APP,
        "app.kubernetes.io/part-of": APP,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/managed-by": "pulumi",
    }
