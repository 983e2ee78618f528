"""Perf stage: the recipe's AIPerf sweep against one deployment, parsed into `ProfileResults`.

For each concurrency level: write the level's dataset (its own videos, so it starts cold), run
`aiperf profile` with the arguments from `stages.aiperf`, and read its JSON export. Progress goes
to stderr as plain lines, one per level plus a heartbeat on long levels, readable in CI logs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from components.contract import StackOutputs
from lab.processes import deferred_interrupts
from stages.aiperf import aiperf_environment, aiperf_profile_args
from stages.results import AIPERF_EXPORT_FILE, LevelResult, ProfileResults, read_level
from stages.targets import lab_aiperf_executable, lab_tokenizer, require_local_target
from stages.workload import PerfWorkload, VideoStandIn, dataset_rows, write_dataset

HEARTBEAT_SECONDS = 15.0
STOP_GRACE_SECONDS = 10.0
RECORDS_FILE = "profile_export.jsonl"
"""AIPerf appends one line per finished request here while it runs: the heartbeat counts them."""


class PerfError(RuntimeError):
    """AIPerf failed or the results break the workload's promises."""


@dataclass(frozen=True)
class LocalAIPerf:
    """AIPerf run as a process on this machine (the lab target's submission)."""

    executable: Path
    tokenizer: str

    @classmethod
    def for_lab(cls, executable: Path | None = None, tokenizer: str | None = None) -> LocalAIPerf:
        return cls(executable or lab_aiperf_executable(), tokenizer or lab_tokenizer())

    def run(self, args: list[str], artifact_dir: Path, progress: Progress, label: str) -> None:
        """Run AIPerf to completion, logging to `artifact_dir/aiperf.log`; PerfError if it fails.

        AIPerf 0.13.0 can exit 0 after failing to start its services, so success also requires
        its JSON export.
        """
        artifact_dir.mkdir(parents=True, exist_ok=True)
        for stale in (AIPERF_EXPORT_FILE, RECORDS_FILE):  # from an earlier run into the same dir
            (artifact_dir / stale).unlink(missing_ok=True)
        log_path = artifact_dir / "aiperf.log"
        # A short scratch directory: AIPerf puts ZMQ IPC sockets there, whose paths may not
        # exceed 107 characters.
        with tempfile.TemporaryDirectory(prefix="aiperf-") as scratch, log_path.open("w") as log:
            env = os.environ | aiperf_environment() | {"TMPDIR": scratch}
            process: subprocess.Popen[bytes] | None = None
            try:
                # An interrupt is held until `process` is recorded, so `finally` always stops it.
                with deferred_interrupts():
                    # Its own process group: AIPerf starts a dozen helpers, stopped together.
                    process = subprocess.Popen(
                        [str(self.executable), *args],
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                self._wait(process, artifact_dir / RECORDS_FILE, progress, label)
            finally:
                if process is not None:
                    with deferred_interrupts():
                        _stop_group(process)
        exported = (artifact_dir / AIPERF_EXPORT_FILE).is_file()
        if process.returncode != 0 or not exported:
            tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-20:])
            raise PerfError(
                f"AIPerf failed ({label}): exit status {process.returncode}, "
                f"{'an' if exported else 'no'} {AIPERF_EXPORT_FILE}; end of {log_path}:\n{tail}"
            )

    @staticmethod
    def _wait(
        process: subprocess.Popen[bytes], records: Path, progress: Progress, label: str
    ) -> None:
        next_beat = time.monotonic() + HEARTBEAT_SECONDS
        while process.poll() is None:
            time.sleep(0.5)
            if time.monotonic() >= next_beat:
                progress.heartbeat(label, _count_lines(records))
                next_beat += HEARTBEAT_SECONDS


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """Stop what is left of the process's group: all of it if interrupted, stragglers otherwise."""
    for signum, grace in (
        (signal.SIGTERM, STOP_GRACE_SECONDS),
        (signal.SIGKILL, STOP_GRACE_SECONDS),
    ):
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            continue
        time.sleep(0.2)  # let helpers that got the signal exit before checking again


def _count_lines(path: Path) -> int:
    try:
        with path.open("rb") as records:
            return sum(1 for _ in records)
    except FileNotFoundError:
        return 0


class Progress:
    """Plain progress lines on stderr (no bars, no colour), one per event."""

    def __init__(
        self, profile: str, levels: int, requests_per_level: int, stream: TextIO | None = None
    ):
        self.profile = profile
        self.levels = levels
        self.requests_per_level = requests_per_level
        self.stream = stream or sys.stderr
        self._started = 0.0

    def say(self, message: str) -> None:
        print(f"[perf {self.profile}] {message}", file=self.stream, flush=True)

    def level_started(self, index: int, concurrency: int) -> None:
        self._started = time.monotonic()
        self.say(
            f"level {index}/{self.levels}: concurrency {concurrency}, "
            f"{self.requests_per_level} requests ..."
        )

    def heartbeat(self, label: str, done: int) -> None:
        elapsed = time.monotonic() - self._started
        self.say(f"  {label}: {done}/{self.requests_per_level} requests done after {elapsed:.0f} s")

    def level_finished(self, level: LevelResult) -> None:
        self.say(
            f"  concurrency {level.concurrency} done in {time.monotonic() - self._started:.0f} s: "
            f"{level.requests_per_second:.2f} req/s, TTFT p50 {level.ttft_p50_ms:.0f} ms, "
            f"prefix-cache hits {level.cache_hit_ratio:.0%}, errors {level.error_count}"
        )


def check_level(level: LevelResult, workload: PerfWorkload) -> list[str]:
    """Broken promises of one level: errors, missing requests, output length not exact."""
    problems = []
    if level.error_count:
        problems.append(f"concurrency {level.concurrency}: {level.error_count} requests failed")
    if level.request_count != workload.requests_per_level:
        problems.append(
            f"concurrency {level.concurrency}: {level.request_count} requests completed, "
            f"{workload.requests_per_level} expected"
        )
    if abs(level.output_tokens_mean - workload.output_tokens) > 1e-6:
        problems.append(
            f"concurrency {level.concurrency}: {level.output_tokens_mean:g} output tokens on "
            f"average, exactly {workload.output_tokens} expected"
        )
    return problems


def run_perf(
    outputs: StackOutputs,
    workload: PerfWorkload,
    out_dir: Path,
    client: LocalAIPerf | None = None,
    stream: TextIO | None = None,
) -> ProfileResults:
    """Run the sweep; writes datasets and AIPerf artifacts under `out_dir/c<N>/`.

    Raises PerfError after the sweep if any level broke the workload's promises (the results are
    still saved to `out_dir/results.json` for inspection).
    """
    require_local_target(outputs, stage="perf")
    client = client or LocalAIPerf.for_lab()
    media = VideoStandIn(workload.prefix_tokens)
    progress = Progress(
        outputs.profile.value, len(workload.concurrencies), workload.requests_per_level, stream
    )
    levels = []
    for index, concurrency in enumerate(workload.concurrencies, start=1):
        level_dir = out_dir / f"c{concurrency}"
        dataset = write_dataset(
            dataset_rows(workload, concurrency, media), level_dir / "dataset.jsonl"
        )
        artifact_dir = level_dir / "aiperf"
        args = aiperf_profile_args(
            outputs, workload, concurrency, dataset, artifact_dir, client.tokenizer
        )
        progress.level_started(index, concurrency)
        client.run(args, artifact_dir, progress, label=f"concurrency {concurrency}")
        level = read_level(artifact_dir)
        progress.level_finished(level)
        levels.append(level)
    return finish_sweep(outputs, workload, levels, out_dir)


def finish_sweep(
    outputs: StackOutputs, workload: PerfWorkload, levels: list[LevelResult], out_dir: Path
) -> ProfileResults:
    """Save the sweep as `out_dir/results.json`, then fail if a level broke the workload's promises.

    Shared by every target, so the lab and the cluster write the same results for `report` and
    `archive`.
    """
    results = ProfileResults(
        profile=outputs.profile,
        target=outputs.target,
        graph_name=outputs.graph_name,
        workers=outputs.worker_replicas,
        session_header=outputs.session_header,
        workload=workload,
        levels=levels,
    )
    results.save(out_dir / "results.json")
    problems = [p for level in levels for p in check_level(level, workload)]
    if problems:
        raise PerfError("the sweep broke its promises:\n" + "\n".join(problems))
    return results
