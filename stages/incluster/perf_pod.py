"""The perf Job's program: the AIPerf sweep from inside the cluster, exports returned in the log.

    python -m stages.incluster.perf_pod /config/perf-plan.json.gz

The plan (built by `stages.cluster_jobs.perf_pod_plan` from the same builders as the lab's sweep)
holds every video's FFmpeg arguments, every level's dataset lines and AIPerf arguments. Steps:

1. wait (bounded) until the frontend's `/v1/models` lists the model;
2. check that the tokenizer AIPerf loads is available (bounded, so a blocked download fails here
   with a reason instead of hanging inside AIPerf);
3. make every video of the sweep (30 s, 2 FPS, H.264, distinct per video id) and serve them;
4. fetch one through its URL (the media Service), as the workers will;
5. per concurrency level: write its dataset, run AIPerf, print a summary and the level's exports
   framed for the stage (`pod_common.export_lines`).

The last line is `Perf sweep finished: ...` on success; a failure prints `Perf FAILED: <reason>`
(exit 1), a frontend that never lists the model `Frontend not ready: <reason>` (exit 3).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from stages.incluster import pod_common
from stages.incluster.pod_common import Export, PodFailure, say

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


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """Stop whatever is left of AIPerf's process group (it starts a dozen helpers)."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            continue
        time.sleep(0.2)


def run_aiperf(config: dict[str, Any], level: dict[str, Any]) -> None:
    """One AIPerf run to completion, with a heartbeat; PodFailure with its log's tail if it fails.

    AIPerf 0.13.0 can exit 0 after failing to start its services, so success also needs the export.
    """
    artifact_dir = Path(level["artifact_dir"])
    artifact_dir.mkdir(parents=True, exist_ok=True)
    log_path = artifact_dir.parent / "aiperf-output.log"
    label = f"concurrency {level['concurrency']}"
    started = time.monotonic()
    # A short scratch directory: AIPerf's ZMQ IPC socket paths may not exceed 107 characters.
    with tempfile.TemporaryDirectory(prefix="ap-") as scratch, log_path.open("wb") as log:
        env = os.environ | config["aiperf_env"] | {"TMPDIR": scratch}
        process = subprocess.Popen(
            [config["aiperf_executable"], *level["argv"]],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            next_beat = started + HEARTBEAT_SECONDS
            while process.poll() is None:
                time.sleep(0.5)
                if time.monotonic() >= next_beat:
                    done = count_lines(artifact_dir / RECORDS_FILE)
                    say(f"  {label}: {done}/{level['requests']} requests done after "
                        f"{time.monotonic() - started:.0f} s")  # fmt: skip
                    next_beat += HEARTBEAT_SECONDS
        finally:
            stop_group(process)
    if process.returncode != 0 or not (artifact_dir / AIPERF_EXPORT_JSON).is_file():
        tail = log_path.read_text(errors="replace").splitlines()[-20:]
        for line in tail:
            say(f"  aiperf| {line}")
        raise PodFailure(
            f"AIPerf failed at {label}: exit status {process.returncode}, "
            f"{'an' if (artifact_dir / AIPERF_EXPORT_JSON).is_file() else 'no'} {AIPERF_EXPORT_JSON}"
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


def write_dataset(level: dict[str, Any]) -> Path:
    path = Path(level["dataset_path"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in level["dataset"]))
    return path


def print_exports(config: dict[str, Any], level: dict[str, Any]) -> None:
    """The level's AIPerf files, framed in the log for the stage to decode."""
    artifact_dir = Path(level["artifact_dir"])
    for name in config["export_files"]:
        path = artifact_dir / name
        if path.is_file():
            for line in pod_common.export_lines(
                Export(level["concurrency"], name, path.read_bytes())
            ):
                print(line)
    sys.stdout.flush()


def run_level(config: dict[str, Any], level: dict[str, Any], index: int) -> None:
    levels = len(config["levels"])
    say(f"level {index}/{levels}: concurrency {level['concurrency']}, {level['requests']} requests")
    write_dataset(level)
    run_aiperf(config, level)
    export = json.loads((Path(level["artifact_dir"]) / AIPERF_EXPORT_JSON).read_text())
    say(summary(level["concurrency"], export))
    print_exports(config, level)


def run(config: dict[str, Any]) -> int:
    """The sweep's steps; returns the number of levels run."""
    pod_common.wait_for_model(
        config["models_url"], config["served_model"], float(config["model_wait_seconds"])
    )
    check_tokenizer(config.get("tokenizer_check"))
    make_videos(config)
    media_dir = Path(config["media_dir"])
    server = pod_common.MediaServer.start(media_dir, config["listen_host"], config["listen_port"])
    try:
        pod_common.wait_until_served(config["media_check_url"], float(config["media_wait_seconds"]))
        for index, level in enumerate(config["levels"], start=1):
            run_level(config, level, index)
    finally:
        server.stop()
    return len(config["levels"])


def main(argv: list[str] | None = None) -> int:
    return pod_common.run_pod_program(
        sys.argv[1:] if argv is None else argv,
        usage="python -m stages.incluster.perf_pod PLAN_JSON[.gz]",
        program=lambda config: f"{FINISHED} {run(config)} levels",
        failed=FAILED,
    )


if __name__ == "__main__":
    sys.exit(main())
