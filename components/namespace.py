"""Namespace component: creates the recipe's namespace, or uses an existing one by name."""

from __future__ import annotations

from typing import cast

import pulumi

from components import layer_manifests
from components.args import NamespaceArgs
from components.drift import applied
from components.live import Live


class Namespace(pulumi.ComponentResource):
    """The namespace every object of the recipe lives in, protected and retained on delete when
    this stack creates it or takes it over: deleting a namespace deletes everything in it, the
    model cache and other stacks' graphs included (docs/deploying.md)."""

    name: pulumi.Output[str]
    """Namespace name; depends on the Namespace resource when this stack creates it."""

    def __init__(
        self,
        name: str,
        args: NamespaceArgs,
        live: Live,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("cosmos3:recipe:Namespace", name, None, opts)
        if args.create:
            manifest = layer_manifests.namespace(args)
            kept = pulumi.ResourceOptions(parent=self, protect=True, retain_on_delete=True)
            namespace = applied(name, manifest, kept, live)
            # Always set: the manifest names the namespace explicitly.
            self.name = namespace.metadata.apply(lambda metadata: cast(str, metadata["name"]))
        else:
            self.name = pulumi.Output.from_input(args.name)
        self.register_outputs({"name": self.name})
