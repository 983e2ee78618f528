"""`python -m stages`: subcommands, help, outputs from a file or stdin, exit codes."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from common import REPO_ROOT
from components.contract import StackOutputs
from components.routing import RoutingProfile
from lab.stage_tools import LAB_RECIPE_WORKLOAD, LAB_WORKLOAD
from stages.cli import main
from tests.stages.support import FIXTURES, lab_outputs_for
from tests.support import LOCAL_TOOLS


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["smoke", "perf", "report", "archive"])
def test_every_stage_has_help(stage: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "stages", stage, "--help"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: python -m stages {stage}")


LOCAL = LOCAL_TOOLS


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


@pytest.mark.slow
def test_report_from_two_results_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("results-round-robin.json", "results-session-affinity.json"):
        shutil.copy(FIXTURES / name, tmp_path / name)

    status = main(
        [
            "report",
            "--results",
            str(tmp_path / "results-session-affinity.json"),
            str(tmp_path / "results-round-robin.json"),
            "--out",
            str(tmp_path / "report"),
        ]
    )

    assert status == 0
    assert "| Concurrency | Round-robin req/s" in capsys.readouterr().out
    assert (tmp_path / "report" / "ab-chart.png").is_file()


# --- bad usage: a message naming the option, exit status 2, never a traceback -------------------

WORKLOAD_ERRORS = [
    (["--videos", "0"], "--videos must be a positive integer, got '0'"),
    (["--videos", "x"], "--videos must be a positive integer, got 'x'"),
    (["--questions", "-1"], "--questions must be a positive integer"),
    (["--output-tokens", "0"], "--output-tokens must be a positive integer"),
    (["--concurrency", "0"], "--concurrency must be distinct positive integers, e.g. 1,2,4,8,16"),
    (["--concurrency", "1,1"], "--concurrency must be distinct positive integers"),
    (["--concurrency", "1,,2"], "--concurrency must be distinct positive integers"),
    (["--turn-jitter-ms", "-5"], "--turn-jitter-ms must be an integer of 0 or more"),
    (["--prefix-tokens", "0"], "--prefix-tokens must be a positive integer"),
    (["--seed", "1.5"], "--seed must be an integer"),
    (["--videos", "9" * 5000], "--videos must be a positive integer, got '99999"),
    (["--wait-seconds", "nan"], "--wait-seconds must be a number of seconds (0 or more"),
    (["--timeout", "-1"], "--timeout must be a number of seconds"),
    (["--start-timeout", "inf"], "--start-timeout must be a number of seconds"),
    (["--run-id", "run/1"], "--run-id must be a Kubernetes label value"),
]


@pytest.mark.parametrize(("argv", "message"), WORKLOAD_ERRORS)
def test_bad_workload_and_cluster_options_exit_2_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    path = write_outputs(lab_outputs_for(RoutingProfile.ROUND_ROBIN), tmp_path / "outputs.json")

    with pytest.raises(SystemExit) as exited:
        main(["perf", "--outputs", str(path), "--dry-run", *argv], local=LOCAL)

    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert f"python -m stages perf: error: {message}" in err
    assert len(err) < 2000  # a huge value is shown cut short


def test_a_bad_pip_url_is_refused_without_showing_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_outputs(lab_outputs_for(RoutingProfile.ROUND_ROBIN), tmp_path / "outputs.json")

    with pytest.raises(SystemExit, match="2"):
        main(["smoke", "--outputs", str(path), "--pip-index-url", "ftp://u:hunter2@mirror/x"])

    err = capsys.readouterr().err
    assert "--pip-index-url must be an http:// or https:// URL with a host" in err
    assert "hunter2" not in err


def test_the_lab_ab_shares_the_checked_workload_options(capsys: pytest.CaptureFixture[str]) -> None:
    from lab.__main__ import build_parser as lab_parser

    with pytest.raises(SystemExit, match="2"):
        lab_parser().parse_args(["ab", "--videos", "0"])

    assert "--videos must be a positive integer" in capsys.readouterr().err


def test_a_workload_the_model_refuses_names_the_option() -> None:
    import argparse

    from stages.errors import UsageError
    from stages.options import WORKLOAD_FIELDS, workload_from_args

    args = argparse.Namespace(recipe_sizes=False, **dict.fromkeys(WORKLOAD_FIELDS))
    args.videos, args.concurrencies = 0, (2, 2)

    with pytest.raises(UsageError) as refused:
        workload_from_args(args, LAB_WORKLOAD, LAB_RECIPE_WORKLOAD)

    assert refused.value.exit_status == 2
    assert "--videos: Input should be greater than 0" in str(refused.value)
    assert "--concurrency: concurrencies must be distinct" in str(refused.value)


def unreadable_outputs(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / f"outputs-{kind}"
    if kind == "directory":
        path.mkdir()
    elif kind == "binary":
        path.write_bytes(b"\xff\xfe\x00\x81 not text")
    elif kind == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "long-number":
        path.write_text('{"frontendPort": ' + "7" * 5000 + "}")
    return path


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("directory", "{path} is a directory, not a stack-outputs file"),
        ("binary", "{path} is not UTF-8 text"),
        ("deep", "stack-outputs file {path} nests deeper than 100 levels"),
        ("long-number", "outputs file {path} is not usable JSON (ValueError: Exceeds the limit"),
    ],
)
@pytest.mark.parametrize("stage", ["smoke", "perf"])
def test_outputs_that_cannot_be_read_exit_2_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stage: str, kind: str, message: str
) -> None:
    path = unreadable_outputs(tmp_path, kind)

    assert main([stage, "--outputs", str(path), "--dry-run"], local=LOCAL) == 2
    assert message.format(path=path) in capsys.readouterr().err


def test_an_unreadable_outputs_file_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    unreadable = tmp_path / "o.json"
    unreadable.write_text("{}")
    os_open = os.open

    def refuse(path: Any, *args: Any, **kwargs: Any) -> int:
        if Path(str(path)) == unreadable:  # as a file mode 000 does (not to root)
            raise PermissionError(13, "Permission denied")
        return os_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)

    assert main(["smoke", "--outputs", str(tmp_path / "o.json"), "--dry-run"]) == 2
    assert (
        f"outputs file {tmp_path / 'o.json'} cannot be read (Permission denied)"
        in capsys.readouterr().err
    )


def test_binary_outputs_on_stdin_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stdin = io.TextIOWrapper(io.BytesIO(b"\xff\xfe\x00garbage"), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)

    assert main(["smoke", "--outputs", "-", "--dry-run"]) == 2
    assert "is not UTF-8 text (a binary file?)" in capsys.readouterr().err


def test_unreadable_results_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(
        ["report", "--results", str(tmp_path), str(tmp_path), "--out", str(tmp_path / "r")]
    )

    assert status == 2
    assert f"--results: {tmp_path} is a directory, not a results file" in capsys.readouterr().err


ENDPOINT = "https://key:" + "hunter2@s3.example.com"  # assembled: not a real one


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--archive-bucket", "ab"], "--archive-bucket must be a bucket name: 3 to 63"),
        (["--archive-bucket", "x" * 64], "--archive-bucket must be a bucket name"),
        (["--archive-bucket", ".."], "--archive-bucket must be a bucket name"),
        (["--archive-bucket", "ok-bucket", "--archive-prefix", "a//b"], "--archive-prefix: "),
        (
            ["--archive-bucket", "ok-bucket", "--stacks", "a/b", "c"],
            "argument --stacks: 'a/b' is not",
        ),
        (
            ["--archive-bucket", "ok-bucket", "--run-ids", "..", "r"],
            "argument --run-ids: '..' is not",
        ),
    ],
)
@pytest.mark.parametrize("stage", ["report", "ab"])
def test_bad_archive_options_exit_2_naming_the_option_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stage: str, argv: list[str], message: str
) -> None:
    if stage == "ab" and ("--run-ids" in argv or "--stacks" in argv):
        return  # the A/B's --stacks are Pulumi stacks, and it has no --run-ids
    stacks = [] if "--stacks" in argv else ["--stacks", "rr", "sa"]
    extra = ["--out", str(tmp_path / "report"), *stacks] if stage == "report" else []

    with pytest.raises(SystemExit) as exited:
        main([stage, *argv, *extra, "--archive-endpoint", ENDPOINT])

    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert f"python -m stages {stage}: error: " in err and message in err
    assert "hunter2" not in err


def test_the_ab_needs_an_archive_unless_it_rehearses(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["ab"])

    assert exited.value.code == 2
    assert "--archive-bucket BUCKET is required (unless --rehearse)" in capsys.readouterr().err


def test_an_ab_sweep_too_big_for_a_cluster_is_refused_before_any_stack_is_touched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no `pulumi` at all: none may be asked
    status = main(
        [
            "ab",
            "--archive-bucket",
            "results",
            "--org",
            "acme",
            "--gpus",
            "16",
            "--videos",
            "2000",
            "--concurrency",
            "1,2",
        ]
    )

    assert status == 2
    assert "reduce --videos or the levels" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "usage"),
    [
        (["perf", "--outputs", "-", "--concurency", "4"], "python -m stages perf"),
        (["archive", "list", "--bucket", "b", "--stagee", "perf"], "python -m stages archive list"),
    ],
)
def test_a_mistyped_option_shows_its_subcommands_usage(
    argv: list[str], usage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv, local=LOCAL)

    stderr = capsys.readouterr().err
    assert exit_.value.code == 2
    assert stderr.startswith(f"usage: {usage} ")
    assert f"{usage}: error: unrecognized arguments: {argv[-2]} {argv[-1]}" in stderr


@pytest.mark.parametrize(
    ("stacks", "message"),
    [
        (["--stacks", "rr", "acme/cosmos3-nano-reasoner/rr"], "--stacks names rr twice"),
        (
            ["--layer-stack", "acme/cosmos3-nano-reasoner/shared", "--stacks", "shared", "sa"],
            "--stacks includes the layer stack shared",
        ),
        (
            ["--org", "acme", "--stacks", "acme/cosmos3-nano-reasoner/shared", "sa"],
            "--stacks includes the layer stack shared",
        ),
    ],
)
def test_an_ab_of_one_stack_twice_or_of_the_layer_is_refused_however_it_is_spelt(
    capsys: pytest.CaptureFixture[str], stacks: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["ab", "--archive-bucket", "ok-bucket", *stacks])

    assert exited.value.code == 2
    assert message in capsys.readouterr().err
