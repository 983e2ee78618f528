"""The perf stage's sweep loop, with a stand-in AIPerf executable (no lab needed)."""

from __future__ import annotations

import io
import shlex
from pathlib import Path

import pytest

from components.routing import RoutingProfile
from stages.perf import LocalAIPerf, PerfError, run_perf
from stages.workload import LAB_WORKLOAD
from tests.stages.conftest import FIXTURES, lab_outputs_for

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


def fake_aiperf(tmp_path: Path, script: str) -> LocalAIPerf:
    """An executable that records its arguments and then runs `script` (bash)."""
    executable = tmp_path / "aiperf"
    executable.write_text(
        "#!/usr/bin/env bash\n"
        f'printf "%s\\n" "$@" > {shlex.quote(str(tmp_path / "argv.txt"))}\n'
        f"{script}\n"
    )
    executable.chmod(0o755)
    return LocalAIPerf(executable=executable, tokenizer="tok")


WRITE_FIXTURE = (
    'dir="$(grep -A1 -x -- --output-artifact-dir ' + "{argv}" + ' | tail -1)"; mkdir -p "$dir"; '
    f'cp {FIXTURES / "aiperf-session-affinity-c2.json"} "$dir/profile_export_aiperf.json"'
)


def test_a_sweep_runs_aiperf_per_level_and_parses_each(tmp_path: Path) -> None:
    client = fake_aiperf(tmp_path, WRITE_FIXTURE.format(argv=tmp_path / "argv.txt"))
    outputs = lab_outputs_for(RoutingProfile.SESSION_AFFINITY)

    results = run_perf(outputs, MATCHING, tmp_path / "perf", client, stream=io.StringIO())

    argv = (tmp_path / "argv.txt").read_text().splitlines()
    assert argv[0] == "profile" and "--session-header" in argv
    assert (tmp_path / "perf" / "c2" / "dataset.jsonl").read_text().count("\n") == 9
    assert [level.concurrency for level in results.levels] == [2]
    assert results.profile is RoutingProfile.SESSION_AFFINITY and results.workers == 8


def test_results_that_break_the_workload_fail_the_stage(tmp_path: Path) -> None:
    client = fake_aiperf(tmp_path, WRITE_FIXTURE.format(argv=tmp_path / "argv.txt"))
    workload = MATCHING.model_copy(update={"output_tokens": 128})

    with pytest.raises(PerfError, match="exactly 128 expected"):
        run_perf(
            lab_outputs_for(RoutingProfile.ROUND_ROBIN),
            workload,
            tmp_path / "perf",
            client,
            stream=io.StringIO(),
        )

    assert (tmp_path / "perf" / "results.json").is_file()  # kept for inspection


def test_aiperf_exiting_0_without_an_export_is_a_failure(tmp_path: Path) -> None:
    client = fake_aiperf(tmp_path, 'echo "ZMQ socket failed"; exit 0')

    with pytest.raises(PerfError, match="no profile_export_aiperf.json") as failure:
        run_perf(
            lab_outputs_for(RoutingProfile.ROUND_ROBIN),
            MATCHING,
            tmp_path / "perf",
            client,
            stream=io.StringIO(),
        )

    assert "ZMQ socket failed" in str(failure.value)


def test_aiperf_failing_is_reported_with_its_status(tmp_path: Path) -> None:
    client = fake_aiperf(tmp_path, "exit 3")

    with pytest.raises(PerfError, match="exit status 3"):
        run_perf(
            lab_outputs_for(RoutingProfile.ROUND_ROBIN),
            MATCHING,
            tmp_path / "perf",
            client,
            stream=io.StringIO(),
        )
