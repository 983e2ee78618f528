"""The A/B refuses a stack it cannot measure (issue 32): one whose workers an autoscaler owns (its
numbers need one fixed count), and one with several frontends and affinity (the Service it goes
through does not hash sessions). From the stack's config before anything is deployed, and from
its last outputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from components.routing import RoutingProfile
from components.settings import PROJECT
from stages.ab.cluster_target import ClusterAbTarget
from stages.ab.pulumi_stacks import DeployError
from stages.cluster.run import ClusterOptions
from stages.errors import UsageError
from tools.offline import ProgramRun

RunStack = Callable[..., ProgramRun]
AUTOSCALING = {"workerAutoscaling": True, "workerMinReplicas": 2, "workerMaxReplicas": 6}


class Stacks:
    """The stacks' config (None: unreadable) and last outputs, as `PulumiStacks` gives them."""

    def __init__(
        self, config: dict[str, str] | None, outputs: dict[str, Any] | None = None
    ) -> None:
        self.config = config
        self.last_outputs = outputs

    def config_value(self, stack: str, key: str) -> str | None:
        if self.config is None:
            raise DeployError(f"`pulumi config get {key}` of stack {stack} failed")
        return self.config.get(key.removeprefix(f"{PROJECT}:"))

    def outputs(self, stack: str) -> dict[str, Any]:
        if self.last_outputs is None:
            raise DeployError("no outputs")
        return self.last_outputs


def ab_target(stacks: Stacks) -> ClusterAbTarget:
    return ClusterAbTarget(stacks=stacks, cluster=ClusterOptions())  # type: ignore[arg-type]


def test_the_ab_refuses_a_stack_whose_config_hands_the_workers_to_an_autoscaler() -> None:
    with pytest.raises(UsageError) as caught:
        ab_target(Stacks({"workerAutoscaling": "true"})).graph_gpus(
            RoutingProfile.ROUND_ROBIN, lambda line: None
        )
    assert f"{PROJECT}:workerAutoscaling is true" in str(caught.value)
    assert "round-robin" in str(caught.value)


def test_the_ab_refuses_a_stack_whose_last_outputs_say_autoscaling(run_stack: RunStack) -> None:
    exports = run_stack("round-robin", AUTOSCALING).exports
    with pytest.raises(UsageError, match="workerAutoscaling"):
        ab_target(Stacks(None, exports)).graph_gpus(RoutingProfile.ROUND_ROBIN, lambda line: None)


def test_the_ab_takes_a_fixed_count_stack(run_stack: RunStack) -> None:
    exports = run_stack("round-robin").exports
    target = ab_target(Stacks({"workerAutoscaling": "false"}, exports))
    assert target.graph_gpus(RoutingProfile.ROUND_ROBIN, lambda line: None) == 8


@pytest.mark.parametrize("config", [{"frontendReplicas": "2"}, {"frontendReplicas": " 3 "}])
def test_the_ab_refuses_several_frontends_with_affinity_before_deploying(
    config: dict[str, str],
) -> None:
    target = ab_target(Stacks(config))
    with pytest.raises(UsageError) as caught:
        target.graph_gpus(RoutingProfile.SESSION_AFFINITY, lambda line: None)
    message = str(caught.value)
    assert (
        "session-affinity runs" in message and "frontend replicas with session affinity" in message
    )
    assert f"{PROJECT}:frontendReplicas 1" in message


@pytest.mark.parametrize("config", [{"frontendReplicas": "1"}, {}, None])
def test_one_frontend_or_an_unreadable_key_is_measured(config: dict[str, str] | None) -> None:
    assert ab_target(Stacks(config)).graph_gpus(RoutingProfile.SESSION_AFFINITY, print) == 8


def test_several_round_robin_frontends_are_measured() -> None:
    target = ab_target(Stacks({"frontendReplicas": "2"}))
    assert target.graph_gpus(RoutingProfile.ROUND_ROBIN, lambda line: None) == 8
