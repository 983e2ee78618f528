"""`python -m lab ab`: the A/B orchestrator on the real lab graph (marker `lab`), failure and resume.

The second profile's graph is broken on purpose (its mock workers get an argument they refuse, so
the graph does not come up: a real start-up failure); the run ends with round robin passed and
session affinity failed. The same command with the same `--run-id` and a working graph runs only
session affinity, then the report of both.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from common import REPO_ROOT
from components.routing import RoutingProfile
from lab.ab import LabAbTarget, lab_archive
from lab.environment import LabInstall
from lab.stage_tools import LAB_WORKLOAD
from stages.ab.orchestrator import run_ab
from stages.ab.plan import AbRun
from stages.archive import list_runs
from stages.core.results import ProfileResults
from tests.lab.support import lab_ab_direct

pytestmark = pytest.mark.lab
TINY = LAB_WORKLOAD.model_copy(
    update={
        "videos": 2,
        "questions": 2,
        "output_tokens": 32,
        "concurrencies": (1,),
        "prefix_tokens": 64,
        "turn_jitter_ms": 0,
    }
)
WORKLOAD_ARGS = [
    "--videos",
    "2",
    "--questions",
    "2",
    "--output-tokens",
    "32",
    "--concurrency",
    "1",
    "--prefix-tokens",
    "64",
    "--turn-jitter-ms",
    "0",
]


def test_a_failure_in_the_second_profile_then_a_resume(
    lab_install: LabInstall, tmp_path: Path
) -> None:
    broken: dict[RoutingProfile, tuple[str, ...]] = {
        RoutingProfile.SESSION_AFFINITY: ("--speedup-ratio", "not-a-number")
    }
    target = LabAbTarget(out=tmp_path, workers=2, install=lab_install, mocker_args=broken)
    run = AbRun("run-1", TINY, tmp_path, lab_archive(tmp_path), commit="0" * 40)
    said: list[str] = []

    first = run_ab(target, run, said.append)

    assert first.lines()[0] == "round-robin: passed"
    assert first.lines()[1].startswith("session-affinity: failed (lab process exited during")
    assert first.report is None and not target.running  # every graph stopped

    fixed = LabAbTarget(out=tmp_path, workers=2, install=lab_install)
    second = run_ab(fixed, run, said.append)

    assert second.lines() == [
        "round-robin: skipped (perf results of run run-1 already archived)",
        "session-affinity: passed",
    ]
    assert list(fixed.timings) == ["session-affinity"]  # only its graph was started
    assert second.report is not None and "| Concurrency |" in second.report.read_text()
    archived = {(r.stack, r.stage.value) for r in list_runs(lab_archive(tmp_path), stage=None)}
    assert ("lab-session-affinity", "report") in archived


def test_the_lab_command_is_the_orchestrator(lab_install: LabInstall, tmp_path: Path) -> None:
    command = lab_ab_direct(tmp_path, "--run-id", "cli-run", "--time-scale", "2", *WORKLOAD_ARGS)

    result = subprocess.run(
        command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False
    )

    assert result.returncode == 0, result.stderr[-3000:]
    assert "round-robin: passed\nsession-affinity: passed\n" in result.stdout
    profiles = [tmp_path / "cli-run" / p.value / "perf" / "results.json" for p in RoutingProfile]
    conditions = [ProfileResults.load(path).conditions for path in profiles]
    for timing in conditions:
        assert timing is not None and timing.time_scale == 2
        assert timing.sweep is not None and timing.sweep.own_cores > 0  # measured
    verdict = result.stdout.splitlines()[-1]
    disturbed = [timing.disturbed for timing in conditions if timing and timing.disturbed]
    if disturbed:  # a host busier than 2x corrects for (e.g. a build beside the tests): said so
        assert verdict.startswith("verdict: inconclusive: a busy host during ")
        assert disturbed[0] in verdict
    else:
        assert verdict.startswith("verdict: session affinity ")
    outputs = json.loads((tmp_path / "outputs-session-affinity.json").read_text())
    assert outputs["sessionAffinityTtlSeconds"] == 600  # the TTL slowed with the graph
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["run_id"] == "cli-run" and summary["peak_rss_bytes"] > 0
    report = (tmp_path / "report.md").read_text()
    assert report.startswith("#")
    for path in profiles:  # every level read the graph's own counters: both workers, all requests
        for level in ProfileResults.load(path).levels:
            assert level.graph is not None and not level.graph.unreachable
            assert len(level.graph.workers) == 2
            assert sum(level.graph.served()) == level.request_count
            assert level.graph.frontend is not None
            assert level.graph.frontend.requests == level.request_count
    assert "Requests per worker (the workers' and the frontend's own /metrics" in report
    assert "| session affinity | " in report
    again = subprocess.run(
        command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert again.returncode == 0, again.stdout + again.stderr[-3000:]
    assert "round-robin: skipped" in again.stdout, again.stdout
