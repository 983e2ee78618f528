"""Layer guard component: no `pulumi destroy` deletes what a running graph stands on.

The engine continues past a protected resource when it destroys without a preview, but never
deletes a resource while one that depends on it stays (pulumi `performPostSteps`). So this
protected ConfigMap, which depends on everything else in the layer, is the first thing any destroy
meets, and refused, it keeps all of it (docs/day-two.md, "What destroy does"; decision 0012).
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi

from components import layer_manifests
from components.drift import applied
from components.live import Live


class LayerGuard(pulumi.ComponentResource):
    """ConfigMap `cosmos3-nano-reasoner-layer-guard`: protected, after the rest of the layer."""

    def __init__(
        self,
        name: str,
        namespace: str,
        live: Live,
        depends_on: Sequence[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("cosmos3:recipe:LayerGuard", name, None, opts)
        manifest = layer_manifests.layer_guard(namespace)
        kept = pulumi.ResourceOptions(parent=self, protect=True, depends_on=list(depends_on))
        applied(name, manifest, kept, live)
        self.register_outputs({})
