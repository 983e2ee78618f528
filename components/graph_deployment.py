"""Graph component: the DynamoGraphDeployment of one routing profile, awaited until Ready."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from components import graph_manifest
from components.args import GraphArgs
from components.layer_manifests import SharedLayer


class GraphDeployment(pulumi.ComponentResource):
    """Frontend + NIM workers as one DynamoGraphDeployment.

    The manifest's `pulumi.com/waitFor: condition=Ready` makes pulumi-kubernetes wait for the
    operator's Ready condition (custom resources are otherwise "ready" on admission); the custom
    timeout bounds that wait. The layer may be an Output when it comes from a shared layer stack.
    """

    resource: k8s.apiextensions.CustomResource

    def __init__(
        self,
        name: str,
        args: GraphArgs,
        layer: pulumi.Input[SharedLayer],
        depends_on: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("cosmos3:recipe:GraphDeployment", name, None, opts)
        manifest = pulumi.Output.from_input(layer).apply(
            lambda resolved: graph_manifest.graph_deployment(args, resolved)
        )
        timeout = f"{args.ready_timeout_seconds}s"
        self.resource = k8s.apiextensions.CustomResource(
            name,
            api_version=graph_manifest.API_VERSION,
            kind=graph_manifest.KIND,
            metadata=manifest.apply(lambda m: m["metadata"]),
            spec=manifest.apply(lambda m: m["spec"]),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=list(depends_on),
                custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout),
            ),
        )
        self.register_outputs({})
