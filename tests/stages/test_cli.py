"""`python -m stages`: subcommands, help, outputs from a file or stdin, exit codes."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from components.contract import StackOutputs
from components.routing import RoutingProfile
from lab.standin import VideoStandIn
from lab.workload import LAB_RECIPE_WORKLOAD, LAB_WORKLOAD
from stages.cli import main
from stages.local.run import LocalTools
from tests.stages.conftest import FIXTURES, lab_outputs_for

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("stage", ["smoke", "perf", "report", "archive"])
def test_every_stage_has_help(stage: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "stages", stage, "--help"],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: python -m stages {stage}")


LOCAL = LocalTools(
    aiperf=Path("/opt/aiperf/bin/aiperf"),
    tokenizer="tok",
    media_for=lambda workload: VideoStandIn(workload.prefix_tokens),
    default_workload=LAB_WORKLOAD,
    recipe_workload=LAB_RECIPE_WORKLOAD,
    ffmpeg="/usr/bin/ffmpeg",
)


def write_outputs(outputs: StackOutputs, path: Path) -> Path:
    path.write_text(json.dumps(outputs.to_json_dict()))
    return path


def test_perf_dry_run_reads_outputs_from_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs = lab_outputs_for(RoutingProfile.SESSION_AFFINITY)
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(outputs.to_json_dict())))

    status = main(["perf", "--outputs", "-", "--dry-run", "--concurrency", "1,4"], local=LOCAL)

    lines = capsys.readouterr().out.splitlines()
    assert status == 0
    assert len(lines) == 2 and all(line.startswith("aiperf profile ") for line in lines)
    assert "--concurrency 4" in lines[1] and "--session-header X-Dynamo-Session-ID" in lines[1]


def test_recipe_sizes_select_the_recipes_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_outputs(lab_outputs_for(RoutingProfile.ROUND_ROBIN), tmp_path / "outputs.json")

    assert main(["perf", "--outputs", str(path), "--dry-run", "--recipe-sizes"], local=LOCAL) == 0

    lines = capsys.readouterr().out.splitlines()
    assert [line.split("--concurrency ")[1].split()[0] for line in lines] == [
        "1",
        "2",
        "4",
        "8",
        "16",
    ]
    assert all("--request-count 4000" in line and "min_tokens:128" in line for line in lines)
    assert not any("--session-header" in line for line in lines)


def test_smoke_dry_run_prints_the_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_outputs(lab_outputs_for(RoutingProfile.ROUND_ROBIN), tmp_path / "outputs.json")

    assert main(["smoke", "--outputs", str(path), "--dry-run"], local=LOCAL) == 0

    config = json.loads(capsys.readouterr().out)
    assert config["request_body"]["messages"][0]["content"][0]["type"] == "video_url"
    assert config["ffmpeg"] == "/usr/bin/ffmpeg" and config["listen_host"] == "127.0.0.1"


def test_lab_outputs_without_the_labs_tools_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_outputs(lab_outputs_for(RoutingProfile.ROUND_ROBIN), tmp_path / "outputs.json")

    assert main(["perf", "--outputs", str(path), "--dry-run"]) == 2
    assert "python -m lab stage perf" in capsys.readouterr().err


def test_unusable_outputs_exit_2_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "outputs.json"
    broken.write_text('{"namespace": "lab"}')

    assert main(["smoke", "--outputs", str(broken)]) == 2
    assert "break the contract" in capsys.readouterr().err


def test_cluster_outputs_with_a_loopback_frontend_are_refused_before_any_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Inside a pod, 127.0.0.1 is the pod itself: such outputs can never be reached by a Job.
    cluster = lab_outputs_for(RoutingProfile.ROUND_ROBIN).model_copy(update={"target": "cluster"})
    path = write_outputs(cluster, tmp_path / "outputs.json")

    assert main(["smoke", "--outputs", str(path)]) != 0
    assert "loopback address inside the pod" in capsys.readouterr().err


def test_report_from_two_results_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("results-round-robin.json", "results-session-affinity.json"):
        shutil.copy(FIXTURES / name, tmp_path / name)

    status = main([
        "report", "--results", str(tmp_path / "results-session-affinity.json"),
        str(tmp_path / "results-round-robin.json"), "--out", str(tmp_path / "report"),
    ])  # fmt: skip

    assert status == 0
    assert "| Concurrency | Round-robin req/s" in capsys.readouterr().out
    assert (tmp_path / "report" / "ab-chart.png").is_file()
