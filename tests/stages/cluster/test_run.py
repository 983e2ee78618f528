"""Submitting and following the stage Jobs, at the `ClusterApi` seam with a fake cluster.

Build -> replace -> create -> wait -> read the log -> decide, for smoke and perf: success, a
failed Job, a timeout, a pod that never starts, a frontend that is not ready, a re-run that
replaces the previous run, and perf exports decoded from the log into results.
"""

from __future__ import annotations

import gzip
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from components.routing import RoutingProfile
from stages.cluster.api import Condition, Manifest, PodState
from stages.cluster.job_runner import Timer, WaitLimits
from stages.cluster.manifests import RUN_ID_LABEL
from stages.cluster.run import ClusterOptions, run_cluster_perf, run_cluster_smoke
from stages.core.pod_plans import PERF_PLAN
from stages.core.report import write_report
from stages.core.results import ProfileResults
from stages.core.verdicts import LogEcho, PodRun, sweep_results
from stages.core.workload import RECIPE_WORKLOAD
from stages.errors import (
    EXIT_FRONTEND_NOT_READY,
    EXIT_POD_NOT_STARTED,
    EXIT_TIMED_OUT,
    ClusterUnreachable,
    FrontendNotReady,
    PodNotStarted,
    StageFailed,
    TimedOut,
)
from stages.incluster.graph_metrics import GRAPH_METRICS_FILE
from stages.incluster.log_exports import Export, export_lines
from tests.stages.cluster.fakes import (
    FakeClock,
    FakeCluster,
    Frame,
    cluster_outputs,
    failed,
    pending,
    pod_files,
    running,
    succeeded,
)
from tests.stages.support import FIXTURES

OPTIONS = ClusterOptions(run_id="run-1", poll_seconds=5.0)
SMOKE_OBJECTS = [
    ("ConfigMap", "cosmos3-nano-reasoner-smoke"),
    ("Service", "cosmos3-nano-reasoner-smoke-media"),
    ("Job", "cosmos3-nano-reasoner-smoke"),
]
PASSED_LOG = (
    "installing FFmpeg\nfrontend lists nvidia/cosmos3-nano-reasoner\nmade smoke.mp4\n"
    "Smoke test passed: A test pattern with a moving red box.\n"
)
# The fixture export: 3 videos x 3 questions at concurrency 2, 8 output tokens.
MATCHING = RECIPE_WORKLOAD.model_copy(
    update={"videos": 3, "questions": 3, "output_tokens": 8, "concurrencies": (2,)}
)


@dataclass
class Run:
    """One stage run against a fake cluster with a fake clock; `progress` is what it printed."""

    cluster: FakeCluster
    clock: FakeClock = field(default_factory=FakeClock)
    stream: io.StringIO = field(default_factory=io.StringIO)

    @property
    def timer(self) -> Timer:
        return Timer(self.clock.clock, self.clock.sleep)

    @property
    def progress(self) -> str:
        return self.stream.getvalue()

    def smoke(self, options: ClusterOptions = OPTIONS) -> str:
        outputs = cluster_outputs(RoutingProfile.SESSION_AFFINITY)
        result = run_cluster_smoke(outputs, options, 60, self.cluster, self.stream, self.timer)
        return result.answer

    def perf(self, out_dir: Path) -> ProfileResults:
        outputs = cluster_outputs(RoutingProfile.SESSION_AFFINITY)
        return run_cluster_perf(
            outputs, MATCHING, out_dir, OPTIONS, 600, self.cluster, self.stream, self.timer
        )


# --- smoke -------------------------------------------------------------------------------------


def test_a_passing_smoke_job_returns_the_answer() -> None:
    run = Run(FakeCluster([pending(), running("installing FFmpeg\n"), succeeded(PASSED_LOG)]))
    cluster = run.cluster

    answer = run.smoke()

    assert answer == "A test pattern with a moving red box."
    assert cluster.calls == [("create", *obj) for obj in SMOKE_OBJECTS]
    assert set(cluster.selectors) == {f"{RUN_ID_LABEL}=run-1"}
    lines = run.progress
    assert "pod pod-1: Pending (ContainerCreating)" in lines
    assert "  pod| Smoke test passed: A test pattern" in lines
    assert lines.count("pod| installing FFmpeg") == 1  # each log line echoed once


def test_a_rerun_replaces_the_previous_run_before_creating_anything() -> None:
    run = Run(FakeCluster([succeeded(PASSED_LOG)], existing=tuple(SMOKE_OBJECTS), linger=3))
    cluster, clock = run.cluster, run.clock

    run.smoke()

    deletes = [call for call in cluster.calls if call[0] == "delete"]
    assert deletes == [("delete", *obj) for obj in reversed(SMOKE_OBJECTS)]  # the Job first
    first_create = next(i for i, call in enumerate(cluster.calls) if call[0] == "create")
    assert first_create == len(deletes)
    assert clock.slept, "waited until the previous objects were gone"
    assert "replacing the previous Job cosmos3-nano-reasoner-smoke" in run.progress


def test_a_pip_secret_is_created_first_and_replaced_like_the_others() -> None:
    url = "https://ci:" + "pw-0123456789@pypi.example.com/simple"
    objects = [("Secret", "cosmos3-nano-reasoner-smoke-pip"), *SMOKE_OBJECTS]
    run = Run(FakeCluster([succeeded(PASSED_LOG)], existing=tuple(objects)))

    run.smoke(ClusterOptions(run_id="run-1", pip_index_url=url))

    calls = run.cluster.calls
    assert calls == [("delete", *obj) for obj in reversed(objects)] + [
        ("create", *obj) for obj in objects
    ]
    assert run.cluster.created("Secret")["stringData"] == {"PIP_INDEX_URL": url}
    assert "pw-0123456789" not in run.progress


def test_a_previous_run_that_never_goes_away_times_out_before_creating() -> None:
    cluster = FakeCluster([succeeded(PASSED_LOG)], existing=tuple(SMOKE_OBJECTS), linger=10**6)

    with pytest.raises(TimedOut, match="still exist"):
        Run(cluster).smoke()

    assert not [call for call in cluster.calls if call[0] == "create"]


def test_a_failed_smoke_job_fails_with_the_end_of_its_log() -> None:
    log = "frontend lists nvidia/cosmos3-nano-reasoner\nSmoke test FAILED: the model returned an empty answer\n"
    cluster = FakeCluster([running(log), failed(log)])

    with pytest.raises(StageFailed) as failure:
        Run(cluster).smoke()

    message = str(failure.value)
    assert "BackoffLimitExceeded" in message and "container exit code 1" in message
    assert "Smoke test FAILED: the model returned an empty answer" in message
    assert failure.value.exit_status == 1


def test_a_completed_job_without_the_pass_line_is_a_failure() -> None:
    cluster = FakeCluster([succeeded("made smoke.mp4\nsomething else\n")])

    with pytest.raises(StageFailed, match="last log line is not"):
        Run(cluster).smoke()


def test_a_frontend_that_is_not_ready_has_its_own_exit_code() -> None:
    log = "Frontend not ready: http://x/v1/models did not list nvidia/cosmos3-nano-reasoner within 60 s (ConnectionRefusedError)\n"
    cluster = FakeCluster([failed(log, exit_code=3)])

    with pytest.raises(FrontendNotReady, match="did not list") as failure:
        Run(cluster).smoke()

    assert failure.value.exit_status == EXIT_FRONTEND_NOT_READY == 3


def test_a_job_still_running_at_the_timeout_is_deleted_and_times_out() -> None:
    run = Run(FakeCluster([running("frontend lists the model\n")]))
    cluster, clock = run.cluster, run.clock
    options = ClusterOptions(run_id="run-1", timeout_seconds=90, poll_seconds=5)

    with pytest.raises(TimedOut, match="did not finish within 90 s") as failure:
        run.smoke(options)

    assert failure.value.exit_status == EXIT_TIMED_OUT == 4
    assert cluster.calls[-1] == ("delete", "Job", "cosmos3-nano-reasoner-smoke")
    assert 90 <= sum(clock.slept) <= 95
    assert "still pod pod-1: Running, ready" in run.progress  # the minute heartbeat


def test_the_jobs_own_deadline_counts_as_a_timeout() -> None:
    deadline = Frame(failed("").pod, "", failed=failed("", reason="DeadlineExceeded").failed)

    with pytest.raises(TimedOut, match="activeDeadlineSeconds"):
        Run(FakeCluster([deadline])).smoke()


def test_a_deadline_counts_at_its_failure_target_before_the_pod_is_gone() -> None:
    reason = "Job was active longer than specified deadline"
    target = Condition("FailureTarget", "True", "DeadlineExceeded", reason)
    still_running = Frame(PodState("pod-1", "Running", 1.0), "", failed=target)

    with pytest.raises(TimedOut, match="activeDeadlineSeconds: Job was active longer"):
        Run(FakeCluster([still_running])).smoke()


def test_a_pod_stuck_pulling_its_image_fails_after_the_start_timeout() -> None:
    run = Run(FakeCluster([pending("ImagePullBackOff", 'Back-off pulling image "python:3"')]))
    cluster, clock = run.cluster, run.clock
    options = ClusterOptions(run_id="run-1", start_timeout_seconds=120, poll_seconds=5)

    with pytest.raises(PodNotStarted, match="ImagePullBackOff") as failure:
        run.smoke(options)

    assert failure.value.exit_status == EXIT_POD_NOT_STARTED == 5
    assert 120 <= sum(clock.slept) <= 125
    assert cluster.calls[-1][0] == "delete"
    assert "Pending (ImagePullBackOff: Back-off pulling image" in run.progress


def test_an_invalid_image_name_fails_at_once() -> None:
    run = Run(FakeCluster([pending("InvalidImageName")]))

    with pytest.raises(PodNotStarted, match="InvalidImageName"):
        run.smoke()

    assert run.clock.slept == []


def test_an_unschedulable_pod_says_why() -> None:
    pod = PodState("pod-1", "Pending", 1.0, unschedulable="0/3 nodes: Insufficient cpu")
    options = ClusterOptions(run_id="r", start_timeout_seconds=10)

    with pytest.raises(PodNotStarted, match="Insufficient cpu"):
        Run(FakeCluster([Frame(pod)])).smoke(options)


def test_no_pod_at_all_is_a_start_failure() -> None:
    options = ClusterOptions(run_id="r", start_timeout_seconds=10)

    with pytest.raises(PodNotStarted, match="no pod was created"):
        Run(FakeCluster([Frame()])).smoke(options)


def test_the_log_echo_hides_export_bodies_and_waits_for_whole_lines() -> None:
    written: list[str] = []
    echo = LogEcho(written.append)
    lines = export_lines(Export(2, "profile_export_aiperf.json", b"{}" * 2000))

    echo.update("first\nsec")
    echo.update("first\nsecond\n" + "\n".join(lines) + "\nlast")
    echo.update("first\nsecond\n" + "\n".join(lines) + "\nlast\n", final=True)

    assert written[0] == "  pod| first" and written[1] == "  pod| second"
    assert written[2].startswith("  pod| (export concurrency=2 file=profile_export_aiperf.json")
    assert written[3:] == ["  pod| last"]


def test_wait_limits_default_to_the_stage() -> None:
    assert OPTIONS.limits(900).timeout_seconds == 900
    settings = ClusterOptions(timeout_seconds=100).job_settings(900, 60)
    assert settings.deadline_seconds == 400 and settings.plan.model_wait_seconds == 60


# --- perf --------------------------------------------------------------------------------------


def perf_log(exports: list[Export], tail: str = "Perf sweep finished: 1 levels") -> str:
    lines = ["frontend lists nvidia/cosmos3-nano-reasoner", "concurrency 2 finished: 1 req/s"]
    for export in exports:
        lines += export_lines(export)
    return "\n".join([*lines, tail]) + "\n"


def fixture_export() -> Export:
    data = (FIXTURES / "aiperf-session-affinity-c2.json").read_bytes()
    return Export(2, "profile_export_aiperf.json", data)


def test_perf_exports_in_the_log_become_the_same_results_as_the_lab(tmp_path: Path) -> None:
    cluster = FakeCluster([running("installing\n"), succeeded(perf_log([fixture_export()]))])

    results = Run(cluster).perf(tmp_path)

    (level,) = results.levels
    assert (level.concurrency, level.request_count, level.output_tokens_mean) == (2, 9, 8)
    assert results.target == "cluster" and results.session_header == "X-Dynamo-Session-ID"
    assert ProfileResults.load(tmp_path / "results.json") == results
    exported = tmp_path / "c2" / "aiperf" / "profile_export_aiperf.json"
    assert exported.read_bytes() == fixture_export().data
    rows = [
        json.loads(line) for line in (tmp_path / "c2" / "dataset.jsonl").read_text().splitlines()
    ]
    assert rows[0]["video"].startswith("http://cosmos3-nano-reasoner-perf-media.")
    assert (tmp_path / "pod.log").read_text() == cluster.frame.log
    assert "kind: Job" in (tmp_path / "manifests.yaml").read_text()


WORKER_PODS = [
    PodState("w-0", "Running", ip="10.1.0.7", ports=(("system", 9345), ("nixl", 5600))),
    PodState("w-1", "Running", ip="fd00::12"),  # no named port: the operator's 9090
    PodState("w-2", "Pending"),  # not serving yet: nothing to read
]


def test_the_perf_job_reads_the_running_workers_metrics(tmp_path: Path) -> None:
    counted = json.dumps({"workers": {"7": {"requests": 9}}}).encode()
    graph_metrics = Export(2, GRAPH_METRICS_FILE, counted)
    log = perf_log([fixture_export(), graph_metrics])
    cluster = FakeCluster([succeeded(log)], workers=WORKER_PODS)
    run = Run(cluster)

    results = run.perf(tmp_path)

    plan = json.loads(gzip.decompress(pod_files(cluster.created("ConfigMap"))[PERF_PLAN]))
    assert plan["graph_metrics"]["workers"] == [
        "http://10.1.0.7:9345/metrics",
        "http://[fd00::12]:9090/metrics",
    ]
    assert plan["graph_metrics"]["frontend"].endswith(":8000/metrics")
    assert "reads 2 workers' /metrics around each level" in run.progress
    (level,) = results.levels
    assert level.graph is not None and level.graph.served() == [9]


def test_a_refused_worker_listing_is_said_and_the_sweep_runs(tmp_path: Path) -> None:
    refused = ClusterUnreachable("list pods: HTTP 403 Forbidden")
    run = Run(FakeCluster([succeeded(perf_log([fixture_export()]))], workers=refused))

    (level,) = run.perf(tmp_path).levels

    assert "the workers' /metrics will not be read (listing their pods failed): " in run.progress
    assert level.graph is None


def test_a_level_missing_from_the_log_fails_perf(tmp_path: Path) -> None:
    stale = tmp_path / "c2" / "aiperf" / "profile_export_aiperf.json"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(fixture_export().data)  # from an earlier run: must not be read
    cluster = FakeCluster([succeeded(perf_log([]))])

    with pytest.raises(StageFailed, match="lacks a level's export"):
        Run(cluster).perf(tmp_path)


def test_a_damaged_export_fails_perf(tmp_path: Path) -> None:
    log = perf_log([fixture_export()])
    lines = log.splitlines()
    lines[3] = lines[3][:-8] + "AAAAAAAA"  # one garbled base64 line
    cluster = FakeCluster([succeeded("\n".join(lines) + "\n")])

    with pytest.raises(StageFailed, match="damaged"):
        Run(cluster).perf(tmp_path)


def test_a_failed_perf_job_keeps_its_log(tmp_path: Path) -> None:
    log = "  aiperf| ZMQ error\nPerf FAILED: AIPerf failed at concurrency 2: exit status 1\n"
    cluster = FakeCluster([failed(log)])

    with pytest.raises(StageFailed, match="AIPerf failed at concurrency 2"):
        Run(cluster).perf(tmp_path)

    assert (tmp_path / "pod.log").read_text() == log


def test_perf_frontend_not_ready(tmp_path: Path) -> None:
    cluster = FakeCluster([failed("Frontend not ready: nothing listed\n", exit_code=3)])

    with pytest.raises(FrontendNotReady):
        Run(cluster).perf(tmp_path)


def test_results_from_a_pods_log_are_what_the_report_reads(tmp_path: Path) -> None:
    outputs = cluster_outputs(RoutingProfile.SESSION_AFFINITY)
    run = PodRun("Job perf", True, perf_log([fixture_export()]))
    results = sweep_results(outputs, MATCHING, run, tmp_path / "aff", tmp_path / "pod.log")
    other = ProfileResults.load(FIXTURES / "results-round-robin.json")

    markdown = write_report(other, results, tmp_path / "report")

    (level,) = results.levels
    first, second = ([c.strip() for c in row.split("|")[1:-1]] for row in level_rows(markdown, 2))
    assert (first[2], first[5]) == (f"{level.requests_per_second:.2f}", "34 ms")  # the affinity
    assert second[-1] == f"{level.request_count}/{level.error_count}" == "9/0"


def level_rows(markdown: str, concurrency: int) -> list[str]:
    """The report's table rows of one concurrency level (one in each table)."""
    return [line for line in markdown.splitlines() if line.startswith(f"| {concurrency} |")]


def test_a_failure_message_shows_exports_as_one_line(tmp_path: Path) -> None:
    log = perf_log([fixture_export()], tail="Perf FAILED: AIPerf failed at concurrency 4")
    cluster = FakeCluster([failed(log)])

    with pytest.raises(StageFailed) as failure:
        Run(cluster).perf(tmp_path)

    message = str(failure.value)
    assert "===== BEGIN AIPERF EXPORT concurrency=2" in message
    assert "H4sI" not in message  # no gzip+base64 body


def test_ctrl_c_while_waiting_deletes_the_job() -> None:
    class Interrupted(FakeCluster):
        def pod_log(self, name: str) -> str:
            raise KeyboardInterrupt

    run = Run(Interrupted([running("installing\n")]))

    with pytest.raises(KeyboardInterrupt):
        run.smoke()

    assert run.cluster.calls[-1] == ("delete", "Job", "cosmos3-nano-reasoner-smoke")
    assert "interrupted: deleting Job cosmos3-nano-reasoner-smoke" in run.progress


def test_ctrl_c_as_the_job_is_created_deletes_it() -> None:
    class InterruptedOnCreate(FakeCluster):
        def create(self, manifest: Manifest) -> None:
            super().create(manifest)  # the API server made it; the answer never arrives
            if manifest["kind"] == "Job":
                raise KeyboardInterrupt

    run = Run(InterruptedOnCreate([running("installing\n")]))

    with pytest.raises(KeyboardInterrupt):
        run.smoke()

    assert run.cluster.calls[-1] == ("delete", "Job", "cosmos3-nano-reasoner-smoke")


class Unanswered(FakeCluster):
    """The API server answers no log request from the `first`th on, for `polls` polls."""

    def __init__(self, frames: list[Frame], first: int, polls: int) -> None:
        super().__init__(frames)
        self.first, self.polls, self.asked = first, polls, 0

    def pod_log(self, name: str) -> str:
        self.asked += 1
        if self.first <= self.asked < self.first + self.polls:
            raise ClusterUnreachable("read the log of pod pod-1: HTTP 503 Service Unavailable")
        return super().pod_log(name)


def test_a_poll_the_api_server_does_not_answer_is_asked_again() -> None:
    run = Run(Unanswered([running("installing\n"), running("x\n"), succeeded(PASSED_LOG)], 2, 3))

    assert run.smoke() == "A test pattern with a moving red box."
    assert run.progress.count("did not answer") == 3


def test_an_api_server_that_stops_answering_fails_the_stage_and_its_job_is_deleted() -> None:
    run = Run(Unanswered([running("installing\n")], 2, 1000))
    limit = WaitLimits(timeout_seconds=3600).unanswered_seconds

    with pytest.raises(ClusterUnreachable, match="503") as failure:
        run.smoke()

    assert failure.value.exit_status == 6
    assert run.cluster.calls[-1] == ("delete", "Job", "cosmos3-nano-reasoner-smoke")
    assert limit <= sum(run.clock.slept) <= limit + 10


def test_a_perf_job_that_times_out_keeps_its_log_and_the_levels_it_finished(
    tmp_path: Path,
) -> None:
    workload = MATCHING.model_copy(update={"concurrencies": (2, 4)})
    log = perf_log([fixture_export()], tail="level 2/2: concurrency 4, 9 requests")
    outputs = cluster_outputs(RoutingProfile.SESSION_AFFINITY)
    options = ClusterOptions(run_id="run-1", timeout_seconds=60, poll_seconds=5)
    run = Run(FakeCluster([running(log)]))

    with pytest.raises(TimedOut, match="did not finish within 60 s"):
        run_cluster_perf(
            outputs, workload, tmp_path, options, 600, run.cluster, run.stream, run.timer
        )

    assert (tmp_path / "pod.log").read_text() == log
    saved = ProfileResults.load(tmp_path / "results.json")
    assert [level.concurrency for level in saved.levels] == [2] and not saved.complete
