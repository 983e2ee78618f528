"""The cluster's smoke and perf Jobs as plain Kubernetes objects: pure builders, no client.

Each stage submits three objects into the stack's namespace (four with a pip index URL that
carries credentials: first a Secret `<job>-pip` holding it, never plain env):

- a ConfigMap with what the pod runs: the pod program (`stages/incluster/`, mounted at the same
  relative paths under /config) and its config or plan (`stages.core.pod_plans`, the builders the
  lab's local runs use too);
- a Service `<job>-media` on port 8090 that selects the Job's pod, through which the workers fetch
  the synthetic videos the pod serves (`http://<service>.<namespace>.svc.cluster.local:8090/...`);
- the Job itself (`cosmos3-nano-reasoner-smoke` / `-perf`, the recipe's names). Its pod uses a
  pinned plain Python image and installs what it needs into a virtualenv under /tmp with pip:
  FFmpeg from the `imageio-ffmpeg` wheel (the project's own pin, with libx264), and for perf the
  stages' complete AIPerf lock (`stages/requirements-aiperf.lock`), the very set the lab runs. The
  program itself runs with the image's bare Python from /config.

Nothing here talks to a cluster: `stages.cluster.run` submits what these functions return.

Over 300 lines: one Job's objects, built together from one shape and one set of settings: the
ConfigMap, the media Service, the pip Secret, the Job and its pod template, and their masked YAML.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import yaml

from common.credentials import MASK, credential_kind, mask_values
from components import names
from components.contract import StackOutputs
from stages.cluster.api import Manifest
from stages.core.pod_plans import (
    AIPERF_VERSION,
    MEDIA_PORT,
    PERF_PLAN,
    POD_ROOT,
    SMOKE_CONFIG,
    PlanSettings,
    PodPlace,
    perf_pod_plan,
    plan_file,
    program_files,
    smoke_pod_config,
)
from stages.core.workload import PerfWorkload, VideoUrl
from stages.errors import UsageError
from stages.incluster import perf_pod, smoke_pod

AIPERF_LOCK = Path(__file__).resolve().parent.parent / "requirements-aiperf.lock"
"""The complete, `pip check`-clean AIPerf set the lab runs; the perf pod installs exactly this."""

SMOKE_JOB = f"{names.APP}-smoke"
PERF_JOB = f"{names.APP}-perf"
MANAGED_BY = "cosmos3-stages"
RUN_ID_LABEL = f"{names.APP}/run-id"
"""On the pod and in the media Service's selector: the Service only ever reaches this run's pod."""
CONFIG_MAP_LIMIT_BYTES = 900 * 1024
"""The API server refuses ConfigMaps over 1 MiB; keep a margin."""

POD_IMAGE = "python:3.11.7-slim-bookworm"
"""A full patch tag: the interpreter the AIPerf lock was resolved and tested with (3.11.7).
A digest is stronger (a tag can be re-pushed): `--image python:3.11.7-slim-bookworm@sha256:...`
with the digest from `docker buildx imagetools inspect python:3.11.7-slim-bookworm`."""
IMAGEIO_FFMPEG = "imageio-ffmpeg==0.8.1"
"""The project's own pin (the stages lock): its wheel ships an FFmpeg with libx264."""
CONFIG_DIR = PurePosixPath("/config")
MEDIA_PORT_NAME = "media"
JOB_TTL_SECONDS = 7 * 24 * 3600
"""A finished Job (and its log) stays a week for `kubectl logs`, unless a re-run replaces it."""
PIP_INDEX_URL = "PIP_INDEX_URL"


@dataclass(frozen=True)
class JobSettings:
    """What a cluster run may choose; the defaults are the documented choices above."""

    run_id: str
    plan: PlanSettings
    image: str = POD_IMAGE
    deadline_seconds: int = 3600
    pip_index_url: str | None = field(default=None, repr=False)  # may carry a password


@dataclass(frozen=True)
class JobShape:
    """What differs between the smoke and the perf Job besides the program."""

    job: str
    component: str
    resources: dict[str, Any]
    scratch: str


SMOKE = JobShape(
    SMOKE_JOB,
    "smoke",
    {
        "requests": {"cpu": "500m", "memory": "512Mi", "ephemeral-storage": "1Gi"},
        "limits": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "2Gi"},
    },
    scratch="1Gi",
)
PERF = JobShape(
    PERF_JOB,
    "perf",
    # AIPerf runs a dozen processes at concurrency 16 and its venv is about 1.2 GB on disk.
    {
        "requests": {"cpu": "4", "memory": "8Gi", "ephemeral-storage": "6Gi"},
        "limits": {"cpu": "8", "memory": "16Gi", "ephemeral-storage": "10Gi"},
    },
    scratch="8Gi",
)


# --- names and URLs -----------------------------------------------------------------------------


def media_service_name(job: str) -> str:
    return f"{job}-media"


def media_base_url(outputs: StackOutputs, job: str) -> str:
    """Where the workers fetch the pod's videos: the media Service's cluster DNS name."""
    return f"http://{media_service_name(job)}.{outputs.namespace}.svc.cluster.local:{MEDIA_PORT}"


def labels(component: str, outputs: StackOutputs) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": names.APP,
        "app.kubernetes.io/part-of": names.APP,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/managed-by": MANAGED_BY,
        f"{names.APP}/profile": outputs.profile.value,
    }


# --- the objects --------------------------------------------------------------------------------


def smoke_manifests(outputs: StackOutputs, settings: JobSettings) -> list[Manifest]:
    """ConfigMap, media Service and Job of the smoke stage, in the order they are created."""
    config = smoke_pod_config(
        outputs, media_base_url(outputs, SMOKE_JOB), PodPlace(), settings.plan.model_wait_seconds
    )
    files = program_files("smoke_pod.py")
    files[SMOKE_CONFIG] = (json.dumps(config, indent=2) + "\n").encode()
    script = entry_script(
        f"FFmpeg ({IMAGEIO_FFMPEG})",
        [IMAGEIO_FFMPEG],
        f"stages.incluster.smoke_pod {CONFIG_DIR / SMOKE_CONFIG}",
        smoke_pod.FAILED,
    )
    return _objects(SMOKE, outputs, settings, script, files)


def perf_manifests(
    outputs: StackOutputs, workload: PerfWorkload, settings: JobSettings
) -> list[Manifest]:
    """ConfigMap, media Service and Job of the perf stage, in the order they are created."""
    media_url = media_base_url(outputs, PERF_JOB)
    plan = perf_pod_plan(
        outputs, workload, VideoUrl(media_url), media_url, PodPlace(), settings.plan
    )
    files = program_files("perf_pod.py")
    files[AIPERF_LOCK.name] = AIPERF_LOCK.read_bytes()
    files[PERF_PLAN] = plan_file(plan)
    script = entry_script(
        f"AIPerf {AIPERF_VERSION} (the stages' lock) and FFmpeg",
        ["--no-deps", "-r", str(CONFIG_DIR / AIPERF_LOCK.name), IMAGEIO_FFMPEG],
        f"stages.incluster.perf_pod {CONFIG_DIR / PERF_PLAN}",
        perf_pod.FAILED,
    )
    objects = _objects(PERF, outputs, settings, script, files)
    objects[-1]["spec"]["template"]["spec"]["affinity"] = frontend_affinity(outputs)
    return objects


def _objects(
    shape: JobShape,
    outputs: StackOutputs,
    settings: JobSettings,
    script: str,
    files: dict[str, bytes],
) -> list[Manifest]:
    def metadata(name: str) -> Manifest:
        return {
            "name": name,
            "namespace": outputs.namespace,
            "labels": labels(shape.component, outputs),
        }

    run_labels = labels(shape.component, outputs) | {RUN_ID_LABEL: settings.run_id}
    port = {
        "name": MEDIA_PORT_NAME,
        "port": MEDIA_PORT,
        "targetPort": MEDIA_PORT_NAME,
        "protocol": "TCP",
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(media_service_name(shape.job)),
        "spec": {"selector": run_labels, "ports": [port]},
    }
    secret = pip_secret(settings, metadata(pip_secret_name(shape.job)))
    return [
        *([secret] if secret else []),
        _config_map(shape, metadata(shape.job), files),
        service,
        job(shape, settings, script, sorted(files), metadata(shape.job), run_labels),
    ]


def _config_map(shape: JobShape, metadata: Manifest, files: dict[str, bytes]) -> Manifest:
    """Text files as `data`, the gzipped plan as `binaryData`, each under its file name."""
    size = sum(len(content) for content in files.values())
    if size > CONFIG_MAP_LIMIT_BYTES:
        raise UsageError(
            f"the {shape.component} ConfigMap would hold {size} bytes, over "
            f"{CONFIG_MAP_LIMIT_BYTES}: reduce the workload (--videos x --questions x the "
            "--concurrency levels)"
        )
    names_of = {path: PurePosixPath(path).name for path in files}
    binary = {path for path in files if path.endswith(".gz")}
    manifest: Manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata,
        "data": {names_of[p]: files[p].decode() for p in sorted(files) if p not in binary},
    }
    if binary:
        manifest["binaryData"] = {
            names_of[p]: base64.b64encode(files[p]).decode() for p in sorted(binary)
        }
    return manifest


def frontend_affinity(outputs: StackOutputs) -> dict[str, Any]:
    """Prefer the frontend's node, as the recipes' perf Jobs do (preferred: never blocks)."""
    match = [
        {
            "key": names.GRAPH_LABEL,
            "operator": "In",
            "values": [outputs.graph_name],
        },
        {"key": names.COMPONENT_TYPE_LABEL, "operator": "In", "values": ["frontend"]},
    ]
    term = {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchExpressions": match}}
    preferred = [{"weight": 100, "podAffinityTerm": term}]
    return {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}


# --- the pod template --------------------------------------------------------------------------

FIND_FFMPEG = "import imageio_ffmpeg; print(imageio_ffmpeg.get_ffmpeg_exe())"


def entry_script(what: str, pip_args: list[str], program: str, failed: str) -> str:
    """The container's shell: a venv under /tmp, pip, then the program with the image's Python.

    A venv rather than the image's site-packages: the pod runs as a non-root user on a read-only
    root filesystem, so only /tmp is writable. The program itself needs only the standard library;
    it runs with the image's Python from /config, where the ConfigMap lays out its package.
    """
    venv = POD_ROOT / "venv"
    pip = ["--quiet", "--no-cache-dir", "--disable-pip-version-check", "--no-input", *pip_args]
    lines = [
        "set -eu",
        'mkdir -p "$HOME" "$XDG_CACHE_HOME"',
        f'echo "installing {what} into {venv}"',
        f"python -m venv {venv}",
        f"if ! {venv}/bin/python -m pip install {' '.join(pip)}; then",
        f'  echo "{failed} pip could not install {what}: is PyPI (or PIP_INDEX_URL) reachable?"',
        "  exit 1",
        "fi",
        f'FFMPEG="$({venv}/bin/python -c "{FIND_FFMPEG}")"',
        "export FFMPEG",
        f"cd {CONFIG_DIR}",
        f"exec python -m {program}",
    ]
    return "\n".join(lines) + "\n"


def check_pip_index_url(url: str) -> str:
    """`--pip-index-url`: an http(s) URL with a host; returns it or raises ValueError (whose
    message never holds the URL: it may carry a password)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        raise ValueError("not a URL") from None
    if parts.scheme not in {"http", "https"} or not host or not url.isprintable() or " " in url:
        raise ValueError("not an http:// or https:// URL with a host")
    return url


def has_credentials(url: str) -> bool:
    """A URL with a user-info part (`user:password@`, or a token as the user) or a credential in
    its query (`?token=`, `X-Amz-Signature=`; `common.credentials`) carries a secret."""
    try:
        return "@" in urlsplit(url).netloc or credential_kind(url) is not None
    except ValueError:
        return True  # unparseable: never shown, never plain


def pip_secret_name(job: str) -> str:
    return f"{job}-pip"


def pip_secret(settings: JobSettings, metadata: Manifest) -> Manifest | None:
    """The Secret `<job>-pip` holding a --pip-index-url with credentials (None without them):
    the pod reads it through `valueFrom.secretKeyRef`, never as plain env."""
    url = settings.pip_index_url
    if not url or not has_credentials(url):
        return None
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "type": "Opaque",
        "stringData": {PIP_INDEX_URL: url},
    }


def _environment(shape: JobShape, settings: JobSettings) -> list[dict[str, Any]]:
    """Every cache and home under /tmp (the only writable path); a pip index URL with credentials
    comes from the stage's Secret, nothing else is secret."""
    cache = POD_ROOT / "cache"
    env = {
        "HOME": str(POD_ROOT / "home"),
        "USER": "stage",
        "TMPDIR": str(POD_ROOT),
        "XDG_CACHE_HOME": str(cache),
        # tiktoken's other cache variable: TIKTOKEN_CACHE_DIR would look like a secret to the
        # policy pack's name rule (`*TOKEN`), and both keep the encoding in one place per pod.
        "DATA_GYM_CACHE_DIR": str(cache / "tiktoken"),
        "HF_HOME": str(cache / "huggingface"),
        "MPLCONFIGDIR": str(cache / "matplotlib"),
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    plain: list[dict[str, Any]] = [{"name": name, "value": value} for name, value in env.items()]
    if url := settings.pip_index_url:
        ref = {"secretKeyRef": {"name": pip_secret_name(shape.job), "key": PIP_INDEX_URL}}
        value = {"valueFrom": ref} if has_credentials(url) else {"value": url}
        plain.append({"name": PIP_INDEX_URL, **value})
    return plain


def _container(shape: JobShape, settings: JobSettings, script: str) -> Manifest:
    return {
        "name": shape.component,
        "image": settings.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/sh", "-c"],
        "args": [script],
        "env": _environment(shape, settings),
        "ports": [{"name": MEDIA_PORT_NAME, "containerPort": MEDIA_PORT, "protocol": "TCP"}],
        "readinessProbe": {
            "httpGet": {"path": "/healthz", "port": MEDIA_PORT_NAME},
            "periodSeconds": 5,
        },
        "resources": shape.resources,
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [
            {"name": "program", "mountPath": str(CONFIG_DIR), "readOnly": True},
            {"name": "scratch", "mountPath": str(POD_ROOT)},
        ],
    }


POD_SECURITY_CONTEXT = {
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "runAsGroup": 1000,
    "fsGroup": 1000,
    "seccompProfile": {"type": "RuntimeDefault"},
}
"""Non-root with a numeric id (the python image has no user 1000, so HOME and USER come from the
env); with pip confined to a venv under /tmp this needs no root and no writable image."""


def job(
    shape: JobShape,
    settings: JobSettings,
    script: str,
    paths: list[str],
    metadata: Manifest,
    pod_labels: dict[str, str],
) -> Manifest:
    """One pod, never retried (`backoffLimit: 0`): the stage reads one pod's log, and a half-run
    sweep is not silently repeated; a re-run is the stage's decision and replaces the Job.
    `activeDeadlineSeconds` bounds it even if the stage that submitted it is gone."""
    # ConfigMap keys cannot hold a `/`: each file is a key named after it, mounted at its path.
    items = [{"key": PurePosixPath(path).name, "path": path} for path in paths]
    volumes = [
        {"name": "program", "configMap": {"name": shape.job, "items": items, "defaultMode": 0o444}},
        {"name": "scratch", "emptyDir": {"sizeLimit": shape.scratch}},
    ]
    pod_spec = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 10,
        "securityContext": POD_SECURITY_CONTEXT,
        "containers": [_container(shape, settings, script)],
        "volumes": volumes,
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": settings.deadline_seconds,
            "ttlSecondsAfterFinished": JOB_TTL_SECONDS,
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": pod_spec,
            },
        },
    }


# --- YAML for --dry-run ---------------------------------------------------------------------------


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (the scripts) as literal blocks, so a dry run is readable."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _represent_str)


def to_yaml(manifests: list[Manifest]) -> str:
    """The objects as one multi-document YAML stream, in submission order, every Secret value
    masked: this is what a dry run prints and what `manifests.yaml` keeps."""
    return yaml.dump_all(
        [mask_values(masked(m)) for m in manifests],
        Dumper=_BlockDumper,
        sort_keys=False,
        width=100,
    )


def masked(manifest: Manifest) -> Manifest:
    """The object with each Secret value replaced by `<secret>` (anything else unchanged)."""
    if manifest.get("kind") != "Secret":
        return manifest
    fields = {
        f: {key: MASK for key in manifest[f]} for f in ("data", "stringData") if f in manifest
    }
    return manifest | fields


# --- checks -------------------------------------------------------------------------------------

RUN_ID_REQUIREMENT = "a Kubernetes label value (letters, digits, `.`, `_`, `-`; 63 at most)"


def check_run_id(run_id: str) -> str:
    """A run id must be a label value (it selects the run's pod): returns it or raises."""
    if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?", run_id):
        raise ValueError(f"run id {run_id!r} is not {RUN_ID_REQUIREMENT}")
    return run_id
