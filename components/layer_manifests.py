"""Pure builders for the shared layer: namespace, secrets, model cache claim, model download Job.

Each component's small args model (`components.args`) in, plain Kubernetes objects (dicts) out;
no Pulumi here. Secret values are parameters:
the Pulumi components pass secret Outputs (the offline render masks them in what it writes).
"""

from __future__ import annotations

import base64
import copy
import json
from dataclasses import dataclass
from typing import Any

from pydantic.alias_generators import to_camel

from components import names
from components.args import DownloadArgs, ModelCacheArgs, NamespaceArgs, PlacementArgs, WorkerArgs

Manifest = dict[str, Any]


@dataclass(frozen=True)
class SharedLayer:
    """What a graph needs from the layer beneath it, whichever stack owns that layer."""

    namespace: str
    model_cache_claim: str
    ngc_secret: str | None = names.NGC_SECRET
    """None: no NGC key at all (`ngcApiKeyNeeded` false), so no NGC_API_KEY in any pod."""
    registry_pull_secret: str | None = None
    ngc_secret_key: str = names.NGC_SECRET_KEY
    """The key of `ngc_secret` that holds the NGC key (another with `ngcApiKeyFromField`)."""
    credentials_digest: str = ""
    """Of the credentials in those Secrets (components/credentials_digest.py); marks the workers."""


def kube_object(
    api_version: str,
    kind: str,
    name: str,
    namespace: str | None,
    component: str,
    annotations: dict[str, str] | None = None,
    **fields: Any,
) -> Manifest:
    """An object with the recipe's labels and annotations (`names.object_annotations()` unless
    given); `fields` follow its metadata."""
    metadata: Manifest = {
        "name": name,
        "labels": names.labels(component),
        "annotations": annotations or names.object_annotations(),
    }
    if namespace is not None:
        metadata["namespace"] = namespace
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **fields}


def namespace(args: NamespaceArgs) -> Manifest:
    return kube_object("v1", "Namespace", args.name, None, "namespace")


def ngc_secret(namespace_name: str, api_key: object) -> Manifest:
    """Secret `ngc-api-secret` with key NGC_API_KEY, as the recipe's `kubectl create secret`."""
    return _secret(names.NGC_SECRET, namespace_name, "Opaque", {names.NGC_SECRET_KEY: api_key})


def registry_pull_secret(namespace_name: str, docker_config: object) -> Manifest:
    """docker-registry Secret for a private mirror; `docker_config` from `docker_config_json`."""
    data = {".dockerconfigjson": docker_config}
    return _secret(
        names.REGISTRY_PULL_SECRET, namespace_name, "kubernetes.io/dockerconfigjson", data
    )


def _secret(name: str, namespace_name: str, type_: str, data: Manifest) -> Manifest:
    return kube_object(
        "v1", "Secret", name, namespace_name, "credentials", type=type_, stringData=data
    )


LAYER_GUARD_NOTE = """\
This ConfigMap guards the shared layer of cosmos3-nano-reasoner in this namespace: the model cache
claim, the Secrets and the model download that running graphs use. The stack that created it
protects it, and it depends on everything else in the layer, so no `pulumi destroy` of that stack,
with or without its preview, deletes any of them. To tear the layer down: destroy every profile
stack first, then follow "Tear down" in the project's docs/day-two.md.
"""


def layer_guard(namespace_name: str) -> Manifest:
    """The layer guard's ConfigMap (components/layer_guard.py): constant, so never replaced."""
    guard = {"README": LAYER_GUARD_NOTE}
    return kube_object(
        "v1", "ConfigMap", names.LAYER_GUARD, namespace_name, "layer-guard", data=guard
    )


def docker_config_json(server: str, username: str, password: str) -> str:
    """The `.dockerconfigjson` that `kubectl create secret docker-registry` writes."""
    auth = base64.b64encode(f"{username}:{password}".encode()).decode()
    entry = {"username": username, "password": password, "auth": auth}
    return json.dumps({"auths": {server: entry}}, sort_keys=True)


def model_cache_claim(args: ModelCacheArgs) -> Manifest:
    spec = {
        "accessModes": ["ReadWriteMany"],
        "storageClassName": args.storage_class,
        "resources": {"requests": {"storage": args.size}},
    }
    return kube_object(
        "v1", "PersistentVolumeClaim", args.claim, args.namespace, "model-cache", spec=spec
    )


RECIPE_SELECTION = {"NIM_MODEL_TYPE": "reasoner", "NIM_MODEL_SIZE": "nano", "NIM_PRECISION": "fp8"}
"""The recipe's choice of the NIM's model profile (docs/configuration.md, open questions)."""


def nim_selection_env(worker: WorkerArgs, layer: SharedLayer) -> list[Manifest]:
    """What the NIM reads to pick the model profile; shared by the download Job and the workers,
    so both resolve the same profile into the same cache."""
    pinned = (
        [{"name": "NIM_MODEL_PROFILE", "value": worker.nim_profile}] if worker.nim_profile else []
    )
    env: list[Manifest] = [
        *({"name": name, "value": value} for name, value in RECIPE_SELECTION.items()),
        *pinned,
        {"name": "NIM_CACHE_PATH", "value": names.CACHE_MOUNT_PATH},
    ]
    if layer.ngc_secret is not None:  # None: no NGC key at all
        ref = {"name": layer.ngc_secret, "key": layer.ngc_secret_key}
        env.append({"name": "NGC_API_KEY", "valueFrom": {"secretKeyRef": ref}})
    return env


def with_extra_env(env: list[Manifest], extra: tuple[str, ...]) -> list[Manifest]:
    """`env` with NAME=value overrides applied: a same-name entry is replaced in place."""
    overrides = dict(item.split("=", 1) for item in extra)
    merged = [
        {"name": entry["name"], "value": overrides.pop(entry["name"])}
        if entry["name"] in overrides
        else entry
        for entry in env
    ]
    return merged + [{"name": name, "value": value} for name, value in overrides.items()]


def cache_volume(layer: SharedLayer) -> Manifest:
    return {
        "name": names.CACHE_VOLUME,
        "persistentVolumeClaim": {"claimName": layer.model_cache_claim},
    }


def cache_mount() -> Manifest:
    return {"name": names.CACHE_VOLUME, "mountPath": names.CACHE_MOUNT_PATH}


def pull_secrets(layer: SharedLayer) -> Manifest:
    """Pod spec field naming the mirror's pull secret, when there is a mirror."""
    if layer.registry_pull_secret is None:
        return {}
    return {"imagePullSecrets": [{"name": layer.registry_pull_secret}]}


def pod_placement(placement: PlacementArgs) -> Manifest:
    """The pod spec fields that decide where a pod runs, each only when set (the recipe's
    overlay table, as config); used by the workers, the frontend and the download Job."""
    fields: Manifest = {}
    if placement.node_selector:
        fields["nodeSelector"] = dict(item.split("=", 1) for item in placement.node_selector)
    if placement.tolerations:
        fields["tolerations"] = [_toleration(item) for item in placement.tolerations]
    if placement.affinity:
        fields["affinity"] = copy.deepcopy(placement.affinity)  # the manifest's own
    for name in ("priority_class_name", "runtime_class_name", "scheduler_name"):
        if getattr(placement, name):
            fields[to_camel(name)] = getattr(placement, name)
    return fields


def _toleration(item: str) -> Manifest:
    key_value, _, effect = item.rpartition(":")
    key, equals, value = key_value.partition("=")
    if equals:
        return {"key": key, "operator": "Equal", "value": value, "effect": effect}
    return {"key": key, "operator": "Exists", "effect": effect}


NIM_USER_ID = 1000
"""The NIM images run as 1000:1000; the Cosmos cookbook gives its pods `fsGroup: 1000`."""

NIM_POD_SECURITY_CONTEXT = {
    "runAsUser": NIM_USER_ID,
    "runAsGroup": NIM_USER_ID,
    "fsGroup": NIM_USER_ID,
    # Re-own the volume only when its root is not the NIM's already (a full cache is large).
    "fsGroupChangePolicy": "OnRootMismatch",
}
"""What the Dynamo operator gives DGD pods (DefaultSecurityContextFSGroup 1000) and a plain Job
does not get. The kubelet applies `fsGroup` only to volumes whose CSI driver says `fsGroupPolicy:
File`, which most ReadWriteMany drivers (NFS among them) do not: `cache_owner_container` makes the
cache the NIM's there."""

CACHE_OWNER_SCRIPT = """\
set -eu
cache="$1"
owner="$2"
found=$(stat -c %u:%g "$cache")
if [ "$found" = "$owner" ]; then
  echo "cache-owner: $cache is owned by $owner already; nothing changed"
else
  chown -R "$owner" "$cache"
  echo "cache-owner: $cache was owned by $found; now by $owner"
fi
"""
"""Re-own the cache for the NIM's user, only when its root is someone else's: on a fresh volume
once, then never again (a full cache holds hundreds of GB). Arguments: the cache, `uid:gid`."""


def cache_owner_container(image: str) -> Manifest:
    """The download Job's init step: as root, with only the capabilities `chown -R` needs."""
    owner = f"{NIM_USER_ID}:{NIM_USER_ID}"
    return {
        "name": "cache-owner",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/sh", "-c", CACHE_OWNER_SCRIPT, "cache-owner"],
        "args": [names.CACHE_MOUNT_PATH, owner],
        "securityContext": {
            "runAsUser": 0,
            "runAsGroup": 0,
            "runAsNonRoot": False,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "FOWNER", "DAC_READ_SEARCH"]},
        },
        "resources": {
            "requests": {"cpu": "100m", "memory": "64Mi"},
            "limits": {"cpu": "1", "memory": "256Mi"},
        },
        "volumeMounts": [cache_mount()],
    }


def model_download_job(
    args: DownloadArgs, layer: SharedLayer, rerun_of: str | None = None
) -> Manifest:
    """The Job that fills the cache with the same pinned image and NIM selection as the workers.

    Its memory is the workers' (`workerMemory`): the NIM counts a pod's memory limit as system
    memory when it selects a profile, so a smaller Job could download a profile the workers would
    not select. Its `activeDeadlineSeconds` ends a download that cannot finish (docs/day-two.md);
    `rerun_of` names a failed Job this one runs again (components/model_download.py).
    """
    gpus = {"nvidia.com/gpu": str(args.gpus)} if args.gpus else {}
    memory = {"memory": args.worker.memory}
    container = {
        "name": "download",
        "image": args.worker.image,
        "imagePullPolicy": "IfNotPresent",
        "workingDir": "/opt/nim",
        "command": list(args.command),
        "env": with_extra_env(nim_selection_env(args.worker, layer), args.worker.extra_env),
        "resources": {
            "requests": {"cpu": "4"} | memory | gpus,
            "limits": {"cpu": "8"} | memory | gpus,
        },
        "volumeMounts": [cache_mount()],
    }
    spec = {
        "backoffLimit": 3,
        "activeDeadlineSeconds": args.timeout_seconds,
        "template": {
            "metadata": {"labels": names.labels("model-download")}
            | ({"annotations": {names.RERUN_ANNOTATION: rerun_of}} if rerun_of else {}),
            "spec": {
                "restartPolicy": "Never",
                "securityContext": NIM_POD_SECURITY_CONTEXT,
                **pull_secrets(layer),
                **pod_placement(args.placement),
                "initContainers": [cache_owner_container(args.worker.image)],
                "containers": [container],
                "volumes": [cache_volume(layer)],
            },
        },
    }
    annotations = names.object_annotations(**names.PROVIDER_WAIT_ENDS_AT_ONCE)
    return kube_object(
        "batch/v1",
        "Job",
        names.MODEL_DOWNLOAD_JOB,
        layer.namespace,
        "model-download",
        annotations,
        spec=spec,
    )
