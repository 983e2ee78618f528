"""Namespace component: creates the recipe's namespace, or adopts an existing one by name."""

from __future__ import annotations

from typing import cast

import pulumi
import pulumi_kubernetes as k8s

from components import layer_manifests
from components.args import NamespaceArgs


class Namespace(pulumi.ComponentResource):
    """The namespace every object of the recipe lives in.

    Kubernetes deletes everything in a namespace that is deleted, a protected claim included:
    Pulumi's protection covers the claim's own delete, not the namespace's cascade. So when this
    stack also creates the model cache, the namespace is protected too, and setting
    `createNamespace` to false or renaming the namespace stops at preview ("unable to delete
    resource ... marked for protection") instead of deleting the downloaded weights.
    """

    name: pulumi.Output[str]
    """Namespace name; depends on the Namespace resource when this stack creates it."""

    def __init__(
        self,
        name: str,
        args: NamespaceArgs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("cosmos3:recipe:Namespace", name, None, opts)
        if args.create:
            manifest = layer_manifests.namespace(args)
            namespace = k8s.core.v1.Namespace(
                name,
                metadata=manifest["metadata"],
                opts=pulumi.ResourceOptions(parent=self, protect=args.protect),
            )
            # Always set: the manifest names the namespace explicitly.
            self.name = namespace.metadata.apply(lambda metadata: cast(str, metadata.name))
        else:
            self.name = pulumi.Output.from_input(args.name)
        self.register_outputs({"name": self.name})
