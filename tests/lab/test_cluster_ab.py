"""What the lab's A/B through `pulumi up` sets and reads (`lab.cluster_ab`, `lab.frontend_service`),
without a cluster: the stacks' config, the outputs a local stage uses, the controller's status.
The real runs are on the real tier (tests/real/test_lab_controller.py, test_lab_through_pulumi.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import testenv
from common import REPO_ROOT
from components.contract import StackOutputs
from components.routing import RoutingProfile
from lab.cluster_ab import GRAPH_READY_TIMEOUT_SECONDS, lab_cluster, profile_config
from lab.deployed_graph import Phase, graph_status
from lab.frontend_service import reached_at
from testenv.cluster import ClusterError
from testenv.engine import Engine

MANIFESTS = REPO_ROOT / "manifests"


def test_the_affinity_stack_gets_the_recipe_ttl_at_the_time_scale() -> None:
    affinity = profile_config(RoutingProfile.SESSION_AFFINITY, workers=3, scale=2.5)
    round_robin = profile_config(RoutingProfile.ROUND_ROBIN, workers=3, scale=2.5)

    assert affinity["sessionAffinityTtlSeconds"] == "750"
    assert "sessionAffinityTtlSeconds" not in round_robin
    for config in (affinity, round_robin):
        assert config["workerReplicas"] == "3"
        assert config["graphReadyTimeoutSeconds"] == str(GRAPH_READY_TIMEOUT_SECONDS)
        assert config["kubeContext"] == "cosmos3-local"


def test_a_local_stage_reaches_the_published_frontend_and_nothing_else_changes() -> None:
    outputs = StackOutputs.model_validate(
        json.loads((MANIFESTS / "session-affinity" / "outputs.json").read_text())
    )

    local = reached_at(outputs, "http://127.0.0.1:41234")

    assert (local.frontend_url, local.models_url, local.frontend_port, local.target) == (
        "http://127.0.0.1:41234",
        "http://127.0.0.1:41234/v1/models",
        41234,
        "lab",
    )
    unchanged = {"frontend_url", "models_url", "frontend_port", "target"}
    assert local.model_dump(exclude=unchanged) == outputs.model_dump(exclude=unchanged)
    assert outputs.target == "cluster", "the stack's own outputs are left as they are"


def test_only_a_serving_graph_is_ready_and_every_status_names_its_generation() -> None:
    for phase in Phase:
        status = graph_status(phase, "why", generation=7)
        (ready,) = status["conditions"]

        assert ready["status"] == ("True" if phase is Phase.READY else "False")
        assert (ready["reason"], ready["message"]) == (phase.value, "why")
        assert status["observedGeneration"] == ready["observedGeneration"] == 7
        assert status["state"] in {"pending", "successful", "failed"}
    assert graph_status(Phase.STARTING, "", 1)["state"] == "pending"
    assert graph_status(Phase.PROCESS_EXITED, "", 1)["state"] == "failed"


def test_a_ready_graph_reports_the_restart_its_spec_asks_for() -> None:
    ready = graph_status(Phase.READY, "", 3, restart_id="2026-12-05")
    assert ready["restart"] == {"observedID": "2026-12-05", "phase": "Completed"}
    assert "restart" not in graph_status(Phase.STARTING, "", 3, restart_id="2026-12-05")
    assert "restart" not in graph_status(Phase.READY, "", 3)


def test_a_cluster_folder_in_the_switch_is_refused_before_the_lab_starts_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder of `testenv.cluster up` runs kwok's graph Stage, which would report the graphs'
    status in the lab controller's place; a kubeconfig is the lab's way to an existing cluster."""
    monkeypatch.setenv(testenv.ENV_CLUSTER, str(tmp_path))
    said: list[str] = []

    with pytest.raises(ClusterError) as refused:
        lab_cluster(tmp_path / "cluster", Engine(tmp_path / "engine"), said.append)

    assert "$COSMOS3_CLUSTER names a folder of `testenv.cluster up`" in str(refused.value)
    assert "name the kubeconfig of a control plane without nodes" in str(refused.value)
    assert not (tmp_path / "cluster").exists() and said == []
