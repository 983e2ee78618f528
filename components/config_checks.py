"""The checks across stack config keys: each a rule that needs several keys at once (a cache this
stack creates needs a storage class; two frontends with affinity need hashing), run on every key
that validated even when others did not (`cross_check_problems`, called by
`components.config_parser`). Pure: no Pulumi.

Over 300 lines: one short function per check, each registered with the fields it needs
(`_needs`), in the order its refusals are listed; each feature's checks are a block.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from pydantic.alias_generators import to_camel

from components import names
from components.args import PlacementArgs
from components.routing import SESSION_HEADER, RoutingProfile
from components.settings import StackSettings, config_key

Check = Callable[[StackSettings], str | None]


@dataclass(frozen=True)
class CrossCheck:
    """A rule across keys; it runs when every field it `needs` validated."""

    needs: frozenset[str]
    check: Check


_CROSS_CHECKS: list[CrossCheck] = []
"""Each rule across keys, in the order its refusals are listed."""


def _needs(*fields: str) -> Callable[[Check], Check]:
    """Register a check that runs when every one of `fields` validated."""

    def register(check: Check) -> Check:
        _CROSS_CHECKS.append(CrossCheck(frozenset(fields), check))
        return check

    return register


@_needs("shared_stack", "model_cache_mode", "model_cache_storage_class")
def _storage_class_needed(s: StackSettings) -> str | None:
    if s.manages_model_cache and not s.model_cache_storage_class:
        return (
            f"{config_key('modelCacheStorageClass')} is required when this stack creates the model "
            f"cache: set a ReadWriteMany-capable class (`pulumi config set "
            f"{config_key('modelCacheStorageClass')} <class>`), or set "
            f"{config_key('modelCacheMode')}=existing to keep a cache that already exists"
        )
    return None


@_needs("registry_server", "registry_username")
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


@_needs("shared_stack", "deploy_graph")
def _shared_layer_and_no_graph(s: StackSettings) -> str | None:
    if s.uses_shared_layer and not s.deploy_graph:
        return (
            f"{config_key('sharedStack')} is set and {config_key('deployGraph')} is false: "
            "this stack would deploy nothing"
        )
    return None


@_needs("monitoring", "deploy_graph")
def _monitoring_without_graph(s: StackSettings) -> str | None:
    if s.monitoring and not s.deploy_graph:
        return (
            f"{config_key('monitoring')} is true and {config_key('deployGraph')} is false: the "
            "monitoring objects watch a graph; set monitoring on the profile stacks that deploy one"
        )
    return None


@_needs("graph_restart_id", "worker_autoscaling", "deploy_graph")
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


@_needs("worker_autoscaling", "worker_min_replicas", "worker_max_replicas")
def _autoscaling_bounds(s: StackSettings) -> str | None:
    if s.worker_autoscaling and s.worker_min_replicas > s.worker_max_replicas:
        return (
            f"{config_key('workerMinReplicas')} ({s.worker_min_replicas}) is above "
            f"{config_key('workerMaxReplicas')} ({s.worker_max_replicas}): the autoscaler's "
            "bounds need min <= max; raise the maximum or lower the minimum"
        )
    return None


FRONTEND_PLACEMENT_FIELDS = frozenset(f"frontend_{field}" for field in PlacementArgs.model_fields)


@_needs(*FRONTEND_PLACEMENT_FIELDS, "deploy_graph")
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


_EXPOSURE_FIELDS = frozenset(
    {_field(key) for keys in EXPOSURE_KEYS.values() for key in keys}
    | {"frontend_exposure", "frontend_host"}
)


@_needs(*_EXPOSURE_FIELDS)
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


@_needs(*_EXPOSURE_FIELDS)
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


@_needs("frontend_session_hashing", "frontend_exposure")
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


@_needs("frontend_replicas", "profile", "frontend_session_hashing")
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


@_needs("frontend_exposure", "frontend_replicas", "deploy_graph")
def _exposure_without_graph(s: StackSettings) -> str | None:
    if s.deploy_graph or (s.frontend_exposure == "none" and s.frontend_replicas == 1):
        return None
    return (
        f"{config_key('frontendExposure')} or {config_key('frontendReplicas')} is set and "
        f"{config_key('deployGraph')} is false: they concern a graph's frontend; set them on the "
        "profile stacks that deploy one"
    )


# --- disruption budget and existing Secrets ---------------------------------------------------


@_needs("worker_max_unavailable", "worker_replicas", "worker_autoscaling", "worker_max_replicas")
def _budget_against_replicas(s: StackSettings) -> str | None:
    """A budget of 0 (or 0%) lets no worker be evicted: every node drain waits on it forever,
    so it is refused, not warned about. One over the most workers there can be is a typo (the
    autoscaler's maximum when it owns the count, `workerReplicas` is then not written)."""
    budget = s.worker_max_unavailable
    key = config_key("workerMaxUnavailable")
    if budget and int(budget.rstrip("%")) == 0:  # the field rule let only N or N% through
        return (
            f"{key} is {budget!r}: a budget that lets no worker go blocks every node drain (and "
            "cluster upgrade) forever; set 1 (one worker at a time), or '' for no budget"
        )
    most, most_key = (
        (s.worker_max_replicas, "workerMaxReplicas")
        if s.worker_autoscaling
        else (s.worker_replicas, "workerReplicas")
    )
    if budget.isdigit() and int(budget) > most:
        return f"{key} is {budget}, more than {config_key(most_key)} ({most}): set at most {most}"
    return None


@_needs(
    "image_pull_from",
    "registry_server",
    "registry_username",
    "ngc_api_key_from",
    "ngc_api_key_from_field",
    "ngc_api_key_needed",
    "shared_stack",
)
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


@_needs("ngc_api_key_needed", "ngc_api_key_from", "model_download", "model_cache_mode")
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


def cross_check_problems(settings: StackSettings, unvalidated: Collection[str] = ()) -> list[str]:
    """The problems across keys, skipping each check that needs a field in `unvalidated` (field
    names; `settings` may then be partial, built from the fields that validated)."""
    return [
        problem
        for cross in _CROSS_CHECKS
        if not cross.needs & set(unvalidated) and (problem := cross.check(settings)) is not None
    ]
