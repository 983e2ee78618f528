"""What the lab controller reads from a DynamoGraphDeployment (`lab.deployed_graph`), on the
objects the program renders (manifests/, the offline render's goldens), and where it listens."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from common import REPO_ROOT
from components.names import SERVED_MODEL
from components.routing import RoutingProfile, routing_for
from lab.deployed_graph import UnrunnableGraph, WorkerMapping, read_graph
from lab.environment import LOOPBACK_ONLY, dynamo_environment
from lab.graph import FrontendCommand, GraphSpec, LabGraph, listen_on

MANIFESTS = REPO_ROOT / "manifests"


def rendered_graph(profile: str) -> dict[str, Any]:
    (path,) = (MANIFESTS / profile).glob("*-dynamographdeployment-*.yaml")
    graph: dict[str, Any] = yaml.safe_load(path.read_text())
    graph["metadata"] |= {"uid": "uid-1", "generation": 3}
    return graph


def test_the_frontend_runs_the_command_line_the_object_gives() -> None:
    graph = read_graph(rendered_graph("session-affinity"))

    assert graph.frontend.argv == (
        "python3", "-m", "dynamo.frontend", "--router-mode", "round-robin",
        "--router-session-affinity-ttl-secs", "300",
    )  # fmt: skip
    assert dict(graph.frontend.env) == {"DYN_REQUEST_PLANE": "tcp"}
    assert (graph.name, graph.namespace) == (
        "cosmos3-nano-reasoner-agg-h200-session-affinity",
        "cosmos3-nano-reasoner",
    )
    assert (graph.uid, graph.generation, graph.workers) == ("uid-1", 3, 8)


def test_round_robin_has_no_ttl_argument() -> None:
    graph = read_graph(rendered_graph("round-robin"))

    assert "--router-session-affinity-ttl-secs" not in graph.frontend.argv
    assert graph.frontend.argv[-2:] == ("--router-mode", "round-robin")


def test_an_edited_object_is_followed_not_the_settings() -> None:
    edited = rendered_graph("session-affinity")
    frontend, worker = edited["spec"]["components"]
    frontend["podTemplate"]["spec"]["containers"][0]["args"][-1] = "45"
    worker["replicas"] = 3

    graph = read_graph(edited)

    assert graph.frontend.argv[-1] == "45"
    assert graph.workers == 3


def test_workers_become_mockers_serving_the_stack_s_model() -> None:
    mapping = WorkerMapping(mocker_args=("--speedup-ratio", "0.5"))
    spec = read_graph(rendered_graph("round-robin")).spec(mapping)

    assert spec.served_model == SERVED_MODEL
    assert spec.workers == 8
    assert spec.mocker_args == ("--speedup-ratio", "0.5")
    assert spec.graph_name == "cosmos3-nano-reasoner-agg-h200-round-robin"
    assert spec.routing is None


def test_frontend_replicas_run_behind_a_pass_through_that_does_not_hash() -> None:
    """As the operator's Service: each connection to any frontend (issue 32's question)."""
    edited = rendered_graph("session-affinity")
    edited["spec"]["components"][0]["replicas"] = 2

    spec = read_graph(edited).spec(WorkerMapping())

    assert (spec.frontends, spec.frontend_hashing) == (2, False)
    assert read_graph(rendered_graph("session-affinity")).frontends == 1


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda g: g["spec"]["components"].pop(0), "0 components of type 'frontend'"),
        (
            lambda g: g["spec"]["components"][0]["podTemplate"]["spec"]["containers"][0].pop(
                "command"
            ),
            "gives no command",
        ),
        (
            lambda g: g["spec"]["components"][0]["podTemplate"]["spec"]["containers"][0][
                "env"
            ].append({"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}),
            "'TOKEN' takes its value from another object",
        ),
        (lambda g: g["spec"]["components"][1].update(replicas=0), "0 replicas in all"),
        (lambda g: g["spec"]["components"][1].update(replicas=500), "500 replicas in all"),
        (lambda g: g["spec"]["components"][0].update(replicas=5), "frontend component has 5"),
        (lambda g: g["spec"]["components"][0].update(replicas=0), "frontend component has 0"),
    ],
)
def test_an_object_the_lab_cannot_run_says_why(edit: Any, reason: str) -> None:
    graph = copy.deepcopy(rendered_graph("session-affinity"))
    edit(graph)

    with pytest.raises(UnrunnableGraph, match=reason):
        read_graph(graph)


def test_a_spec_takes_routing_or_a_frontend_command_not_both() -> None:
    frontend = FrontendCommand(argv=("python3",))
    for neither_or_both in ({}, {"routing": routing_for(RoutingProfile.ROUND_ROBIN, 0),
                                 "frontend": frontend}):  # fmt: skip
        with pytest.raises(ValueError, match="either its routing or a frontend command line"):
            GraphSpec(**neither_or_both)  # type: ignore[arg-type]
    assert GraphSpec(frontend=frontend, name="g").graph_name == "g"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["python3", "-m", "x"], ["python3", "-m", "x"]),
        (["x", "--http-port", "9000"], ["x", "--http-port", "4321"]),
        (["x", "--http-port=9000", "--http-host=0.0.0.0"], ["x", "--http-port=4321",
                                                               "--http-host=127.0.0.1"]),
        (["x", "--http-host", "0.0.0.0", "--router-mode", "round-robin"],
         ["x", "--http-host", "127.0.0.1", "--router-mode", "round-robin"]),
        (["x", "--http-h", "0.0.0.0", "--http-po=9000"],  # abbreviations, as argparse takes them
         ["x", "--http-h", "127.0.0.1", "--http-po=4321"]),
        (["x", "--http", "0.0.0.0"], ["x", "--http", "0.0.0.0"]),  # ambiguous: the frontend refuses
    ],
)  # fmt: skip
def test_only_where_the_frontend_listens_is_overridden(
    argv: list[str], expected: list[str]
) -> None:
    assert listen_on(argv, 4321) == expected


def test_a_restart_id_is_read_and_a_new_one_restarts_the_graph() -> None:
    from lab.controller import _restart_needed

    plain = rendered_graph("round-robin")
    asked = copy.deepcopy(plain)
    asked["spec"]["restart"] = {"id": "one"}
    again = copy.deepcopy(plain)
    again["spec"]["restart"] = {"id": "two"}

    assert read_graph(plain).restart_id == ""
    assert read_graph(asked).restart_id == "one"
    assert _restart_needed(read_graph(asked), read_graph(again))
    assert not _restart_needed(read_graph(asked), read_graph(copy.deepcopy(asked)))


def test_an_objects_environment_never_moves_a_listener_off_loopback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The object's env is set over the lab's, but for where the frontend listens."""
    wildcard = {name: "0.0.0.0" for name in [*LOOPBACK_ONLY, "DYN_HTTP_HOST"]}
    env = (*wildcard.items(), ("DYN_REQUEST_PLANE", "tcp"))
    frontend = FrontendCommand(argv=("python3", "-m", "dynamo.frontend"), env=env)
    graph = LabGraph(GraphSpec(frontend=frontend), tmp_path)
    spawned: dict[str, str] = {}
    monkeypatch.setattr(LabGraph, "_spawn", lambda self, name, argv, env: spawned.update(env))

    graph._start_frontend(0, dynamo_environment(tmp_path, {}))

    assert {name: spawned[name] for name in wildcard} == dict.fromkeys(wildcard, "127.0.0.1")
    assert spawned["DYN_REQUEST_PLANE"] == "tcp"  # the rest of the object's env is the object's
