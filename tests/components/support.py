"""What the component tests share: settings parsed or refused, legal edges, placement values."""

from __future__ import annotations

from typing import Any

import pytest

from components.config_parser import ConfigError
from components.settings import PROJECT, StackSettings
from tests.support import stack_settings

P = PROJECT


def parse(
    stack: str = "dev", secrets: dict[str, str] | None = None, **overrides: Any
) -> StackSettings:
    return stack_settings(
        stack, {"ngcApiKey": "nvapi-x"} if secrets is None else secrets, **overrides
    )


def refused(match: str, **kwargs: Any) -> str:
    with pytest.raises(ConfigError, match=match) as caught:
        parse(**kwargs)
    return str(caught.value)


# --- the Kubernetes API server's rules: the tester's values and the legal edges -------------------

INT32_MAX = 2**31 - 1

TESTERS_ACCEPTED_BUT_INVALID = [
    # The 14 values a tester found accepted, whose manifests the API server rejects.
    ({"modelCacheStorageClass": "rwx nfs"}, "modelCacheStorageClass", "RFC 1123 subdomain"),
    ({"modelCacheStorageClass": "RWX-NFS"}, "modelCacheStorageClass", "RFC 1123 subdomain"),
    ({"modelCacheSize": "0"}, "modelCacheSize", "greater than zero"),
    ({"workerReplicas": INT32_MAX + 1}, "workerReplicas", "must be at most 5000"),
    ({"workerReplicas": 10**20}, "workerReplicas", "must be at most 5000"),
    ({"workerNodeSelector": ["bad key!=x"]}, "workerNodeSelector[0]", "key name part"),
    ({"workerNodeSelector": ["k=" + "v" * 100]}, "workerNodeSelector[0]", "no more than 63"),
    ({"workerNodeSelector": ["gpu=bad value!"]}, "workerNodeSelector[0]", "value must be"),
    ({"workerTolerations": ["=v:NoSchedule"]}, "workerTolerations[0]", "Equal needs a key"),
    ({"workerTolerations": ["k=v=w:NoSchedule"]}, "workerTolerations[0]", "value must be"),
    ({"workerTolerations": ["a:b:NoSchedule"]}, "workerTolerations[0]", "exactly one ':'"),
    ({"workerTolerations": ["bad key!:NoSchedule"]}, "workerTolerations[0]", "key name part"),
    ({"workerExtraEnv": ["FOO\n=1"]}, "workerExtraEnv[0]", "the name before '='"),
    ({"workerExtraEnv": ["FOO"]}, "workerExtraEnv[0]", "must be NAME=value"),
]

LEGAL_EDGES = [
    # Values at the edge of a rule that the API server accepts, and so must the program.
    {"namespace": "a"},
    {"namespace": "a" * 63},
    {"namespace": "0-9"},
    {"modelCacheClaim": "c" * 63},
    {"modelCacheClaim": "cosmos3.cache-" + "c" * 239},  # a claim name is a DNS subdomain
    {"modelCacheStorageClass": "a"},
    {"modelCacheStorageClass": ".".join(["b" * 63] * 3) + "." + "c" * 61},
    {"modelCacheStorageClass": "rwx.nfs-1"},
    {"modelCacheSize": "1"},
    {"modelCacheSize": "0.5Gi"},
    {"modelCacheSize": "1e3"},
    {"modelCacheSize": "+200Gi"},
    {"modelCacheSize": "7Ei"},
    {"workerCpu": "500m"},
    {"workerCpu": "1n"},
    {"workerCpu": ".5"},
    {"workerMemory": "96G"},
    {"workerSharedMemorySize": "1E"},
    {"workerReplicas": 5000, "workerGpus": 16},
    {"workerGpus": 8},
    {"modelDownloadGpus": 0},
    {"modelDownloadTimeoutSeconds": INT32_MAX, "graphReadyTimeoutSeconds": 1},
    {"graphUpdateTimeoutSeconds": 1},
    {"graphUpdateTimeoutSeconds": INT32_MAX},
    {"sessionAffinityTtlSeconds": 31_536_000, "profile": "session-affinity"},
    {"workerNodeSelector": ["nvidia.com/gpu.product=NVIDIA-H200"]},
    {"workerNodeSelector": ["example.com/empty="]},
    {"workerNodeSelector": ["k=" + "v" * 63, "A_b.c=Z"]},
    {"workerNodeSelector": ["b" * 253 + "/" + "n" * 63 + "=x"]},
    {"workerTolerations": ["nvidia.com/gpu:NoSchedule"]},
    {"workerTolerations": ["dedicated=gpu:PreferNoSchedule", "k=:NoExecute"]},
    {"workerTolerations": [":NoSchedule"]},
    {"workerExtraEnv": ["NIM_LOG_LEVEL=DEBUG"]},
    {"workerExtraEnv": ["FOO=", "BAR=a=b", "my.env-name=x", "_X=1", "-Y=2"]},
    {"workerExtraEnv": ["MULTI=line1\nline2", "UNICODE=žluťoučký kůň"]},
    {"workerExtraEnv": ["NIM_MAX_NUM_BATCHED_TOKENS=8192", "NIM_CACHE_PATH=/x"]},
    {"nimModelProfile": "a" * 256},
    {"workerImage": "nvcr.io/nim/nvidia/cosmos3@sha256:" + "0" * 64},
    {"kubeContext": "arn:aws:eks:us-east-1:123:cluster/h200 prod"},
]


# --- placement (issue 32): tests/components/test_placement.py, and the real tier's ----------------

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
