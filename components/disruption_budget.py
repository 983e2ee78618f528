"""Disruption budgets: a `policy/v1` PodDisruptionBudget for the graph's workers, and one for its
frontends when it has more than one.

Without one, a node drain (a cluster upgrade, an autoscaler scaling nodes down) may evict every
worker at once, and the graph serves nothing until each has loaded the model again. The budget
selects the worker pods by the labels the Dynamo operator puts on them
(the operator's `generateLabels`, the same the monitor selects by), so it follows the pods
of every rolling-update generation. It is not the DGD's own `minAvailable`, which only Grove's
gang scheduling reads, is immutable, and is an error on other schedulers (the CRD's description
of the component's `minAvailable`).

One frontend gets no budget: none can both keep its one pod and let a drain finish. Several
(`frontendReplicas`) get one that lets one go at a time, so a drain never takes every frontend
at once. Created with the graph, in the profile stack, and deleted with it.
"""

from __future__ import annotations

from functools import partial

import pulumi

from components.args import DisruptionBudgetArgs
from components.drift import resource_of
from components.layer_manifests import Manifest, SharedLayer, kube_object
from components.live import Live
from components.names import COMPONENT_TYPE_LABEL, GRAPH_LABEL

API_VERSION = "policy/v1"
KIND = "PodDisruptionBudget"


def budget(graph: str, component: str, allowed: int | str, namespace: str) -> Manifest:
    """A component type's budget (`worker`, `frontend`), named `<graph>-<component>` like the
    operator's objects of that component."""
    selector = {"matchLabels": {GRAPH_LABEL: graph, COMPONENT_TYPE_LABEL: component}}
    spec = {"maxUnavailable": allowed, "selector": selector}
    return kube_object(
        API_VERSION, KIND, f"{graph}-{component}", namespace, "disruption-budget", spec=spec
    )


def budgeted(args: DisruptionBudgetArgs) -> dict[str, int | str]:
    """Each budgeted component's `maxUnavailable`: the workers' (unless `workerMaxUnavailable` is
    empty), and the frontends' when there are several."""
    made: dict[str, int | str] = {}
    value = args.max_unavailable
    if value:
        # As the API takes an IntOrString: a whole number as an int (the text "1" would be
        # refused as a malformed percentage), a percentage as text.
        made["worker"] = int(value) if value.isdigit() else value
    if args.frontend_replicas > 1:
        made["frontend"] = 1
    return made


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
        child = pulumi.ResourceOptions(parent=self)
        for component, most in budgeted(args).items():
            build = partial(budget, args.graph, component, most)
            resource_of(f"{name}-{component}", build(""), namespace.apply(build), child, live)
        self.register_outputs({})
