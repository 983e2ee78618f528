"""How stack settings become each component's args: pure functions of `StackSettings`, no Pulumi
(the recipe, `components.recipe`, wires the components; the tests build manifests from these)."""

from __future__ import annotations

from typing import Any

from components import names
from components.args import (
    DisruptionBudgetArgs,
    DownloadArgs,
    ExposureArgs,
    GraphArgs,
    ModelCacheArgs,
    MonitoringArgs,
    NamespaceArgs,
    PlacementArgs,
    WorkerArgs,
)
from components.layer_manifests import SharedLayer
from components.settings import StackSettings


def own_layer(settings: StackSettings) -> SharedLayer:
    """The layer a self-contained stack creates for itself: its Secrets, or existing ones."""
    pull_secret = settings.image_pull_from or (
        names.REGISTRY_PULL_SECRET if settings.uses_registry_mirror else None
    )
    return SharedLayer(
        settings.namespace,
        settings.model_cache_claim,
        ngc_secret=(settings.ngc_api_key_from or names.NGC_SECRET)
        if settings.ngc_api_key_needed
        else None,
        registry_pull_secret=pull_secret,
        ngc_secret_key=settings.ngc_api_key_from_field,
    )


def namespace_args(settings: StackSettings) -> NamespaceArgs:
    return NamespaceArgs(name=settings.namespace, create=settings.create_namespace)


def cache_args(settings: StackSettings) -> ModelCacheArgs:
    return ModelCacheArgs(
        namespace=settings.namespace,
        claim=settings.model_cache_claim,
        create=settings.model_cache_mode == "create",
        storage_class=settings.model_cache_storage_class,
        size=settings.model_cache_size,
    )


def worker_args(settings: StackSettings) -> WorkerArgs:
    return WorkerArgs(
        image=settings.worker_image,
        runtime_version=settings.worker_dynamo_runtime_version,
        replicas=settings.worker_replicas,
        gpus=settings.worker_gpus,
        cpu=settings.worker_cpu,
        memory=settings.worker_memory,
        shared_memory=settings.worker_shared_memory_size,
        placement=_placement(settings, "worker"),
        extra_env=tuple(settings.worker_extra_env),
        nim_profile=settings.nim_model_profile,
    )


def _placement(
    settings: StackSettings, part: str, unset: PlacementArgs | None = None
) -> PlacementArgs:
    """`part`'s placement settings (`<part>_<field>` for each field of `PlacementArgs`); with
    `unset`, its value for each field left unset."""
    fields: dict[str, Any] = {}
    for field in PlacementArgs.model_fields:
        value = getattr(settings, f"{part}_{field}")
        if isinstance(value, list):
            value = tuple(value)
        if not value and unset is not None:
            value = getattr(unset, field)
        fields[field] = value
    return PlacementArgs(**fields)


def download_args(settings: StackSettings) -> DownloadArgs:
    return DownloadArgs(
        command=tuple(settings.model_download_command),
        gpus=settings.model_download_gpus,
        timeout_seconds=settings.model_download_timeout_seconds,
        worker=worker_args(settings),
        # Each modelDownload* field set, else the workers' value (the Job needs the workers'
        # kind of node: same image, GPU and NIM profile selection).
        placement=_placement(settings, "model_download", unset=_placement(settings, "worker")),
    )


def graph_args(settings: StackSettings) -> GraphArgs:
    return GraphArgs(
        routing=settings.routing,
        frontend_image=settings.frontend_image,
        frontend_placement=_placement(settings, "frontend"),
        frontend_replicas=settings.frontend_replicas,
        worker=worker_args(settings),
        ready_timeout_seconds=settings.graph_ready_timeout_seconds,
        update_timeout_seconds=settings.graph_update_timeout_seconds,
        restart_id=settings.graph_restart_id,
        restart_strategy=settings.graph_restart_strategy,
        autoscaling=settings.worker_autoscaling,
    )


def monitoring_args(settings: StackSettings) -> MonitoringArgs:
    return MonitoringArgs(
        graph=names.graph_name(settings.profile),
        kind=settings.monitoring_kind,
        labels=tuple(settings.monitoring_labels),
        # With an autoscaler, fewer than its minimum is what is missing.
        worker_replicas=(
            settings.worker_min_replicas
            if settings.worker_autoscaling
            else settings.worker_replicas
        ),
        ttft_seconds_alert=settings.monitoring_ttft_seconds_alert,
        dashboard=settings.monitoring_dashboard,
    )


def exposure_args(settings: StackSettings) -> ExposureArgs:
    return ExposureArgs(
        graph=names.graph_name(settings.profile),
        mode=settings.frontend_exposure,
        service_type=settings.frontend_service_type,
        source_ranges=tuple(settings.frontend_load_balancer_source_ranges),
        service_annotations=tuple(settings.frontend_service_annotations),
        ingress_class=settings.frontend_ingress_class_name,
        host=settings.frontend_host,
        tls_secret=settings.frontend_tls_secret,
        gateway_name=settings.frontend_gateway_name,
        gateway_namespace=settings.frontend_gateway_namespace,
        hashing=settings.frontend_session_hashing,
    )


def disruption_budget_args(settings: StackSettings) -> DisruptionBudgetArgs:
    return DisruptionBudgetArgs(
        graph=names.graph_name(settings.profile),
        max_unavailable=settings.worker_max_unavailable,
        frontend_replicas=settings.frontend_replicas,
    )
