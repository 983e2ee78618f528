"""Frontend exposure, opt in (`frontendExposure`): the graph's frontend reached from outside the
cluster through a Service of our own, an Ingress or a Gateway API HTTPRoute, and the consistent
hashing on the session header that more than one frontend replica needs (`frontendSessionHashing`).
Pure builders, then the component; docs/deploying.md, "Exposing the frontend", says what each
creates and what cannot be verified here.

Our Service selects the graph's frontend pods by the labels the Dynamo operator puts on them (its
`graph.go` `generateLabels`) and targets their port `http`; the Ingress and the HTTPRoute send to
the operator's own frontend Service, `<graph>-frontend` port 8000 (`names.FRONTEND_PORT`). Why
hashing: each frontend process keeps its own session-to-worker table, synchronised across replicas
only best-effort (Dynamo 1.6.1 does; the NIM's bundled runtime UNCERTAIN), so two frontends behind a
balancer that spreads requests may split one session between two tables (ai-dynamo/dynamo #11035,
#11217, #10883). `dynamo-sync` relies on the synchronisation instead (docs/lab.md measured it).
"""

from __future__ import annotations

from functools import partial

import pulumi

from components import names
from components.args import ExposureArgs
from components.drift import resource_of
from components.layer_manifests import Manifest, SharedLayer, kube_object
from components.live import Live, missing_crds
from components.routing import SESSION_HEADER
from components.settings import config_key

GATEWAY_API_VERSION = "gateway.networking.k8s.io/v1"
HTTP_ROUTE_CRD = "httproutes.gateway.networking.k8s.io"
ENVOY_API_VERSION = "gateway.envoyproxy.io/v1alpha1"
BACKEND_TRAFFIC_POLICY_CRD = "backendtrafficpolicies.gateway.envoyproxy.io"
NGINX_HASH_ANNOTATION = "nginx.ingress.kubernetes.io/upstream-hash-by"
NGINX_SESSION_VARIABLE = "$http_" + SESSION_HEADER.lower().replace("-", "_")
"""ingress-nginx names a request header `$http_<name>`, lowercase, `-` as `_`."""
COMPONENT = "frontend-exposure"

# The provider's own wait ends when the object exists: no load balancer, ingress controller or
# ready frontend pod need answer first (none runs in the local cluster; a real one may take
# minutes to assign an address, which `kubectl get` shows).
_ANNOTATIONS = names.object_annotations(**names.PROVIDER_WAIT_ENDS_AT_ONCE)


def _backend(args: ExposureArgs) -> tuple[str, int]:
    """The operator's frontend Service and its port: where the Ingress and the route send."""
    return names.frontend_service(args.graph), names.FRONTEND_PORT


def public_service(args: ExposureArgs, namespace: str) -> Manifest:
    """A LoadBalancer or NodePort Service of the graph's frontend pods."""
    spec: Manifest = {
        "type": args.service_type,
        "selector": {names.GRAPH_LABEL: args.graph, names.COMPONENT_TYPE_LABEL: "frontend"},
        "ports": [
            {"name": "http", "port": names.FRONTEND_PORT, "targetPort": "http", "protocol": "TCP"}
        ],
    }
    if args.source_ranges:
        spec["loadBalancerSourceRanges"] = list(args.source_ranges)
    user = dict(item.split("=", 1) for item in args.service_annotations)
    name = names.frontend_public_service(args.graph)
    return kube_object("v1", "Service", name, namespace, COMPONENT, user | _ANNOTATIONS, spec=spec)


def ingress(args: ExposureArgs, namespace: str) -> Manifest:
    """An Ingress to the operator's frontend Service; with ingress-nginx hashing, the annotation
    that makes the controller pick the frontend by the session header."""
    service, port = _backend(args)
    path = {
        "path": "/",
        "pathType": "Prefix",
        "backend": {"service": {"name": service, "port": {"number": port}}},
    }
    rule: Manifest = {"http": {"paths": [path]}}
    if args.host:
        rule = {"host": args.host} | rule
    spec: Manifest = {"rules": [rule]}
    if args.ingress_class:
        spec = {"ingressClassName": args.ingress_class} | spec
    if args.tls_secret:
        tls: Manifest = {"secretName": args.tls_secret}
        if args.host:
            tls = {"hosts": [args.host]} | tls
        spec["tls"] = [tls]
    annotations = dict(_ANNOTATIONS)
    if args.hashing == "ingress-nginx":
        annotations[NGINX_HASH_ANNOTATION] = NGINX_SESSION_VARIABLE
    name = names.frontend_service(args.graph)
    return kube_object(
        "networking.k8s.io/v1", "Ingress", name, namespace, COMPONENT, annotations, spec=spec
    )


def http_route(args: ExposureArgs, namespace: str) -> Manifest:
    """A Gateway API HTTPRoute from the named Gateway to the operator's frontend Service."""
    service, port = _backend(args)
    parent = {"name": args.gateway_name}
    if args.gateway_namespace:
        parent["namespace"] = args.gateway_namespace
    spec: Manifest = {
        "parentRefs": [parent],
        "rules": [{"backendRefs": [{"name": service, "port": port}]}],
    }
    if args.host:
        spec = {"hostnames": [args.host]} | spec
    name = names.frontend_service(args.graph)
    return kube_object(
        GATEWAY_API_VERSION, "HTTPRoute", name, namespace, COMPONENT, _ANNOTATIONS, spec=spec
    )


def backend_traffic_policy(args: ExposureArgs, namespace: str) -> Manifest:
    """Envoy Gateway's BackendTrafficPolicy on our HTTPRoute: consistent hashing on the session
    header, so one session's requests reach one frontend (field names: Envoy Gateway's load
    balancing task, docs/deploying.md)."""
    spec = {
        "targetRefs": [
            {
                "group": GATEWAY_API_VERSION.split("/")[0],
                "kind": "HTTPRoute",
                "name": names.frontend_service(args.graph),
            }
        ],
        "loadBalancer": {
            "type": "ConsistentHash",
            "consistentHash": {"type": "Header", "header": {"name": SESSION_HEADER}},
        },
    }
    name = f"{names.frontend_service(args.graph)}-session-hash"
    return kube_object(
        ENVOY_API_VERSION,
        "BackendTrafficPolicy",
        name,
        namespace,
        COMPONENT,
        _ANNOTATIONS,
        spec=spec,
    )


def exposure_objects(args: ExposureArgs, namespace: str) -> list[Manifest]:
    """Every object the exposure creates, in the order they are registered."""
    if args.mode == "service":
        return [public_service(args, namespace)]
    if args.mode == "ingress":
        return [ingress(args, namespace)]
    route = [http_route(args, namespace)]
    if args.hashing == "envoy-gateway":
        route.append(backend_traffic_policy(args, namespace))
    return route


def require_crds(live: Live, exposure: str, hashing: str) -> None:
    """Refuse, before anything is created, a cluster without the CRDs of what the exposure
    creates (as `components.monitoring.require_crds`)."""
    wanted = []
    if exposure == "httproute":
        fix = "or expose it another way (service, ingress)"
        wanted.append(("frontendExposure", exposure, HTTP_ROUTE_CRD, "the Gateway API's", fix))
    if hashing == "envoy-gateway":
        fix = "or set it external if another balancer hashes"
        wanted.append(
            ("frontendSessionHashing", hashing, BACKEND_TRAFFIC_POLICY_CRD, "Envoy Gateway's", fix)
        )
    for key, value, crd, whose, fix in wanted:
        if missing_crds(live, [crd]):
            raise pulumi.RunError(
                f"{config_key(key)} is {value} but the cluster has no {crd} CRD: install "
                f"{whose} CRDs (docs/deploying.md, Exposing the frontend), {fix}"
            )


class FrontendExposure(pulumi.ComponentResource):
    """The frontend's Service, Ingress or HTTPRoute (and its hashing policy)."""

    def __init__(
        self,
        name: str,
        args: ExposureArgs,
        layer: pulumi.Input[SharedLayer],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("cosmos3:recipe:FrontendExposure", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        namespace = pulumi.Output.from_input(layer).apply(lambda plain: plain.namespace)
        # The kinds are known from the args alone; each object's namespace comes with the layer.
        for index, shape in enumerate(exposure_objects(args, "")):
            manifest = namespace.apply(partial(_object, args, index))
            resource_of(f"{name}-{shape['kind'].lower()}", shape, manifest, child)
        self.register_outputs({})


def _object(args: ExposureArgs, index: int, namespace: str) -> Manifest:
    return exposure_objects(args, namespace)[index]
