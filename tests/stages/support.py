"""What the stage tests share: the captured AIPerf exports' folder, and stack outputs as a lab
graph writes them."""

from __future__ import annotations

from pathlib import Path

from components.contract import StackOutputs
from components.routing import RECIPE_AFFINITY_TTL_SECONDS, RoutingProfile, routing_for
from lab.graph import GraphSpec
from stages.core.routing_probe import RoutingProbe

FIXTURES = Path(__file__).parent / "fixtures"


def lab_outputs_for(profile: RoutingProfile, port: int = 8000) -> StackOutputs:
    """Stack outputs as a lab graph writes them, without starting one."""
    from lab.graph import lab_outputs

    spec = GraphSpec(routing=routing_for(profile, RECIPE_AFFINITY_TTL_SECONDS), workers=8)
    outputs = lab_outputs(spec, port)
    assert outputs is not None  # a graph with a routing has outputs of its own
    return outputs


def observed_probe(workers: list[list[str | int]], header: str | None) -> RoutingProbe:
    """A routing probe that saw, for each video, the workers its questions reached."""
    return RoutingProbe(
        videos=len(workers),
        questions=len(workers[0]),
        session_header=header,
        observable=True,
        workers=workers,
    )
