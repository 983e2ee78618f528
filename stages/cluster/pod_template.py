"""The pod template of the cluster's stage Jobs: the container, its shell, the Job around it.

The pod uses a pinned plain Python image and installs what it needs into a virtualenv under /tmp
with pip: FFmpeg from the `imageio-ffmpeg` wheel (the project's own pin, with libx264), and for
perf the stages' complete AIPerf lock (`stages/requirements-aiperf.lock`), the very set the lab
runs. The program itself runs with the image's bare Python from /config.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from common.credentials import credential_kind
from stages.core.pod_plans import MEDIA_PORT, POD_ROOT, PlanSettings

Manifest = dict[str, Any]

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
    url = settings.pip_index_url
    if url and has_credentials(url):
        ref = {"name": pip_secret_name(shape.job), "key": PIP_INDEX_URL}
        plain.append({"name": PIP_INDEX_URL, "valueFrom": {"secretKeyRef": ref}})
    elif url:
        plain.append({"name": PIP_INDEX_URL, "value": url})
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
    items: list[dict[str, str]],
    metadata: Manifest,
    pod_labels: dict[str, str],
) -> Manifest:
    """One pod, never retried (`backoffLimit: 0`): the stage reads one pod's log, and a half-run
    sweep is not silently repeated; a re-run is the stage's decision and replaces the Job.
    `activeDeadlineSeconds` bounds it even if the stage that submitted it is gone."""
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
