"""Disruption budget: a `policy/v1` PodDisruptionBudget for the graph's workers.

Without one, a node drain (a cluster upgrade, an autoscaler scaling nodes down) may evict every
worker at once, and the graph serves nothing until each has loaded the model again. The budget
selects the worker pods by the labels the Dynamo operator puts on them
(reference/dynamo-cosmos3-facts.md 2.2, the same the monitor selects by), so it follows the pods
of every rolling-update generation. It is not the DGD's own `minAvailable`, which only Grove's
gang scheduling reads, is immutable, and is an error on other schedulers (facts, component
fields).

The frontend has one replica, for which no budget can both protect it and let a drain finish;
it gets none. Created with the graph, in the profile stack, and deleted with it.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.args import DisruptionBudgetArgs
from components.drift import warn_kubectl_fields
from components.layer_manifests import Manifest, SharedLayer, kube_object
from components.live import Live
from components.names import COMPONENT_TYPE_LABEL, GRAPH_LABEL

API_VERSION = "policy/v1"
KIND = "PodDisruptionBudget"


def max_unavailable(value: str) -> int | str:
    """The budget as the API takes an IntOrString: a whole number as an int (the text "1" would be
    refused as a malformed percentage), a percentage as text."""
    return int(value) if value.isdigit() else value


def worker_budget(args: DisruptionBudgetArgs, namespace: str) -> Manifest:
    """The workers' budget, named `<graph>-worker` like the operator's worker objects."""
    selector = {"matchLabels": {GRAPH_LABEL: args.graph, COMPONENT_TYPE_LABEL: "worker"}}
    spec = {"maxUnavailable": max_unavailable(args.max_unavailable), "selector": selector}
    return kube_object(
        API_VERSION, KIND, f"{args.graph}-worker", namespace, "disruption-budget", spec=spec
    )


class DisruptionBudget(pulumi.ComponentResource):
    """The workers' PodDisruptionBudget, in the namespace of the layer the graph runs on."""

    def __init__(
        self,
        name: str,
        args: DisruptionBudgetArgs,
        layer: pulumi.Input[SharedLayer],
        live: Live,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("cosmos3:recipe:DisruptionBudget", name, None, opts)
        manifest = pulumi.Output.from_input(layer).apply(
            lambda resolved: worker_budget(args, resolved.namespace)
        )
        self.budget = k8s.policy.v1.PodDisruptionBudget(
            f"{name}-worker",
            metadata=manifest.apply(lambda m: m["metadata"]),
            spec=manifest.apply(lambda m: m["spec"]),
            opts=pulumi.ResourceOptions(parent=self),
        )
        manifest.apply(lambda m: warn_kubectl_fields(live, m, self.budget))
        self.register_outputs({})
