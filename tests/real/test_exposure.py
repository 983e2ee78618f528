"""Frontend exposure on the real engine (issue 32, part 6): with the Gateway API's CRDs and Envoy
Gateway's BackendTrafficPolicy CRD installed (`make pinned-crds`, testenv.engine.pins), `pulumi
up` creates two frontends behind the HTTPRoute and its consistent-hash policy, the API server
judging both against their CRDs' schemas, and then, exposure by exposure, the Ingress with its
hash annotation and the Service of our own in their place; without the CRDs, the preview refuses
in one line naming the key, before anything is created; two frontends with session affinity and no
hashing are refused before anything is created. No ingress controller or gateway runs here:
routing through them is not tested (docs/deploying.md, Exposing the frontend)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from testenv import cluster as local
from testenv.engine.pins import ENVOY_GATEWAY_CRDS, GATEWAY_API_CRDS
from testenv.local_stacks import SITE, LocalStacks
from tests.real.support import layer_up, pinned_crds_installed

NAMESPACE = "cosmos3-nano-reasoner"
GRAPH = "cosmos3-nano-reasoner-agg-h200-session-affinity"
STACK = "session-affinity"
ROUTE = {"frontendExposure": "httproute", "frontendGatewayName": "public"}
ROUTES = "httproutes.gateway.networking.k8s.io"
POLICIES = "backendtrafficpolicies.gateway.envoyproxy.io"
INGRESSES = "ingresses.networking.k8s.io"


@pytest.fixture
def gateway_crds(local_cluster: local.LocalCluster) -> Iterator[None]:
    """The Gateway API's and Envoy Gateway's CRDs on this worker's cluster for one test, then
    gone again (the refusal's test needs a cluster without them)."""
    with (
        pinned_crds_installed(local_cluster, GATEWAY_API_CRDS),
        pinned_crds_installed(local_cluster, ENVOY_GATEWAY_CRDS),
    ):
        yield


def get(cluster: local.LocalCluster, kind: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(
        cluster.kubectl("get", kind, name, "-n", NAMESPACE, "-o", "json")
    )
    return found


def names(cluster: local.LocalCluster, kind: str) -> list[str]:
    return sorted(cluster.kubectl("get", kind, "-n", NAMESPACE, "-o", "name").split())


def set_config(stacks: LocalStacks, **values: str) -> None:
    for key, value in values.items():
        stacks.run("config", "set", key, value, "--stack", STACK)


def remove_config(stacks: LocalStacks, *keys: str) -> None:
    for key in keys:
        stacks.run("config", "rm", key, "--stack", STACK)


def test_two_hashed_frontends_behind_the_route_then_the_ingress_then_the_service(
    stacks: LocalStacks, local_cluster: local.LocalCluster, gateway_crds: None
) -> None:
    layer_up(stacks)
    hashed = {"frontendReplicas": "2", "frontendSessionHashing": "envoy-gateway"}
    stacks.configure(STACK, SITE | ROUTE | hashed | {"frontendHost": "reasoner.example.com"})
    stacks.run("up", "--yes", "--stack", STACK)

    graph = get(local_cluster, "dgd", GRAPH)
    assert graph["spec"]["components"][0]["replicas"] == 2
    route = get(local_cluster, ROUTES, f"{GRAPH}-frontend")
    assert route["spec"]["parentRefs"][0]["name"] == "public"
    assert route["spec"]["hostnames"] == ["reasoner.example.com"]
    assert route["spec"]["rules"][0]["backendRefs"][0]["name"] == f"{GRAPH}-frontend"
    policy = get(local_cluster, POLICIES, f"{GRAPH}-frontend-session-hash")
    assert policy["spec"]["targetRefs"][0]["name"] == f"{GRAPH}-frontend"
    assert policy["spec"]["loadBalancer"]["consistentHash"]["header"] == {
        "name": "X-Dynamo-Session-ID"
    }
    outputs = stacks.outputs(STACK)
    assert outputs["frontendReplicas"] == 2
    assert "frontendExternalUrl" not in outputs

    remove_config(stacks, "frontendGatewayName")
    set_config(
        stacks,
        frontendExposure="ingress",
        frontendSessionHashing="ingress-nginx",
        frontendTlsSecret="reasoner-tls",
    )
    stacks.run("up", "--yes", "--stack", STACK)

    assert names(local_cluster, ROUTES) == [] and names(local_cluster, POLICIES) == []
    ingress = get(local_cluster, INGRESSES, f"{GRAPH}-frontend")
    annotations = ingress["metadata"]["annotations"]
    assert annotations["nginx.ingress.kubernetes.io/upstream-hash-by"] == (
        "$http_x_dynamo_session_id"
    )
    assert ingress["spec"]["tls"] == [
        {"hosts": ["reasoner.example.com"], "secretName": "reasoner-tls"}
    ]
    assert stacks.outputs(STACK)["frontendExternalUrl"] == "https://reasoner.example.com"

    remove_config(stacks, "frontendHost", "frontendTlsSecret")
    set_config(
        stacks,
        frontendExposure="service",
        frontendServiceType="NodePort",
        frontendSessionHashing="external",
    )
    stacks.run("up", "--yes", "--stack", STACK)

    assert names(local_cluster, INGRESSES) == []
    service = get(local_cluster, "service", f"{GRAPH}-frontend-public")  # 63 characters
    assert service["spec"]["type"] == "NodePort"
    assert service["spec"]["selector"] == {
        "nvidia.com/dynamo-graph-deployment-name": GRAPH,
        "nvidia.com/dynamo-component-type": "frontend",
    }
    assert service["spec"]["ports"][0]["nodePort"] > 0  # the API server gave it one
    stacks.run("destroy", "--yes", "--stack", STACK)
    assert f"service/{GRAPH}-frontend-public" not in names(local_cluster, "services")


def test_a_route_on_a_cluster_without_the_crds_is_refused_at_preview_naming_the_key(
    stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    layer_up(stacks)
    stacks.configure(STACK, SITE | ROUTE)

    refused = stacks.run("preview", "--stack", STACK, check=False)

    assert refused.returncode != 0
    output = refused.stdout + refused.stderr
    assert (
        "cosmos3-nano-reasoner:frontendExposure is httproute but the cluster has no "
        "httproutes.gateway.networking.k8s.io CRD" in output
    ), output
    assert "Traceback" not in output
    graphs = local_cluster.kubectl("get", "dgd", "-n", NAMESPACE, "-o", "name", check=False)
    assert graphs.strip() == ""


def test_two_frontends_with_affinity_and_no_hashing_are_refused_before_anything_is_created(
    stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    stacks.configure(STACK, SITE | {"frontendReplicas": "2"})

    refused = stacks.run("up", "--yes", "--stack", STACK, check=False)

    assert refused.returncode != 0
    output = refused.stdout + refused.stderr
    assert "cosmos3-nano-reasoner:frontendReplicas=2 on the session-affinity profile" in output
    assert "each frontend routes by its own session-to-worker table" in output, output
    assert "Traceback" not in output
    graphs = local_cluster.kubectl("get", "dgd", "-A", "-o", "name", check=False)
    assert graphs.strip() == ""
