"""`python -m stages ab` against a cluster: the stacks through the Automation API stand-in.

The stand-in `pulumi` (fake_pulumi.py) checks every command line; the stages' smoke and perf are
stand-ins here (they run as Kubernetes Jobs, tested on their own in tests/stages/cluster/). What
this shows: the shared layer is previewed and left alone when up to date, then each profile's
stack goes up, is tested, archived and destroyed before the next one, on the recipe's 8 GPUs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from components.routing import RoutingProfile
from stages.ab import orchestrator
from stages.ab.cluster_target import ClusterAbTarget
from stages.ab.orchestrator import AbRun, run_ab
from stages.ab.pulumi_stacks import PulumiStacks
from stages.archive import ArchiveLocation
from stages.cli import main
from stages.cluster.run import ClusterOptions
from tests.stages.ab.conftest import ORG, PROJECT, REPO, FakePulumi, golden_outputs
from tests.stages.ab.test_orchestrator import WORKLOAD, Stages


def script_the_stacks(fake: FakePulumi, rr_deployed_before: bool = True) -> None:
    fake.add_stack("shared", deployed=True, outputs=golden_outputs("shared"))
    earlier = {"outputs": golden_outputs("round-robin")} if rr_deployed_before else {}
    fake.add_stack("round-robin", **earlier, deployed=rr_deployed_before)
    fake.add_stack("session-affinity", outputs=golden_outputs("session-affinity"))


def commands(fake: FakePulumi) -> list[str]:
    """`<command> <short stack>` for each preview, up and destroy the stand-in ran."""
    wanted = {"preview", "up", "destroy"}
    found = []
    for args in fake.command_lines():
        command = next((arg for arg in args if arg in wanted), None)
        if command:
            stack = args[args.index("--stack") + 1].removeprefix(f"{ORG}/{PROJECT}/")
            found.append(f"{command} {stack}")
    return found


def test_the_recipes_a_b_on_eight_gpus(
    fake_pulumi: FakePulumi, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script_the_stacks(fake_pulumi)
    said: list[str] = []
    calls: list[str] = []
    stages = Stages(calls)
    monkeypatch.setattr(orchestrator.targets, "run_smoke", stages.smoke)
    monkeypatch.setattr(orchestrator.targets, "run_perf", stages.perf)
    stacks = PulumiStacks(REPO, said.append, pulumi_root=fake_pulumi.root, organization=ORG)
    target = ClusterAbTarget(stacks=stacks, cluster=ClusterOptions(), gpus=8)
    archive = ArchiveLocation(bucket="results", endpoint_url=f"file://{tmp_path / 'archive'}")
    run = AbRun("run-1", WORKLOAD, tmp_path / "out", archive, commit="0" * 40)

    result = run_ab(target, run, said.append)

    assert commands(fake_pulumi) == [
        "preview shared",
        "up round-robin", "destroy round-robin",
        "up session-affinity", "destroy session-affinity",
    ]  # fmt: skip
    assert calls == ["smoke round-robin", "perf round-robin",
                     "smoke session-affinity", "perf session-affinity"]  # fmt: skip
    assert result.passed and result.report is not None
    assert not fake_pulumi.stack("round-robin")["deployed"]  # its GPUs are free again
    assert "shared: up to date, nothing to deploy" in said
    assert any("8 GPUs hold one graph at a time" in line for line in said)


def test_a_never_deployed_stack_is_assumed_the_recipes_size(
    fake_pulumi: FakePulumi, tmp_path: Path
) -> None:
    script_the_stacks(fake_pulumi, rr_deployed_before=False)
    said: list[str] = []
    stacks = PulumiStacks(REPO, said.append, pulumi_root=fake_pulumi.root, organization=ORG)
    target = ClusterAbTarget(stacks=stacks, cluster=ClusterOptions(), gpus=8)

    assert target.graph_gpus(RoutingProfile.ROUND_ROBIN, said.append) == 8
    assert any("assuming the recipe's graph of 8 GPUs" in line for line in said)
    assert target.graph_gpus(RoutingProfile.SESSION_AFFINITY, said.append) == 8  # its outputs


def test_the_command_line_runs_the_same(
    fake_pulumi: FakePulumi,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    script_the_stacks(fake_pulumi)
    calls: list[str] = []
    monkeypatch.setattr(orchestrator.targets, "run_smoke", Stages(calls).smoke)
    monkeypatch.setattr(orchestrator.targets, "run_perf", Stages(calls).perf)
    monkeypatch.setenv("PATH", f"{fake_pulumi.root / 'bin'}:/usr/bin:/bin")
    workload = ["--videos", "3", "--questions", "3", "--output-tokens", "8", "--concurrency", "2"]

    status = main([
        "ab", "--archive-bucket", "results", "--archive-endpoint", f"file://{tmp_path / 'a'}",
        "--org", ORG, "--gpus", "16", "--run-id", "run-7", "--out", str(tmp_path / "out"),
        *workload, "--prefix-tokens", "32", "--turn-jitter-ms", "100",
    ])  # fmt: skip

    printed = capsys.readouterr().out.splitlines()
    assert status == 0, printed
    assert printed[:2] == ["round-robin: passed", "session-affinity: passed"]
    assert commands(fake_pulumi)[-2:] == ["destroy round-robin", "destroy session-affinity"]


def test_a_sweep_too_big_for_the_cluster_is_refused_before_any_stack_is_touched(
    fake_pulumi: FakePulumi,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    script_the_stacks(fake_pulumi)
    monkeypatch.setenv("PATH", f"{fake_pulumi.root / 'bin'}:/usr/bin:/bin")

    status = main([
        "ab", "--archive-bucket", "results", "--archive-endpoint", f"file://{tmp_path / 'a'}",
        "--org", ORG, "--gpus", "16", "--videos", "2000", "--concurrency", "1,2",
    ])  # fmt: skip

    assert status == 2
    assert "reduce --videos or the levels" in capsys.readouterr().err
    assert commands(fake_pulumi) == []
