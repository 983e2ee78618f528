"""Frontend exposure and replicas (issue 32, part 6): the Service, Ingress, HTTPRoute and hashing
policy builders, the config that turns them on and what it refuses (each value as the API server
would, and more than one frontend with affinity but no hashing), the program's objects under
Pulumi mocks, the refusal at preview of a cluster without the Gateway API's or Envoy Gateway's
CRDs, the outputs, and the A/B's refusal of unhashed frontends."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pulumi import RunError

from components import exposure
from components.args import ExposureArgs
from components.config_parser import ConfigError, parse_stack_config
from components.contract import StackOutputs
from components.live import LiveReadError
from components.settings import PROJECT
from stages.ab.plan import refuse_unhashed_frontends
from stages.errors import UsageError
from tests.support import stack_settings
from tools.offline import MockCluster, ProgramRun
from tools.stack_files import cli_config, example_site_for

RunStack = Callable[..., ProgramRun]
GRAPH = "cosmos3-nano-reasoner-agg-h200-session-affinity"
NAMESPACE = "cosmos3-nano-reasoner"
OPERATOR_SERVICE = f"{GRAPH}-frontend"
SERVICE = "kubernetes:core/v1:Service"
INGRESS = "kubernetes:networking.k8s.io/v1:Ingress"
ROUTE = "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute"
POLICY = "kubernetes:gateway.envoyproxy.io/v1alpha1:BackendTrafficPolicy"
DGD = "kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment"
ROUTE_ON = {"frontendExposure": "httproute", "frontendGatewayName": "public"}


def args(**fields: Any) -> ExposureArgs:
    defaults: dict[str, Any] = {
        "graph": GRAPH,
        "mode": "service",
        "service_type": "LoadBalancer",
        "source_ranges": (),
        "service_annotations": (),
        "ingress_class": "",
        "host": "",
        "tls_secret": "",
        "gateway_name": "",
        "gateway_namespace": "",
        "hashing": "none",
    }
    return ExposureArgs(**(defaults | fields))


# --- the builders ---------------------------------------------------------------------------------


def test_the_service_selects_the_graphs_frontend_pods_on_their_http_port() -> None:
    (service,) = exposure.exposure_objects(
        args(
            service_type="NodePort",
            service_annotations=("example.com/lb=internal",),
            source_ranges=("10.0.0.0/8",),
        ),
        NAMESPACE,
    )
    assert (service["kind"], service["metadata"]["name"]) == ("Service", f"{GRAPH}-frontend-public")
    assert len(service["metadata"]["name"]) <= 63
    assert service["metadata"]["namespace"] == NAMESPACE
    spec = service["spec"]
    assert spec["type"] == "NodePort"
    assert spec["selector"] == {
        "nvidia.com/dynamo-graph-deployment-name": GRAPH,
        "nvidia.com/dynamo-component-type": "frontend",
    }
    assert spec["ports"] == [
        {"name": "http", "port": 8000, "targetPort": "http", "protocol": "TCP"}
    ]
    assert spec["loadBalancerSourceRanges"] == ["10.0.0.0/8"]
    annotations = service["metadata"]["annotations"]
    assert annotations["example.com/lb"] == "internal"
    # The provider's wait ends once it exists: no load balancer answers in every cluster.
    assert annotations["pulumi.com/waitFor"] == "jsonpath={.metadata.uid}"


def test_the_ingress_sends_to_the_operators_service_with_host_class_and_tls() -> None:
    (ingress,) = exposure.exposure_objects(
        args(mode="ingress", ingress_class="nginx", host="reasoner.example.com", tls_secret="tls"),
        NAMESPACE,
    )
    assert ingress["apiVersion"] == "networking.k8s.io/v1"
    spec = ingress["spec"]
    assert spec["ingressClassName"] == "nginx"
    (rule,) = spec["rules"]
    assert rule["host"] == "reasoner.example.com"
    (path,) = rule["http"]["paths"]
    assert path["backend"] == {"service": {"name": OPERATOR_SERVICE, "port": {"number": 8000}}}
    assert spec["tls"] == [{"hosts": ["reasoner.example.com"], "secretName": "tls"}]
    assert exposure.NGINX_HASH_ANNOTATION not in ingress["metadata"]["annotations"]


def test_ingress_nginx_hashing_annotates_the_ingress_with_the_session_header() -> None:
    (ingress,) = exposure.exposure_objects(args(mode="ingress", hashing="ingress-nginx"), NAMESPACE)
    annotations = ingress["metadata"]["annotations"]
    assert (
        annotations["nginx.ingress.kubernetes.io/upstream-hash-by"] == "$http_x_dynamo_session_id"
    )
    assert "ingressClassName" not in ingress["spec"] and "tls" not in ingress["spec"]
    assert "host" not in ingress["spec"]["rules"][0]


def test_the_route_attaches_to_the_gateway_and_sends_to_the_operators_service() -> None:
    (route,) = exposure.exposure_objects(
        args(mode="httproute", gateway_name="public", gateway_namespace="gateways", host="a.b"),
        NAMESPACE,
    )
    assert (route["apiVersion"], route["kind"]) == ("gateway.networking.k8s.io/v1", "HTTPRoute")
    assert route["spec"] == {
        "hostnames": ["a.b"],
        "parentRefs": [{"name": "public", "namespace": "gateways"}],
        "rules": [{"backendRefs": [{"name": OPERATOR_SERVICE, "port": 8000}]}],
    }


def test_envoy_gateway_hashing_adds_a_consistent_hash_policy_on_the_route() -> None:
    route, policy = exposure.exposure_objects(
        args(mode="httproute", gateway_name="public", hashing="envoy-gateway"), NAMESPACE
    )
    assert "namespace" not in route["spec"]["parentRefs"][0]
    assert (policy["apiVersion"], policy["kind"]) == (
        "gateway.envoyproxy.io/v1alpha1",
        "BackendTrafficPolicy",
    )
    assert policy["spec"]["targetRefs"] == [
        {
            "group": "gateway.networking.k8s.io",
            "kind": "HTTPRoute",
            "name": route["metadata"]["name"],
        }
    ]
    assert policy["spec"]["loadBalancer"] == {
        "type": "ConsistentHash",
        "consistentHash": {"type": "Header", "header": {"name": "X-Dynamo-Session-ID"}},
    }


# --- config -------------------------------------------------------------------------------------


def settings(stack: str = "session-affinity", **overrides: Any) -> Any:
    return stack_settings(stack, **overrides)


def refusal(stack: str = "session-affinity", **overrides: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        settings(stack, **overrides)
    return str(caught.value)


def test_off_by_default_one_frontend_and_no_exposure() -> None:
    defaults = settings()
    assert defaults.frontend_replicas == 1
    assert defaults.frontend_exposure == "none"
    assert defaults.frontend_session_hashing == "none"


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"frontendExposure": "loadbalancer"}, f"{PROJECT}:frontendExposure: Input should be"),
        ({"frontendReplicas": 0}, f"{PROJECT}:frontendReplicas"),
        (
            {"frontendExposure": "service", "frontendServiceType": "ClusterIP"},
            f"{PROJECT}:frontendServiceType: Input should be 'LoadBalancer' or 'NodePort'",
        ),
        (
            {"frontendExposure": "service", "frontendLoadBalancerSourceRanges": ["10.0.0.1/8"]},
            f"{PROJECT}:frontendLoadBalancerSourceRanges[0]: must be a CIDR with no bits set",
        ),
        (
            {"frontendExposure": "service", "frontendLoadBalancerSourceRanges": ["10.0.0.1"]},
            f"{PROJECT}:frontendLoadBalancerSourceRanges[0]: must be a CIDR: an address",
        ),
        (
            {"frontendExposure": "service", "frontendServiceAnnotations": ["bad key=x"]},
            f"{PROJECT}:frontendServiceAnnotations[0]: key ",
        ),
        (
            {
                "frontendExposure": "service",
                "frontendServiceAnnotations": ["pulumi.com/skipAwait=x"],
            },
            "pulumi.com/ annotations are the program's own",
        ),
        (
            {"frontendExposure": "ingress", "frontendHost": "10.1.2.3"},
            f"{PROJECT}:frontendHost: must be a DNS name, not an IP address",
        ),
        (
            {"frontendExposure": "ingress", "frontendHost": "Reasoner.example.com"},
            f"{PROJECT}:frontendHost: must be a lowercase RFC 1123 subdomain",
        ),
        (
            {"frontendExposure": "ingress", "frontendHost": "a.*.example.com"},
            f"{PROJECT}:frontendHost: must be a wildcard DNS-1123 subdomain",
        ),
        (
            {"frontendExposure": "ingress", "frontendIngressClassName": "Nginx"},
            f"{PROJECT}:frontendIngressClassName: must be a lowercase RFC 1123 subdomain",
        ),
        (
            {"frontendExposure": "ingress", "frontendTlsSecret": "tls_secret"},
            f"{PROJECT}:frontendTlsSecret: must be a lowercase RFC 1123 subdomain",
        ),
        (
            ROUTE_ON | {"frontendGatewayNamespace": "gateways.example"},
            f"{PROJECT}:frontendGatewayNamespace: must be a lowercase RFC 1123 label",
        ),
        (
            {"frontendSessionHashing": "haproxy"},
            f"{PROJECT}:frontendSessionHashing: Input should be",
        ),
    ],
)
def test_exposure_values_are_refused_as_the_api_server_would_naming_the_key(
    overrides: dict[str, Any], expected: str
) -> None:
    assert expected in refusal(**overrides)


def test_accepted_values() -> None:
    ok = settings(
        frontendExposure="ingress",
        frontendHost="*.reasoner.example.com",
        frontendIngressClassName="nginx",
        frontendTlsSecret="reasoner-tls",
    )
    assert ok.frontend_host == "*.reasoner.example.com"
    route = settings(**ROUTE_ON, frontendGatewayNamespace="gateways", frontendHost="a.example.com")
    assert route.frontend_gateway_name == "public"
    service = settings(
        frontendExposure="service",
        frontendLoadBalancerSourceRanges=["203.0.113.0/24", "2001:db8::/32"],
    )
    assert service.frontend_load_balancer_source_ranges == ["203.0.113.0/24", "2001:db8::/32"]


def test_a_route_needs_its_gateway() -> None:
    message = refusal(frontendExposure="httproute")
    assert (
        f"{PROJECT}:frontendExposure is httproute without {PROJECT}:frontendGatewayName" in message
    )


def test_source_ranges_only_on_a_load_balancer() -> None:
    message = refusal(
        frontendExposure="service",
        frontendServiceType="NodePort",
        frontendLoadBalancerSourceRanges=["10.0.0.0/8"],
    )
    assert "takes source ranges only on a LoadBalancer Service" in message


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"frontendHost": "a.example.com"}, "frontendHost"),
        ({"frontendExposure": "service", "frontendTlsSecret": "tls"}, "frontendTlsSecret"),
        ({"frontendExposure": "ingress", "frontendGatewayName": "gw"}, "frontendGatewayName"),
        (ROUTE_ON | {"frontendServiceType": "NodePort"}, "frontendServiceType"),
    ],
)
def test_a_key_of_another_exposure_is_refused(overrides: dict[str, Any], named: str) -> None:
    message = refusal(**overrides)
    assert f"{PROJECT}:{named} set with {PROJECT}:frontendExposure=" in message
    assert "changes nothing" in message


@pytest.mark.parametrize(
    ("hashing", "needed"), [("ingress-nginx", "ingress"), ("envoy-gateway", "httproute")]
)
def test_hashing_needs_the_object_it_rides_on(hashing: str, needed: str) -> None:
    message = refusal(frontendSessionHashing=hashing, frontendExposure="service")
    assert f"{PROJECT}:frontendSessionHashing={hashing}" in message
    assert f"{PROJECT}:frontendExposure={needed} (it is service)" in message


def test_two_frontends_with_affinity_and_no_hashing_are_refused_saying_why() -> None:
    message = refusal(frontendReplicas=2)
    assert f"{PROJECT}:frontendReplicas=2 on the session-affinity profile" in message
    assert "X-Dynamo-Session-ID" in message
    assert "each frontend routes by its own session-to-worker table" in message
    assert "best-effort" in message and "dynamo-sync" in message
    assert "#11035" in message
    assert f"{PROJECT}:frontendSessionHashing" in message


@pytest.mark.parametrize(
    "overrides",
    [
        {"frontendSessionHashing": "external"},
        {"frontendSessionHashing": "ingress-nginx", "frontendExposure": "ingress"},
        ROUTE_ON | {"frontendSessionHashing": "envoy-gateway"},
    ],
)
def test_two_frontends_with_affinity_and_hashing_are_accepted(overrides: dict[str, Any]) -> None:
    assert settings(frontendReplicas=2, **overrides).frontend_replicas == 2


def test_round_robin_takes_any_frontend_count_without_hashing() -> None:
    assert settings("round-robin", frontendReplicas=3).frontend_replicas == 3


def test_exposure_on_a_stack_without_a_graph_is_refused() -> None:
    raw = cli_config("shared", example_site_for("shared") | {"frontendExposure": "service"})
    with pytest.raises(ConfigError, match=f"{PROJECT}:deployGraph is false"):
        parse_stack_config(raw, secret_keys={f"{PROJECT}:ngcApiKey"})


# --- the program ----------------------------------------------------------------------------------


def exposure_objects(run: ProgramRun) -> list[Any]:
    return [r for r in run.kubernetes_objects() if "FrontendExposure" in r.parent]


@pytest.mark.parametrize("stack", ["dev", "round-robin", "session-affinity"])
def test_off_by_default_nothing_exposed_one_frontend(run_stack: RunStack, stack: str) -> None:
    run = run_stack(stack)
    assert run.of_type("cosmos3:recipe:FrontendExposure") == []
    assert exposure_objects(run) == []
    frontend = run.one(DGD).inputs["spec"]["components"][0]
    assert frontend["replicas"] == 1
    assert "frontendReplicas" not in run.exports and "frontendExternalUrl" not in run.exports


@pytest.mark.parametrize(
    ("overrides", "types"),
    [
        ({"frontendExposure": "service"}, [SERVICE]),
        ({"frontendExposure": "ingress"}, [INGRESS]),
        (ROUTE_ON, [ROUTE]),
        (ROUTE_ON | {"frontendSessionHashing": "envoy-gateway"}, [ROUTE, POLICY]),
    ],
)
def test_each_exposure_creates_its_objects_in_the_graphs_namespace(
    run_stack: RunStack, overrides: dict[str, Any], types: list[str]
) -> None:
    run = run_stack("session-affinity", overrides)
    component = run.one("cosmos3:recipe:FrontendExposure")
    objects = exposure_objects(run)
    assert sorted(r.type for r in objects) == sorted(types)
    namespace = run.one(DGD).inputs["metadata"]["namespace"]
    for obj in objects:
        assert obj.parent == component.urn
        assert obj.inputs["metadata"]["namespace"] == namespace


def test_frontend_replicas_reach_the_graph_and_the_outputs(run_stack: RunStack) -> None:
    run = run_stack(
        "session-affinity",
        {
            "frontendReplicas": 3,
            "frontendExposure": "ingress",
            "frontendSessionHashing": "ingress-nginx",
            "frontendHost": "reasoner.example.com",
            "frontendTlsSecret": "reasoner-tls",
        },
    )
    assert run.one(DGD).inputs["spec"]["components"][0]["replicas"] == 3
    assert run.exports["frontendReplicas"] == 3
    assert run.exports["frontendExternalUrl"] == "https://reasoner.example.com"
    outputs = StackOutputs.model_validate(run.exports)
    assert outputs.frontends == 3


@pytest.mark.parametrize(
    ("overrides", "key", "crd"),
    [
        (ROUTE_ON, "frontendExposure", "httproutes.gateway.networking.k8s.io"),
        (
            ROUTE_ON | {"frontendSessionHashing": "envoy-gateway"},
            "frontendSessionHashing",
            "backendtrafficpolicies.gateway.envoyproxy.io",
        ),
    ],
)
def test_missing_crds_are_refused_at_preview_naming_the_key(
    run_stack: RunStack, overrides: dict[str, Any], key: str, crd: str
) -> None:
    cluster = MockCluster({("CustomResourceDefinition", crd): None})
    with pytest.raises(RunError) as caught:
        run_stack("session-affinity", overrides, cluster=cluster, preview=True)
    message = str(caught.value)
    assert f"{PROJECT}:{key} is {overrides[key]} but the cluster has no {crd} CRD" in message
    assert "\n" not in message


def test_a_cluster_that_cannot_be_read_is_not_refused(run_stack: RunStack) -> None:
    class Unreadable(MockCluster):
        def metadata(self, ref: Any) -> dict[str, Any] | None:
            raise LiveReadError("no credentials")

    run = run_stack("session-affinity", ROUTE_ON, cluster=Unreadable(), preview=True)
    assert [r.type for r in exposure_objects(run)] == [ROUTE]


# --- outputs and the A/B --------------------------------------------------------------------------


def test_the_external_url_is_known_only_for_an_ingress_with_a_host() -> None:
    from components.outputs import external_url

    assert external_url("ingress", "a.example.com", "") == "http://a.example.com"
    assert external_url("ingress", "a.example.com", "tls") == "https://a.example.com"
    assert external_url("ingress", "", "") is None
    assert external_url("ingress", "*.example.com", "") is None
    assert external_url("httproute", "a.example.com", "") is None
    assert external_url("service", "", "") is None


def contract(**fields: Any) -> StackOutputs:
    url = f"http://{OPERATOR_SERVICE}.{NAMESPACE}.svc.cluster.local:8000"
    base: dict[str, Any] = {
        "namespace": NAMESPACE,
        "profile": "session-affinity",
        "graphName": GRAPH,
        "frontendService": OPERATOR_SERVICE,
        "frontendPort": 8000,
        "frontendUrl": url,
        "modelsUrl": f"{url}/v1/models",
        "servedModel": "nvidia/cosmos3-nano-reasoner",
        "sessionAffinityTtlSeconds": 300,
        "sessionHeader": "X-Dynamo-Session-ID",
        "workerReplicas": 8,
    }
    return StackOutputs.model_validate(base | fields)


def test_the_ab_refuses_two_frontends_with_affinity() -> None:
    with pytest.raises(UsageError) as caught:
        refuse_unhashed_frontends(contract(frontendReplicas=2), "session-affinity")
    message = str(caught.value)
    assert "2 frontend replicas with session affinity" in message
    assert "would be round robin's" in message
    assert f"{PROJECT}:frontendReplicas 1" in message


def test_the_ab_takes_one_frontend_or_round_robin() -> None:
    refuse_unhashed_frontends(contract(), "session-affinity")
    round_robin = contract(
        profile="round-robin",
        sessionAffinityTtlSeconds=None,
        sessionHeader=None,
        frontendReplicas=4,
    )
    refuse_unhashed_frontends(round_robin, "round-robin")


def test_outputs_without_the_new_keys_still_load() -> None:
    outputs = contract()
    assert outputs.frontends == 1 and outputs.frontend_external_url is None
    with pytest.raises(ValueError, match="frontendExternalUrl"):
        contract(frontendExternalUrl="ftp://x")


def test_two_frontends_relying_on_dynamos_sync_are_accepted_and_create_nothing_more(
    run_stack: Any,
) -> None:
    accepted = settings(frontendReplicas=2, frontendSessionHashing="dynamo-sync")
    assert (accepted.frontend_replicas, accepted.frontend_session_hashing) == (2, "dynamo-sync")
    run = run_stack(
        "session-affinity", {"frontendReplicas": 2, "frontendSessionHashing": "dynamo-sync"}
    )
    created = {resource.type for resource in run.resources}
    assert not any(
        "Ingress" in t or "HTTPRoute" in t or "BackendTrafficPolicy" in t for t in created
    )
