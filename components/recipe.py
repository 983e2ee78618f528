"""The top-level component: the whole recipe for one stack.

A self-contained stack (dev, or the shared layer stack) creates namespace, secrets, model cache and
download itself; a profile stack on a shared layer reads them from that stack and adds only its
DynamoGraphDeployment. Either way the graph sees one `SharedLayer`.
"""

from __future__ import annotations

from collections.abc import Callable
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
from components.settings import StackSettings, qualified_stack_name


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
            layer_plain, ready, exported = self._create_layer(name, settings, secrets)
            layer = pulumi.Output.from_input(layer_plain)
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
    ) -> tuple[SharedLayer, list[pulumi.Resource], dict[str, pulumi.Output[Any]]]:
        """Namespace, secrets, cache and download: the layer, what the graph waits for, and the
        layer's exports for profile stacks."""
        if secrets is None:
            raise ValueError("a stack that creates the shared layer needs the secret values")
        layer = SharedLayer.from_settings(settings)
        child = pulumi.ResourceOptions(parent=self)
        namespace = Namespace(f"{name}-namespace", settings, opts=child)
        created: list[pulumi.Resource] = [
            namespace,
            Secrets(f"{name}-secrets", settings, secrets, depends_on=[namespace], opts=child),
            ModelCache(f"{name}-model-cache", settings, depends_on=[namespace], opts=child),
        ]
        exported = {
            key: pulumi.Output.from_input(value)
            for key, value in outputs.layer_outputs(layer).items()
        }
        if settings.model_download:
            download = ModelDownload(
                f"{name}-model-download", settings, layer, depends_on=created, opts=child
            )
            created.append(download)
            exported[outputs.WORKER_IMAGE_KEY] = download.image
            exported[outputs.CACHE_READY_KEY] = download.cache_ready
        else:
            # No download to wait for: the workers fill the cache on first start (the recipe's
            # cookbook default), or it was filled by hand. Documented under modelDownload.
            exported[outputs.WORKER_IMAGE_KEY] = pulumi.Output.from_input(settings.worker_image)
            exported[outputs.CACHE_READY_KEY] = pulumi.Output.from_input(True)
        return layer, created, exported


def _read_shared_layer(
    name: str, settings: StackSettings, parent: pulumi.Resource
) -> pulumi.Output[SharedLayer]:
    """The layer exported by the shared stack, checked; the graph waits until it resolves.

    The engine itself fails a reference to a stack that does not exist ("unknown stack", pulumi
    `backendClient.GetStackOutputs`); a stack that exists but lacks what this stack needs is
    refused here with what to do, as a clean `error:` line (RunError, no traceback).
    """
    stack = qualified_stack_name(
        settings.shared_stack, pulumi.get_organization(), pulumi.get_project()
    )
    shared = pulumi.StackReference(
        f"{name}-shared-layer", stack_name=stack, opts=pulumi.ResourceOptions(parent=parent)
    )

    def checked(values: dict[str, Any]) -> SharedLayer:
        try:
            return outputs.shared_layer_from_outputs(values, settings, stack)
        except outputs.SharedLayerError as error:
            raise pulumi.RunError(str(error)) from None

    return shared.outputs.apply(checked)


def _keyed(
    values: pulumi.Output[dict[str, Any]], keys: tuple[str, ...]
) -> dict[str, pulumi.Output[Any]]:
    # An absent key exports None, which the SDK never sends to the engine: absent there too.
    return {key: values.apply(_getter(key)) for key in keys}


def _getter(key: str) -> Callable[[dict[str, Any]], Any]:
    return lambda resolved: resolved.get(key)
