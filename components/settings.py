"""Stack settings: every key declared in `Pulumi.yaml`, as one frozen, validated `StackSettings`.

Each value is checked against the rule of the Kubernetes field it lands in (`components.k8s_values`,
through `components.config_rules`), so config the program accepts is config the API server
accepts; the checks across keys (`_CROSS_CHECKS`) run on every key that validated, even when others
did not. `components.config_parser.parse_stack_config` builds it. No Pulumi import.

Over 300 lines: every key's typed field and every check across keys, one place a reader opens to
learn what stack config the program accepts; each feature's keys and checks are one block.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from components import names
from components.config_rules import (
    Affinity,
    ClassName,
    Command,
    ContextName,
    Count,
    DnsLabel,
    ExtraEnv,
    GpuCount,
    Image,
    MaxUnavailable,
    MonitoringLabels,
    NimProfile,
    NodeSelector,
    OptionalDnsLabel,
    OptionalSecretName,
    OptionalSubdomain,
    OwnNamespace,
    Path,
    PublicHost,
    Quantity,
    RegistryServer,
    RegistryUsername,
    RestartId,
    RuntimeVersion,
    SchedulerName,
    SecretKey,
    ServiceAnnotations,
    SourceRanges,
    StackReference,
    StorageClass,
    Tolerations,
    WorkerGpus,
    WorkerReplicas,
)
from components.routing import (
    MAX_AFFINITY_TTL_SECONDS,
    MIN_AFFINITY_TTL_SECONDS,
    SESSION_HEADER,
    Routing,
    RoutingProfile,
    routing_for,
)

PROJECT = "cosmos3-nano-reasoner"
SECRET_KEYS = frozenset({"ngcApiKey", "registryPassword"})
"""Config keys that must be set with `pulumi config set --secret`; their values never enter settings."""
QUIET_KEYS = frozenset(
    {"workerExtraEnv", "modelDownloadCommand", "registryUsername", "kubeconfigPath"}
)
"""Keys whose values a refusal never shows: an env value or a command may hold a secret, a user
name or a path is nobody else's business. Every other key's value is shown when it is short."""


MAX_TTFT_ALERT_SECONDS = 3600
"""A time to first token over an hour is a typo, not a threshold."""


class StackSettings(BaseModel):
    """Validated stack config; field aliases are the config keys of `Pulumi.yaml`."""

    model_config = ConfigDict(
        alias_generator=to_camel, frozen=True, extra="forbid", validate_by_name=True
    )

    # Cluster access: an explicit provider, never the current kubeconfig context.
    kube_context: ContextName
    kubeconfig_path: Path

    # Layering: a self-contained stack, or a profile stack on a shared layer stack.
    shared_stack: StackReference
    deploy_graph: bool

    namespace: OwnNamespace
    create_namespace: bool

    registry_server: RegistryServer
    registry_username: RegistryUsername

    model_cache_claim: DnsLabel
    model_cache_mode: Literal["create", "existing"]
    model_cache_storage_class: StorageClass
    model_cache_size: Quantity

    model_download: bool
    model_download_command: Command
    model_download_gpus: GpuCount
    model_download_timeout_seconds: Count

    profile: RoutingProfile
    session_affinity_ttl_seconds: Annotated[
        int, Field(ge=MIN_AFFINITY_TTL_SECONDS, le=MAX_AFFINITY_TTL_SECONDS)
    ]
    graph_ready_timeout_seconds: Count
    graph_update_timeout_seconds: Count

    frontend_image: Image
    worker_image: Image
    worker_dynamo_runtime_version: RuntimeVersion
    worker_replicas: WorkerReplicas
    worker_gpus: WorkerGpus
    worker_cpu: Quantity
    worker_memory: Quantity
    worker_shared_memory_size: Quantity
    worker_node_selector: NodeSelector
    worker_tolerations: Tolerations
    worker_extra_env: ExtraEnv
    nim_model_profile: NimProfile

    # Monitoring of the graph (components/monitoring.py): off unless asked for.
    monitoring: bool
    monitoring_kind: Literal["PodMonitor", "ServiceMonitor"]
    monitoring_labels: MonitoringLabels
    monitoring_ttft_seconds_alert: Annotated[int, Field(ge=1, le=MAX_TTFT_ALERT_SECONDS)]
    monitoring_dashboard: bool

    # Restart and autoscaler-owned replicas (docs/day-two.md): off unless asked for.
    graph_restart_id: RestartId
    graph_restart_strategy: Literal["Sequential", "Parallel"]
    worker_autoscaling: bool
    worker_min_replicas: WorkerReplicas
    worker_max_replicas: WorkerReplicas
    # Placement (issue 32), beside workerNodeSelector and workerTolerations; empty: not set. An
    # empty download field takes the workers' value (`components.recipe_args.download_placement`).
    worker_affinity: Affinity
    worker_priority_class_name: ClassName
    worker_runtime_class_name: ClassName
    worker_scheduler_name: SchedulerName
    frontend_node_selector: NodeSelector
    frontend_tolerations: Tolerations
    frontend_affinity: Affinity
    frontend_priority_class_name: ClassName
    frontend_runtime_class_name: ClassName
    frontend_scheduler_name: SchedulerName
    model_download_node_selector: NodeSelector
    model_download_tolerations: Tolerations
    model_download_affinity: Affinity
    model_download_priority_class_name: ClassName
    model_download_runtime_class_name: ClassName
    model_download_scheduler_name: SchedulerName
    # The frontend beyond the cluster, and its replicas (components/exposure.py): one replica
    # behind the operator's ClusterIP Service unless asked.
    frontend_replicas: Count
    frontend_exposure: Literal["none", "service", "ingress", "httproute"]
    frontend_service_type: Literal["LoadBalancer", "NodePort"]
    frontend_load_balancer_source_ranges: SourceRanges
    frontend_service_annotations: ServiceAnnotations
    frontend_ingress_class_name: OptionalSubdomain
    frontend_host: PublicHost
    frontend_tls_secret: OptionalSubdomain
    frontend_gateway_name: OptionalSubdomain
    frontend_gateway_namespace: OptionalDnsLabel
    frontend_session_hashing: Literal[
        "none", "ingress-nginx", "envoy-gateway", "external", "dynamo-sync"
    ]
    # The workers' disruption budget (components/disruption_budget.py), and Secrets the cluster's
    # own store keeps, used instead of created (components/secrets.py).
    worker_max_unavailable: MaxUnavailable
    ngc_api_key_from: OptionalSecretName
    ngc_api_key_from_field: SecretKey
    image_pull_from: OptionalSecretName
    ngc_api_key_needed: bool

    @property
    def routing(self) -> Routing:
        return routing_for(self.profile, self.session_affinity_ttl_seconds)

    @property
    def uses_shared_layer(self) -> bool:
        """Namespace, secrets and model cache belong to another stack, which creates them."""
        return bool(self.shared_stack)

    @property
    def manages_secrets(self) -> bool:
        return not self.uses_shared_layer

    @property
    def manages_model_cache(self) -> bool:
        return not self.uses_shared_layer and self.model_cache_mode == "create"

    @property
    def uses_registry_mirror(self) -> bool:
        return bool(self.registry_server)

    @property
    def creates_ngc_secret(self) -> bool:
        """The NGC key comes from `ngcApiKey`, into the Secret this stack creates; otherwise
        from the existing Secret `ngcApiKeyFrom` (never created, changed or deleted here), or
        there is none (`ngcApiKeyNeeded` false)."""
        return self.manages_secrets and self.ngc_api_key_needed and not self.ngc_api_key_from


def qualified_stack_name(name: str, organization: str, project: str) -> str:
    """`<org>/<project>/<stack>` for a short or qualified stack name.

    A short name takes the organization and project of the stack being deployed: on Pulumi Cloud
    that is the stack's real organization, on a DIY backend always `organization` (the only one
    it has), so one stack file works on both. The CLI would resolve a short name to the user's
    *default* organization instead (httpstate `ParseStackReference`), which need not be the
    stack's own; qualifying it here removes that ambiguity.
    """
    return name if "/" in name else f"{organization}/{project}/{name}"


@dataclass(frozen=True)
class CrossCheck:
    """A rule across keys; it runs when every field it `needs` validated."""

    needs: frozenset[str]
    check: Callable[[StackSettings], str | None]


def _storage_class_needed(s: StackSettings) -> str | None:
    if s.manages_model_cache and not s.model_cache_storage_class:
        return (
            f"{config_key('modelCacheStorageClass')} is required when this stack creates the model "
            f"cache: set a ReadWriteMany-capable class (`pulumi config set "
            f"{config_key('modelCacheStorageClass')} <class>`), or set "
            f"{config_key('modelCacheMode')}=existing to keep a cache that already exists"
        )
    return None


def _registry_credentials(s: StackSettings) -> str | None:
    if s.registry_server and not s.registry_username:
        return (
            f"{config_key('registryServer')} is set without {config_key('registryUsername')}: set "
            "the username and the registryPassword secret, or unset registryServer when images "
            "come from nvcr.io"
        )
    if s.registry_username and not s.registry_server:
        return (
            f"{config_key('registryUsername')} is set without {config_key('registryServer')}: "
            "set the mirror's server"
        )
    return None


LAYER_KEYS = (
    "namespace",
    "createNamespace",
    "registryServer",
    "registryUsername",
    "modelCacheClaim",
    "modelCacheMode",
    "modelCacheStorageClass",
    "modelCacheSize",
    "modelDownload",
    "modelDownloadCommand",
    "modelDownloadGpus",
    "modelDownloadTimeoutSeconds",
    "modelDownloadNodeSelector",
    "modelDownloadTolerations",
    "modelDownloadAffinity",
    "modelDownloadPriorityClassName",
    "modelDownloadRuntimeClassName",
    "modelDownloadSchedulerName",
    "ngcApiKeyFrom",
    "ngcApiKeyFromField",
    "imagePullFrom",
    "ngcApiKeyNeeded",
)
"""What only the stack that owns the layer uses: a profile stack reads the layer from its
`sharedStack` instead, so one of these set there would change nothing (`components.config_parser`
refuses it)."""


def _shared_layer_and_no_graph(s: StackSettings) -> str | None:
    if s.uses_shared_layer and not s.deploy_graph:
        return (
            f"{config_key('sharedStack')} is set and {config_key('deployGraph')} is false: "
            "this stack would deploy nothing"
        )
    return None


def _monitoring_without_graph(s: StackSettings) -> str | None:
    if s.monitoring and not s.deploy_graph:
        return (
            f"{config_key('monitoring')} is true and {config_key('deployGraph')} is false: the "
            "monitoring objects watch a graph; set monitoring on the profile stacks that deploy one"
        )
    return None


def _graph_keys_without_graph(s: StackSettings) -> str | None:
    asked = [
        key
        for key, used in (
            ("graphRestartId", bool(s.graph_restart_id)),
            ("workerAutoscaling", s.worker_autoscaling),
        )
        if used
    ]
    if asked and not s.deploy_graph:
        return (
            f"{', '.join(config_key(key) for key in asked)} set and {config_key('deployGraph')} "
            "is false: they act on a graph; set them on the profile stacks that deploy one"
        )
    return None


def _autoscaling_bounds(s: StackSettings) -> str | None:
    if s.worker_autoscaling and s.worker_min_replicas > s.worker_max_replicas:
        return (
            f"{config_key('workerMinReplicas')} ({s.worker_min_replicas}) is above "
            f"{config_key('workerMaxReplicas')} ({s.worker_max_replicas}): the autoscaler's "
            "bounds need min <= max; raise the maximum or lower the minimum"
        )
    return None


_PLACEMENT = (
    "node_selector tolerations affinity priority_class_name runtime_class_name scheduler_name"
)
FRONTEND_PLACEMENT_FIELDS = frozenset(f"frontend_{field}" for field in _PLACEMENT.split())


def _frontend_placement_without_graph(s: StackSettings) -> str | None:
    placed = sorted(name for name in FRONTEND_PLACEMENT_FIELDS if getattr(s, name))
    if placed and not s.deploy_graph:
        keys = ", ".join(config_key(to_camel(name)) for name in placed)
        return (
            f"{keys} set with {config_key('deployGraph')} false: the frontend is part of the "
            "graph; set its placement on the profile stacks that deploy one"
        )
    return None


# --- frontend exposure and replicas -------------------------------------------------------------

EXPOSURE_KEYS = {
    "service": (
        "frontendServiceType",
        "frontendLoadBalancerSourceRanges",
        "frontendServiceAnnotations",
    ),
    "ingress": ("frontendIngressClassName", "frontendTlsSecret"),
    "httproute": ("frontendGatewayName", "frontendGatewayNamespace"),
}
"""The keys only one exposure uses (frontendHost serves ingress and httproute)."""
HASHING_NEEDS = {"ingress-nginx": "ingress", "envoy-gateway": "httproute"}
"""Hashing that this program declares rides on the object of one exposure."""


def _field(key: str) -> str:
    return next(name for name, f in StackSettings.model_fields.items() if f.alias == key)


def _keys_of_other_exposures(s: StackSettings) -> str | None:
    defaults = {"frontendServiceType": "LoadBalancer"}
    unused = [
        key
        for mode, keys in EXPOSURE_KEYS.items()
        if mode != s.frontend_exposure
        for key in keys
        if getattr(s, _field(key)) not in ("", [], defaults.get(key))
    ]
    if s.frontend_host and s.frontend_exposure not in ("ingress", "httproute"):
        unused.insert(0, "frontendHost")
    if not unused:
        return None
    listed = ", ".join(config_key(key) for key in unused)
    return (
        f"{listed} set with {config_key('frontendExposure')}={s.frontend_exposure}, where it "
        "changes nothing: set the exposure that uses it (docs/deploying.md, Exposing the "
        "frontend), or `pulumi config rm` it"
    )


def _exposure_needs(s: StackSettings) -> str | None:
    if s.frontend_exposure == "httproute" and not s.frontend_gateway_name:
        return (
            f"{config_key('frontendExposure')} is httproute without "
            f"{config_key('frontendGatewayName')}: name the Gateway the route attaches to "
            f"(`pulumi config set {config_key('frontendGatewayName')} <gateway>`)"
        )
    ranges = s.frontend_load_balancer_source_ranges
    if s.frontend_exposure == "service" and ranges and s.frontend_service_type != "LoadBalancer":
        # core/validation: "may only be used when `type` is 'LoadBalancer'".
        return (
            f"{config_key('frontendLoadBalancerSourceRanges')} is set with "
            f"{config_key('frontendServiceType')}={s.frontend_service_type}: the API server takes "
            "source ranges only on a LoadBalancer Service; set the type LoadBalancer or remove them"
        )
    return None


def _hashing_needs_its_exposure(s: StackSettings) -> str | None:
    needed = HASHING_NEEDS.get(s.frontend_session_hashing)
    if needed is None or s.frontend_exposure == needed:
        return None
    made = "annotates the Ingress" if needed == "ingress" else "attaches a policy to the HTTPRoute"
    return (
        f"{config_key('frontendSessionHashing')}={s.frontend_session_hashing} {made} this "
        f"program creates, so it needs {config_key('frontendExposure')}={needed} (it is "
        f"{s.frontend_exposure}); or set frontendSessionHashing external when your own load "
        "balancer hashes"
    )


def _replicas_need_hashing(s: StackSettings) -> str | None:
    if s.frontend_replicas == 1 or s.profile is not RoutingProfile.SESSION_AFFINITY:
        return None  # round robin: any number of frontends routes alike
    if s.frontend_session_hashing != "none":
        return None
    return (
        f"{config_key('frontendReplicas')}={s.frontend_replicas} on the session-affinity profile "
        f"needs consistent hashing on {SESSION_HEADER} in front of the frontends: each frontend "
        "routes by its own session-to-worker table, which Dynamo synchronises across replicas "
        "only best-effort (1.6.1 does, measured on the lab; whether the NIM's bundled runtime "
        "does is UNCERTAIN, and ai-dynamo/dynamo #11035, #11217, #10883 reported affinity lost), "
        "so without hashing a session's requests may meet several tables and reach several "
        f"workers. Set {config_key('frontendSessionHashing')} (ingress-nginx, envoy-gateway, "
        "external for your own load balancer, or dynamo-sync to rely on Dynamo's sync), or "
        f"{config_key('frontendReplicas')}=1. The round-robin profile takes any replica count"
    )


def _exposure_without_graph(s: StackSettings) -> str | None:
    if s.deploy_graph or (s.frontend_exposure == "none" and s.frontend_replicas == 1):
        return None
    return (
        f"{config_key('frontendExposure')} or {config_key('frontendReplicas')} is set and "
        f"{config_key('deployGraph')} is false: they concern a graph's frontend; set them on the "
        "profile stacks that deploy one"
    )


_EXPOSURE_FIELDS = frozenset(
    {_field(key) for keys in EXPOSURE_KEYS.values() for key in keys}
    | {"frontend_exposure", "frontend_host"}
)

# --- disruption budget and existing Secrets ---------------------------------------------------


def _budget_against_replicas(s: StackSettings) -> str | None:
    """A budget of 0 (or 0%) lets no worker be evicted: every node drain waits on it forever,
    so it is refused, not warned about. One over the replica count is a typo."""
    budget = s.worker_max_unavailable
    key = config_key("workerMaxUnavailable")
    if budget and int(budget.rstrip("%")) == 0:  # the field rule let only N or N% through
        return (
            f"{key} is {budget!r}: a budget that lets no worker go blocks every node drain (and "
            "cluster upgrade) forever; set 1 (one worker at a time), or '' for no budget"
        )
    if budget.isdigit() and int(budget) > s.worker_replicas:
        return (
            f"{key} is {budget}, more than {config_key('workerReplicas')} "
            f"({s.worker_replicas}): set at most {s.worker_replicas}"
        )
    return None


def _existing_secrets(s: StackSettings) -> str | None:
    if s.image_pull_from and (s.registry_server or s.registry_username):
        return (
            f"{config_key('imagePullFrom')} is set together with {config_key('registryServer')}"
            f"/{config_key('registryUsername')}: use the existing pull secret, or let this stack "
            "create one from the registry keys, not both"
        )
    if s.uses_registry_mirror and not s.creates_ngc_secret and not s.uses_shared_layer:
        where = (
            f"{config_key('ngcApiKeyFrom')} is set"
            if s.ngc_api_key_needed
            else f"{config_key('ngcApiKeyNeeded')} is false"
        )
        return (
            f"{where} with {config_key('registryServer')}: the mirror's credentials then come "
            f"from an existing pull secret too (`pulumi config set "
            f"{config_key('imagePullFrom')} <secret>`): the workers' credentials digest "
            "is keyed with the NGC key from ngcApiKey, without which a weak registry password "
            "could be guessed from it"
        )
    default_key = names.NGC_SECRET_KEY
    if s.ngc_api_key_from_field != default_key and not s.ngc_api_key_from:
        return (
            f"{config_key('ngcApiKeyFromField')} is set without {config_key('ngcApiKeyFrom')}, "
            f"where it changes nothing (the created Secret's key is {default_key}): set the "
            f"Secret's name too, or `pulumi config rm {config_key('ngcApiKeyFromField')}`"
        )
    return None


def _without_ngc_key(s: StackSettings) -> str | None:
    """No NGC key only where nothing downloads: a cache that exists, filled, and no download."""
    if s.ngc_api_key_needed:
        return None
    key = config_key("ngcApiKeyNeeded")
    if s.ngc_api_key_from:
        return (
            f"{key} is false and {config_key('ngcApiKeyFrom')} names a Secret for it: "
            "unset one of them"
        )
    if s.model_download or s.model_cache_mode != "existing":
        return (
            f"{key} is false, but something downloads the model with the key: set "
            f"{config_key('modelDownload')}=false and {config_key('modelCacheMode')}=existing "
            "for a cache that is filled already (the workers download into an empty one)"
        )
    return None


_CROSS_CHECKS = (
    CrossCheck(
        frozenset({"shared_stack", "model_cache_mode", "model_cache_storage_class"}),
        _storage_class_needed,
    ),
    CrossCheck(frozenset({"registry_server", "registry_username"}), _registry_credentials),
    CrossCheck(frozenset({"shared_stack", "deploy_graph"}), _shared_layer_and_no_graph),
    CrossCheck(frozenset({"monitoring", "deploy_graph"}), _monitoring_without_graph),
    CrossCheck(
        frozenset({"graph_restart_id", "worker_autoscaling", "deploy_graph"}),
        _graph_keys_without_graph,
    ),
    CrossCheck(
        frozenset({"worker_autoscaling", "worker_min_replicas", "worker_max_replicas"}),
        _autoscaling_bounds,
    ),
    CrossCheck(FRONTEND_PLACEMENT_FIELDS | {"deploy_graph"}, _frontend_placement_without_graph),
    CrossCheck(_EXPOSURE_FIELDS, _keys_of_other_exposures),
    CrossCheck(_EXPOSURE_FIELDS, _exposure_needs),
    CrossCheck(
        frozenset({"frontend_session_hashing", "frontend_exposure"}), _hashing_needs_its_exposure
    ),
    CrossCheck(
        frozenset({"frontend_replicas", "profile", "frontend_session_hashing"}),
        _replicas_need_hashing,
    ),
    CrossCheck(
        frozenset({"frontend_exposure", "frontend_replicas", "deploy_graph"}),
        _exposure_without_graph,
    ),
    CrossCheck(frozenset({"worker_max_unavailable", "worker_replicas"}), _budget_against_replicas),
    CrossCheck(
        frozenset(
            {
                "image_pull_from",
                "registry_server",
                "registry_username",
                "ngc_api_key_from",
                "ngc_api_key_from_field",
                "ngc_api_key_needed",
                "shared_stack",
            }
        ),
        _existing_secrets,
    ),
    CrossCheck(
        frozenset({"ngc_api_key_needed", "ngc_api_key_from", "model_download", "model_cache_mode"}),
        _without_ngc_key,
    ),
)


def cross_check_problems(settings: StackSettings, unvalidated: Collection[str] = ()) -> list[str]:
    """The problems across keys, skipping each check that needs a field in `unvalidated` (field
    names; `settings` may then be partial, built from the fields that validated)."""
    return [
        problem
        for cross_check in _CROSS_CHECKS
        if not cross_check.needs & set(unvalidated)
        and (problem := cross_check.check(settings)) is not None
    ]


def config_key(name: str) -> str:
    """The fully qualified config key, as users type it in `pulumi config set`."""
    return f"{PROJECT}:{name}"
