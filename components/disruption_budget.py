"""Disruption budgets: a `policy/v1` PodDisruptionBudget for the graph's workers, and one for its
frontends when it has more than one.

Without one, a node drain (a cluster upgrade, an autoscaler scaling nodes down) may evict every
worker at once, and the graph serves nothing until each has loaded the model again. The budget
selects the worker pods by the labels the Dynamo operator puts on them
(reference/dynamo-cosmos3-facts.md 2.2, the same the monitor selects by), so it follows the pods
of every rolling-update generation. It is not the DGD's own `minAvailable`, which only Grove's
gang scheduling reads, is immutable, and is an error on other schedulers (facts, component
fields).

One frontend gets no budget: none can both keep its one pod and let a drain finish. Several
(`frontendReplicas`) get one that lets one go at a time, so a drain never takes every frontend
at once. Created with the graph, in the profile stack, and deleted with it.
"""

from __future__ import annotations

from functools import partial

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


def budget(graph: str, component: str, allowed: int | str, namespace: str) -> Manifest:
    """A component type's budget (`worker`, `frontend`), named `<graph>-<component>` like the
    operator's objects of that component."""
    selector = {"matchLabels": {GRAPH_LABEL: graph, COMPONENT_TYPE_LABEL: component}}
    spec = {"maxUnavailable": allowed, "selector": selector}
    return kube_object(
        API_VERSION, KIND, f"{graph}-{component}", namespace, "disruption-budget", spec=spec
    )


def worker_budget(args: DisruptionBudgetArgs, namespace: str) -> Manifest:
    return budget(args.graph, "worker", max_unavailable(args.max_unavailable), namespace)


def budgets(args: DisruptionBudgetArgs, namespace: str) -> list[Manifest]:
    """The workers' budget (unless `workerMaxUnavailable` is empty), and the frontends' when
    there are several."""
    made = [worker_budget(args, namespace)] if args.max_unavailable else []
    if args.frontend_replicas > 1:
        made.append(budget(args.graph, "frontend", 1, namespace))
    return made


def _nth(args: DisruptionBudgetArgs, index: int, namespace: str) -> Manifest:
    return budgets(args, namespace)[index]


class DisruptionBudget(pulumi.ComponentResource):
    """The graph's PodDisruptionBudgets, in the namespace of the layer the graph runs on."""

    def __init__(
        self,
        name: str,
        args: DisruptionBudgetArgs,
        layer: pulumi.Input[SharedLayer],
        live: Live,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("cosmos3:recipe:DisruptionBudget", name, None, opts)
        namespace = pulumi.Output.from_input(layer).apply(lambda resolved: resolved.namespace)
        components = ["worker"] if args.max_unavailable else []
        components += ["frontend"] if args.frontend_replicas > 1 else []
        for index, component in enumerate(components):
            self._budget(f"{name}-{component}", namespace.apply(partial(_nth, args, index)), live)
        self.register_outputs({})

    def _budget(self, name: str, manifest: pulumi.Output[Manifest], live: Live) -> None:
        made = k8s.policy.v1.PodDisruptionBudget(
            name,
            metadata=manifest.apply(lambda m: m["metadata"]),
            spec=manifest.apply(lambda m: m["spec"]),
            opts=pulumi.ResourceOptions(parent=self),
        )
        manifest.apply(lambda m: warn_kubectl_fields(live, m, made))
