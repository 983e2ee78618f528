"""Placement (issue 32): affinity, priority class, runtime class, scheduler name, node selector and
tolerations for the workers, the frontend and the download Job. Each lands in its pod spec only
when set, each bad value is refused naming its key, and the Job takes the workers' placement for
every field of its own left empty.

The values here are the real tier's too (tests/real/test_placement.py): there the API server
judges them, the bad ones refused by it as by the config check."""

from __future__ import annotations

import re
from typing import Any

import pytest

from components.affinity import affinity_problems
from components.graph_manifest import graph_deployment
from components.layer_manifests import model_download_job
from components.recipe_args import download_args, graph_args, own_layer
from components.settings import StackSettings
from tests.components.test_settings import P, parse, refused

Manifest = dict[str, Any]

GPU_NODES = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {
                            "key": "nvidia.com/gpu.product",
                            "operator": "In",
                            "values": ["NVIDIA-H200"],
                        }
                    ]
                }
            ]
        }
    }
}
ONE_WORKER_PER_NODE = {
    "podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 100,
                "podAffinityTerm": {
                    "labelSelector": {
                        "matchLabels": {"nvidia.com/dynamo-component-type": "worker"}
                    },
                    "topologyKey": "kubernetes.io/hostname",
                },
            }
        ]
    }
}
NEAR_THE_WORKERS = {
    "podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "labelSelector": {
                    "matchExpressions": [
                        {"key": "app.kubernetes.io/name", "operator": "Exists"},
                        {"key": "tier", "operator": "NotIn", "values": ["batch", ""]},
                    ]
                },
                "namespaces": ["cosmos3-dev"],
                "namespaceSelector": {},
                "topologyKey": "topology.kubernetes.io/zone",
                "matchLabelKeys": ["pod-template-hash"],
                "mismatchLabelKeys": ["tenant"],
            }
        ]
    },
    "nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [{"key": "cpu", "operator": "Gt", "values": ["32"]}]}},
            {"weight": 50, "preference": {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node-1"]}]}},
            {"weight": 5, "preference": {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["not a label value!"]}]}},
        ]
    },
}  # fmt: skip

GOOD_AFFINITIES = [GPU_NODES, ONE_WORKER_PER_NODE, NEAR_THE_WORKERS, {"podAntiAffinity": {}}]

_REQUIRED = ["nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"]


def _node_terms(*terms: Any) -> Manifest:
    return {"nodeAffinity": {_REQUIRED[1]: {"nodeSelectorTerms": list(terms)}}}


def _expression(**fields: Any) -> Manifest:
    return _node_terms({"matchExpressions": [fields]})


def _pod_term(**fields: Any) -> Manifest:
    return {"podAffinity": {_REQUIRED[1]: [fields]}}


TERM = "nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
EXPRESSION = f"{TERM}.matchExpressions[0]"
POD_TERM = "podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"

BAD_AFFINITIES: list[tuple[Manifest, str, str]] = [
    # (affinity, where the problem is, what the message says): the API server refuses each in a
    # pod template (tests/real/test_placement.py shows it does).
    (_node_terms(), f"{_REQUIRED[0]}.{_REQUIRED[1]}.nodeSelectorTerms", "at least one"),
    (_expression(key="pool", operator="Near", values=["a"]), f"{EXPRESSION}.operator", "not a valid selector operator"),
    (_expression(key="pool", operator="In"), f"{EXPRESSION}.values", "must be specified when"),
    (_expression(key="pool", operator="Exists", values=["a"]), f"{EXPRESSION}.values", "may not be specified"),
    (_expression(key="pool", operator="Gt", values=["1", "2"]), f"{EXPRESSION}.values", "single value"),
    (_expression(key="bad key!", operator="Exists"), f"{EXPRESSION}.key", "name part"),
    (_expression(key="pool", operator="In", values=["not a label value!"]), f"{EXPRESSION}.values[0]", "alphanumeric"),
    (_node_terms({"matchFields": [{"key": "metadata.labels", "operator": "In", "values": ["a"]}]}), f"{TERM}.matchFields[0].key", "not a valid field selector key"),
    (_node_terms({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}), f"{TERM}.matchFields[0].values", "only one value"),
    ({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "preference": {}}]}}, "preferredDuringSchedulingIgnoredDuringExecution[0].weight", "range 1-100"),
    (_pod_term(labelSelector={}), f"{POD_TERM}.topologyKey", "is required"),
    (_pod_term(topologyKey=""), f"{POD_TERM}.topologyKey", "can not be empty"),
    (_pod_term(topologyKey="bad key!"), f"{POD_TERM}.topologyKey", "name part"),
    (_pod_term(topologyKey="zone", namespaces=["Bad_NS"]), f"{POD_TERM}.namespaces[0]", "RFC 1123 label"),
    (_pod_term(topologyKey="zone", labelSelector={"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}), f"{POD_TERM}.labelSelector.matchExpressions[0].operator", "not a valid selector operator"),
    (_pod_term(topologyKey="zone", labelSelector={"matchLabels": {"a": "b c"}}), f"{POD_TERM}.labelSelector.matchLabels", "alphanumeric"),
    (_pod_term(topologyKey="zone", matchLabelKeys=["pod-template-hash"]), f"{POD_TERM}.matchLabelKeys", "labelSelector is not set"),
    (_pod_term(topologyKey="zone", labelSelector={}, matchLabelKeys=["a"], mismatchLabelKeys=["a"]), f"{POD_TERM}.matchLabelKeys[0]", "both matchLabelKeys and mismatchLabelKeys"),
    ({"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 101, "podAffinityTerm": {"topologyKey": "zone"}}]}}, "podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight", "range 1-100"),
    ({"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1}]}}, "podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm", "is required"),
    ({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": "50", "preference": {}}]}}, "preferredDuringSchedulingIgnoredDuringExecution[0].weight", "must be an integer"),
    ({"nodeAfinity": {}}, "nodeAfinity", "unknown field"),
    ({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"topologyKey": "zone"}}}, "podAffinity.requiredDuringSchedulingIgnoredDuringExecution", "must be a list"),
    (_expression(key="pool", operator="In", values=[8]), f"{EXPRESSION}.values[0]", "must be a string"),
]  # fmt: skip

STRICTER_AFFINITIES: list[tuple[Manifest, str, str]] = [
    # Refused here though the API server takes it in a Job's pod template: a pod made from it
    # would be refused once the API server merges matchLabelKeys into its selector, and the DGD's
    # schema requires `preference`; a null the API server reads as "not set" is a mistake.
    (_pod_term(topologyKey="zone", labelSelector={"matchLabels": {"a": "b"}}, matchLabelKeys=["a"]), f"{POD_TERM}.matchLabelKeys[0]", "both matchLabelKeys and labelSelector"),
    ({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1}]}}, "preferredDuringSchedulingIgnoredDuringExecution[0].preference", "is required"),
    ({"podAffinity": None}, "podAffinity", "must not be null"),
]  # fmt: skip

PREFIXES = ("worker", "frontend", "modelDownload")

BAD_NAMES: list[tuple[str, str | list[str], str]] = [
    # (key suffix, value, what the message says)
    ("PriorityClassName", "High_Priority", "RFC 1123 subdomain"),
    ("PriorityClassName", "a" * 254, "no more than 253"),
    ("RuntimeClassName", "Nvidia", "RFC 1123 subdomain"),
    ("RuntimeClassName", "nvidia\n", "RFC 1123 subdomain"),
    ("NodeSelector", ["pool"], "key=value"),
    ("Tolerations", ["pool:Sometimes"], "NoSchedule"),
]
STRICTER_NAMES: list[tuple[str, str, str]] = [
    # The API server takes any schedulerName; no scheduler answers to these.
    ("SchedulerName", "kai/scheduler", "may not contain '/'"),
    ("SchedulerName", "..", "may not be '..'"),
    ("SchedulerName", "kai scheduler", "whitespace"),
]


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
