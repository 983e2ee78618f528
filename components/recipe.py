"""The top-level component: the whole recipe for one stack.

A self-contained stack (dev, or the shared layer stack) creates namespace, secrets, model cache and
download itself; a profile stack on a shared layer reads them from that stack and adds only its
DynamoGraphDeployment. Either way the graph sees one `SharedLayer`.

Components take `depends_on` as an argument and hand it to the objects inside, rather than in their
own `opts`: the engine's state records a dependency on the resource that declares it, and a
component's is not passed to its children (the Python SDK's `Resource` takes a parent's providers,
protect and transformations, not its dependencies). The Job and the graph then record what they wait
for, so a delete-before-replace of that dependency finds them among its dependents.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any

import pulumi

from components import exposure, outputs
from components.args import SecretsArgs
from components.contract import StackOutputs
from components.disruption_budget import DisruptionBudget
from components.graph_deployment import GraphDeployment
from components.layer_guard import LayerGuard
from components.layer_manifests import SharedLayer
from components.live import Live
from components.model_cache import ModelCache
from components.model_download import ModelDownload
from components.monitoring import Monitoring, require_crds
from components.namespace import Namespace
from components.recipe_args import (
    cache_args,
    disruption_budget_args,
    download_args,
    exposure_args,
    graph_args,
    monitoring_args,
    namespace_args,
    own_layer,
)
from components.secrets import Secrets, SecretValues, existing_secrets_args
from components.settings import StackSettings, qualified_stack_name

Exports = dict[str, pulumi.Output[Any]]


class Recipe(pulumi.ComponentResource):
    """Cosmos3 Nano Reasoner on Dynamo for one stack; `outputs` is the stack-output contract."""

    outputs: Exports

    def __init__(
        self,
        name: str,
        settings: StackSettings,
        secrets: SecretValues | None,
        live: Live,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("cosmos3:recipe:Recipe", name, None, opts)
        if settings.monitoring:  # before anything is created
            require_crds(live, settings.monitoring_kind)
        if settings.deploy_graph:
            exposure.require_crds(
                live, settings.frontend_exposure, settings.frontend_session_hashing
            )
        if settings.uses_shared_layer:
            layer = _read_shared_layer(name, settings, self)
            ready: list[pulumi.Input[pulumi.Resource]] = []
            exported: Exports = {}
        else:
            # Before anything is created: an existing Secret that is not there is refused.
            secrets_args = existing_secrets_args(live, settings)
            layer, ready, exported = self._create_layer(name, settings, secrets, secrets_args, live)
        if settings.deploy_graph:
            graph = GraphDeployment(
                f"{name}-graph",
                graph_args(settings),
                layer,
                live,
                depends_on=ready,
                opts=pulumi.ResourceOptions(parent=self),
            )
            if settings.worker_max_unavailable or settings.frontend_replicas > 1:
                DisruptionBudget(
                    f"{name}-disruption-budget",
                    disruption_budget_args(settings),
                    layer,
                    live,
                    opts=pulumi.ResourceOptions(parent=self),
                )
            if settings.monitoring:
                Monitoring(
                    f"{name}-monitoring",
                    monitoring_args(settings),
                    layer,
                    live,
                    opts=pulumi.ResourceOptions(parent=self),
                )
            if settings.frontend_exposure != "none":
                exposure.FrontendExposure(
                    f"{name}-frontend-exposure",
                    exposure_args(settings),
                    layer,
                    opts=pulumi.ResourceOptions(parent=self),
                )
            # Exported once the graph is Ready: an update that did not get there keeps the outputs
            # of the last one that did.
            contract = pulumi.Output.all(layer, graph.ready).apply(
                lambda both: outputs.graph_outputs(settings, both[0]).to_json_dict()
            )
            # An absent key exports None, which the SDK never sends to the engine: absent there too.
            contract_keys = StackOutputs.keys()
            exported |= {key: contract.apply(partial(_get, key)) for key in contract_keys}
        self.outputs = exported
        self.register_outputs(exported)

    def _create_layer(
        self,
        name: str,
        settings: StackSettings,
        secrets: SecretValues | None,
        secrets_args: SecretsArgs,
        live: Live,
    ) -> tuple[pulumi.Output[SharedLayer], list[pulumi.Input[pulumi.Resource]], Exports]:
        """Namespace, secrets, cache, download and their guard: the layer, what the graph waits
        for, and the layer's exports for profile stacks."""
        if secrets is None:
            raise ValueError("a stack that creates the shared layer needs the secret values")
        plain = own_layer(settings)
        child = pulumi.ResourceOptions(parent=self)
        namespace = Namespace(f"{name}-namespace", namespace_args(settings), live, opts=child)
        credentials = Secrets(
            f"{name}-secrets", secrets_args, secrets, live, depends_on=[namespace], opts=child
        )
        created: list[pulumi.Resource] = [
            namespace,
            credentials,
            ModelCache(
                f"{name}-model-cache",
                cache_args(settings),
                live,
                depends_on=[namespace],
                opts=child,
            ),
        ]
        exported = {
            key: pulumi.Output.from_input(value)
            for key, value in outputs.layer_outputs(plain).items()
        }
        exported[outputs.CREDENTIALS_DIGEST_KEY] = credentials.digest
        ready: list[pulumi.Input[pulumi.Resource]] = list(created)
        if settings.model_download:
            download = ModelDownload(
                f"{name}-model-download",
                download_args(settings),
                plain,
                live,
                depends_on=created,
                opts=child,
            )
            created.append(download)
            # The graph is registered once the download's wait has seen it complete.
            ready = [download.cache_ready.apply(lambda _: download.job)]
            exported[outputs.WORKER_IMAGE_KEY] = download.image
            for key, value in outputs.selected_by(settings).items():
                exported[key] = pulumi.Output.from_input(value)
            exported[outputs.CACHE_READY_KEY] = download.cache_ready
        else:
            # No download to wait for: the workers fill the cache on first start (the recipe's
            # cookbook default), or it was filled by hand. Documented under modelDownload.
            exported[outputs.WORKER_IMAGE_KEY] = pulumi.Output.from_input(settings.worker_image)
            exported[outputs.CACHE_READY_KEY] = pulumi.Output.from_input(True)
        LayerGuard(f"{name}-layer-guard", settings.namespace, live, depends_on=created, opts=child)
        layer = credentials.digest.apply(
            lambda digest: dataclasses.replace(plain, credentials_digest=digest)
        )
        return layer, ready, exported


# --- what each component consumes, from the settings ---------------------------------------------


def _read_shared_layer(
    name: str, settings: StackSettings, parent: pulumi.Resource
) -> pulumi.Output[SharedLayer]:
    """The layer exported by the shared stack, checked (`outputs.shared_layer_from_outputs`);
    the graph waits until it resolves. The engine itself fails a reference to a stack that does not
    exist ("unknown stack"); a refusal here is a clean `error:` line (RunError, no traceback)."""
    stack = qualified_stack_name(
        settings.shared_stack, pulumi.get_organization(), pulumi.get_project()
    )
    shared = pulumi.StackReference(
        f"{name}-shared-layer", stack_name=stack, opts=pulumi.ResourceOptions(parent=parent)
    )

    def checked(values: dict[str, Any]) -> SharedLayer:
        preview = pulumi.runtime.is_dry_run()
        try:
            layer, notes = outputs.shared_layer_from_outputs(values, settings, stack, preview)
        except outputs.SharedLayerError as error:
            raise pulumi.RunError(str(error)) from None
        for note in notes:
            pulumi.log.warn(note, resource=shared)
        return layer

    return shared.outputs.apply(checked)


def _get(key: str, resolved: dict[str, Any]) -> Any:
    return resolved.get(key)
