"""Run the smoke and perf pod programs as local processes; read their verdict like a cluster Job's.

Each run lays the program out the way the Job's ConfigMap does (`stages/incluster/*.py` and its
config under one directory) and starts `python -S -E -u -m stages.incluster.<program>` there: `-S`
keeps site-packages out and `-E` the PYTHON* variables, so the program runs on the standard library
alone, as in the pod's bare image.
Its output is echoed as it grows (`[perf lab]   pod| ...`) and kept in a log file; the verdict is
`stages.core.verdicts`, the same as for a Job's log.

The program runs in its own process group, stopped whole however the run ends; on SIGTERM it stops
the AIPerf group it started before it exits (`pod_common.run_pod_program`), given time to do so.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from common.confined_paths import no_link_below, remove_file, write_file
from common.credentials import mask
from common.ports import LOOPBACK, free_port
from components.contract import StackOutputs
from stages.core.pod_plans import (
    NEW_CONNECTIONS,
    PERF_PLAN,
    SMOKE_CONFIG,
    PlanSettings,
    PodPlace,
    dataset_path,
    perf_pod_plan,
    plan_file,
    program_files,
    smoke_pod_config,
)
from stages.core.results import ProfileResults, RunConditions
from stages.core.verdicts import (
    LogEcho,
    PodRun,
    SmokeResult,
    printer,
    smoke_verdict,
    sweep_results,
)
from stages.core.workload import PerfWorkload, VideoMedia, dataset_rows, write_dataset
from stages.errors import FrontendNotReady, UsageError
from stages.incluster.exit_causes import exit_cause
from stages.incluster.processes import running_group
from stages.local.host_load import HostSampler

POLL_SECONDS = 0.5
LOCAL_HEARTBEAT_SECONDS = 15.0
PROGRAM_STOP_GRACE_SECONDS = 30.0
"""Longer than stopping its AIPerf group takes: three `STOP_GRACE_SECONDS` waits, 15 s at most."""
PROGRAM_LOG = "program.log"
_INHERITED_PYTHON_VARIABLES = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")


def _ffmpeg() -> str:
    import imageio_ffmpeg  # type: ignore[import-untyped]

    return str(imageio_ffmpeg.get_ffmpeg_exe())


@dataclass(frozen=True)
class LocalTools:
    """What a local run needs from whoever owns the graph."""

    aiperf: Path
    tokenizer: str
    media_for: Callable[[PerfWorkload], VideoMedia]
    """What a request carries for its video (the lab: a per-video text prefix of the workload's
    `prefix_tokens`)."""
    default_workload: PerfWorkload
    """The sweep when no size is given (the lab: a reduced one that runs in minutes)."""
    recipe_workload: PerfWorkload
    """The recipe's sizes as this graph runs them (`--recipe-sizes`)."""
    ffmpeg: str = field(default_factory=_ffmpeg)
    """FFmpeg for the smoke video (default: the imageio-ffmpeg wheel's, as in the pod)."""
    conditions: RunConditions | None = None
    """How the graph's sweeps are timed: its time scale (the pauses between questions are
    stretched by it, the results given back in real time) and the host load is measured and
    recorded with them. None: real time, unmeasured."""
    worker_metrics_pages: tuple[str, ...] = ()
    """The graph's workers' /metrics URLs, read around each perf level with the frontend's (the
    lab knows its workers' ports; none: only the frontend's is read)."""


def require_local_tools(tools: LocalTools | None, outputs: StackOutputs) -> LocalTools:
    if tools is None:
        raise UsageError(
            f"{outputs.graph_name} is a lab graph (target: lab): run the stage through the lab, "
            "which knows its AIPerf and tokenizer, e.g. `python -m lab stage perf --outputs ...`"
        )
    return tools


def require_listening(outputs: StackOutputs) -> None:
    """Fail at once when nothing listens at the outputs' frontend: a local graph is up before its
    outputs are written, so a refused connection means they are stale (a graph since stopped), and
    waiting for the model would only cost the whole wait."""
    url = urllib.parse.urlsplit(outputs.frontend_url)
    try:
        socket.create_connection((url.hostname or LOOPBACK, url.port or 80), timeout=5).close()
    except OSError as error:
        raise FrontendNotReady(
            f"nothing listens at {outputs.frontend_url} ({os.strerror(error.errno or 0) or error}):"
            f" the graph {outputs.graph_name} that these outputs describe is not running; start it"
            " again (`python -m lab up` writes fresh outputs) and pass its outputs.json"
        ) from None


def run_locally(
    entry: str, config: tuple[str, bytes], work_dir: Path, say: Callable[[str], None]
) -> PodRun:
    """Lay out and run one pod program to its end; its output is echoed and kept in a log."""
    program_dir = work_dir / "program"
    for path, content in (program_files(entry) | dict([config])).items():
        (program_dir / path).parent.mkdir(parents=True, exist_ok=True)
        write_file(program_dir / path, content)
    log_path = work_dir / PROGRAM_LOG
    remove_file(log_path)  # the last run's; a link there is refused, not written through
    module = f"stages.incluster.{entry.removesuffix('.py')}"
    argv = [sys.executable, "-S", "-E", "-u", "-B", "-m", module, str(program_dir / config[0])]
    env = {k: v for k, v in os.environ.items() if k not in _INHERITED_PYTHON_VARIABLES}
    echo = LogEcho(say)
    with running_group(module, argv, env, log_path, cwd=program_dir) as program:
        program.stop_grace_seconds = PROGRAM_STOP_GRACE_SECONDS
        while program.exit_code() is None:
            time.sleep(POLL_SECONDS)
            echo.update(log_path.read_text(errors="replace"))
    log = log_path.read_text(errors="replace")
    _keep_masked(log_path, log)  # as a Job's pod log is kept; the verdict reads `log`
    echo.update(log, final=True)
    status = program.exit_code()
    failure = None if status == 0 else exit_cause(status, log[-4000:], work_dir)
    return PodRun(f"the local {module} program", status == 0, log, failure)


def _keep_masked(log_path: Path, log: str) -> None:
    """The program's log file with every credential masked, replaced whole (`write_file`), so a
    full disk cannot cut the log short; if even that fails, the unmasked log goes (its end is in
    the stage's message), since a secret in plain text must not stay on disk."""
    masked = mask(log)
    if masked != log:
        try:
            write_file(log_path, masked)
        except OSError:
            log_path.unlink(missing_ok=True)


def run_local_smoke(
    outputs: StackOutputs,
    tools: LocalTools,
    work_dir: Path,
    model_wait_seconds: float,
    stream: TextIO | None = None,
) -> SmokeResult:
    """The smoke program against a graph on this machine; returns the answer and the routing
    probe or raises why not."""
    require_listening(outputs)
    port = free_port()
    place = PodPlace(
        work_dir=str(work_dir.resolve()),
        listen_host=LOOPBACK,
        listen_port=port,
        ffmpeg=tools.ffmpeg,
    )
    config = smoke_pod_config(outputs, f"http://{LOOPBACK}:{port}", place, model_wait_seconds)
    content = (json.dumps(config, indent=2) + "\n").encode()
    run = run_locally(
        "smoke_pod.py", (SMOKE_CONFIG, content), work_dir, printer("smoke lab", stream)
    )
    return smoke_verdict(run)


def run_local_perf(
    outputs: StackOutputs,
    workload: PerfWorkload,
    out_dir: Path,
    tools: LocalTools,
    model_wait_seconds: float,
    stream: TextIO | None = None,
) -> ProfileResults:
    """The perf program against a graph on this machine; writes datasets, AIPerf's artifacts, the
    program's log and `results.json` under `out_dir`, as the cluster's perf stage does."""
    require_listening(outputs)
    out_dir = out_dir.resolve()
    place = PodPlace(work_dir=str(out_dir), listen_host=LOOPBACK, aiperf=str(tools.aiperf))
    settings = PlanSettings(
        tokenizer=tools.tokenizer,
        model_wait_seconds=model_wait_seconds,
        connection_reuse=NEW_CONNECTIONS,
        heartbeat_seconds=LOCAL_HEARTBEAT_SECONDS,
        worker_metrics_pages=tools.worker_metrics_pages,
    )
    media = tools.media_for(workload)
    conditions = tools.conditions
    timed = _stretched(workload, conditions.time_scale if conditions else 1.0)
    plan = perf_pod_plan(outputs, timed, media, "", place, settings, inline_datasets=False)
    for concurrency in workload.concurrencies:
        no_link_below(out_dir, f"c{concurrency}")  # the program and AIPerf write there unchecked
        rows = dataset_rows(timed, concurrency, media)
        write_dataset(rows, dataset_path(place, concurrency))
    content = plan_file(plan)
    with HostSampler() as host:
        run = run_locally("perf_pod.py", (PERF_PLAN, content), out_dir, printer("perf lab", stream))
    if conditions is not None:
        conditions = conditions.model_copy(update={"sweep": host.load()})
    return sweep_results(outputs, workload, run, out_dir, out_dir / PROGRAM_LOG, conditions)


def _stretched(workload: PerfWorkload, time_scale: float) -> PerfWorkload:
    """The workload as a graph `time_scale` times slower than real time runs it: its pauses
    between a video's questions stretched alike (what the results record is `workload`)."""
    if time_scale == 1:
        return workload
    return workload.model_copy(
        update={"turn_jitter_ms": round(workload.turn_jitter_ms * time_scale)}
    )
