"""Graph component: the DynamoGraphDeployment of one routing profile, awaited until Ready.

The provider applies it and returns (`pulumi.com/skipAwait`); the program then waits in `pulumi up`
until the operator reports `Ready` for its current generation (components/readiness.py), within
`graphReadyTimeoutSeconds` at its first generation and `graphUpdateTimeoutSeconds` after a change
(docs/day-two.md, "The program waits itself"). Every `up` ends with the graph Ready.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any

import pulumi

from components import graph_manifest, names
from components.args import GraphArgs
from components.drift import handed_over, warn_kubectl_fields
from components.graph_manifest import ExistingGraph
from components.kubernetes_object import KubernetesObject
from components.layer_manifests import Manifest, SharedLayer
from components.live import Live, LiveReadError, ObjectRef, Unknown
from components.readiness import (
    FAILED_GRACE_SECONDS,
    Outcome,
    Verdict,
    WaitFailed,
    graph_verdict,
    wait_for,
)
from components.settings import config_key


class GraphDeployment(pulumi.ComponentResource):
    """Frontend + NIM workers as one DynamoGraphDeployment; `ready` resolves once it is Ready.

    The layer may be an Output when it comes from a shared layer stack. `depends_on` may hold
    Outputs of resources: the graph is registered once they resolve (the download's wait).
    """

    resource: KubernetesObject
    ready: pulumi.Output[bool]

    def __init__(
        self,
        name: str,
        args: GraphArgs,
        layer: pulumi.Input[SharedLayer],
        live: Live,
        depends_on: Sequence[pulumi.Input[pulumi.Resource]] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("cosmos3:recipe:GraphDeployment", name, None, opts)
        manifest = pulumi.Output.from_input(layer).apply(
            lambda resolved: graph_manifest.graph_deployment(
                args, resolved, self._existing(args, resolved, live)
            )
        )
        self.resource = KubernetesObject(
            name,
            graph_manifest.API_VERSION,
            graph_manifest.KIND,
            {key: manifest.apply(itemgetter(key)) for key in ("metadata", "spec")},
            pulumi.ResourceOptions(parent=self, depends_on=list(depends_on)),
        )
        manifest.apply(lambda m: warn_kubectl_fields(live, m, self.resource))
        self.ready = pulumi.Output.all(manifest, self.resource.id).apply(
            lambda both: _awaited(self.resource, live, both[0], args)
        )
        self.register_outputs({"ready": self.ready})

    def _existing(self, args: GraphArgs, layer: SharedLayer, live: Live) -> ExistingGraph | None:
        """The graph the cluster holds, read only when a restart or autoscaling asks (the live
        object, not the state: an adopted graph exists too); None when there is none, or when the
        cluster cannot say, which writes nothing that only an existing graph may carry. Under
        autoscaling an `up` that cannot say stops: it would drop the worker count the program
        keeps while it still owns it."""
        if not (args.restart_id or args.autoscaling):
            return None
        name = names.graph_name(args.routing.profile)
        ref = ObjectRef(graph_manifest.API_VERSION, graph_manifest.KIND, name, layer.namespace)
        found = live.attempt(lambda view: view.get(ref))
        restart = config_key("graphRestartId")
        if isinstance(found, Unknown):
            scaling = config_key("workerAutoscaling")
            if args.autoscaling and not pulumi.runtime.is_dry_run():
                raise pulumi.RunError(
                    f"cannot read {ref}: with {scaling} `pulumi up` keeps the Worker's live count "
                    "until the autoscaler owns it, and without the read it would drop it; check "
                    "the cluster's credentials and run `pulumi up` again"
                )
            if args.autoscaling:
                pulumi.log.warn(
                    f"cannot read {ref}: this preview shows the Worker without the live count "
                    f"{scaling} keeps, and `pulumi up` stops unless it can read it",
                    resource=self,
                )
            if args.restart_id:
                pulumi.log.warn(
                    f"cannot tell whether {ref} exists: {restart} is not written this run",
                    resource=self,
                )
            return None
        if found is None:
            if args.restart_id:
                pulumi.log.info(
                    f"{restart}={args.restart_id!r} takes effect on the next update: {ref} is "
                    "created now, and its CRD refuses spec.restart on create",
                    resource=self,
                )
            return None
        return existing_graph(found)


def existing_graph(found: Mapping[str, Any]) -> ExistingGraph:
    """What the builder needs of a live graph: the Worker's count, when no field manager but this
    program's (and the kubectl ones the provider takes over before an update) owns it."""
    owners = worker_replicas_owners(found)
    # pulumi-kubernetes' own manager, or one whose fields it takes over (components/drift.py).
    ours = bool(owners) and all(
        manager.startswith("pulumi-kubernetes") or handed_over(manager, operation)
        for manager, operation in owners
    )
    if not ours:
        return ExistingGraph()
    for component in (found.get("spec") or {}).get("components") or []:
        if component.get("name") == names.WORKER_COMPONENT and "replicas" in component:
            return ExistingGraph(kept_worker_replicas=int(component["replicas"]))
    return ExistingGraph()


def worker_replicas_owners(found: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(manager, operation) of each field manager that owns the Worker's `replicas`."""
    owners = []
    for entry in (found.get("metadata") or {}).get("managedFields") or []:
        if entry.get("subresource"):
            continue
        spec = (entry.get("fieldsV1") or {}).get("f:spec") or {}
        for key, fields in (spec.get("f:components") or {}).items():
            if not key.startswith("k:"):
                continue
            named = json.loads(key[2:]).get("name") == names.WORKER_COMPONENT
            if named and "f:replicas" in (fields or {}):
                owners.append((str(entry.get("manager") or ""), str(entry.get("operation") or "")))
    return owners


def _awaited(resource: pulumi.Resource, live: Live, manifest: Manifest, args: GraphArgs) -> Any:
    if pulumi.runtime.is_dry_run():
        return True  # what a successful `up` makes it; nothing is awaited in a preview
    ref = ObjectRef.of(manifest)

    def judge() -> Verdict:
        graph = live.view.get(ref)
        if graph is None:
            return Verdict(Outcome.FAILED, f"{ref} is gone: something deleted it")
        return graph_verdict(graph)

    def report(summary: str) -> None:
        pulumi.log.info(f"graph: {summary}", resource=resource, ephemeral=True)

    async def wait() -> bool:
        timeout, key = _timeout(live, ref, args)
        try:
            await wait_for(judge, timeout, report, failed_grace_seconds=FAILED_GRACE_SECONDS)
        except WaitFailed as failure:
            raise pulumi.RunError(graph_failure(failure, ref, timeout, key)) from None
        return True

    return wait()


def _timeout(live: Live, ref: ObjectRef, args: GraphArgs) -> tuple[int, str]:
    """The create timeout for a graph at its first generation, else the update timeout."""
    try:
        graph = live.view.metadata(ref)
    except LiveReadError:  # unknown: the longer of the two
        longer = max(args.ready_timeout_seconds, args.update_timeout_seconds)
        return longer, "graphReadyTimeoutSeconds or graphUpdateTimeoutSeconds"
    generation = int(((graph or {}).get("metadata") or {}).get("generation") or 1)
    if generation <= 1:
        return args.ready_timeout_seconds, "graphReadyTimeoutSeconds"
    return args.update_timeout_seconds, "graphUpdateTimeoutSeconds"


def graph_failure(failure: WaitFailed, ref: ObjectRef, timeout: int, key: str) -> str:
    """The error of a graph that did not become Ready: its reason, where to look, what next."""
    verdict = failure.verdict
    if failure.timed_out:
        head = f"{ref} is not Ready after {timeout} s (cosmos3-nano-reasoner:{key})"
    else:
        head = f"{ref} cannot start: its status says so for {FAILED_GRACE_SECONDS:.0f} s"
    selector = f"{names.GRAPH_LABEL}={ref.name}"
    return "\n".join(
        [
            f"{head}: {verdict.summary}",
            *(f"  {line}" for line in verdict.details),
            (
                f"  check: `kubectl describe dynamographdeployment {ref.name} -n {ref.namespace}`, "
                f"its pods (`kubectl get pods -n {ref.namespace} -l {selector}`) and their events"
            ),
            "  the next `pulumi up` waits for it again, from wherever it is",
        ]
    )
