"""What the pod programs run: their config (smoke) and plan (perf), and their files.

The same builders serve both targets. On a cluster the config travels in the Job's ConfigMap and
the program runs in a pod; on this machine (the lab) it is written to a directory laid out the
same way and the program runs as a local process. Only `PodPlace` (where the program works and
listens) and what a request carries for its video (`VideoMedia`) differ.

The smoke test asks one question about one synthetic video, video first, and needs a non-empty
answer. On the cluster the worker fetches the video and the model describes it. In the lab,
Dynamo's frontend accepts the `video_url` part (it counts one video) and its chat template reduces
it to a `[video_url]` marker; the mock engine never fetches or decodes the video and answers with
random words from the tiny vocabulary. So the lab proves the request shape, routing and serving
path, not video understanding; to show the video is served, the program fetches it once itself.

The videos are the recipe's 30 s, 2 FPS clips, H.264 in MP4 (the workers decode with NVDEC, which
takes H.264/H.265 only), made by the FFmpeg of the `imageio-ffmpeg` wheel (it includes libx264).
The AIPerf 0.13.0 arguments are the same on every target: only the dataset path, the tokenizer and
the connection strategy differ.

Over 300 lines: everything a pod program is given, built by the same builders for both targets:
its files, its config or plan, and the request, video and AIPerf arguments they carry.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from components.contract import StackOutputs
from stages.core.aiperf_export import AIPERF_EXPORT_FILE
from stages.core.workload import PerfWorkload, VideoMedia, dataset_rows, video_ids
from stages.incluster.graph_metrics import GRAPH_METRICS_FILE, SCRAPE_TIMEOUT_SECONDS

INCLUSTER_DIR = Path(__file__).resolve().parent.parent / "incluster"
PROGRAM_MODULES = ("pod_common.py", "processes.py", "log_exports.py", "graph_metrics.py")
"""What the pod programs import besides their entry module (standard library only)."""
PROGRAM_PACKAGE = PurePosixPath("stages/incluster")
"""Where the program files sit under the program's working directory, so `python -m
stages.incluster.<program>` runs them with a bare interpreter."""

SMOKE_CONFIG = "smoke-config.json"
PERF_PLAN = "perf-plan.json.gz"
PLAN_COMPRESSION_LEVEL = 6
"""The recipe's plan on a cluster is 4.8 MB of JSON (every level's dataset inline): at gzip's
level 6 it is 102 KB in 30 ms, at level 9 (`gzip.compress`'s default) no smaller, in 84 ms."""
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
    worker_metrics_pages: tuple[str, ...] = ()
    """The workers' /metrics URLs the perf program reads around each level (with the frontend's,
    which its URL gives): the lab knows its workers' ports, the cluster lists the worker pods."""


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
        "routing_probe": {
            "model": outputs.served_model,
            "videos": PROBE_VIDEOS,
            "questions": PROBE_QUESTIONS,
            "max_tokens": PROBE_MAX_TOKENS,
            "session_header": outputs.session_header,
        },
    }


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
        "tokenizer_check": [  # the builtin tokenizer's encoding, loaded before the sweep
            f"{place.venv}/bin/python",
            "-c",
            "import tiktoken; tiktoken.get_encoding('o200k_base')",
        ]
        if settings.tokenizer_check and settings.tokenizer == "builtin"
        else None,
        "heartbeat_seconds": settings.heartbeat_seconds,
        "export_files": [AIPERF_EXPORT_FILE, "profile_export_aiperf.csv", GRAPH_METRICS_FILE],
        "graph_metrics": {
            "frontend": f"{outputs.frontend_url.rstrip('/')}/metrics",
            "workers": list(settings.worker_metrics_pages),
            "timeout_seconds": SCRAPE_TIMEOUT_SECONDS,
        },
        "levels": [
            _perf_level(outputs, workload, c, media if inline_datasets else None, place, settings)
            for c in workload.concurrencies
        ],
    }


def plan_file(plan: dict[str, Any]) -> bytes:
    """The plan as the perf program reads it (`PERF_PLAN`): JSON, gzipped, the same bytes for the
    same plan."""
    return gzip.compress(json.dumps(plan).encode(), compresslevel=PLAN_COMPRESSION_LEVEL, mtime=0)


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


# --- the smoke request --------------------------------------------------------------------------

SMOKE_QUESTION = "Describe what happens in this video."
SMOKE_MAX_TOKENS = 64
VIDEO_NAME = "smoke.mp4"
PROBE_VIDEOS = 12
PROBE_QUESTIONS = 3
PROBE_MAX_TOKENS = 1
"""The routing probe after the smoke answer: 36 short text requests, sent one after another, each
video one session as in the perf workload; only the worker that served each one matters."""


def smoke_request_body(
    model: str, video_url: str, question: str = SMOKE_QUESTION
) -> dict[str, Any]:
    """The chat request: the video first, then the question (the Reasoner's expected order)."""
    return {
        "model": model,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "video_url", "video_url": {"url": video_url}},
                    {"type": "text", "text": question},
                ],
            }
        ],
        "max_tokens": SMOKE_MAX_TOKENS,
        "media_io_kwargs": {"video": {"fps": 2.0}},
    }


# --- synthetic videos --------------------------------------------------------------------------

DURATION_SECONDS = 30
FRAMES_PER_SECOND = 2
WIDTH, HEIGHT = 640, 360
SIZE = f"{WIDTH}x{HEIGHT}"


def ffmpeg_args(out: Path, pattern: str = "testsrc") -> list[str]:
    """Arguments after the ffmpeg executable; `pattern` is an FFmpeg test source (testsrc, ...)."""
    source = f"{pattern}=duration={DURATION_SECONDS}:size={SIZE}:rate={FRAMES_PER_SECOND}"
    # Laid out by hand (formatter skipped): a command line, each option beside its value.
    return [
        "-hide_banner", "-loglevel", "error", "-y",
        "-f", "lavfi", "-i", source,
        "-c:v", "libx264", "-pix_fmt", "yuv420p",
        str(out),
    ]  # fmt: skip


_PALETTE = ("red", "yellow", "cyan", "magenta", "white", "black", "orange", "lime")
_BOX = 64
_BOX_STEP = 8
_COLUMNS = (WIDTH - _BOX) // _BOX_STEP + 1
DISTINCT_VIDEOS = _COLUMNS * ((HEIGHT - _BOX) // _BOX_STEP + 1)
"""How many distinct videos `distinct_video_args` makes: one per position of its box."""


def distinct_video_args(out: str, index: int) -> list[str]:
    """FFmpeg arguments for the sweep's `index`-th video: the stage's test pattern plus a box
    whose position (and colour) is unique to the index.

    Every video id must have different pixels: a worker's multimodal cache keys on the media's
    content, so two ids with identical frames would make a "new" video a cache hit.
    """
    if not 0 <= index < DISTINCT_VIDEOS:
        raise ValueError(f"at most {DISTINCT_VIDEOS} distinct synthetic videos, asked for #{index}")
    x, y = _BOX_STEP * (index % _COLUMNS), _BOX_STEP * (index // _COLUMNS)
    colour = _PALETTE[index % len(_PALETTE)]
    box = f"drawbox=x={x}:y={y}:w={_BOX}:h={_BOX}:color={colour}@1:t=fill"
    args = ffmpeg_args(Path(out))
    codec = args.index("-c:v")
    return [*args[:codec], "-vf", box, *args[codec:]]


# --- AIPerf ------------------------------------------------------------------------------------

AIPERF_VERSION = "0.13.0"
ConnectionReuse = Literal["pooled", "never", "sticky-user-sessions"]

NEW_CONNECTIONS: ConnectionReuse = "never"
"""A new connection per request, on every target. On loopback, a reused keep-alive connection adds
a ~20-40 ms TCP stall to the first token of a streamed response (measured: TTFT p50 44 ms pooled
vs 26 ms with a new connection per request, same graph, same prompts)."""


def aiperf_profile_args(
    outputs: StackOutputs,
    workload: PerfWorkload,
    concurrency: int,
    dataset: Path,
    artifact_dir: Path,
    tokenizer: str,
    connection_reuse: ConnectionReuse = NEW_CONNECTIONS,
) -> list[str]:
    """`aiperf profile ...` arguments (without the executable) for one concurrency level.

    Every request returns exactly `workload.output_tokens` tokens: the dataset sets each line's
    output length (sent as the maximum) and the extra inputs forbid stopping earlier. One session
    per video carries the profile's session header only when the outputs name one (affinity on);
    without it AIPerf sends its own X-Correlation-ID only, which the Dynamo router ignores.
    """
    # Laid out by hand (formatter skipped): a command line, each option beside its value.
    args = [
        "profile",
        "--model", outputs.served_model,
        "--url", outputs.frontend_url,
        "--endpoint-type", "chat",
        "--streaming",
        "--tokenizer", tokenizer,
        "--use-server-token-count",
        "--input-file", str(dataset),
        "--custom-dataset-type", "single_turn",
        "--request-count", str(workload.requests_per_level),
        "--concurrency", str(concurrency),
        "--extra-inputs", "ignore_eos:true",
        "--extra-inputs", f"min_tokens:{workload.output_tokens}",
        "--connection-reuse-strategy", connection_reuse,
        "--random-seed", str(workload.seed),
        "--ui-type", "none",
        "--no-gpu-telemetry",
        "--no-server-metrics",
        "--output-artifact-dir", str(artifact_dir),
    ]  # fmt: skip
    if outputs.session_header is not None:
        args += ["--session-header", outputs.session_header]
    return args


def aiperf_environment() -> dict[str, str]:
    """Environment for AIPerf: no session header of its own beyond what `--session-header` names.

    AIPerf 0.13.0 adds `X-Session-Affinity` to every request by default, and can add
    `X-Dynamo-Session-ID`; both are switched off so that the only session header on the wire is the
    one the stack outputs ask for. Hub-offline switches are cleared: with them set, AIPerf 0.13.0
    mistakes a local tokenizer directory for a hub id.
    """
    return {
        "AIPERF_HTTP_X_SESSION_AFFINITY_FROM_CORRELATION_ID": "false",
        "AIPERF_HTTP_X_DYNAMO_SESSION_ID_FROM_CORRELATION_ID": "false",
        "HF_HUB_OFFLINE": "",
        "TRANSFORMERS_OFFLINE": "",
    }
