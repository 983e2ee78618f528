"""Layer guard component: no `pulumi destroy` deletes what a running graph stands on.

A running graph uses its layer's namespace, model cache claim and Secrets. The claim and the
namespace are protected, but the engine continues past a protected resource when it deletes
without a preview (`pulumi destroy --skip-preview`, and every destroy through the Automation API):
it would delete the Secrets and the download Job beside them, and the graph's workers would fail
on their next restart. The engine never deletes a resource while one that depends on it stays
(pulumi `performPostSteps`: the dependencies of a delete that failed are skipped), so this
protected ConfigMap, which depends on everything else in the layer, is the first thing any
destroy meets: refused, it keeps all of it, with or without the preview.

Tearing a layer down is therefore deliberate: destroy the profile stacks, then unprotect the layer
stack and destroy it (docs/day-two.md, "Tear down").
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from components import layer_manifests
from components.drift import warn_kubectl_fields
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
        guard = k8s.core.v1.ConfigMap(
            name,
            metadata=manifest["metadata"],
            data=manifest["data"],
            opts=pulumi.ResourceOptions(parent=self, protect=True, depends_on=list(depends_on)),
        )
        warn_kubectl_fields(live, manifest, guard)
        self.register_outputs({})
