"""The perf program: the AIPerf sweep, its exports returned in the log. Runs in the cluster's perf
Job and, unchanged, as a local process against the lab.

    python -m stages.incluster.perf_pod /config/perf-plan.json.gz

The plan (built by `stages.core.pod_plans.perf_pod_plan`) holds every video's FFmpeg arguments,
every level's dataset lines and AIPerf arguments. Steps:

1. wait (bounded) until the frontend's `/v1/models` lists the model;
2. check that the tokenizer AIPerf loads is available (bounded, so a blocked download fails here
   with a reason instead of hanging inside AIPerf);
3. make every video of the sweep (30 s, 2 FPS, H.264, distinct per video id) and serve them, and
   fetch one through its URL (the media Service), as the workers will; the lab's plan has no video
   files (its videos are text stand-ins), so there is nothing to make;
4. per concurrency level: write its dataset, run AIPerf, print a summary and the level's exports
   framed for the stage (`log_exports.export_lines`); when the plan names the graph's `/metrics`
   pages, what the graph counted during the level is one of them (`graph_metrics`).

The last line is `Perf sweep finished: ...` on success; a failure prints `Perf FAILED: <reason>`
(exit 1), a frontend that never lists the model `Frontend not ready: <reason>` (exit 3).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from stages.incluster import graph_metrics, pod_common
from stages.incluster.log_exports import Export, export_lines
from stages.incluster.pod_common import PodFailure, say
from stages.incluster.processes import running_group

FINISHED = "Perf sweep finished:"
FAILED = "Perf FAILED:"
AIPERF_EXPORT_JSON = "profile_export_aiperf.json"
RECORDS_FILE = "profile_export.jsonl"
HEARTBEAT_SECONDS = 60.0
VIDEO_PROGRESS_EVERY = 50
TOKENIZER_CHECK_SECONDS = 180.0


def check_tokenizer(command: list[str] | None) -> None:
    """Run the plan's tokenizer check (e.g. load tiktoken's encoding) with a time limit."""
    if not command:
        return
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=TOKENIZER_CHECK_SECONDS, check=False
        )
    except subprocess.TimeoutExpired as error:
        raise PodFailure(
            f"the tokenizer did not load within {TOKENIZER_CHECK_SECONDS:.0f} s "
            "(a blocked download? see docs/stages.md, tokenizer)"
        ) from error
    if result.returncode != 0:
        tail = result.stderr.strip().splitlines()[-3:]
        raise PodFailure(f"the tokenizer does not load: {' | '.join(tail)}")
    say("tokenizer available")


def make_videos(config: dict[str, Any]) -> None:
    """Every video of the sweep, a few FFmpeg processes at a time, with a progress line per 50."""
    ffmpeg = pod_common.ffmpeg_executable(config.get("ffmpeg"))
    media_dir = Path(config["media_dir"])
    videos = config["videos"]
    started = time.monotonic()
    say(f"making {len(videos)} videos with {ffmpeg}")
    with ThreadPoolExecutor(max_workers=int(config["video_jobs"])) as pool:
        made = pool.map(
            lambda video: pod_common.make_video(
                ffmpeg, video["ffmpeg_args"], media_dir / video["name"]
            ),
            videos,
        )
        for count, _ in enumerate(made, start=1):
            if count % VIDEO_PROGRESS_EVERY == 0 or count == len(videos):
                say(f"  {count}/{len(videos)} videos made ({time.monotonic() - started:.0f} s)")


def count_lines(path: Path) -> int:
    try:
        with path.open("rb") as records:
            return sum(1 for _ in records)
    except FileNotFoundError:
        return 0


def run_aiperf(config: dict[str, Any], level: dict[str, Any]) -> None:
    """One AIPerf run to completion, with a heartbeat; PodFailure with its log's tail if it fails.

    AIPerf starts a dozen helper processes: it runs in its own process group, which is stopped
    whole however the run ends (an interrupt included). AIPerf 0.13.0 can exit 0 after failing to
    start its services, so success also needs the export.
    """
    artifact_dir = Path(level["artifact_dir"])
    artifact_dir.mkdir(parents=True, exist_ok=True)
    stale_files = (AIPERF_EXPORT_JSON, RECORDS_FILE, graph_metrics.GRAPH_METRICS_FILE)
    for stale in stale_files:  # from an earlier run into the same place
        (artifact_dir / stale).unlink(missing_ok=True)
    log_path = artifact_dir.parent / "aiperf-output.log"
    label = f"concurrency {level['concurrency']}"
    heartbeat = float(config.get("heartbeat_seconds", HEARTBEAT_SECONDS))
    started = time.monotonic()
    # A short scratch directory: AIPerf's ZMQ IPC socket paths may not exceed 107 characters.
    with tempfile.TemporaryDirectory(prefix="ap-") as scratch:
        env = os.environ | config["aiperf_env"] | {"TMPDIR": scratch}
        argv = [config["aiperf_executable"], *level["argv"]]
        with running_group("aiperf", argv, env, log_path, cwd=Path(scratch)) as aiperf:
            next_beat = started + heartbeat
            while aiperf.exit_code() is None:
                time.sleep(0.5)
                if time.monotonic() >= next_beat:
                    done = count_lines(artifact_dir / RECORDS_FILE)
                    say(
                        f"  {label}: {done}/{level['requests']} requests done after "
                        f"{time.monotonic() - started:.0f} s"
                    )
                    next_beat += heartbeat
        status = aiperf.exit_code()
    exported = (artifact_dir / AIPERF_EXPORT_JSON).is_file()
    if status != 0 or not exported:
        for line in log_path.read_text(errors="replace").splitlines()[-20:]:
            say(f"  aiperf| {line}")
        raise PodFailure(
            f"AIPerf failed at {label}: exit status {status}, "
            f"{'an' if exported else 'no'} {AIPERF_EXPORT_JSON}"
        )


def summary(concurrency: int, export: dict[str, Any]) -> str:
    """The level's headline numbers, read from AIPerf's JSON export."""

    def stat(tag: str, name: str) -> float:
        entry = export.get(tag)
        value = entry.get(name) if isinstance(entry, dict) else None
        return float(value) if isinstance(value, int | float) else float("nan")

    return (
        f"concurrency {concurrency} finished: {stat('request_throughput', 'avg'):.2f} req/s, "
        f"TTFT p50 {stat('time_to_first_token', 'p50'):.0f} ms, "
        f"{stat('request_count', 'avg'):.0f} requests"
    )


def write_dataset(level: dict[str, Any]) -> None:
    """The level's dataset from the plan; a plan without one means it is already written."""
    path = Path(level["dataset_path"])
    if level["dataset"] is None:
        if not path.is_file():
            raise PodFailure(f"the plan leaves the dataset to {path}, which does not exist")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in level["dataset"]))


def print_exports(config: dict[str, Any], level: dict[str, Any]) -> None:
    """The level's AIPerf files, framed in the log for the stage to decode."""
    artifact_dir = Path(level["artifact_dir"])
    for name in config["export_files"]:
        path = artifact_dir / name
        if path.is_file():
            for line in export_lines(Export(level["concurrency"], name, path.read_bytes())):
                print(line)
    sys.stdout.flush()


def run_level(config: dict[str, Any], level: dict[str, Any], index: int) -> None:
    levels = len(config["levels"])
    say(f"level {index}/{levels}: concurrency {level['concurrency']}, {level['requests']} requests")
    write_dataset(level)
    sources = config.get("graph_metrics")
    before = graph_metrics.snapshot(sources) if sources else None
    run_aiperf(config, level)
    artifact_dir = Path(level["artifact_dir"])
    export = json.loads((artifact_dir / AIPERF_EXPORT_JSON).read_text())
    say(summary(level["concurrency"], export))
    if sources and before is not None:
        record = graph_metrics.level_record(before, graph_metrics.snapshot(sources))
        graph_metrics.write_level_record(record, artifact_dir)
        say(graph_metrics.summary(record))
    print_exports(config, level)


def run(config: dict[str, Any]) -> int:
    """The sweep's steps; returns the number of levels run."""
    pod_common.wait_for_model(config)
    check_tokenizer(config.get("tokenizer_check"))
    with ExitStack() as videos:
        # Made and served, proven fetchable through their URL; a plan without video files (the
        # lab's text stand-ins) has nothing to make or serve.
        if config["videos"]:
            make_videos(config)
            videos.enter_context(pod_common.serving(config, config["media_check_url"]))
        for index, level in enumerate(config["levels"], start=1):
            run_level(config, level, index)
    return len(config["levels"])


if __name__ == "__main__":
    sys.exit(
        pod_common.run_pod_program(
            sys.argv[1:],
            usage="python -m stages.incluster.perf_pod PLAN_JSON[.gz]",
            program=lambda config: f"{FINISHED} {run(config)} levels",
            failed=FAILED,
        )
    )
