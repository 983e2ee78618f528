"""Stack outputs: the contract of `components.contract`, computed from settings and the layer."""

from __future__ import annotations

from components import names
from components.contract import StackOutputs
from components.layer_manifests import SharedLayer
from components.settings import StackSettings


def graph_outputs(settings: StackSettings, layer: SharedLayer) -> StackOutputs:
    """What a profile stack tells the test stages: where the frontend is and how it routes."""
    graph = names.graph_name(settings.profile)
    service = names.frontend_service(graph)
    port = names.FRONTEND_PORT
    url = f"http://{service}.{layer.namespace}.svc.cluster.local:{port}"
    routing = settings.routing
    return StackOutputs(
        namespace=layer.namespace,
        profile=settings.profile,
        graph_name=graph,
        frontend_service=service,
        frontend_port=port,
        frontend_url=url,
        models_url=f"{url}/v1/models",
        served_model=settings.served_model,
        session_affinity_ttl_seconds=routing.affinity_ttl_seconds,
        session_header=routing.session_header,
        worker_replicas=settings.worker_replicas,
        model_cache_claim=layer.model_cache_claim,
        port_forward_command=(
            f"kubectl --context {settings.kube_context} -n {layer.namespace} "
            f"port-forward service/{service} {port}:{port}"
        ),
        kube_context=settings.kube_context,
        target="cluster",
    )


LAYER_OUTPUT_KEYS = (
    "namespace",
    "modelCacheClaim",
    "modelCacheStorageClass",
    "ngcSecret",
    "registryPullSecret",
)


def layer_outputs(settings: StackSettings, layer: SharedLayer) -> dict[str, object]:
    """What a stack that owns the layer exports, for profile stacks to read by StackReference.

    `modelCacheStorageClass` also lets the next update of this stack notice a storage class
    change before it could turn into a replacement of the cache (see components.model_cache).
    """
    return {
        "namespace": layer.namespace,
        "modelCacheClaim": layer.model_cache_claim,
        "modelCacheStorageClass": settings.model_cache_storage_class or None,
        "ngcSecret": layer.ngc_secret,
        "registryPullSecret": layer.registry_pull_secret,
    }
