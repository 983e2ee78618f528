"""Stack settings: every key declared in `Pulumi.yaml`, as one frozen, validated `StackSettings`.

Each value is checked against the rule of the Kubernetes field it lands in (`components.k8s_values`,
through `components.config_rules`), so config the program accepts is config the API server
accepts; the checks across keys (`components.config_checks`) run on every key that validated,
even when others did not. `components.config_parser.parse_stack_config` builds it. No Pulumi
import.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from components.config_rules import (
    Affinity,
    AffinityTtl,
    ClaimName,
    Command,
    ContextName,
    Count,
    ExtraEnv,
    FrontendImage,
    GpuCount,
    Image,
    MaxUnavailable,
    MonitoringLabels,
    NimProfile,
    NodeSelector,
    OptionalDnsLabel,
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
    Tolerations,
    WorkerGpus,
    WorkerReplicas,
)
from components.routing import Routing, RoutingProfile, routing_for

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

    model_cache_claim: ClaimName
    model_cache_mode: Literal["create", "existing"]
    model_cache_storage_class: OptionalSubdomain
    model_cache_size: Quantity

    model_download: bool
    model_download_command: Command
    model_download_gpus: GpuCount
    model_download_timeout_seconds: Count

    profile: RoutingProfile
    session_affinity_ttl_seconds: AffinityTtl
    graph_ready_timeout_seconds: Count
    graph_update_timeout_seconds: Count

    frontend_image: FrontendImage
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
    # empty download field takes the workers' value (`components.recipe_args.download_args`).
    worker_affinity: Affinity
    worker_priority_class_name: OptionalSubdomain
    worker_runtime_class_name: OptionalSubdomain
    worker_scheduler_name: SchedulerName
    frontend_node_selector: NodeSelector
    frontend_tolerations: Tolerations
    frontend_affinity: Affinity
    frontend_priority_class_name: OptionalSubdomain
    frontend_runtime_class_name: OptionalSubdomain
    frontend_scheduler_name: SchedulerName
    model_download_node_selector: NodeSelector
    model_download_tolerations: Tolerations
    model_download_affinity: Affinity
    model_download_priority_class_name: OptionalSubdomain
    model_download_runtime_class_name: OptionalSubdomain
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
    ngc_api_key_from: OptionalSubdomain
    ngc_api_key_from_field: SecretKey
    image_pull_from: OptionalSubdomain
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


def config_key(name: str) -> str:
    """The fully qualified config key, as users type it in `pulumi config set`."""
    return f"{PROJECT}:{name}"
