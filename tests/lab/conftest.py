"""Fixtures for the lab tests. Tests marked `lab` (marker declared in pyproject.toml) start real
Dynamo processes from `.lab/`; they skip, saying why, when `bash lab/setup.sh` has not run."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from components.routing import RECIPE_AFFINITY_TTL_SECONDS, RoutingProfile, routing_for
from lab.environment import LabInstall
from lab.graph import GraphSpec, LabGraph


@pytest.fixture
def lab_install() -> LabInstall:
    install = LabInstall()
    missing = install.missing()
    if missing:
        pytest.skip("lab not installed (run bash lab/setup.sh): missing " + ", ".join(missing))
    return install


@pytest.fixture
def start_graph(lab_install: LabInstall, tmp_path: Path) -> Iterator[Callable[..., LabGraph]]:
    """Start lab graphs inside a test; every graph is stopped when the test ends, pass or fail."""
    graphs: list[LabGraph] = []

    def start(profile: RoutingProfile, workers: int = 2, **spec_fields: Any) -> LabGraph:
        routing = routing_for(profile, RECIPE_AFFINITY_TTL_SECONDS)
        spec = GraphSpec(routing=routing, workers=workers, install=lab_install, **spec_fields)
        graph = LabGraph(spec, tmp_path / f"graph-{len(graphs)}-{profile.value}")
        graphs.append(graph)
        return graph.__enter__()

    yield start
    for graph in graphs:
        graph.stop()
