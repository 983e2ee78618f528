"""What the local cluster holds before any test or user touches it, and kwok's Stages.

- the real DGD CRD (`testenv.crd`: NVIDIA's file, never copied into the project), its conversion
  webhook replaced by `strategy: None`: the webhook's Service is the Dynamo operator's, which does
  not run here (both served versions then share one stored object, only relabelled);
- GPU nodes that kwok keeps Ready: 8 `nvidia.com/gpu` each, the H200 product label, no taint (the
  program sets no tolerations by default);
- a ReadWriteMany StorageClass with static volumes for the model cache (no provisioner runs, so
  `kubernetes.io/no-provisioner` with immediate binding; the controller-manager binds the claims);
- kwok's Stages: its own for nodes and pods (pods become Ready; a Job's pods complete), and one for
  the graph: a DynamoGraphDeployment gets `state: successful` and condition `Ready`, which is what
  the Dynamo operator would report. kwok is not the operator: it makes no pods, no frontend
  Service, and its `Ready` says nothing about a model being served.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from common.input_files import read_text
from testenv.cluster.components import KWOK_NODE_SELECTOR
from testenv.crd import load_crd

CONTEXT = "cosmos3-local"
RWX_CLASS = "local-rwx"
MADE_BY = {"cosmos3.local/made-by": "testenv"}
"""The label of every node, volume and class the tier makes: on a cluster it attached to
(testenv/cluster/existing.py), what it deletes when it leaves, and all it deletes."""
SYSTEM_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
GPU_PRODUCT = "NVIDIA-H200"
NODE_GPUS = 8
VOLUME_SIZE = "1Ti"
GRAPH_READY_MESSAGE = "set by the local cluster's kwok Stage: no Dynamo operator runs here, so no pod serves this graph"


def kubeconfig(cluster: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    """A kubeconfig with one context, `cosmos3-local`, of `cluster` and `user` (their bodies)."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": cluster}],
        "users": [{"name": CONTEXT, "user": user}],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": CONTEXT}}],
        "current-context": CONTEXT,
    }


def dgd_crd(crd_file: Path) -> dict[str, Any]:
    """The DGD CRD of `crd_file` (`testenv.crd.crd_path`), with no conversion webhook: no
    operator runs here to serve one."""
    crd = load_crd(crd_file)
    crd["spec"]["conversion"] = {"strategy": "None"}
    return crd


def gpu_node(name: str) -> dict[str, Any]:
    key, _, value = KWOK_NODE_SELECTOR.partition("=")
    resources = {
        "cpu": "224",
        "memory": "2Ti",
        "ephemeral-storage": "8Ti",
        "pods": "110",
        "nvidia.com/gpu": str(NODE_GPUS),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {key: value, "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                **MADE_BY,
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": GPU_PRODUCT,
            },
        },
        "spec": {},
        "status": {"capacity": resources, "allocatable": resources},
    }


def storage_class(name: str = RWX_CLASS) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name, "labels": MADE_BY},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "Immediate",
        "reclaimPolicy": "Retain",
    }


def volume(name: str) -> dict[str, Any]:
    """A static ReadWriteMany volume of the class; nothing mounts it (kwok runs no kubelet)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {**MADE_BY, "cosmos3.local/volume": "model-cache"}},
        "spec": {
            "capacity": {"storage": VOLUME_SIZE},
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": RWX_CLASS,
            "volumeMode": "Filesystem",
            "hostPath": {"path": f"/nonexistent/cosmos3-local/{name}"},
        },
    }


def graph_ready_stage() -> dict[str, Any]:
    """kwok's stand-in for the operator's status: every graph not being deleted is Ready for its
    current generation.

    The program's readiness wait (components/readiness.py) also compares the condition's
    `observedGeneration` with the object's generation, so the Stage must follow every spec change:
    it selects every live
    graph, and its status is a function of the object alone (no `Now`), so that once applied it
    changes nothing and kwok comes to rest.
    """
    template = "\n".join(
        [
            "state: successful",
            "conditions:",
            "- type: Ready",
            '  status: "True"',
            "  reason: KwokStage",
            f"  message: {json.dumps(GRAPH_READY_MESSAGE)}",
            "  lastTransitionTime: {{ .metadata.creationTimestamp }}",
            "  observedGeneration: {{ .metadata.generation }}",
            # The operator's report of the restart the spec asks for (spec.restart.id), which the
            # wait also requires: done at once, as the Ready condition is.
            "{{ with .spec.restart }}",
            "restart:",
            "  observedID: {{ Quote .id }}",
            "  phase: Completed",
            "{{ end }}",
        ]
    )
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": "dynamographdeployment-ready"},
        "spec": {
            "resourceRef": {"apiGroup": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment"},
            "selector": {
                "matchExpressions": [
                    {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}
                ]
            },
            "next": {"statusTemplate": template + "\n"},
        },
    }


def kwok_config(own_stages: list[Path], graph_stage: bool = True) -> str:
    """kwok's `--config` file: its own Stages (as the engine copied them) and, unless something
    else sets the graphs' status (the lab controller, `lab/controller.py`), the graph's."""
    documents = [read_text(path, "kwok stage file").strip() for path in own_stages]
    if graph_stage:
        documents.append(yaml.safe_dump(graph_ready_stage(), sort_keys=False).strip())
    return "\n---\n".join(documents) + "\n"


def as_json_stream(objects: list[dict[str, Any]]) -> str:
    """One JSON document per object (kubectl reads a stream of them from stdin)."""
    return "\n".join(json.dumps(item) for item in objects) + "\n"
