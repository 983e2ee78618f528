"""What each component consumes: small, typed arguments, built from the settings in `recipe.py`.

A component (and the pure builder behind it) sees only its own arguments, never the whole
`StackSettings`: what a Namespace or a Job depends on is readable from its signature, and a test
can build one without a stack.
"""

from __future__ import annotations

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
    node_selector: tuple[str, ...]
    """`key=value` items."""
    tolerations: tuple[str, ...]
    """`key:Effect` or `key=value:Effect` items."""
    extra_env: tuple[str, ...]
    """`NAME=value` items, overriding the recipe's values of the same name."""
    nim_profile: str
    """A pinned NIM_MODEL_PROFILE, or empty to let the NIM select."""


class DownloadArgs(_Args):
    command: tuple[str, ...]
    gpus: int
    timeout_seconds: int
    worker: WorkerArgs


class GraphArgs(_Args):
    routing: Routing
    frontend_image: str
    worker: WorkerArgs
    ready_timeout_seconds: int
    """For a graph at its first generation."""
    update_timeout_seconds: int
    """After a change: every worker restarts, in the operator's rolling update."""


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


class DisruptionBudgetArgs(_Args):
    graph: str
    """The DynamoGraphDeployment's name: the budget selects its worker pods."""
    max_unavailable: str
    """A whole number or a percentage, as the `workerMaxUnavailable` key holds it."""
