"""The workers' disruption budget (issue 32, part 2): the builder, the program's object with the
default and without a budget, and what `workerMaxUnavailable` refuses against `workerReplicas`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from components import disruption_budget
from components.args import DisruptionBudgetArgs
from components.config_parser import ConfigError
from components.settings import PROJECT
from tests.support import stack_settings
from tools.offline import ProgramRun

RunStack = Callable[..., ProgramRun]
PDB = "kubernetes:policy/v1:PodDisruptionBudget"
GRAPH = "cosmos3-nano-reasoner-agg-h200-session-affinity"
WORKER_PODS = {
    "nvidia.com/dynamo-graph-deployment-name": GRAPH,
    "nvidia.com/dynamo-component-type": "worker",
}
"""The labels the Dynamo operator gives the graph's worker pods (its `generateLabels`)."""


def parse(stack: str = "round-robin", **overrides: Any) -> Any:
    return stack_settings(stack, **overrides)


def refused(**overrides: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        parse(**overrides)
    return str(caught.value)


# --- the builder ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("configured", "sent"), [("1", 1), ("3", 3), ("25%", "25%")])
def test_the_budget_selects_the_graphs_workers_by_the_operators_labels(
    configured: str, sent: int | str
) -> None:
    args = DisruptionBudgetArgs(graph=GRAPH, max_unavailable=configured)
    manifest = disruption_budget.budget(
        GRAPH, "worker", disruption_budget.budgeted(args)["worker"], "ns"
    )
    assert (manifest["apiVersion"], manifest["kind"]) == ("policy/v1", "PodDisruptionBudget")
    assert manifest["metadata"]["name"] == f"{GRAPH}-worker"
    assert manifest["metadata"]["namespace"] == "ns"
    # A whole number goes as an int: the API server reads the text "3" as a broken percentage.
    assert manifest["spec"] == {"maxUnavailable": sent, "selector": {"matchLabels": WORKER_PODS}}
    assert "minAvailable" not in manifest["spec"]


# --- the program ----------------------------------------------------------------------------------


def test_each_graph_stack_gets_a_budget_of_one_worker_by_default(run_stack: RunStack) -> None:
    run = run_stack("session-affinity")
    budget = run.one(PDB)
    assert budget.inputs["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": WORKER_PODS}}
    assert budget.inputs["metadata"]["namespace"] == "cosmos3-nano-reasoner"
    component = run.by_urn(budget.parent)
    assert component.type == "cosmos3:recipe:DisruptionBudget"
    assert run.by_urn(component.parent).type == "cosmos3:recipe:Recipe"


def test_a_percentage_budget_is_sent_as_text(run_stack: RunStack) -> None:
    run = run_stack("round-robin", {"workerMaxUnavailable": "25%"})
    assert run.one(PDB).inputs["spec"]["maxUnavailable"] == "25%"


def test_an_empty_budget_creates_none(run_stack: RunStack) -> None:
    assert run_stack("round-robin", {"workerMaxUnavailable": ""}).of_type(PDB) == []


def test_several_frontends_get_a_budget_of_one_frontend(run_stack: RunStack) -> None:
    run = run_stack("round-robin", {"frontendReplicas": 2, "workerMaxUnavailable": ""})
    (budget,) = run.of_type(PDB)
    frontends = WORKER_PODS | {"nvidia.com/dynamo-component-type": "frontend"}
    frontends["nvidia.com/dynamo-graph-deployment-name"] = GRAPH.replace(
        "session-affinity", "round-robin"
    )
    assert budget.inputs["metadata"]["name"].endswith("-frontend")
    assert budget.inputs["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": frontends}}
    both = run_stack("round-robin", {"frontendReplicas": 3})
    kinds = sorted(b.inputs["metadata"]["name"].rsplit("-", 1)[1] for b in both.of_type(PDB))
    assert kinds == ["frontend", "worker"]
    assert run_stack("round-robin").of_type(PDB)[0].inputs["metadata"]["name"].endswith("-worker")
    assert len(run_stack("round-robin").of_type(PDB)) == 1  # one frontend: no frontend budget


def test_the_layer_stack_without_a_graph_has_no_budget(run_stack: RunStack) -> None:
    assert run_stack("shared").of_type(PDB) == []


# --- the config -----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["1", "8", "100%", "1%", 2, ""])
def test_budgets_that_let_a_drain_finish_are_accepted(value: Any) -> None:
    assert parse(workerMaxUnavailable=value).worker_max_unavailable == str(value)


@pytest.mark.parametrize("value", ["0", "0%", "00"])
def test_a_budget_that_lets_no_worker_go_is_refused_saying_why(value: str) -> None:
    message = refused(workerMaxUnavailable=value)
    assert f"{PROJECT}:workerMaxUnavailable is {value!r}" in message
    assert "blocks every node drain" in message and "set 1" in message


def test_a_budget_over_the_replica_count_is_refused() -> None:
    message = refused(workerMaxUnavailable="9", workerReplicas=8)
    assert f"{PROJECT}:workerMaxUnavailable is 9, more than {PROJECT}:workerReplicas (8)" in message


def test_under_an_autoscaler_the_budget_is_held_to_its_maximum() -> None:
    autoscaled: dict[str, Any] = {
        "workerAutoscaling": True,
        "workerMinReplicas": 4,
        "workerMaxReplicas": 16,
    }
    unused: dict[str, Any] = {"workerReplicas": 1}  # not written under the autoscaler

    assert parse(workerMaxUnavailable="4", **autoscaled, **unused).worker_max_unavailable == "4"
    message = refused(workerMaxUnavailable="17", **autoscaled)
    assert f"{PROJECT}:workerMaxUnavailable is 17, more than {PROJECT}:workerMaxReplicas (16)" in (
        message
    )


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("one", "must be a whole number (e.g. 1) or a percentage"),
        ("-1", "must be a whole number (e.g. 1) or a percentage"),
        ("1.5", "must be a whole number (e.g. 1) or a percentage"),
        ("25 %", "must be a whole number (e.g. 1) or a percentage"),
        ("101%", "must not be greater than 100%"),
        ("2147483648", "must be at most 2147483647"),
    ],
)
def test_a_budget_the_api_server_would_refuse_is_refused(value: str, problem: str) -> None:
    message = refused(workerMaxUnavailable=value)
    assert f"{PROJECT}:workerMaxUnavailable: {problem}" in message
