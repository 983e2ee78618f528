"""The local target without the lab: the perf program with a stand-in AIPerf and frontend.

The stand-in AIPerf records its arguments and writes a real AIPerf export (a fixture); the
frontend stand-in only lists the model. Everything else is the product: the program laid out and
run as `python -S -E`, its log decoded into `results.json` by the verdict the cluster uses.
"""

from __future__ import annotations

import errno
import io
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from common.ports import free_port
from components.contract import StackOutputs
from components.routing import RoutingProfile
from lab.stage_tools import LAB_WORKLOAD
from lab.standin import VideoStandIn
from stages.core.workload import PerfWorkload
from stages.errors import FrontendNotReady, StageFailed
from stages.local.run import LocalTools, _keep_masked, run_local_perf
from tests.stages.support import FIXTURES, lab_outputs_for
from tests.support import StandInHandler, stand_in_server

# The fixture export: 3 videos x 3 questions at concurrency 2, 8 output tokens.
MATCHING = LAB_WORKLOAD.model_copy(
    update={
        "videos": 3,
        "questions": 3,
        "output_tokens": 8,
        "concurrencies": (2,),
        "prefix_tokens": 32,
    }
)
WRITE_FIXTURE = (
    'dir="$(grep -A1 -x -- --output-artifact-dir "{argv}" | tail -1)"; mkdir -p "$dir"; '
    f'cp {FIXTURES / "aiperf-session-affinity-c2.json"} "$dir/profile_export_aiperf.json"'
)


class _ListsTheModel(StandInHandler):
    model = "tiny-llama"

    def do_GET(self) -> None:
        self.send_json({"data": [{"id": self.model}]})


@pytest.fixture
def frontend() -> Iterator[int]:
    with stand_in_server(_ListsTheModel) as port:
        yield port


def fake_tools(tmp_path: Path, script: str) -> LocalTools:
    """An AIPerf that records its arguments and then runs `script` (bash)."""
    executable = tmp_path / "aiperf"
    argv = tmp_path / "argv.txt"
    executable.write_text(
        f'#!/usr/bin/env bash\nprintf "%s\\n" "$@" > {shlex.quote(str(argv))}\n'
        + script.format(argv=argv)
        + "\n"
    )
    executable.chmod(0o755)
    return LocalTools(
        aiperf=executable,
        tokenizer="tok",
        media_for=lambda workload: VideoStandIn(workload.prefix_tokens),
        default_workload=MATCHING,
        recipe_workload=MATCHING,
        ffmpeg="/nonexistent/ffmpeg",
    )


def outputs(profile: RoutingProfile, port: int) -> StackOutputs:
    return lab_outputs_for(profile, port=port)


def sweep(
    tmp_path: Path, script: str, port: int, workload: PerfWorkload = MATCHING
) -> tuple[Any, str]:
    progress = io.StringIO()
    results = run_local_perf(
        outputs(RoutingProfile.SESSION_AFFINITY, port),
        workload,
        tmp_path / "perf",
        fake_tools(tmp_path, script),
        model_wait_seconds=5,
        stream=progress,
    )
    return results, progress.getvalue()


@pytest.mark.slow
def test_a_sweep_runs_aiperf_per_level_and_parses_each(tmp_path: Path, frontend: int) -> None:
    results, progress = sweep(tmp_path, WRITE_FIXTURE, frontend)

    argv = (tmp_path / "argv.txt").read_text().splitlines()
    assert argv[0] == "profile" and "--session-header" in argv
    assert (tmp_path / "perf" / "c2" / "dataset.jsonl").read_text().count("\n") == 9
    assert [level.concurrency for level in results.levels] == [2]
    assert results.profile is RoutingProfile.SESSION_AFFINITY and results.workers == 8
    assert "[perf lab]   pod| level 1/1: concurrency 2" in progress
    assert "(export concurrency=2 file=profile_export_aiperf.json" in progress


@pytest.mark.slow
def test_results_that_break_the_workload_fail_the_stage(tmp_path: Path, frontend: int) -> None:
    workload = MATCHING.model_copy(update={"output_tokens": 128})

    with pytest.raises(StageFailed, match="exactly 128 expected"):
        sweep(tmp_path, WRITE_FIXTURE, frontend, workload)

    assert (tmp_path / "perf" / "results.json").is_file()  # kept for inspection


@pytest.mark.slow
def test_aiperf_exiting_0_without_an_export_is_a_failure(tmp_path: Path, frontend: int) -> None:
    with pytest.raises(StageFailed, match="no profile_export_aiperf.json") as failure:
        sweep(tmp_path, 'echo "ZMQ socket failed"; exit 0', frontend)

    assert "ZMQ socket failed" in str(failure.value)


@pytest.mark.slow
def test_aiperf_failing_is_reported_with_its_status(tmp_path: Path, frontend: int) -> None:
    with pytest.raises(StageFailed, match="exit status 3"):
        sweep(tmp_path, "exit 3", frontend)


class _ListsAnotherModel(_ListsTheModel):
    model = "another-model"


@pytest.mark.slow
def test_a_frontend_that_never_lists_the_model_is_its_own_failure(tmp_path: Path) -> None:
    with (
        stand_in_server(_ListsAnotherModel) as port,
        pytest.raises(FrontendNotReady, match="did not list tiny-llama") as failure,
    ):
        sweep(tmp_path, WRITE_FIXTURE, port)

    assert failure.value.exit_status == 3


def test_outputs_of_a_stopped_graph_fail_at_once_naming_the_fix(tmp_path: Path) -> None:
    # A stale outputs.json (its graph since stopped) used to cost the whole model wait.
    with pytest.raises(FrontendNotReady, match="nothing listens at http://127.0.0.1:") as failure:
        sweep(tmp_path, WRITE_FIXTURE, free_port())

    assert "is not running" in str(failure.value) and "python -m lab up" in str(failure.value)
    assert not (tmp_path / "argv.txt").exists()  # AIPerf never started
    assert failure.value.exit_status == 3


PIP_LINE = "Looking in indexes: https://ci:pa/ss" + "Cn7f3a9d2e41b8c6Zq@mirror.example.com/simple\n"
"""pip's line for an index URL whose password holds a `/` (assembled: a canary, no password)."""


def test_the_programs_log_is_kept_masked(tmp_path: Path) -> None:
    log = tmp_path / "program.log"
    log.write_text(PIP_LINE)

    _keep_masked(log, PIP_LINE)

    assert log.read_text() == "Looking in indexes: https://<secret>@mirror.example.com/simple\n"
    assert [path.name for path in tmp_path.iterdir()] == ["program.log"]


def test_a_log_that_cannot_be_masked_on_disk_is_not_kept_in_plain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "program.log"
    log.write_text(PIP_LINE)

    def full(path: Path, content: str) -> Path:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("stages.local.run.write_file", full)
    _keep_masked(log, PIP_LINE)

    assert list(tmp_path.iterdir()) == []
