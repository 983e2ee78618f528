"""The frontend Service the Dynamo operator would make, and the lab's frontend address on it.

The controller (`lab.controller`) makes `<graph>-frontend` (port 8000), owned by the graph so that
the garbage collector deletes it with it, and annotates it with where the lab's frontend listens
on loopback; the lab's stage target reads that annotation from the Service the stack's outputs
name (`published_frontend_url`), so the outputs lead the stages to the frontend unedited.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes.client.exceptions import ApiException

from components.contract import StackOutputs
from components.names import COMPONENT_TYPE_LABEL, FRONTEND_PORT, GRAPH_LABEL, frontend_service
from lab.deployed_graph import DeployedGraph
from lab.graph import LabGraphError
from stages.cluster.kubernetes_api import KubernetesApi

GROUP, VERSION = "nvidia.com", "v1beta1"
FRONTEND_URL_ANNOTATION = "lab.cosmos3.nvidia.com/frontend-url"
"""On the frontend Service: where the lab's frontend for the graph listens (`http://127.0.0.1:P`)."""
MANAGED_BY = "cosmos3-lab-controller"


def frontend_service_manifest(graph: DeployedGraph) -> dict[str, Any]:
    """`<graph>-frontend`, port 8000, owned by the graph."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": frontend_service(graph.name),
            "namespace": graph.namespace,
            "labels": {"app.kubernetes.io/managed-by": MANAGED_BY},
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "DynamoGraphDeployment",
                    "name": graph.name,
                    "uid": graph.uid,
                    "controller": True,
                }
            ],
        },
        "spec": {
            "selector": {
                GRAPH_LABEL: graph.name,
                COMPONENT_TYPE_LABEL: "frontend",
            },
            "ports": [{"name": "http", "port": FRONTEND_PORT, "targetPort": FRONTEND_PORT}],
        },
    }


def owns_frontend_service(core: Any, graph: DeployedGraph) -> bool:
    """The graph's frontend Service, made if missing (`core`: a `CoreV1Api`); False when one the
    graph does not own is there already (it is left alone)."""
    name = frontend_service(graph.name)
    try:
        existing = core.read_namespaced_service(name, graph.namespace)
    except ApiException as error:
        if error.status != 404:
            raise
        core.create_namespaced_service(graph.namespace, frontend_service_manifest(graph))
        return True
    owners = existing.metadata.owner_references or []
    return any(owner.uid == graph.uid for owner in owners)


def annotate_frontend_service(core: Any, graph: DeployedGraph, url: str | None) -> None:
    """Publish `url` on the graph's frontend Service; None removes it (a strategic merge patch:
    a null value deletes the key)."""
    body = {"metadata": {"annotations": {FRONTEND_URL_ANNOTATION: url}}}
    try:
        core.patch_namespaced_service(frontend_service(graph.name), graph.namespace, body)
    except ApiException as error:
        if error.status != 404:  # gone with its graph
            raise


def published_frontend_url(outputs: StackOutputs, kubeconfig: Path | None) -> str:
    """Where the lab's frontend for the outputs' graph listens: the annotation on the frontend
    Service the outputs name (`frontendService` in `namespace`, on `kubeContext`)."""
    if not outputs.kube_context:  # never the kubeconfig's current context
        raise LabGraphError(
            f"the outputs of graph {outputs.graph_name} name no kubeContext: the lab reads its "
            "frontend Service only on the cluster the stack deployed to"
        )
    api = KubernetesApi.connect(outputs.namespace, kubeconfig, outputs.kube_context)
    try:
        service = api.core.read_namespaced_service(outputs.frontend_service, outputs.namespace)
    except ApiException as error:
        raise LabGraphError(
            f"cannot read the Service {outputs.namespace}/{outputs.frontend_service} the outputs "
            f"name: {error.status} {error.reason}"
        ) from None
    url = (service.metadata.annotations or {}).get(FRONTEND_URL_ANNOTATION)
    if not url:
        raise LabGraphError(
            f"the Service {outputs.namespace}/{outputs.frontend_service} carries no "
            f"{FRONTEND_URL_ANNOTATION}: no lab frontend serves graph {outputs.graph_name} (is "
            "the lab controller running, and the graph Ready?)"
        )
    return str(url)


def reached_at(outputs: StackOutputs, url: str) -> StackOutputs:
    """The outputs as a local stage uses them: the same graph, its frontend at `url`."""
    port = int(url.rsplit(":", 1)[1])
    return outputs.model_copy(
        update={
            "frontend_url": url,
            "models_url": f"{url}/v1/models",
            "frontend_port": port,
            "target": "lab",
        }
    )
