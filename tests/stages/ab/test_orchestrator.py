"""The A/B orchestrator's order, resume and failure paths, with a scripted target and stages.

The target records what it is asked; smoke and perf are stand-ins that write a real results file
(a fixture) so the real archive (a local directory) and the real report run. The lab runs the
same orchestrator for real (tests/lab/test_lab_ab.py); a cluster's stacks through the real CLI
(tests/real/test_ab.py, tests/real/test_pulumi_stacks.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from unittest import mock

import pytest

from components.contract import StackOutputs
from components.routing import RoutingProfile
from stages.ab import orchestrator
from stages.ab.orchestrator import run_ab
from stages.ab.plan import AbRun
from stages.ab.target import Say
from stages.archive import (
    CLEANED,
    ArchiveError,
    ArchiveLocation,
    RunPlace,
    Stage,
    list_incomplete_runs,
    list_runs,
)
from stages.archive.stores import DirectoryBucket, open_bucket
from stages.core.results import ProfileResults
from stages.core.routing_probe import RoutingProbe
from stages.core.verdicts import SmokeResult
from stages.core.workload import PerfWorkload
from stages.errors import StageFailed, UsageError
from stages.targets import StageTarget
from tests.stages.support import FIXTURES, lab_outputs_for, observed_probe

RR, SA = RoutingProfile.ROUND_ROBIN, RoutingProfile.SESSION_AFFINITY


@dataclass
class ScriptedTarget:
    """A target that records its calls; `gpus`/`graph` set the budget, `fail_deploy` breaks one."""

    gpus: int | None = None
    graph: int = 8
    fail_deploy: RoutingProfile | None = None
    fail_prepare: bool = False
    fail_teardown: RoutingProfile | None = None
    qualifier: str = ""
    """Put before each stack's name: `acme/cosmos3-nano-reasoner/` makes them qualified."""
    calls: list[str] = field(default_factory=list)
    name: str = "scripted"
    stages: Stages | None = None
    """What `stage_target` hands the orchestrator for each graph (`run` sets it)."""
    chosen: list[str] = field(default_factory=list)
    """The profiles a stage target was chosen for, in order."""

    def stage_target(self, outputs: StackOutputs) -> StageTarget:
        self.chosen.append(outputs.profile.value)
        assert self.stages is not None, "give the target its stages"
        return ScriptedStageTarget(outputs, self.stages)

    def stack(self, profile: RoutingProfile) -> str:
        return f"{self.qualifier}stack-{profile.value}"

    def available_gpus(self, say: Say) -> int | None:
        return self.gpus

    def graph_gpus(self, profile: RoutingProfile, say: Say) -> int:
        return self.graph

    def continue_from(self, archived: ProfileResults, say: Say) -> None:
        self.calls.append(f"continue from {archived.profile.value}")

    def prepare(self, say: Say) -> None:
        self.calls.append("prepare")
        if self.fail_prepare:
            raise StageFailed("the shared layer did not come up")

    def deploy(self, profile: RoutingProfile, say: Say) -> StackOutputs:
        self.calls.append(f"deploy {profile.value}")
        if profile is self.fail_deploy:
            raise StageFailed(f"{profile.value} did not come up")
        return lab_outputs_for(profile)

    def teardown(self, profile: RoutingProfile, say: Say) -> None:
        self.calls.append(f"teardown {profile.value}")
        if profile is self.fail_teardown:
            raise StageFailed(f"`pulumi destroy` of {profile.value} failed")


@dataclass
class Stages:
    """Stand-ins for a stage target's smoke and perf; `fail_perf` breaks one profile's sweep;
    `rendered` records the dry runs a rehearsal asks for."""

    calls: list[str]
    fail_perf: RoutingProfile | None = None
    interrupt_perf: RoutingProfile | None = None
    rendered: list[str] = field(default_factory=list)
    routing: dict[RoutingProfile, RoutingProbe] = field(default_factory=dict)
    """What each profile's routing probe saw (none: the smoke ran no probe)."""
    sweeps: int = 0
    """Sweeps so far: each measures a little more than the last, as no two real ones agree."""

    def smoke(self, outputs: StackOutputs, *args: object) -> SmokeResult:
        self.calls.append(f"smoke {outputs.profile.value}")
        return SmokeResult("an answer", self.routing.get(outputs.profile))

    def perf(
        self, outputs: StackOutputs, workload: PerfWorkload, out_dir: Path, *args: object
    ) -> ProfileResults:
        self.calls.append(f"perf {outputs.profile.value}")
        if outputs.profile is self.interrupt_perf:
            raise KeyboardInterrupt
        if outputs.profile is self.fail_perf:
            raise StageFailed("the sweep broke its promises:\nconcurrency 2: 3 requests failed")
        fixture = ProfileResults.load(FIXTURES / f"results-{outputs.profile.value}.json")
        self.sweeps += 1
        first = fixture.levels[0]
        first = first.model_copy(
            update={"requests_per_second": first.requests_per_second + self.sweeps}
        )
        levels = [first, *fixture.levels[1:]]
        results = fixture.model_copy(update={"workload": workload, "levels": levels})
        results.save(out_dir / "results.json")
        return results


@dataclass(frozen=True)
class ScriptedStageTarget(StageTarget):
    """A `StageTarget` for one graph that runs the scripted stages."""

    outputs: StackOutputs
    stages: Stages

    def default_workload(self) -> PerfWorkload:
        return WORKLOAD

    def recipe_workload(self) -> PerfWorkload:
        return WORKLOAD

    def run_smoke(self, wait_seconds: float) -> SmokeResult:
        return self.stages.smoke(self.outputs)

    def run_perf(
        self, workload: PerfWorkload, out_dir: Path, wait_seconds: float
    ) -> ProfileResults:
        return self.stages.perf(self.outputs, workload, out_dir)

    def smoke_dry_run(self, wait_seconds: float) -> str:
        self.stages.rendered.append("smoke")
        return "s"

    def perf_dry_run(self, workload: PerfWorkload, out_dir: Path, wait_seconds: float) -> str:
        self.stages.rendered.append("perf")
        return "p"


WORKLOAD = ProfileResults.load(FIXTURES / "results-round-robin.json").workload


def an_ab_run(tmp_path: Path, keep: bool = False) -> AbRun:
    archive = ArchiveLocation(bucket="lab", endpoint_url=f"file://{tmp_path / 'archive'}")
    return AbRun("run-1", WORKLOAD, tmp_path / "out", archive, keep=keep, commit="0" * 40)


def run(
    tmp_path: Path,
    target: ScriptedTarget,
    stages: Stages,
    keep: bool = False,
) -> tuple[orchestrator.AbResult, list[str]]:
    target.stages = stages
    said: list[str] = []
    return run_ab(target, an_ab_run(tmp_path, keep), said.append), said


@pytest.mark.slow
def test_one_graph_at_a_time_in_the_recipes_order(tmp_path: Path) -> None:
    target = ScriptedTarget(gpus=8)
    result, said = run(tmp_path, target, Stages(target.calls))

    assert target.calls == [
        "prepare",
        "deploy round-robin",
        "smoke round-robin",
        "perf round-robin",
        "teardown round-robin",
        "deploy session-affinity",
        "smoke session-affinity",
        "perf session-affinity",
        "teardown session-affinity",
    ]
    assert target.chosen == ["round-robin", "session-affinity"]  # once per graph, not per stage
    assert result.passed and result.lines() == ["round-robin: passed", "session-affinity: passed"]
    assert "8 GPUs hold one graph at a time" in said[0]
    assert result.report is not None and "| Concurrency |" in result.report.read_text()
    stages = {(r.stack, r.stage) for r in list_runs(an_ab_run(tmp_path).archive, stage=None)}
    assert stages == {
        ("stack-round-robin", Stage.SMOKE),
        ("stack-round-robin", Stage.PERF),
        ("stack-session-affinity", Stage.SMOKE),
        ("stack-session-affinity", Stage.PERF),
        ("stack-session-affinity", Stage.REPORT),
    }


def probe(profile: RoutingProfile, workers: list[list[str | int]]) -> RoutingProbe:
    return observed_probe(workers, lab_outputs_for(profile).session_header)


KEPT: list[list[str | int]] = [["w1", "w1", "w1"], ["w2", "w2", "w2"]]
SPREAD: list[list[str | int]] = [["w1", "w2", "w1"], ["w2", "w2", "w2"]]


@pytest.mark.slow
def test_the_routing_probe_reaches_the_archive_and_the_report(tmp_path: Path) -> None:
    target = ScriptedTarget(gpus=16)
    routing = {RR: probe(RR, SPREAD), SA: probe(SA, KEPT)}
    result, said = run(tmp_path, target, Stages(target.calls, routing=routing))

    assert result.passed and result.report is not None
    assert "session-affinity: routing probe: 2 of 2 videos on one worker" in "\n".join(said)
    profile_dir = an_ab_run(tmp_path).profile_dir(SA)
    saved = RoutingProbe.model_validate_json((profile_dir / "smoke" / "routing.json").read_text())
    assert saved == routing[SA]
    assert ProfileResults.load(profile_dir / "perf" / "results.json").routing == routing[SA]
    report = result.report.read_text()
    assert "- session affinity (2 videos x 3 questions): videos on one worker 100%" in report
    assert (result.report.parent / "routing-chart.png").is_file()


@pytest.mark.slow
def test_affinity_whose_videos_reached_several_workers_fails_the_ab(tmp_path: Path) -> None:
    target = ScriptedTarget(gpus=16)
    routing = {RR: probe(RR, SPREAD), SA: probe(SA, SPREAD)}
    result, _ = run(tmp_path, target, Stages(target.calls, routing=routing))

    assert not result.passed and result.report is None
    assert result.report_failure is not None
    assert result.report_failure.startswith(
        "session affinity's run did not keep videos on one worker (1 of 2 videos reached "
        "several workers): the session header did not reach the router"
    )
    stages = {r.stage for r in list_runs(an_ab_run(tmp_path).archive, stage=None)}
    assert Stage.REPORT not in stages  # no gain reported, nor archived
    assert result.refused_report is not None  # written, for a look: the closing verdict's
    assert "verdict: session affinity's run did not keep videos" in (
        result.refused_report.read_text()
    )


def test_with_room_for_both_the_graphs_stay_until_the_end(tmp_path: Path) -> None:
    target = ScriptedTarget(gpus=16)
    result, said = run(tmp_path, target, Stages(target.calls))

    assert target.calls[-2:] == ["teardown round-robin", "teardown session-affinity"]
    assert target.calls.index("deploy session-affinity") < target.calls.index(
        "teardown round-robin"
    )
    assert "side by side" in said[0] and result.passed


def test_a_failure_in_the_second_profile_and_a_resume(tmp_path: Path) -> None:
    target = ScriptedTarget(gpus=8)
    first, _ = run(tmp_path, target, Stages(target.calls, fail_perf=SA))

    assert first.lines() == [
        "round-robin: passed",
        "session-affinity: failed (the sweep broke its promises: concurrency 2: 3 requests failed)",
    ]
    assert target.calls[-1] == "teardown session-affinity"  # the failed graph is taken down
    assert not first.passed and first.report is None

    target.calls.clear()
    second, _ = run(tmp_path, target, Stages(target.calls))

    assert target.calls == [
        "continue from round-robin",  # its archived results, before the layer is prepared
        "prepare",
        "deploy session-affinity",
        "smoke session-affinity",
        "perf session-affinity",
        "teardown session-affinity",
    ]
    assert second.lines() == [
        "round-robin: skipped (perf results of run run-1 already archived)",
        "session-affinity: passed",
    ]
    assert second.passed and second.report is not None


def test_a_resume_whose_shared_layer_fails_blames_the_profile_it_was_for(tmp_path: Path) -> None:
    target = ScriptedTarget(gpus=8)
    run(tmp_path, target, Stages(target.calls, fail_perf=SA))
    target.fail_prepare = True

    again, _ = run(tmp_path, target, Stages(target.calls))

    assert again.lines() == [
        "round-robin: skipped (perf results of run run-1 already archived)",
        "session-affinity: failed (the shared layer did not come up)",
    ]
    assert not again.passed


def test_after_a_failure_the_later_profiles_are_not_run(tmp_path: Path) -> None:
    target = ScriptedTarget(gpus=8, fail_deploy=RR)
    result, _ = run(tmp_path, target, Stages(target.calls))

    assert result.lines() == [
        "round-robin: failed (round-robin did not come up)",
        "session-affinity: not run",
    ]
    assert "deploy session-affinity" not in target.calls
    assert target.calls[-1] == "teardown round-robin"  # whatever it left is cleaned up


def test_ctrl_c_takes_the_current_graph_down(tmp_path: Path) -> None:
    target = ScriptedTarget(gpus=8)
    result, _ = run(tmp_path, target, Stages(target.calls, interrupt_perf=RR))

    assert result.interrupted and result.report is None
    assert target.calls[-1] == "teardown round-robin"
    assert result.lines() == ["round-robin: failed (interrupted)", "session-affinity: not run"]


def test_keep_leaves_the_failed_graph_deployed_and_frees_a_passed_ones_gpus(
    tmp_path: Path,
) -> None:
    target = ScriptedTarget(gpus=8)
    result, _ = run(tmp_path, target, Stages(target.calls, fail_perf=SA), keep=True)
    assert not result.passed

    assert [call for call in target.calls if call.startswith("teardown")] == [
        "teardown round-robin"  # before session affinity's graph, which needs its GPUs
    ]


def test_keep_with_room_for_both_leaves_every_graph_deployed(tmp_path: Path) -> None:
    target = ScriptedTarget(gpus=16)
    result, _ = run(tmp_path, target, Stages(target.calls, fail_perf=SA), keep=True)
    assert not result.passed

    assert not [call for call in target.calls if call.startswith("teardown")]


def test_a_graph_that_was_not_taken_down_stops_the_run(tmp_path: Path) -> None:
    target = ScriptedTarget(gpus=8, fail_teardown=RR)
    result, _ = run(tmp_path, target, Stages(target.calls))

    assert "deploy session-affinity" not in target.calls  # its GPUs are still taken
    assert result.lines() == [
        "round-robin: failed (its graph could not be taken down: `pulumi destroy` of "
        + "round-robin failed)",
        "session-affinity: not run",
    ]
    assert not result.passed


def test_a_failed_take_down_keeps_the_reason_the_profile_failed(tmp_path: Path) -> None:
    target = ScriptedTarget(gpus=8, fail_teardown=SA)
    result, _ = run(tmp_path, target, Stages(target.calls, fail_perf=SA))

    assert result.lines()[1] == (
        "session-affinity: failed (the sweep broke its promises: concurrency 2: 3 requests "
        "failed; then its graph could not be taken down: `pulumi destroy` of session-affinity "
        "failed)"
    )


def test_qualified_stacks_are_archived_under_their_own_names(tmp_path: Path) -> None:
    target = ScriptedTarget(gpus=8, qualifier="acme/cosmos3-nano-reasoner/")
    result, _ = run(tmp_path, target, Stages(target.calls))

    assert result.passed and result.report is not None
    archive = an_ab_run(tmp_path).archive
    archived = list_runs(archive, stack="stack-session-affinity", stage=Stage.PERF)
    assert [record.run_id for record in archived] == ["run-1"]


def test_a_finished_run_does_nothing_but_find_its_report(tmp_path: Path) -> None:
    target = ScriptedTarget(gpus=8)
    run(tmp_path, target, Stages(target.calls))
    target.calls.clear()

    again, said = run(tmp_path, target, Stages(target.calls))

    assert target.calls == [f"continue from {p.value}" for p in RoutingProfile] and again.passed
    assert any("already archived" in line for line in said)


def test_a_graph_larger_than_the_cluster_is_refused_before_anything_runs(tmp_path: Path) -> None:
    target = ScriptedTarget(gpus=4, graph=8)

    with pytest.raises(UsageError, match="a graph needs 8 GPUs"):
        run(tmp_path, target, Stages(target.calls))
    assert target.calls == []


def test_a_resume_with_another_workload_is_refused_before_anything_is_deployed(
    tmp_path: Path,
) -> None:
    target = ScriptedTarget(gpus=8)
    run(tmp_path, target, Stages(target.calls, fail_perf=SA))
    target.stages = Stages(target.calls)
    target.calls.clear()
    seed = WORKLOAD.seed + 1
    changed = replace(an_ab_run(tmp_path), workload=WORKLOAD.model_copy(update={"seed": seed}))

    with pytest.raises(UsageError, match=rf"round-robin's results .*seed {WORKLOAD.seed} then, "):
        run_ab(target, changed, lambda _: None)
    assert target.calls == []
    assert list_runs(changed.archive, stack="stack-session-affinity", stage=Stage.PERF) == []


def test_a_stage_archive_clean_deleted_is_refused_before_anything_is_deployed(
    tmp_path: Path,
) -> None:
    target = ScriptedTarget(gpus=8)
    archive = an_ab_run(tmp_path).archive
    mark = RunPlace("stack-session-affinity", "session-affinity", "run-1", "smoke")
    open_bucket(archive).put_new(mark.manifest_key(archive), CLEANED)

    finished: list[RoutingProfile] = []
    with (
        mock.patch.object(
            orchestrator, "finish_interrupted_pushes", lambda _r, _t, p, _s: finished.append(p)
        ),
        pytest.raises(UsageError, match=r"`archive clean` deleted.*another --run-id"),
    ):
        run(tmp_path, target, Stages(target.calls))
    assert target.calls == [] and finished == []  # no profile's push was finished either


def test_a_rehearsal_deploys_and_tears_down_but_runs_and_archives_nothing(tmp_path: Path) -> None:
    target = ScriptedTarget(gpus=8)
    target.stages = stages = Stages(target.calls)
    rehearsal = replace(an_ab_run(tmp_path), rehearse=True)

    result = run_ab(target, rehearsal, lambda _: None)

    assert target.calls == [
        "prepare",
        "deploy round-robin",
        "teardown round-robin",
        "deploy session-affinity",
        "teardown session-affinity",
    ]
    assert stages.rendered == ["smoke", "perf", "smoke", "perf"]
    assert result.passed and result.report is None
    for profile in (RR, SA):
        directory = rehearsal.profile_dir(profile)
        assert (directory / "smoke" / "rehearsal.txt").read_text() == "s\n"
        assert (directory / "perf" / "rehearsal.txt").read_text() == "p\n"
    assert not (tmp_path / "archive").exists()


def test_a_resume_finishes_an_interrupted_push_without_measuring_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = DirectoryBucket.put_new
    broken = {"puts": 0}

    def dropped_after_one_file(bucket: DirectoryBucket, key: str, *args: object) -> None:
        if "/round-robin/run-1/perf/" in key and broken["puts"] >= 0:
            broken["puts"] += 1
            if broken["puts"] > 1:
                raise ArchiveError(f"uploading {key}: connection reset")
        store(bucket, key, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(DirectoryBucket, "put_new", dropped_after_one_file)
    target = ScriptedTarget(gpus=8)
    first, _ = run(tmp_path, target, Stages(target.calls))
    archive = an_ab_run(tmp_path).archive
    assert "connection reset" in first.lines()[0]
    assert [i.place.stage for i in list_incomplete_runs(archive)] == ["perf"]

    broken["puts"] = -1  # the network is back
    target.calls.clear()
    second, said = run(tmp_path, target, Stages(target.calls))

    assert "finishing the perf push an earlier attempt began" in "\n".join(said)
    assert "deploy round-robin" not in target.calls  # its sweep is the one archived
    assert second.outcomes[RR].outcome.value == "skipped"
    assert second.passed and second.report is not None
    assert list_incomplete_runs(archive) == []
