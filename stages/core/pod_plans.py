"""What the pod programs run: their config (smoke) and plan (perf), and their files.

The same builders serve both targets. On a cluster the config travels in the Job's ConfigMap and
the program runs in a pod; on this machine (the lab) it is written to a directory laid out the
same way and the program runs as a local process. Only `PodPlace` (where the program works and
listens) and what a request carries for its video (`VideoMedia`) differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from components.contract import StackOutputs
from stages.core.aiperf import ConnectionReuse, aiperf_environment, aiperf_profile_args
from stages.core.aiperf_export import AIPERF_EXPORT_FILE
from stages.core.smoke import VIDEO_NAME, smoke_request_body
from stages.core.video import distinct_video_args, ffmpeg_args
from stages.core.workload import PerfWorkload, VideoMedia, dataset_rows, video_ids

INCLUSTER_DIR = Path(__file__).resolve().parent.parent / "incluster"
PROGRAM_MODULES = ("pod_common.py", "processes.py", "log_exports.py")
"""What every pod program imports besides its entry module (standard library only)."""
PROGRAM_PACKAGE = PurePosixPath("stages/incluster")
"""Where the program files sit under the program's working directory, so `python -m
stages.incluster.<program>` runs them with a bare interpreter."""

SMOKE_CONFIG = "smoke-config.json"
PERF_PLAN = "perf-plan.json.gz"
MEDIA_PORT = 8090
"""Where a pod serves its videos (the cluster's media Service targets it)."""
MEDIA_WAIT_SECONDS = 300
REQUEST_TIMEOUT_SECONDS = 300
"""The smoke request's limit: the first video on a cold worker is decoded before it answers."""

POD_ROOT = PurePosixPath("/tmp")
"""The only writable path in the cluster's pod (an emptyDir; the root filesystem is read-only)."""


@dataclass(frozen=True)
class PodPlace:
    """Where the pod program works and listens: the cluster pod's paths, or a local directory."""

    work_dir: str = str(POD_ROOT / "work")
    venv: str = str(POD_ROOT / "venv")
    listen_host: str = "0.0.0.0"
    listen_port: int = MEDIA_PORT
    ffmpeg: str | None = None
    """None: the pod takes $FFMPEG, which the Job sets from the imageio-ffmpeg it installed."""
    aiperf: str | None = None
    """None: AIPerf from `venv` (the pod installs it there)."""

    @property
    def media_dir(self) -> str:
        return f"{self.work_dir}/media"

    @property
    def aiperf_executable(self) -> str:
        return self.aiperf or f"{self.venv}/bin/aiperf"


@dataclass(frozen=True)
class PlanSettings:
    """What a run may choose about the client, on any target."""

    tokenizer: str
    model_wait_seconds: float = 60.0
    connection_reuse: ConnectionReuse = "never"
    heartbeat_seconds: float = 60.0
    tokenizer_check: bool = False
    """Load the tokenizer before the sweep (the cluster's `builtin` one downloads on first use)."""


def program_files(entry: str) -> dict[str, bytes]:
    """A pod program's files by their path under its working directory: the entry module and
    what it imports, read from this checkout."""
    return {
        str(PROGRAM_PACKAGE / name): (INCLUSTER_DIR / name).read_bytes()
        for name in (*PROGRAM_MODULES, entry)
    }


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


def tokenizer_check(settings: PlanSettings, place: PodPlace) -> list[str] | None:
    """A command that loads the builtin tokenizer's encoding before the sweep (None otherwise)."""
    if not settings.tokenizer_check or settings.tokenizer != "builtin":
        return None
    return [
        f"{place.venv}/bin/python",
        "-c",
        "import tiktoken; tiktoken.get_encoding('o200k_base')",
    ]


def perf_pod_plan(
    outputs: StackOutputs,
    workload: PerfWorkload,
    media: VideoMedia,
    media_url: str,
    place: PodPlace,
    settings: PlanSettings,
    inline_datasets: bool = True,
) -> dict[str, Any]:
    """The perf pod's plan: the videos to make (when they are files), and per level its dataset
    lines and AIPerf arguments.

    Without `inline_datasets` a level's dataset is left out (None): the caller writes it to the
    level's `dataset_path` itself. The lab does, because its text stand-ins for videos make the
    recipe's datasets hundreds of megabytes, too much to carry in a plan."""
    videos = _videos(workload, place) if media.video_files else []
    return {
        "served_model": outputs.served_model,
        "models_url": outputs.models_url,
        "model_wait_seconds": settings.model_wait_seconds,
        "media_wait_seconds": MEDIA_WAIT_SECONDS,
        "media_dir": place.media_dir,
        "media_check_url": f"{media_url}/{videos[0]['name']}" if videos else None,
        "listen_host": place.listen_host,
        "listen_port": place.listen_port,
        "ffmpeg": place.ffmpeg,
        "video_jobs": 2,
        "videos": videos,
        "aiperf_executable": place.aiperf_executable,
        "aiperf_env": aiperf_environment(),
        "tokenizer_check": tokenizer_check(settings, place),
        "heartbeat_seconds": settings.heartbeat_seconds,
        "export_files": [AIPERF_EXPORT_FILE, "profile_export_aiperf.csv"],
        "levels": [
            _perf_level(outputs, workload, c, media if inline_datasets else None, place, settings)
            for c in workload.concurrencies
        ],
    }


def _videos(workload: PerfWorkload, place: PodPlace) -> list[dict[str, Any]]:
    """Every video of the sweep, each level's own (so each level starts cold), all distinct."""
    names = [
        f"{video_id}.mp4" for c in workload.concurrencies for video_id in video_ids(workload, c)
    ]
    return [
        {"name": name, "ffmpeg_args": distinct_video_args(f"{place.media_dir}/{name}", index)}
        for index, name in enumerate(names)
    ]


def dataset_path(place: PodPlace, concurrency: int) -> Path:
    """Where a level's dataset is (the program writes it there from the plan, or finds it)."""
    return Path(place.work_dir) / f"c{concurrency}" / "dataset.jsonl"


def _perf_level(
    outputs: StackOutputs,
    workload: PerfWorkload,
    concurrency: int,
    media: VideoMedia | None,
    place: PodPlace,
    settings: PlanSettings,
) -> dict[str, Any]:
    dataset = dataset_path(place, concurrency)
    artifact_dir = dataset.parent / "aiperf"
    argv = aiperf_profile_args(
        outputs,
        workload,
        concurrency,
        dataset,
        artifact_dir,
        settings.tokenizer,
        settings.connection_reuse,
    )
    return {
        "concurrency": concurrency,
        "requests": workload.requests_per_level,
        "dataset_path": str(dataset),
        "dataset": dataset_rows(workload, concurrency, media) if media else None,
        "artifact_dir": str(artifact_dir),
        "argv": argv,
    }
