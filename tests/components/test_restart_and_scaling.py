"""Restart and autoscaler-owned replicas (issue 32, parts 1 and 5): the keys and what they refuse,
the graph the builder makes of them (restart only on a graph that exists; the Worker's count left
to the scaling adapter), what the live graph tells the builder, the wait for a restart and the
outputs' flag (the A/B's refusal: tests/stages/ab/test_unmeasurable_stack.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pulumi
import pytest

from components import graph_manifest
from components.config_parser import ConfigError, parse_stack_config
from components.contract import StackOutputs
from components.graph_deployment import existing_graph
from components.graph_manifest import ExistingGraph
from components.layer_manifests import SharedLayer
from components.readiness import Outcome, graph_verdict
from components.recipe_args import graph_args
from components.settings import PROJECT, StackSettings
from tests.support import stack_settings
from tools.offline import MockCluster, ProgramRun
from tools.stack_files import cli_config, example_site_for

RunStack = Callable[..., ProgramRun]
GRAPH = "cosmos3-nano-reasoner-agg-h200-round-robin"
DGD = "kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment"
AUTOSCALING = {"workerAutoscaling": True, "workerMinReplicas": 2, "workerMaxReplicas": 6}


def settings(**overrides: Any) -> StackSettings:
    return stack_settings("round-robin", **overrides)


def refused(**overrides: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        settings(**overrides)
    return str(caught.value)


def layer() -> SharedLayer:
    return SharedLayer("cosmos3-nano-reasoner", "shared-model-cache")


def built(existing: ExistingGraph | None = None, **overrides: Any) -> dict[str, Any]:
    return graph_manifest.graph_deployment(graph_args(settings(**overrides)), layer(), existing)


def worker_of(graph: dict[str, Any]) -> dict[str, Any]:
    (worker,) = [c for c in graph["spec"]["components"] if c["name"] == "Worker"]
    component: dict[str, Any] = worker
    return component


# --- the keys ------------------------------------------------------------------------------------


def test_off_by_default() -> None:
    s = settings()
    assert (s.graph_restart_id, s.graph_restart_strategy) == ("", "Sequential")
    assert not s.worker_autoscaling


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            AUTOSCALING | {"workerMinReplicas": 7},
            f"{PROJECT}:workerMinReplicas (7) is above {PROJECT}:workerMaxReplicas (6)",
        ),
        ({"workerMinReplicas": 0}, f"{PROJECT}:workerMinReplicas: Input should be greater"),
        ({"workerMaxReplicas": 5001}, f"{PROJECT}:workerMaxReplicas: must be at most 5000"),
        ({"graphRestartId": "x" * 257}, f"{PROJECT}:graphRestartId: must be at most 256"),
        ({"graphRestartId": "a\nb"}, f"{PROJECT}:graphRestartId: must contain no control"),
        ({"graphRestartId": " 1"}, f"{PROJECT}:graphRestartId: must not begin or end"),
        ({"graphRestartStrategy": "Rolling"}, f"{PROJECT}:graphRestartStrategy: Input should be"),
    ],
)
def test_bad_values_are_refused_naming_the_key(overrides: dict[str, Any], expected: str) -> None:
    assert expected in refused(**overrides)


def test_bounds_out_of_order_are_refused_only_with_autoscaling_on() -> None:
    assert settings(workerMinReplicas=7, workerMaxReplicas=6).worker_min_replicas == 7


@pytest.mark.parametrize("overrides", [{"graphRestartId": "1"}, {"workerAutoscaling": True}])
def test_a_stack_without_a_graph_refuses_them(overrides: dict[str, Any]) -> None:
    config = cli_config("shared", example_site_for("shared") | overrides)
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(config, {f"{PROJECT}:ngcApiKey"} | set())
    key = next(iter(overrides))
    assert f"{PROJECT}:{key} set and {PROJECT}:deployGraph is false" in str(caught.value)


# --- the graph -----------------------------------------------------------------------------------


def test_the_default_graph_has_no_restart_and_a_fixed_count() -> None:
    graph = built(ExistingGraph())
    assert "restart" not in graph["spec"]
    worker = worker_of(graph)
    assert worker["replicas"] == 8 and "scalingAdapter" not in worker


def test_a_restart_is_written_only_to_a_graph_that_exists() -> None:
    assert "restart" not in built(None, graphRestartId="2026-12-05")["spec"]
    graph = built(ExistingGraph(), graphRestartId="2026-12-05", graphRestartStrategy="Parallel")
    assert graph["spec"]["restart"] == {"id": "2026-12-05", "strategy": {"type": "Parallel"}}


@pytest.mark.parametrize("existing", [None, ExistingGraph()])
def test_autoscaling_hands_the_count_to_the_adapter(existing: ExistingGraph | None) -> None:
    worker = worker_of(built(existing, **AUTOSCALING))
    assert worker["scalingAdapter"] == {}, "v1beta1: the bare object opts in"
    assert "replicas" not in worker


def test_autoscaling_keeps_the_count_the_program_still_owns() -> None:
    worker = worker_of(built(ExistingGraph(kept_worker_replicas=8), **AUTOSCALING))
    assert (worker["replicas"], worker["scalingAdapter"]) == (8, {})


def test_the_frontend_keeps_its_count_with_autoscaling() -> None:
    (frontend,) = [
        c for c in built(None, **AUTOSCALING)["spec"]["components"] if c["type"] == "frontend"
    ]
    assert frontend["replicas"] == 1 and "scalingAdapter" not in frontend


# --- what the live graph tells the builder -------------------------------------------------------


def live_graph(*owners: tuple[str, str], replicas: int = 5) -> dict[str, Any]:
    worker_key = "k:" + json.dumps({"name": "Worker"}, separators=(",", ":"))
    owned: dict[str, Any] = {"f:spec": {"f:components": {worker_key: {".": {}, "f:replicas": {}}}}}
    return {
        "metadata": {
            "name": GRAPH,
            "managedFields": [
                {"manager": manager, "operation": operation, "fieldsV1": owned}
                for manager, operation in owners
            ],
        },
        "spec": {
            "components": [
                {"name": "Frontend", "replicas": 1},
                {"name": "Worker", "replicas": replicas},
            ]
        },
    }


@pytest.mark.parametrize(
    ("owners", "kept"),
    [
        ([("pulumi-kubernetes-1a2b3c", "Apply")], 5),
        ([("pulumi-kubernetes-1a2b3c", "Apply"), ("kubectl-patch", "Update")], 5),
        ([("keda-operator", "Update")], None),
        ([("pulumi-kubernetes-1a2b3c", "Apply"), ("dynamo-operator", "Update")], None),
        ([], None),
    ],
)
def test_the_count_is_kept_only_while_no_other_manager_owns_it(
    owners: list[tuple[str, str]], kept: int | None
) -> None:
    assert existing_graph(live_graph(*owners)).kept_worker_replicas == kept


def test_a_status_subresource_entry_owns_nothing_here() -> None:
    graph = live_graph(("pulumi-kubernetes-1a2b3c", "Apply"))
    status_entry = dict(graph["metadata"]["managedFields"][0], manager="kwok", subresource="status")
    graph["metadata"]["managedFields"].append(status_entry)
    assert existing_graph(graph).kept_worker_replicas == 5


# --- the program, under mocks --------------------------------------------------------------------


class Said:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.info: list[str] = []
        self.warnings: list[str] = []
        monkeypatch.setattr(pulumi.log, "info", lambda message, *a, **k: self.info.append(message))
        monkeypatch.setattr(
            pulumi.log, "warn", lambda message, *a, **k: self.warnings.append(message)
        )


def test_a_first_up_with_a_restart_id_creates_the_graph_without_it_and_says_so(
    run_stack: RunStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    said = Said(monkeypatch)
    absent = MockCluster({("DynamoGraphDeployment", GRAPH): None})
    run = run_stack("round-robin", {"graphRestartId": "r1"}, cluster=absent, preview=True)
    assert "restart" not in run.one(DGD).inputs["spec"]
    assert any(
        f"{PROJECT}:graphRestartId='r1' takes effect on the next update" in line
        for line in said.info
    ), said.info


def test_an_up_of_an_existing_graph_writes_the_restart(run_stack: RunStack) -> None:
    run = run_stack("round-robin", {"graphRestartId": "r1"})
    assert run.one(DGD).inputs["spec"]["restart"] == {
        "id": "r1",
        "strategy": {"type": "Sequential"},
    }


def test_a_cluster_that_cannot_be_read_writes_no_restart_and_says_so(
    run_stack: RunStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from components.live import LiveReadError

    class Unreadable(MockCluster):
        def get(self, ref: Any) -> dict[str, Any] | None:
            if ref.kind == "DynamoGraphDeployment":
                raise LiveReadError("no credentials")
            return super().get(ref)

    said = Said(monkeypatch)
    run = run_stack("round-robin", {"graphRestartId": "r1"}, cluster=Unreadable(), preview=True)
    assert "restart" not in run.one(DGD).inputs["spec"]
    assert any("graphRestartId is not written this run" in line for line in said.warnings)


def test_an_up_that_cannot_read_the_graph_under_autoscaling_stops(run_stack: RunStack) -> None:
    """It would drop the count the program keeps while it owns it (a preview goes on)."""
    from components.live import LiveReadError

    class Unreadable(MockCluster):
        def get(self, ref: Any) -> dict[str, Any] | None:
            if ref.kind == "DynamoGraphDeployment":
                raise LiveReadError("client timeout")
            return super().get(ref)

    with pytest.raises(pulumi.RunError, match=f"cannot read .*{GRAPH}: with {PROJECT}:workerAuto"):
        run_stack("round-robin", AUTOSCALING, cluster=Unreadable())
    previewed = run_stack("round-robin", AUTOSCALING, cluster=Unreadable(), preview=True)
    assert "replicas" not in worker_of(previewed.one(DGD).inputs)


def test_an_autoscaled_graph_is_registered_without_a_worker_count(run_stack: RunStack) -> None:
    run = run_stack("round-robin", AUTOSCALING)
    worker = worker_of(run.one(DGD).inputs)
    assert worker["scalingAdapter"] == {} and "replicas" not in worker


def test_a_graph_switched_to_autoscaling_is_registered_with_its_live_count(
    run_stack: RunStack,
) -> None:
    running = live_graph(("pulumi-kubernetes-1a2b3c", "Apply"), replicas=4)
    cluster = MockCluster({("DynamoGraphDeployment", GRAPH): running})
    run = run_stack("round-robin", AUTOSCALING, cluster=cluster, preview=True)
    worker = worker_of(run.one(DGD).inputs)
    assert (worker["replicas"], worker["scalingAdapter"]) == (4, {})


def test_the_graph_is_not_read_when_neither_key_asks(run_stack: RunStack) -> None:
    cluster = MockCluster()
    run_stack("round-robin", cluster=cluster, preview=True)
    assert ("DynamoGraphDeployment", GRAPH) not in cluster.reads


# --- the wait ------------------------------------------------------------------------------------


def graph(
    generation: int,
    observed: int | None,
    restart_id: str | None = None,
    restart_status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    ready: dict[str, Any] = {"type": "Ready", "status": "True", "reason": "Ok"}
    if observed is not None:
        ready["observedGeneration"] = observed
    spec = {"restart": {"id": restart_id}} if restart_id else {}
    status: dict[str, Any] = {"state": "successful", "conditions": [ready]}
    if restart_status is not None:
        status["restart"] = restart_status
    return {"metadata": {"generation": generation}, "spec": spec, "status": status}


def test_a_status_without_a_generation_is_current_only_for_a_new_graph() -> None:
    assert graph_verdict(graph(1, None)).outcome is Outcome.DONE
    after_update = graph_verdict(graph(2, None))
    assert after_update.outcome is Outcome.WAITING
    assert "earlier generation than 2" in after_update.summary


@pytest.mark.parametrize(
    ("restart_status", "outcome", "said"),
    [
        (None, Outcome.WAITING, "restart 'r2' not started yet"),
        ({"observedID": "r1", "phase": "Completed"}, Outcome.WAITING, "not started yet"),
        (
            {"observedID": "r2", "phase": "Restarting", "inProgress": ["Worker"]},
            Outcome.WAITING,
            "Restarting (Worker)",
        ),
        ({"observedID": "r2", "phase": "Completed"}, Outcome.DONE, "restart 'r2' completed"),
        ({"observedID": "r2", "phase": "Failed"}, Outcome.FAILED, "restart 'r2' failed"),
    ],
)
def test_a_restart_is_waited_for_until_the_operator_says_it_completed(
    restart_status: dict[str, Any] | None, outcome: Outcome, said: str
) -> None:
    verdict = graph_verdict(graph(3, 3, restart_id="r2", restart_status=restart_status))
    assert verdict.outcome is outcome
    assert said in verdict.summary


# --- the outputs and the A/B ---------------------------------------------------------------------


def test_the_outputs_say_autoscaling_and_its_bounds(run_stack: RunStack) -> None:
    exports = run_stack("round-robin", AUTOSCALING).exports
    assert exports["workerAutoscaling"] is True
    assert (exports["workerMinReplicas"], exports["workerMaxReplicas"]) == (2, 6)
    assert exports["workerReplicas"] == 6, "the most workers: the GPUs the graph can come to hold"
    assert exports["workerScalingAdapter"] == f"{GRAPH}-worker"
    assert StackOutputs.model_validate(exports).autoscaled


def test_a_fixed_count_stack_exports_none_of_the_new_keys(run_stack: RunStack) -> None:
    exports = run_stack("round-robin").exports
    new = {"workerAutoscaling", "workerMinReplicas", "workerMaxReplicas", "workerScalingAdapter"}
    assert not new & set(exports)
    assert not StackOutputs.model_validate(exports).autoscaled
