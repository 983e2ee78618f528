"""Where an A/B run deploys its graphs: what the orchestrator asks of a target.

Two targets: a cluster (`stages.ab.cluster_target`, the stacks through Pulumi's Automation API)
and the lab (`lab.ab`, graphs on this machine). The stages themselves run wherever the outputs a
target's `deploy` returns say: its `stage_target` chooses once per graph (`stages.targets`), with
the tools and options the target carries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from components.contract import StackOutputs
from components.routing import RoutingProfile
from stages.core.results import ProfileResults
from stages.targets import StageTarget

Say = Callable[[str], None]


class AbTarget(Protocol):
    @property
    def name(self) -> str:
        """`cluster` or `lab`, for messages."""
        ...

    def stage_target(self, outputs: StackOutputs) -> StageTarget:
        """Where the stages run against a graph `deploy` returned, chosen once per graph from its
        outputs (`stages.targets.stage_target`), with the options or tools this target carries."""
        ...

    def stack(self, profile: RoutingProfile) -> str:
        """The stack (archive key) of a profile's graph."""
        ...

    def available_gpus(self, say: Say) -> int | None:
        """GPUs the graphs may use; None when the target has none to count (the lab)."""
        ...

    def graph_gpus(self, profile: RoutingProfile, say: Say) -> int:
        """GPUs a profile's graph takes, known before it is deployed."""
        ...

    def continue_from(self, archived: ProfileResults, say: Say) -> None:
        """A resumed run: what the profiles run now keep of one already archived, before
        `prepare` (the lab: its time scale, so that the two profiles stay comparable)."""
        ...

    def prepare(self, say: Say) -> None:
        """What both graphs stand on (the shared layer stack), brought up to date once."""
        ...

    def deploy(self, profile: RoutingProfile, say: Say) -> StackOutputs:
        """Deploy a profile's graph; returns its outputs, the stage contract."""
        ...

    def teardown(self, profile: RoutingProfile, say: Say) -> None:
        """Take a profile's graph down, freeing its GPUs (the cache and secrets stay)."""
        ...
