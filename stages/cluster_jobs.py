"""The cluster's smoke and perf Jobs as plain Kubernetes objects: pure builders, no client.

Each stage submits three objects into the stack's namespace:

- a ConfigMap with what the pod runs: the in-cluster program (`stages/incluster/`, mounted at the
  same relative paths under /config) and its config, built here from the same pure builders as
  the lab (`smoke_request_body`, `ffmpeg_args`, `dataset_rows` with `VideoUrl`,
  `aiperf_profile_args`);
- a Service `<job>-media` on port 8090 that selects the Job's pod, through which the workers fetch
  the synthetic videos the pod serves (`http://<service>.<namespace>.svc.cluster.local:8090/...`);
- the Job itself (`cosmos3-nano-reasoner-smoke` / `-perf`, the recipe's names).

The pod uses a pinned plain Python image and installs what it needs into a virtualenv under
/tmp with pip: FFmpeg from the `imageio-ffmpeg` wheel (the same pin as the project's venv, with
libx264), and for perf the lab's complete AIPerf lock (`lab/requirements-aiperf.lock`,
`aiperf==AIPERF_VERSION`), so the cluster runs the AIPerf the lab was tested with.
Nothing here talks to a cluster: `stages.kube` submits what these functions return.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from components import names
from components.contract import StackOutputs
from stages.aiperf import AIPERF_VERSION, ConnectionReuse, aiperf_environment, aiperf_profile_args
from stages.incluster import perf_pod, smoke_pod
from stages.results import AIPERF_EXPORT_FILE
from stages.smoke import VIDEO_NAME, smoke_request_body
from stages.video import SIZE, ffmpeg_args
from stages.workload import PerfWorkload, VideoUrl, dataset_rows, video_ids

Manifest = dict[str, Any]

STAGES_DIR = Path(__file__).resolve().parent
REPO_ROOT = STAGES_DIR.parent
AIPERF_LOCK = REPO_ROOT / "lab" / "requirements-aiperf.lock"
"""The lab's complete, `pip check`-clean AIPerf set; the perf pod installs exactly this."""

SMOKE_JOB = f"{names.APP}-smoke"
PERF_JOB = f"{names.APP}-perf"
MEDIA_PORT = 8090
MEDIA_PORT_NAME = "media"
MANAGED_BY = "cosmos3-stages"
RUN_ID_LABEL = f"{names.APP}/run-id"
"""On the pod and in the media Service's selector: the Service only ever reaches this run's pod."""

POD_IMAGE = "python:3.11.7-slim-bookworm"
"""A full patch tag: the interpreter the lab's AIPerf lock was resolved and tested with (3.11.7).
A digest is stronger (a tag can be re-pushed): `--image python:3.11.7-slim-bookworm@sha256:...`
with the digest from `docker buildx imagetools inspect python:3.11.7-slim-bookworm`."""
IMAGEIO_FFMPEG = "imageio-ffmpeg==0.8.1"
"""The project's own pin (requirements.txt): its wheel ships an FFmpeg with libx264."""

CLUSTER_TOKENIZER = "builtin"
"""AIPerf's tiktoken tokenizer (o200k_base). The served model id would make AIPerf look the
Cosmos3 tokenizer up on the Hugging Face Hub, where a NIM model need not be. With
`--use-server-token-count` the metrics use the server's token counts, and the dataset fixes every
output length, so the tokenizer only has to load. `builtin` is not offline, despite AIPerf's help:
tiktoken downloads o200k_base.tiktoken from openaipublic.blob.core.windows.net on first use
(checked here: without that host it fails). The pod checks it loads before the sweep."""
CLUSTER_CONNECTION_REUSE: ConnectionReuse = "never"
"""A new connection per request, as in the lab: the A/B numbers come from the same client
behaviour on both targets; the keep-alive stall the lab measured (TTFT p50 44 ms pooled vs 26 ms)
is a TCP interaction not specific to loopback; an in-cluster plain-HTTP connect costs well under a
millisecond against TTFTs of ~60 ms; and with one frontend per graph, connections cannot change
routing (affinity follows the session header). Unverified on a cluster: `--connection-reuse
pooled` switches it."""

POD_ROOT = PurePosixPath("/tmp")
"""The only writable path in the pod (an emptyDir; the root filesystem is read-only)."""
CONFIG_DIR = PurePosixPath("/config")
SMOKE_CONFIG = "smoke-config.json"
PERF_PLAN = "perf-plan.json.gz"
CONFIG_MAP_LIMIT_BYTES = 900 * 1024
"""The API server refuses ConfigMaps over 1 MiB; keep a margin."""
MEDIA_WAIT_SECONDS = 300
REQUEST_TIMEOUT_SECONDS = 300
"""The smoke request's limit: the first video on a cold worker is decoded before it answers."""
JOB_TTL_SECONDS = 7 * 24 * 3600
"""A finished Job (and its log) stays a week for `kubectl logs`, unless a re-run replaces it."""

SMOKE_RESOURCES = {
    "requests": {"cpu": "500m", "memory": "512Mi", "ephemeral-storage": "1Gi"},
    "limits": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "2Gi"},
}
PERF_RESOURCES = {
    "requests": {"cpu": "4", "memory": "8Gi", "ephemeral-storage": "6Gi"},
    "limits": {"cpu": "8", "memory": "16Gi", "ephemeral-storage": "10Gi"},
}
"""AIPerf runs a dozen processes at concurrency 16 and its venv is about 1.2 GB on disk."""
SMOKE_SCRATCH = "1Gi"
PERF_SCRATCH = "8Gi"

_PALETTE = ("red", "yellow", "cyan", "magenta", "white", "black", "orange", "lime")
_BOX = 64
_BOX_STEP = 8


@dataclass(frozen=True)
class JobSettings:
    """What a cluster run may choose; the defaults are the documented choices above."""

    run_id: str
    image: str = POD_IMAGE
    model_wait_seconds: float = 60.0
    deadline_seconds: int = 3600
    pip_index_url: str | None = None
    tokenizer: str = CLUSTER_TOKENIZER
    connection_reuse: ConnectionReuse = CLUSTER_CONNECTION_REUSE


@dataclass(frozen=True)
class PodPlace:
    """Where the pod program works and listens: the cluster pod's paths, or loopback in tests."""

    work_dir: str = str(POD_ROOT / "work")
    venv: str = str(POD_ROOT / "venv")
    listen_host: str = "0.0.0.0"
    listen_port: int = MEDIA_PORT
    ffmpeg: str | None = None
    """None: the pod takes $FFMPEG, which the Job sets from the imageio-ffmpeg it installed."""

    @property
    def media_dir(self) -> str:
        return f"{self.work_dir}/media"

    @property
    def aiperf_executable(self) -> str:
        return f"{self.venv}/bin/aiperf"


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


def pod_labels(component: str, outputs: StackOutputs, run_id: str) -> dict[str, str]:
    return labels(component, outputs) | {RUN_ID_LABEL: run_id}


# --- what the pods run --------------------------------------------------------------------------


def smoke_pod_config(
    outputs: StackOutputs, media_url: str, place: PodPlace, model_wait_seconds: float
) -> dict[str, Any]:
    """The smoke pod's config: the frontend, the video's FFmpeg arguments and the request body."""
    video_url = f"{media_url}/{VIDEO_NAME}"
    return {
        "served_model": outputs.served_model,
        "models_url": outputs.models_url,
        "frontend_url": outputs.frontend_url,
        "model_wait_seconds": model_wait_seconds,
        "media_wait_seconds": MEDIA_WAIT_SECONDS,
        "request_timeout_seconds": REQUEST_TIMEOUT_SECONDS,
        "media_dir": place.media_dir,
        "video_name": VIDEO_NAME,
        "ffmpeg": place.ffmpeg,
        "ffmpeg_args": ffmpeg_args(Path(place.media_dir) / VIDEO_NAME),
        "listen_host": place.listen_host,
        "listen_port": place.listen_port,
        "video_url": video_url,
        "request_body": smoke_request_body(outputs.served_model, video_url),
    }


def distinct_video_args(out: str, index: int) -> list[str]:
    """FFmpeg arguments for the sweep's `index`-th video: the stage's test pattern plus a box
    whose position (and colour) is unique to the index.

    Every video id must have different pixels: a worker's multimodal cache keys on the media's
    content, so two ids with identical frames would make a "new" video a cache hit.
    """
    width, height = (int(part) for part in SIZE.split("x"))
    columns = (width - _BOX) // _BOX_STEP + 1
    rows = (height - _BOX) // _BOX_STEP + 1
    if not 0 <= index < columns * rows:
        raise ValueError(f"at most {columns * rows} distinct synthetic videos, asked for #{index}")
    x, y = _BOX_STEP * (index % columns), _BOX_STEP * (index // columns)
    colour = _PALETTE[index % len(_PALETTE)]
    box = f"drawbox=x={x}:y={y}:w={_BOX}:h={_BOX}:color={colour}@1:t=fill"
    args = ffmpeg_args(Path(out))
    codec = args.index("-c:v")
    return [*args[:codec], "-vf", box, *args[codec:]]


def tokenizer_check(settings: JobSettings, place: PodPlace) -> list[str] | None:
    """A command that loads the builtin tokenizer's encoding before the sweep (None otherwise)."""
    if settings.tokenizer != "builtin":
        return None
    return [
        f"{place.venv}/bin/python",
        "-c",
        "import tiktoken; tiktoken.get_encoding('o200k_base')",
    ]


def perf_pod_plan(
    outputs: StackOutputs,
    workload: PerfWorkload,
    media_url: str,
    place: PodPlace,
    settings: JobSettings,
) -> dict[str, Any]:
    """The perf pod's plan: every video, and per level its dataset lines and AIPerf arguments."""
    videos: list[dict[str, Any]] = []
    levels = []
    for concurrency in workload.concurrencies:
        for video_id in video_ids(workload, concurrency):
            name = f"{video_id}.mp4"
            args = distinct_video_args(f"{place.media_dir}/{name}", index=len(videos))
            videos.append({"name": name, "ffmpeg_args": args})
        levels.append(_perf_level(outputs, workload, concurrency, media_url, place, settings))
    return {
        "served_model": outputs.served_model,
        "models_url": outputs.models_url,
        "model_wait_seconds": settings.model_wait_seconds,
        "media_wait_seconds": MEDIA_WAIT_SECONDS,
        "media_dir": place.media_dir,
        "media_check_url": f"{media_url}/{videos[0]['name']}",
        "listen_host": place.listen_host,
        "listen_port": place.listen_port,
        "ffmpeg": place.ffmpeg,
        "video_jobs": 2,
        "videos": videos,
        "aiperf_executable": place.aiperf_executable,
        "aiperf_env": aiperf_environment(),
        "tokenizer_check": tokenizer_check(settings, place),
        "export_files": [AIPERF_EXPORT_FILE, "profile_export_aiperf.csv"],
        "levels": levels,
    }


def _perf_level(
    outputs: StackOutputs,
    workload: PerfWorkload,
    concurrency: int,
    media_url: str,
    place: PodPlace,
    settings: JobSettings,
) -> dict[str, Any]:
    level_dir = Path(place.work_dir) / f"c{concurrency}"
    dataset, artifact_dir = level_dir / "dataset.jsonl", level_dir / "aiperf"
    argv = aiperf_profile_args(
        outputs, workload, concurrency, dataset, artifact_dir,
        settings.tokenizer, settings.connection_reuse,
    )  # fmt: skip
    return {
        "concurrency": concurrency,
        "requests": workload.requests_per_level,
        "dataset_path": str(dataset),
        "dataset": dataset_rows(workload, concurrency, VideoUrl(media_url)),
        "artifact_dir": str(artifact_dir),
        "argv": argv,
    }


# --- the objects --------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobShape:
    """What differs between the smoke and the perf Job besides the program."""

    job: str
    component: str
    resources: dict[str, Any]
    scratch: str


SMOKE = JobShape(SMOKE_JOB, "smoke", SMOKE_RESOURCES, SMOKE_SCRATCH)
PERF = JobShape(PERF_JOB, "perf", PERF_RESOURCES, PERF_SCRATCH)


def smoke_manifests(outputs: StackOutputs, settings: JobSettings) -> list[Manifest]:
    """ConfigMap, media Service and Job of the smoke stage, in the order they are created."""
    config = smoke_pod_config(
        outputs, media_base_url(outputs, SMOKE_JOB), PodPlace(), settings.model_wait_seconds
    )
    files = _program_files("smoke_pod.py") | {SMOKE_CONFIG: json.dumps(config, indent=2) + "\n"}
    script = _entry_script(
        f"FFmpeg ({IMAGEIO_FFMPEG})",
        [IMAGEIO_FFMPEG],
        f"stages.incluster.smoke_pod {CONFIG_DIR / SMOKE_CONFIG}",
        smoke_pod.FAILED,
    )
    return [
        _config_map(SMOKE, outputs, files, {}),
        _media_service(SMOKE, outputs, settings.run_id),
        _job(SMOKE, outputs, settings, script, sorted(files)),
    ]


def perf_manifests(
    outputs: StackOutputs, workload: PerfWorkload, settings: JobSettings
) -> list[Manifest]:
    """ConfigMap, media Service and Job of the perf stage, in the order they are created."""
    plan = perf_pod_plan(outputs, workload, media_base_url(outputs, PERF_JOB), PodPlace(), settings)
    files = _program_files("perf_pod.py") | {AIPERF_LOCK.name: AIPERF_LOCK.read_text()}
    binary = {PERF_PLAN: gzip.compress(json.dumps(plan).encode(), mtime=0)}
    script = _entry_script(
        f"AIPerf {AIPERF_VERSION} (the lab's lock) and FFmpeg",
        ["--no-deps", "-r", str(CONFIG_DIR / AIPERF_LOCK.name), IMAGEIO_FFMPEG],
        f"stages.incluster.perf_pod {CONFIG_DIR / PERF_PLAN}",
        perf_pod.FAILED,
    )
    job = _job(PERF, outputs, settings, script, sorted(files) + sorted(binary))
    job["spec"]["template"]["spec"]["affinity"] = frontend_affinity(outputs)
    return [
        _config_map(PERF, outputs, files, binary),
        _media_service(PERF, outputs, settings.run_id),
        job,
    ]


def _program_files(entry: str) -> dict[str, str]:
    """The in-cluster program: the shared module and the entry point, read from this checkout."""
    source = STAGES_DIR / "incluster"
    return {name: (source / name).read_text() for name in ("pod_common.py", entry)}


def _mount_path(key: str) -> str:
    """Where a ConfigMap key appears under /config: programs at their package path."""
    return f"stages/incluster/{key}" if key.endswith(".py") else key


def pod_files(config_map: Manifest) -> dict[str, bytes]:
    """The files the pod sees under /config, by relative path (as the volume's items lay out)."""
    files = {_mount_path(key): value.encode() for key, value in config_map.get("data", {}).items()}
    for key, value in config_map.get("binaryData", {}).items():
        files[_mount_path(key)] = base64.b64decode(value)
    return files


def _metadata(name: str, shape: JobShape, outputs: StackOutputs) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": outputs.namespace,
        "labels": labels(shape.component, outputs),
    }


def _config_map(
    shape: JobShape, outputs: StackOutputs, data: dict[str, str], binary: dict[str, bytes]
) -> Manifest:
    size = sum(len(v.encode()) for v in data.values()) + sum(len(v) for v in binary.values())
    if size > CONFIG_MAP_LIMIT_BYTES:
        raise ValueError(
            f"the {shape.component} ConfigMap would hold {size} bytes, over "
            f"{CONFIG_MAP_LIMIT_BYTES}: reduce the workload (videos x questions x levels)"
        )
    manifest: Manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(shape.job, shape, outputs),
        "data": data,
    }
    if binary:
        manifest["binaryData"] = {k: base64.b64encode(v).decode() for k, v in binary.items()}
    return manifest


def _media_service(shape: JobShape, outputs: StackOutputs, run_id: str) -> Manifest:
    port = {
        "name": MEDIA_PORT_NAME,
        "port": MEDIA_PORT,
        "targetPort": MEDIA_PORT_NAME,
        "protocol": "TCP",
    }
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(media_service_name(shape.job), shape, outputs),
        "spec": {"selector": pod_labels(shape.component, outputs, run_id), "ports": [port]},
    }


def frontend_affinity(outputs: StackOutputs) -> dict[str, Any]:
    """Prefer the frontend's node, as the recipes' perf Jobs do (preferred: never blocks)."""
    match = [
        {
            "key": "nvidia.com/dynamo-graph-deployment-name",
            "operator": "In",
            "values": [outputs.graph_name],
        },
        {"key": "nvidia.com/dynamo-component-type", "operator": "In", "values": ["frontend"]},
    ]
    term = {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchExpressions": match}}
    preferred = [{"weight": 100, "podAffinityTerm": term}]
    return {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}


FIND_FFMPEG = "import imageio_ffmpeg; print(imageio_ffmpeg.get_ffmpeg_exe())"


def _entry_script(what: str, pip_args: list[str], program: str, failed: str) -> str:
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


def _environment(settings: JobSettings) -> list[dict[str, str]]:
    """Every cache and home under /tmp (the only writable path); no secret, nothing from a Secret."""
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
    if settings.pip_index_url:
        env["PIP_INDEX_URL"] = settings.pip_index_url
    return [{"name": name, "value": value} for name, value in env.items()]


def _container(shape: JobShape, settings: JobSettings, script: str) -> Manifest:
    return {
        "name": shape.component,
        "image": settings.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/sh", "-c"],
        "args": [script],
        "env": _environment(settings),
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


def _job(
    shape: JobShape, outputs: StackOutputs, settings: JobSettings, script: str, keys: list[str]
) -> Manifest:
    """One pod, never retried (`backoffLimit: 0`): the stage reads one pod's log, and a half-run
    sweep is not silently repeated; a re-run is the stage's decision and replaces the Job.
    `activeDeadlineSeconds` bounds it even if the stage that submitted it is gone."""
    items = [{"key": key, "path": _mount_path(key)} for key in keys]
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
        "metadata": _metadata(shape.job, shape, outputs),
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": settings.deadline_seconds,
            "ttlSecondsAfterFinished": JOB_TTL_SECONDS,
            "template": {
                "metadata": {"labels": pod_labels(shape.component, outputs, settings.run_id)},
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
    """The objects as one multi-document YAML stream, in submission order."""
    return yaml.dump_all(manifests, Dumper=_BlockDumper, sort_keys=False, width=100)


def check_run_id(run_id: str) -> str:
    """A run id must be a label value (it selects the run's pod): returns it or raises."""
    if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?", run_id):
        raise ValueError(f"run id {run_id!r} is not a Kubernetes label value")
    return run_id
