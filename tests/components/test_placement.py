"""Placement (issue 32): affinity, priority class, runtime class, scheduler name, node selector and
tolerations for the workers, the frontend and the download Job. Each lands in its pod spec only
when set, each bad value is refused naming its key, and the Job takes the workers' placement for
every field of its own left empty.

The values (tests/components/support.py) are the real tier's too (tests/real/test_placement.py):
there the API server judges them, the bad ones refused by it as by the config check."""

from __future__ import annotations

import re
from typing import Any

import pytest

from components.affinity import affinity_problems
from components.graph_manifest import graph_deployment
from components.layer_manifests import model_download_job
from components.recipe_args import download_args, graph_args, own_layer
from components.settings import StackSettings
from tests.components.support import (
    BAD_AFFINITIES,
    BAD_NAMES,
    GOOD_AFFINITIES,
    GPU_NODES,
    NEAR_THE_WORKERS,
    ONE_WORKER_PER_NODE,
    PREFIXES,
    STRICTER_AFFINITIES,
    STRICTER_NAMES,
    Manifest,
    P,
    parse,
    refused,
)


def objects(settings: StackSettings) -> tuple[Manifest, Manifest, Manifest]:
    """The frontend's and the workers' pod specs, and the download Job's pod spec."""
    layer = own_layer(settings)
    graph = graph_deployment(graph_args(settings), layer)
    frontend, worker = (c["podTemplate"]["spec"] for c in graph["spec"]["components"])
    job = model_download_job(download_args(settings), layer)["spec"]["template"]["spec"]
    return frontend, worker, job


PLACEMENT_FIELDS = (
    "nodeSelector",
    "tolerations",
    "affinity",
    "priorityClassName",
    "runtimeClassName",
    "schedulerName",
)


def test_by_default_no_pod_spec_has_a_placement_field() -> None:
    for spec in objects(parse()):
        assert not set(PLACEMENT_FIELDS) & set(spec), spec


def _every_field(prefix: str, affinity: Manifest) -> dict[str, Any]:
    return {
        f"{prefix}NodeSelector": [f"pool={prefix.lower()}"],
        f"{prefix}Tolerations": [f"{prefix.lower()}:NoSchedule"],
        f"{prefix}Affinity": affinity,
        f"{prefix}PriorityClassName": f"{prefix.lower()}-priority",
        f"{prefix}RuntimeClassName": "nvidia",
        f"{prefix}SchedulerName": f"{prefix.lower()}-scheduler",
    }


def _expected(prefix: str, affinity: Manifest) -> Manifest:
    return {
        "nodeSelector": {"pool": prefix.lower()},
        "tolerations": [{"key": prefix.lower(), "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": affinity,
        "priorityClassName": f"{prefix.lower()}-priority",
        "runtimeClassName": "nvidia",
        "schedulerName": f"{prefix.lower()}-scheduler",
    }


def _placement(spec: Manifest) -> Manifest:
    return {field: spec[field] for field in PLACEMENT_FIELDS if field in spec}


def test_each_components_placement_lands_in_its_own_pod_spec_only() -> None:
    config = (
        _every_field("worker", GPU_NODES)
        | _every_field("frontend", NEAR_THE_WORKERS)
        | _every_field("modelDownload", ONE_WORKER_PER_NODE)
    )
    frontend, worker, job = objects(parse(**config))
    assert _placement(worker) == _expected("worker", GPU_NODES)
    assert _placement(frontend) == _expected("frontend", NEAR_THE_WORKERS)
    assert _placement(job) == _expected("modelDownload", ONE_WORKER_PER_NODE)


def test_the_job_takes_the_workers_placement_for_each_field_of_its_own_left_empty() -> None:
    settings = parse(
        **_every_field("worker", GPU_NODES),
        modelDownloadTolerations=["download:NoExecute"],
        modelDownloadSchedulerName="default-scheduler",
    )
    frontend, _, job = objects(settings)
    expected = _expected("worker", GPU_NODES) | {
        "tolerations": [{"key": "download", "operator": "Exists", "effect": "NoExecute"}],
        "schedulerName": "default-scheduler",
    }
    assert _placement(job) == expected
    assert _placement(frontend) == {}, "the frontend never takes the workers' placement"


def test_the_graph_keeps_the_workers_pull_secret_beside_their_placement() -> None:
    settings = parse(
        workerPriorityClassName="inference",
        registryServer="mirror.example:5000",
        registryUsername="robot",
        secrets={"ngcApiKey": "k", "registryPassword": "p"},
    )
    frontend, worker, job = objects(settings)
    for spec in (frontend, worker, job):
        assert spec["imagePullSecrets"] == [{"name": "registry-pull-secret"}]
    assert worker["priorityClassName"] == job["priorityClassName"] == "inference"
    assert "priorityClassName" not in frontend


@pytest.mark.parametrize("affinity", GOOD_AFFINITIES)
def test_an_affinity_the_api_server_takes_is_taken(affinity: Manifest) -> None:
    assert affinity_problems(affinity) == []
    assert parse(frontendAffinity=affinity).frontend_affinity == affinity


def test_an_affinity_arrives_as_json_text_from_the_cli_and_empty_text_is_none() -> None:
    assert parse(workerAffinity='{"podAntiAffinity": {}}').worker_affinity == {
        "podAntiAffinity": {}
    }
    assert parse(workerAffinity="").worker_affinity == {}
    refused(re.escape(f"{P}:workerAffinity: expected a YAML/JSON object"), workerAffinity="{")
    refused(
        re.escape(f"{P}:workerAffinity: Input should be a valid dictionary"), workerAffinity="[]"
    )


@pytest.mark.parametrize(
    ("affinity", "where", "says"),
    BAD_AFFINITIES + STRICTER_AFFINITIES,
    ids=[
        f"{index}-{where}"
        for index, (_, where, _) in enumerate(BAD_AFFINITIES + STRICTER_AFFINITIES)
    ],
)
@pytest.mark.parametrize("prefix", PREFIXES)
def test_a_bad_affinity_is_refused_naming_the_key_and_the_field(
    prefix: str, affinity: Manifest, where: str, says: str
) -> None:
    message = refused(re.escape(f"{P}:{prefix}Affinity: "), **{f"{prefix}Affinity": affinity})
    (line,) = [line for line in message.splitlines() if f"{prefix}Affinity" in line]
    assert where in line and says in line, line


NAME_CASES = [
    (prefix, *case)
    for prefix in PREFIXES
    for case in BAD_NAMES + STRICTER_NAMES
    # workerNodeSelector and workerTolerations have their own: tests/components/test_settings.py
    if prefix != "worker" or case[0] not in ("NodeSelector", "Tolerations")
]


@pytest.mark.parametrize(("prefix", "suffix", "value", "says"), NAME_CASES)
def test_a_bad_name_is_refused_naming_its_key(
    prefix: str, suffix: str, value: Any, says: str
) -> None:
    message = refused(re.escape(f"{P}:{prefix}{suffix}"), **{f"{prefix}{suffix}": value})
    assert says in message, message


@pytest.mark.parametrize(
    "config",
    [
        {"workerPriorityClassName": "a" * 253},
        {"workerRuntimeClassName": "nvidia.runtime-1"},
        {"workerSchedulerName": "Kai_Scheduler.v2"},
        {"frontendSchedulerName": "default-scheduler"},
        {"frontendNodeSelector": ["node.kubernetes.io/instance-type=m7i.4xlarge"]},
        {"frontendTolerations": [":NoExecute"]},
    ],
)
def test_legal_edges_are_taken(config: dict[str, Any]) -> None:
    ((key, value),) = config.items()
    settings = parse(**config)
    assert settings.model_dump(by_alias=True)[key] == value


def test_frontend_placement_on_a_stack_without_a_graph_is_refused() -> None:
    message = refused(
        f"{P}:frontendPriorityClassName set with {P}:deployGraph false",
        stack="shared",
        frontendPriorityClassName="web",
    )
    assert "set its placement on the profile stacks" in message


def test_a_profile_stack_takes_the_worker_and_frontend_placement() -> None:
    settings = parse(
        "round-robin", secrets={}, workerSchedulerName="kai-scheduler", frontendAffinity=GPU_NODES
    )
    _, worker, _ = objects(settings)
    assert worker["schedulerName"] == "kai-scheduler"
