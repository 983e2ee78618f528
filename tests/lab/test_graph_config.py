"""The lab graph's configuration, without starting it."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.contract import StackOutputs
from components.routing import (
    RECIPE_AFFINITY_TTL_SECONDS,
    SESSION_HEADER,
    RoutingProfile,
    routing_for,
)
from lab.environment import LabInstall, LabNotInstalled, dynamo_environment
from lab.graph import GraphSpec, lab_outputs, registered_workers


def spec(profile: RoutingProfile, workers: int = 8) -> GraphSpec:
    return GraphSpec(routing=routing_for(profile, RECIPE_AFFINITY_TTL_SECONDS), workers=workers)


def test_dynamo_state_stays_in_the_run_directory(tmp_path: Path) -> None:
    env = dynamo_environment(tmp_path, {"HOME": "/root", "TMPDIR": "/tmp", "PATH": "/usr/bin"})

    assert env["HOME"] == str(tmp_path / "home")
    assert env["TMPDIR"] == str(tmp_path / "tmp")
    assert env["DYN_FILE_KV"] == str(tmp_path / "discovery")
    assert env["PATH"] == "/usr/bin"


def test_everything_listens_on_loopback_without_etcd_or_nats(tmp_path: Path) -> None:
    env = dynamo_environment(tmp_path, {})

    assert env["DYN_DISCOVERY_BACKEND"] == "file"
    assert (env["DYN_REQUEST_PLANE"], env["DYN_EVENT_PLANE"]) == ("tcp", "zmq")
    hosts = [v for k, v in env.items() if k.endswith("_HOST")]
    assert hosts and set(hosts) == {"127.0.0.1"}


def test_the_main_venvs_python_settings_do_not_leak_into_dynamos(tmp_path: Path) -> None:
    env = dynamo_environment(
        tmp_path, {"PYTHONPATH": "/work/main", "VIRTUAL_ENV": "/work/main/.venv"}
    )

    assert "PYTHONPATH" not in env and "VIRTUAL_ENV" not in env


def test_lab_outputs_follow_the_contract() -> None:
    outputs = lab_outputs(spec(RoutingProfile.SESSION_AFFINITY, workers=3), port=18000)
    assert outputs is not None
    reloaded = StackOutputs.model_validate(outputs.to_json_dict())

    assert reloaded == outputs
    assert outputs.to_json_dict() == {
        "namespace": "lab",
        "profile": "session-affinity",
        "graphName": "cosmos3-nano-reasoner-lab-session-affinity",
        "frontendService": "lab-frontend",
        "frontendPort": 18000,
        "frontendUrl": "http://127.0.0.1:18000",
        "modelsUrl": "http://127.0.0.1:18000/v1/models",
        "servedModel": "tiny-llama",
        "sessionAffinityTtlSeconds": 300,
        "sessionHeader": SESSION_HEADER,
        "workerReplicas": 3,
        "workerGpus": 0,
        "target": "lab",
    }  # no key for a None value, as the engine stores a stack's outputs


def test_round_robin_outputs_have_no_session_header() -> None:
    outputs = lab_outputs(spec(RoutingProfile.ROUND_ROBIN), port=18000)
    assert outputs is not None

    assert outputs.session_header is None and outputs.session_affinity_ttl_seconds is None


def test_registered_workers_counts_distinct_generate_endpoints() -> None:
    health = {
        "instances": [
            {"endpoint": "generate", "instance_id": 1},
            {"endpoint": "worker_kv_query_source_a", "instance_id": 1},
            {"endpoint": "generate", "instance_id": 2},
            {"endpoint": "generate", "instance_id": 2},
        ]
    }

    assert registered_workers(health) == 2
    assert registered_workers({"status": "healthy"}) == 0


def test_a_graph_needs_a_worker() -> None:
    with pytest.raises(ValueError):
        spec(RoutingProfile.ROUND_ROBIN, workers=0)


def test_a_missing_install_names_the_setup_command(tmp_path: Path) -> None:
    with pytest.raises(LabNotInstalled, match="bash lab/setup.sh"):
        LabInstall(home=tmp_path).require()
