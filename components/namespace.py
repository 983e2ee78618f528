"""Namespace component: creates the recipe's namespace, or uses an existing one by name."""

from __future__ import annotations

from typing import cast

import pulumi
import pulumi_kubernetes as k8s

from components import layer_manifests
from components.args import NamespaceArgs
from components.drift import warn_kubectl_fields
from components.live import Live


class Namespace(pulumi.ComponentResource):
    """The namespace every object of the recipe lives in.

    Kubernetes deletes everything in a namespace that is deleted: the model cache claim and its
    weights, and the graphs of other stacks in it. So a namespace this stack creates is
    `protect`ed (setting `createNamespace` to false or renaming it stops at preview, "cannot be
    deleted because it is protected") and retained on delete (`retainOnDelete`: even unprotected,
    a `pulumi destroy` only forgets it; `kubectl delete namespace` is the one way it goes). The
    same holds for one that already existed, with its claim (`modelCacheMode: existing`): the
    pinned provider takes it over on create (decision 0011), and from then on it is protected the
    same way, never deleted by any command of this program.
    """

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
            namespace = k8s.core.v1.Namespace(
                name,
                metadata=manifest["metadata"],
                opts=pulumi.ResourceOptions(parent=self, protect=True, retain_on_delete=True),
            )
            warn_kubectl_fields(live, manifest, namespace)
            # Always set: the manifest names the namespace explicitly.
            self.name = namespace.metadata.apply(lambda metadata: cast(str, metadata.name))
        else:
            self.name = pulumi.Output.from_input(args.name)
        self.register_outputs({"name": self.name})
