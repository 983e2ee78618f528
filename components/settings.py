"""Stack settings: the one place stack config is parsed and validated.

Every key is declared, with type, default and description, in `Pulumi.yaml`; the CLI merges those
defaults under `Pulumi.<stack>.yaml` and hands the program the result. `parse_stack_config` turns
that flat mapping into one frozen `StackSettings` (`components.config_parser.parse_stack_config`),
or raises `ConfigError` naming every offending key and the fix, before any resource is registered.

This module has no Pulumi import: the offline render, the lab and the tests use it as-is.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    model_validator,
)
from pydantic.alias_generators import to_camel

from components.routing import (
    MAX_AFFINITY_TTL_SECONDS,
    MIN_AFFINITY_TTL_SECONDS,
    Routing,
    RoutingProfile,
    routing_for,
)

PROJECT = "cosmos3-nano-reasoner"
SECRET_KEYS = frozenset({"ngcApiKey", "registryPassword"})
"""Config keys that must be set with `pulumi config set --secret`; their values never enter settings."""

_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_QUANTITY = r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$"
_SEMVER = r"^(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})$"
_STACK_SEGMENT = r"[A-Za-z0-9_.-]+"
_STACK_NAME = rf"^({_STACK_SEGMENT}|{_STACK_SEGMENT}/{_STACK_SEGMENT}/{_STACK_SEGMENT})$"
"""A stack's short name (`shared`: this stack's organization and project) or `<org>/<project>/<stack>`."""
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_SECRET_ENV_NAMES = ("NGC_API_KEY", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY")


def _json_list(value: Any) -> Any:
    # The CLI passes typed `array` config as JSON text; tests and the render may pass lists.
    if isinstance(value, str):
        try:
            return json.loads(value) if value.strip() else []
        except json.JSONDecodeError as error:
            raise ValueError(f"expected a YAML/JSON list, got {value!r}") from error
    return value


def _key_value(separator: str, what: str) -> Any:
    def check(items: list[str]) -> list[str]:
        for item in items:
            key, sep, _ = item.partition(separator)
            if not sep or not key:
                raise ValueError(f"{item!r} is not {what}")
        return items

    return check


def _tolerations(items: list[str]) -> list[str]:
    for item in items:
        key, _, effect = item.rpartition(":")
        if not key or effect not in _TAINT_EFFECTS:
            raise ValueError(
                f"{item!r} is not a toleration: write 'key:Effect' or 'key=value:Effect' "
                f"with Effect one of {', '.join(_TAINT_EFFECTS)}"
            )
    return items


def _extra_env(items: list[str]) -> list[str]:
    for item in items:
        name = item.partition("=")[0]
        if not re.match(_ENV_NAME, name):
            raise ValueError(f"{item!r} is not NAME=value")
        if name in _SECRET_ENV_NAMES:
            raise ValueError(
                f"{name} is a secret and must not be plain config; "
                "the NGC key comes from the ngcApiKey secret"
            )
    return items


def _stack_reference_name(value: str) -> str:
    if value and not re.fullmatch(_STACK_NAME, value):
        raise ValueError(
            f"{value!r} must be a stack's short name (e.g. shared: same organization and project "
            "as this stack) or its fully qualified name <org>/<project>/<stack>"
        )
    return value


StringList = Annotated[list[str], BeforeValidator(_json_list)]
Quantity = Annotated[str, Field(pattern=_QUANTITY)]
PositiveSeconds = Annotated[int, Field(ge=1)]


class StackSettings(BaseModel):
    """Validated stack config. Field aliases are the config keys of `Pulumi.yaml`."""

    model_config = ConfigDict(
        alias_generator=to_camel, frozen=True, extra="forbid", validate_by_name=True
    )

    # Cluster access: an explicit provider, never the current kubeconfig context.
    kube_context: Annotated[str, Field(min_length=1)]
    kubeconfig_path: str

    # Layering: a self-contained stack, or a profile stack on a shared layer stack.
    shared_stack: Annotated[str, AfterValidator(_stack_reference_name)]
    deploy_graph: bool

    namespace: Annotated[str, Field(pattern=_DNS_LABEL, max_length=63)]
    create_namespace: bool

    registry_server: str
    registry_username: str

    model_cache_claim: Annotated[str, Field(pattern=_DNS_LABEL, max_length=63)]
    model_cache_mode: Literal["create", "existing"]
    model_cache_storage_class: str
    model_cache_size: Quantity

    model_download: bool
    model_download_command: Annotated[StringList, Field(min_length=1)]
    model_download_gpus: Annotated[int, Field(ge=0)]
    model_download_timeout_seconds: PositiveSeconds

    profile: RoutingProfile
    session_affinity_ttl_seconds: Annotated[
        int, Field(ge=MIN_AFFINITY_TTL_SECONDS, le=MAX_AFFINITY_TTL_SECONDS)
    ]
    served_model: Annotated[str, Field(min_length=1)]
    graph_ready_timeout_seconds: PositiveSeconds

    frontend_image: str
    worker_image: str
    worker_dynamo_runtime_version: Annotated[str, Field(pattern=_SEMVER)]
    worker_replicas: Annotated[int, Field(ge=1)]
    worker_gpus: Annotated[int, Field(ge=1)]
    worker_cpu: Quantity
    worker_memory: Quantity
    worker_shared_memory_size: Quantity
    worker_node_selector: Annotated[
        StringList,
        AfterValidator(_key_value("=", "key=value (e.g. nvidia.com/gpu.product=NVIDIA-H200)")),
    ]
    worker_tolerations: Annotated[StringList, AfterValidator(_tolerations)]
    worker_extra_env: Annotated[StringList, AfterValidator(_extra_env)]
    nim_model_profile: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:=,-]*$", max_length=256)]

    @model_validator(mode="after")
    def _consistent(self) -> StackSettings:
        problems = [problem for check in _CROSS_CHECKS if (problem := check(self))]
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def routing(self) -> Routing:
        return routing_for(self.profile, self.session_affinity_ttl_seconds)

    @property
    def uses_shared_layer(self) -> bool:
        """True when namespace, secrets and model cache belong to another stack."""
        return bool(self.shared_stack)

    @property
    def manages_secrets(self) -> bool:
        """True when this stack creates the NGC (and registry) secrets."""
        return not self.uses_shared_layer

    @property
    def manages_model_cache(self) -> bool:
        return not self.uses_shared_layer and self.model_cache_mode == "create"

    @property
    def uses_registry_mirror(self) -> bool:
        return bool(self.registry_server)


def qualified_stack_name(name: str, organization: str, project: str) -> str:
    """`<org>/<project>/<stack>` for a short or qualified stack name.

    A short name takes the organization and project of the stack being deployed: on Pulumi Cloud
    that is the stack's real organization, on a DIY backend always `organization` (the only one
    it has), so one stack file works on both. The CLI would resolve a short name to the user's
    *default* organization instead (httpstate `ParseStackReference`), which need not be the
    stack's own; qualifying it here removes that ambiguity.
    """
    return name if "/" in name else f"{organization}/{project}/{name}"


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


def _shared_layer_owns_cluster_objects(s: StackSettings) -> str | None:
    if not s.uses_shared_layer:
        return None
    owned = [
        key
        for key, value in (
            ("registryServer", s.registry_server),
            ("modelCacheStorageClass", s.model_cache_storage_class),
        )
        if value
    ]
    if owned:
        return (
            f"{', '.join(config_key(key) for key in owned)} set on a stack that reads the shared "
            f"layer from sharedStack={s.shared_stack}: set them on the shared stack instead"
        )
    if not s.deploy_graph:
        return (
            f"{config_key('sharedStack')} is set and {config_key('deployGraph')} is false: "
            "this stack would deploy nothing"
        )
    return None


_CROSS_CHECKS = (
    _storage_class_needed,
    _registry_credentials,
    _shared_layer_owns_cluster_objects,
)


def config_key(name: str) -> str:
    """The fully qualified config key, as users type it in `pulumi config set`."""
    return f"{PROJECT}:{name}"
