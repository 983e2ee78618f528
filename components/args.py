"""What each component consumes: small, typed arguments, built from the settings in `recipe_args.py`.

A component (and the pure builder behind it) sees only its own arguments, never the whole
`StackSettings`: what a Namespace or a Job depends on is readable from its signature, and a test
can build one without a stack.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from components.routing import Routing


class _Args(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class NamespaceArgs(_Args):
    name: str
    create: bool


class SecretsArgs(_Args):
    namespace: str
    registry_server: str
    registry_username: str
    existing_ngc_secret: str = ""
    """The identity of the existing Secret that holds the NGC key (`ngcApiKeyFrom`,
    `components.credentials_digest.secret_identity`); empty: this stack creates ngc-api-secret."""
    existing_pull_secret: str = ""
    """The identity of the existing pull secret (`imagePullFrom`); empty: none, or the mirror's."""


class ModelCacheArgs(_Args):
    namespace: str
    claim: str
    create: bool
    """False: the claim exists already and is only read."""
    storage_class: str
    size: str


class PlacementArgs(_Args):
    """Where a pod runs: the pod spec's placement fields, each empty when not set."""

    node_selector: tuple[str, ...] = ()
    """`key=value` items."""
    tolerations: tuple[str, ...] = ()
    """`key:Effect` or `key=value:Effect` items."""
    affinity: dict[str, Any] = {}
    """A core/v1 Affinity, as validated (`components.affinity`)."""
    priority_class_name: str = ""
    runtime_class_name: str = ""
    scheduler_name: str = ""


class WorkerArgs(_Args):
    """A NIM pod: the workers, and the download Job that must select the same model profile."""

    image: str
    runtime_version: str
    replicas: int
    gpus: int
    cpu: str
    memory: str
    """Also the download Job's: the NIM counts a pod's memory limit as system memory."""
    shared_memory: str
    placement: PlacementArgs
    extra_env: tuple[str, ...]
    """`NAME=value` items, overriding the recipe's values of the same name."""
    nim_profile: str
    """A pinned NIM_MODEL_PROFILE, or empty to let the NIM select."""


class DownloadArgs(_Args):
    command: tuple[str, ...]
    gpus: int
    timeout_seconds: int
    worker: WorkerArgs
    placement: PlacementArgs
    """The Job's own: each field not set takes the workers' (`recipe_args.download_args`)."""


class GraphArgs(_Args):
    routing: Routing
    frontend_image: str
    frontend_placement: PlacementArgs
    frontend_replicas: int = 1
    worker: WorkerArgs
    ready_timeout_seconds: int
    """For a graph at its first generation."""
    update_timeout_seconds: int
    """After a change: every worker restarts, in the operator's rolling update."""
    restart_id: str = ""
    """spec.restart.id once the graph exists; empty: no restart requested."""
    restart_strategy: str = "Sequential"
    autoscaling: bool = False
    """The Worker's replicas belong to the operator's scaling adapter (and the autoscaler behind
    it): the program writes `scalingAdapter: {}` and no count."""


class MonitoringArgs(_Args):
    graph: str
    """The DynamoGraphDeployment's name: the monitor selects its pods, the alerts its targets."""
    kind: str
    """PodMonitor or ServiceMonitor."""
    labels: tuple[str, ...]
    """`key=value` items Prometheus selects the monitor and the rule by."""
    worker_replicas: int
    ttft_seconds_alert: int
    dashboard: bool


class ExposureArgs(_Args):
    """How the graph's frontend is reached from outside the cluster (components/exposure.py)."""

    graph: str
    mode: str
    """service, ingress or httproute."""
    service_type: str
    """LoadBalancer or NodePort (mode service)."""
    source_ranges: tuple[str, ...]
    service_annotations: tuple[str, ...]
    """`key=value` items on the Service (mode service)."""
    ingress_class: str
    host: str
    """The Ingress rule's host or the HTTPRoute's hostname; empty: any."""
    tls_secret: str
    gateway_name: str
    gateway_namespace: str
    """Empty: the route's own namespace."""
    hashing: str
    """How requests are hashed on the session header in front of the frontends."""


class DisruptionBudgetArgs(_Args):
    graph: str
    """The DynamoGraphDeployment's name: the budget selects its worker pods."""
    max_unavailable: str
    """A whole number or a percentage, as the `workerMaxUnavailable` key holds it; empty: the
    workers get no budget."""
    frontend_replicas: int = 1
    """Above 1, the frontends get a budget too: one at a time."""
