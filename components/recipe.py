"""The top-level component: the whole recipe for one stack.

A self-contained stack (dev, or the shared layer stack) creates namespace, secrets, model cache and
download itself; a profile stack on a shared layer reads them from that stack and adds only its
DynamoGraphDeployment. Either way the graph sees one `SharedLayer`.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

import pulumi

from components import outputs
from components.contract import StackOutputs
from components.graph_deployment import GraphDeployment
from components.layer_manifests import SharedLayer
from components.model_cache import ModelCache
from components.model_download import ModelDownload
from components.namespace import Namespace
from components.secrets import Secrets, SecretValues
from components.settings import StackSettings

LAYER_KEYS = ("namespace", "modelCacheClaim", "ngcSecret", "registryPullSecret")


class Recipe(pulumi.ComponentResource):
    """Cosmos3 Nano Reasoner on Dynamo for one stack; `outputs` is the stack-output contract."""

    outputs: dict[str, pulumi.Output[Any]]

    def __init__(
        self,
        name: str,
        settings: StackSettings,
        secrets: SecretValues | None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("cosmos3:recipe:Recipe", name, None, opts)
        if settings.uses_shared_layer:
            layer = _read_shared_layer(name, settings, self)
            ready: list[pulumi.Resource] = []
            exported: dict[str, pulumi.Output[Any]] = {}
        else:
            layer_plain, ready = self._create_layer(name, settings, secrets)
            layer = pulumi.Output.from_input(layer_plain)
            exported = _keyed(
                layer.apply(lambda resolved: outputs.layer_outputs(settings, resolved)),
                outputs.LAYER_OUTPUT_KEYS,
            )
        if settings.deploy_graph:
            GraphDeployment(
                f"{name}-graph",
                settings,
                layer,
                depends_on=ready,
                opts=pulumi.ResourceOptions(parent=self),
            )
            contract = layer.apply(
                lambda resolved: outputs.graph_outputs(settings, resolved).to_json_dict()
            )
            exported |= _keyed(contract, StackOutputs.keys())
        self.outputs = exported
        self.register_outputs(exported)

    def _create_layer(
        self, name: str, settings: StackSettings, secrets: SecretValues | None
    ) -> tuple[SharedLayer, list[pulumi.Resource]]:
        """Namespace, secrets, cache and download; returns the layer and what the graph waits for."""
        if secrets is None:
            raise ValueError("a stack that creates the shared layer needs the secret values")
        layer = SharedLayer.from_settings(settings)
        child = pulumi.ResourceOptions(parent=self)
        namespace = Namespace(f"{name}-namespace", settings, opts=child)
        created: list[pulumi.Resource] = [
            namespace,
            Secrets(f"{name}-secrets", settings, secrets, depends_on=[namespace], opts=child),
            ModelCache(
                f"{name}-model-cache",
                settings,
                _previous_outputs(name, self),
                depends_on=[namespace],
                opts=child,
            ),
        ]
        if settings.model_download:
            download = ModelDownload(
                f"{name}-model-download",
                settings,
                layer,
                depends_on=created,
                opts=child,
            )
            created.append(download)
        return layer, created


def _read_shared_layer(
    name: str, settings: StackSettings, parent: pulumi.Resource
) -> pulumi.Output[SharedLayer]:
    """The layer exported by the shared stack; the graph is not registered until it resolves."""
    shared = pulumi.StackReference(
        f"{name}-shared-layer",
        stack_name=settings.shared_stack,
        opts=pulumi.ResourceOptions(parent=parent),
    )
    values = pulumi.Output.all(
        *(
            shared.require_output(key) if key != "registryPullSecret" else shared.get_output(key)
            for key in LAYER_KEYS
        )
    )
    return values.apply(lambda v: SharedLayer(*v))


def _previous_outputs(name: str, parent: pulumi.Resource) -> pulumi.Output[dict[str, Any] | None]:
    """This stack's outputs from its last update, so the cache guard can see what exists.

    A StackReference to the stack being updated reads its last checkpoint's outputs (the pattern
    Pulumi's maintainers show in pulumi/pulumi#3722); a new stack has none, so the guard passes.
    """
    this_stack = f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"
    previous = pulumi.StackReference(
        f"{name}-previous-update",
        stack_name=this_stack,
        opts=pulumi.ResourceOptions(parent=parent),
    )
    return previous.outputs


def _keyed(
    values: pulumi.Output[dict[str, Any]], keys: tuple[str, ...]
) -> dict[str, pulumi.Output[Any]]:
    return {key: values.apply(itemgetter(key)) for key in keys}
