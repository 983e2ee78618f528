"""The A/B's cluster target: the project's stacks through Pulumi's Automation API.

The shared layer stack is brought up to date once (`pulumi up`, whose outputs the profiles read,
even when no resource changes); each profile's stack is deployed (`pulumi up`), its outputs read
as `pulumi stack output --json` gives them (the stages' contract), and destroyed again (`pulumi
destroy`: a profile stack holds only its graph, so the cache and secrets in the shared stack
stay).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from components.contract import OutputsError, StackOutputs
from components.routing import RoutingProfile
from components.settings import config_key
from stages.ab.plan import RECIPE_GRAPH_GPUS, refuse_unhashed_frontends, unhashed_refusal
from stages.ab.pulumi_stacks import DeployError, PulumiStacks
from stages.ab.target import Say
from stages.cluster.kubernetes_api import KubernetesApi
from stages.cluster.run import ClusterOptions
from stages.core.results import ProfileResults
from stages.errors import UsageError
from stages.targets import StageTarget, stage_target

PROFILE_STACKS = {
    RoutingProfile.ROUND_ROBIN: "round-robin",
    RoutingProfile.SESSION_AFFINITY: "session-affinity",
}
LAYER_STACK = "shared"
AUTOSCALING_KEY = "workerAutoscaling"


@dataclass
class ClusterAbTarget:
    stacks: PulumiStacks
    cluster: ClusterOptions
    gpus: int | None = None
    """None: count the `nvidia.com/gpu` the cluster's nodes offer."""
    layer_stack: str = LAYER_STACK
    profile_stacks: dict[RoutingProfile, str] = field(default_factory=lambda: dict(PROFILE_STACKS))
    name: str = "cluster"

    def stage_target(self, outputs: StackOutputs) -> StageTarget:
        """Jobs in the stack's namespace, with the cluster options (a lab graph is refused)."""
        return stage_target(outputs, self.cluster)

    def stack(self, profile: RoutingProfile) -> str:
        return self.profile_stacks[profile]

    def available_gpus(self, say: Say) -> int | None:
        if self.gpus is not None:
            return self.gpus
        api = KubernetesApi.connect("default", self.cluster.kubeconfig, self.cluster_context())
        gpus = api.allocatable_gpus()
        say(f"the cluster's nodes offer {gpus} GPUs (nvidia.com/gpu allocatable; --gpus overrides)")
        return gpus

    def cluster_context(self) -> str:
        """The context whose nodes are counted: `--context`, else the layer stack's kubeContext
        (where the profile stacks deploy), never the kubeconfig's current context; a UsageError
        before anything is deployed when neither names one."""
        if self.cluster.context:
            return self.cluster.context
        key = config_key("kubeContext")
        try:
            context = self.stacks.config_value(self.layer_stack, key)
        except DeployError as error:
            context, why = None, f"cannot read {key} of stack {self.layer_stack}: {error}"
        else:
            why = f"stack {self.layer_stack} sets no {key}"
        if not context:
            raise UsageError(
                f"the A/B counts the GPUs of the cluster it deploys to, and no --context names "
                f"it ({why.splitlines()[0]}); pass --context <the stacks' kubeContext>, or "
                "--gpus N"
            )
        return context

    def graph_gpus(self, profile: RoutingProfile, say: Say) -> int:
        """From the stack's last outputs (workers x GPUs each); the recipe's 8 if it has none.
        Asked of every profile before anything is deployed: a stack the A/B cannot measure is
        refused here (`refuse_unmeasurable`)."""
        stack = self.stack(profile)
        self.refuse_unmeasurable(profile, stack)
        try:
            outputs = StackOutputs.model_validate(self.stacks.outputs(stack))
        except (DeployError, OutputsError, ValueError):
            say(
                f"{stack}: no outputs of an earlier update; assuming the recipe's graph of "
                f"{RECIPE_GRAPH_GPUS} GPUs"
            )
            return RECIPE_GRAPH_GPUS
        if outputs.autoscaled:
            raise UsageError(autoscaled_refusal(stack))
        return outputs.graph_gpus

    def continue_from(self, archived: ProfileResults, say: Say) -> None:
        pass  # a cluster's graphs run in real time: nothing of a run's to carry over

    def refuse_unmeasurable(self, profile: RoutingProfile, stack: str) -> None:
        """A UsageError, before anything is deployed, when the stack's config hands its workers
        to an autoscaler, or runs several frontends with affinity (`refuse_unhashed_frontends`,
        which `deploy` asks again of the outputs). A key that cannot be read is taken as unset:
        its default is a fixed count and one frontend."""
        if self._config(stack, AUTOSCALING_KEY).lower() == "true":
            raise UsageError(autoscaled_refusal(stack))
        frontends = self._config(stack, "frontendReplicas")
        affinity = profile is RoutingProfile.SESSION_AFFINITY
        if affinity and frontends.isdigit() and int(frontends) > 1:
            raise UsageError(unhashed_refusal(stack, int(frontends)))

    def _config(self, stack: str, key: str) -> str:
        try:
            return (self.stacks.config_value(stack, config_key(key)) or "").strip()
        except DeployError:
            return ""

    def prepare(self, say: Say) -> None:
        say(f"{self.layer_stack}: bringing the shared layer up to date")
        self.stacks.up(self.layer_stack)

    def deploy(self, profile: RoutingProfile, say: Say) -> StackOutputs:
        raw = self.stacks.up(self.stack(profile))
        try:
            outputs = StackOutputs.model_validate(raw)
        except ValueError as error:
            raise UsageError(
                f"{self.stack(profile)}'s outputs break the contract: {error}"
            ) from None
        refuse_unhashed_frontends(outputs, self.stack(profile))  # before a stage measures it
        return outputs

    def teardown(self, profile: RoutingProfile, say: Say) -> None:
        self.stacks.destroy(self.stack(profile))


def autoscaled_refusal(stack: str) -> str:
    key = config_key(AUTOSCALING_KEY)
    return (
        f"stack {stack} hands its workers to an autoscaler ({key} is true): the A/B compares "
        "the two profiles at one fixed worker count, which an autoscaler would change during the "
        f"sweep. For the A/B, `pulumi config set {key} false --stack {stack}` (the count is then "
        "workerReplicas); the perf stage alone runs against an autoscaled graph."
    )
