"""`stages.targets`: the stage target is chosen once, from the outputs' `target`, and each target
hands every operation to its own runner (`stages.cluster.run` or `stages.local.run`).

The runners are stand-ins here (they record their arguments); the real ones run in the cluster
tests (a fake Kubernetes API) and the lab tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from components.contract import StackOutputs
from components.routing import RoutingProfile
from stages import cli, targets
from stages.cluster import manifests
from stages.cluster.run import ClusterOptions, smoke_objects
from stages.core.results import ProfileResults
from stages.core.verdicts import SmokeResult
from stages.core.workload import RECIPE_WORKLOAD, PerfWorkload
from stages.errors import UsageError
from stages.local.run import LocalTools
from stages.targets import ClusterTarget, LocalTarget, StageTarget, stage_target
from tests.stages.cluster.fakes import cluster_outputs
from tests.stages.support import FIXTURES, lab_outputs_for
from tests.support import LOCAL_TOOLS as LOCAL

RR = RoutingProfile.ROUND_ROBIN
OPTIONS = ClusterOptions(image="registry.example/stages:1", run_id="run-7")
RESULTS = ProfileResults.load(FIXTURES / "results-round-robin.json")
SMOKE = SmokeResult("an answer")
SMALL = PerfWorkload(
    videos=2, questions=2, output_tokens=16, concurrencies=(1, 2), prefix_tokens=8, turn_jitter_ms=0
)


# --- the choice -------------------------------------------------------------------------------


def test_cluster_outputs_choose_the_cluster_target_with_its_options() -> None:
    outputs = cluster_outputs(RR)

    target = stage_target(outputs, OPTIONS, LOCAL)

    assert target == ClusterTarget(outputs, OPTIONS)  # the lab's tools are not used
    assert stage_target(outputs) == ClusterTarget(outputs, ClusterOptions())


def test_lab_outputs_choose_the_local_target_with_the_labs_tools() -> None:
    outputs = lab_outputs_for(RR)

    assert stage_target(outputs, OPTIONS, LOCAL) == LocalTarget(outputs, LOCAL)


def test_lab_outputs_without_the_labs_tools_are_refused_when_the_target_is_chosen() -> None:
    outputs = lab_outputs_for(RR)

    with pytest.raises(UsageError) as refused:
        stage_target(outputs, OPTIONS)

    assert str(refused.value) == (
        f"{outputs.graph_name} is a lab graph (target: lab): run the stage through the lab, "
        "which knows its AIPerf and tokenizer, e.g. `python -m lab stage perf --outputs ...`"
    )


def test_the_target_is_chosen_once_per_stage_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    chosen: list[StageTarget] = []

    def choose(
        outputs: StackOutputs, cluster: ClusterOptions, local: LocalTools | None
    ) -> StageTarget:
        chosen.append(stage_target(outputs, cluster, local))
        return chosen[-1]

    monkeypatch.setattr(cli, "stage_target", choose)
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(lab_outputs_for(RR).to_json_dict()))

    assert cli.main(["perf", "--outputs", str(path), "--dry-run"], local=LOCAL) == 0

    assert chosen == [LocalTarget(lab_outputs_for(RR), LOCAL)]  # one choice, for every step
    assert capsys.readouterr().out.startswith("aiperf ")


def test_a_chosen_target_does_not_ask_the_outputs_again() -> None:
    # The outputs a target holds decide nothing more: a cluster target stays a cluster target.
    target = ClusterTarget(lab_outputs_for(RR), OPTIONS)

    assert target.default_workload() == target.recipe_workload() == RECIPE_WORKLOAD


# --- the cluster target -------------------------------------------------------------------------


def test_the_cluster_target_runs_the_cluster_runners_with_its_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[object, ...]] = []

    def smoke(*args: object) -> SmokeResult:
        calls.append(("smoke", *args))
        return SMOKE

    def perf(*args: object) -> ProfileResults:
        calls.append(("perf", *args))
        return RESULTS

    monkeypatch.setattr(targets, "run_cluster_smoke", smoke)
    monkeypatch.setattr(targets, "run_cluster_perf", perf)
    outputs = cluster_outputs(RR)
    target = stage_target(outputs, OPTIONS)

    assert target.run_smoke(60.0) is SMOKE
    assert target.run_perf(SMALL, tmp_path, 600.0) is RESULTS
    assert calls == [
        ("smoke", outputs, OPTIONS, 60.0),
        ("perf", outputs, SMALL, tmp_path, OPTIONS, 600.0),
    ]


def test_the_cluster_targets_smoke_dry_run_is_the_jobs_yaml() -> None:
    outputs = cluster_outputs(RR)

    text = stage_target(outputs, OPTIONS).smoke_dry_run(60.0)

    assert text == manifests.to_yaml(smoke_objects(outputs, OPTIONS, 60.0))
    kinds = [document["kind"] for document in yaml.safe_load_all(text) if document]
    assert "Job" in kinds
    assert "registry.example/stages:1" in text


def test_the_cluster_targets_perf_dry_run_is_the_jobs_yaml(tmp_path: Path) -> None:
    text = stage_target(cluster_outputs(RR), OPTIONS).perf_dry_run(SMALL, tmp_path, 600.0)

    kinds = [document["kind"] for document in yaml.safe_load_all(text) if document]
    assert "Job" in kinds and "ConfigMap" in kinds


def test_the_cluster_targets_perf_dry_run_refuses_a_sweep_its_job_cannot_run(
    tmp_path: Path,
) -> None:
    too_many = SMALL.model_copy(update={"videos": 1_000_000})

    with pytest.raises(UsageError, match="--videos 1000000"):
        stage_target(cluster_outputs(RR), OPTIONS).perf_dry_run(too_many, tmp_path, 600.0)


# --- the local target ---------------------------------------------------------------------------


def test_the_local_target_runs_the_local_runners_with_its_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[object, ...]] = []
    work_dirs: list[Path] = []

    def smoke(outputs: StackOutputs, tools: LocalTools, work_dir: Path, wait: float) -> SmokeResult:
        assert work_dir.is_dir() and work_dir.name.startswith("smoke-")
        work_dirs.append(work_dir)
        calls.append(("smoke", outputs, tools, wait))
        return SMOKE

    def perf(*args: object) -> ProfileResults:
        calls.append(("perf", *args))
        return RESULTS

    monkeypatch.setattr(targets, "run_local_smoke", smoke)
    monkeypatch.setattr(targets, "run_local_perf", perf)
    outputs = lab_outputs_for(RR)
    target = stage_target(outputs, OPTIONS, LOCAL)

    assert target.run_smoke(60.0) is SMOKE
    assert target.run_perf(SMALL, tmp_path, 600.0) is RESULTS
    assert calls == [
        ("smoke", outputs, LOCAL, 60.0),
        ("perf", outputs, SMALL, tmp_path, LOCAL, 600.0),
    ]
    assert not work_dirs[0].exists()  # the smoke's scratch folder is gone afterwards


def test_the_local_target_gives_the_labs_workloads() -> None:
    target = stage_target(lab_outputs_for(RR), local=LOCAL)

    assert target.default_workload() == LOCAL.default_workload
    assert target.recipe_workload() == LOCAL.recipe_workload


def test_the_local_targets_dry_runs_are_the_config_and_the_aiperf_commands(
    tmp_path: Path,
) -> None:
    target = stage_target(lab_outputs_for(RR), local=LOCAL)

    config = json.loads(target.smoke_dry_run(60.0))
    lines = target.perf_dry_run(SMALL, tmp_path, 600.0).splitlines()

    assert config["ffmpeg"] == LOCAL.ffmpeg and config["listen_host"] == "127.0.0.1"
    assert len(lines) == len(SMALL.concurrencies)
    assert all(line.startswith("aiperf ") and "--tokenizer tok" in line for line in lines)
