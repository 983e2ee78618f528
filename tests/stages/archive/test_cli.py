"""The archive's command line, alone and mounted as `python -m stages archive`: every refusal or
failure is one line on stderr with status 1, usage errors status 2, never a traceback."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from common import REPO_ROOT
from common.output_folders import MARKER_FILE
from components.routing import RoutingProfile
from stages.archive import ArchiveLocation, archive_run
from stages.archive.cli import main as archive_cli
from stages.cli import main as stages_cli
from tests.stages.archive.helpers import (
    bucket_keys,
    make_results,
    one_line_error,
    push_args,
    put_bad_manifests,
    record_for,
    recorded_puts,
    store_args,
    tree,
)

COMMANDS = ["push", "list", "pull", "incomplete", "clean"]


def test_cli_push_list_pull(
    tmp_path: Path,
    location: ArchiveLocation,
    capsys: pytest.CaptureFixture[str],
) -> None:
    results = make_results(tmp_path / "results")
    store = store_args(location)

    push = push_args(tmp_path, location, results, "cli-1")
    assert archive_cli(push) == 0
    assert archive_cli(push) == 1
    assert archive_cli(["list", *store]) == 0
    pull = ["pull", "--stack", "session-affinity", "--profile", "session-affinity"]
    assert archive_cli([*pull, "--latest", "--dest", str(tmp_path / "p"), *store]) == 0

    out, err = capsys.readouterr()
    assert "run id: cli-1" in out
    assert re.search(r"session-affinity\s+session-affinity\s+perf\s+cli-1", out)
    assert "downloaded run session-affinity/session-affinity/cli-1/perf" in out
    assert "already exists" in one_line_error(err, "push")
    pulled = tree(tmp_path / "p")
    assert pulled.pop(MARKER_FILE)  # --dest is claimed, as every folder a command writes
    assert pulled == tree(results)


@pytest.mark.parametrize("command", COMMANDS)
def test_cli_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        archive_cli([command, "--help"])

    assert exited.value.code == 0
    assert "--bucket" in capsys.readouterr().out


def test_an_interrupted_push_is_listed_resumed_and_then_not_cleanable(
    tmp_path: Path, location: ArchiveLocation, s3: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The whole repair, through `python -m stages archive ...`."""
    results = make_results(tmp_path / "results")
    push = ["archive", *push_args(tmp_path, location, results, "run-1")]
    with recorded_puts(fail_after=4):
        assert stages_cli(push) == 1
    one_line_error(capsys.readouterr().err, "push")

    assert stages_cli(["archive", "incomplete", *store_args(location)]) == 0
    listing = capsys.readouterr().out
    assert re.search(r"session-affinity\s+session-affinity\s+perf\s+run-1\s+4\s", listing)
    assert "archive push --resume" in listing and "archive clean" in listing

    assert stages_cli([*push, "--resume"]) == 0
    assert "(4 kept from the interrupted push, 2 uploaded)" in capsys.readouterr().out
    assert stages_cli(["archive", "incomplete", *store_args(location)]) == 0
    assert "(no incomplete runs)" in capsys.readouterr().out

    keys = bucket_keys(s3, location)
    clean = [
        "archive",
        "clean",
        "--stack",
        "session-affinity",
        "--profile",
        "session-affinity",
        "--run-id",
        "run-1",
        "--stage",
        "perf",
        "--older-than",
        "0",
        *store_args(location),
    ]
    assert stages_cli(clean) == 1
    assert "never an archived one" in one_line_error(capsys.readouterr().err, "clean")
    assert bucket_keys(s3, location) == keys


def test_clean_through_python_m_stages(tmp_path: Path, location: ArchiveLocation, s3: Any) -> None:
    """A real `python -m stages archive clean` process removes an interrupted push."""
    results = make_results(tmp_path / "results")
    with recorded_puts(fail_after=2), pytest.raises(Exception, match="simulated"):
        archive_run(results, record_for(RoutingProfile.ROUND_ROBIN, "run-1"), location)
    clean = [
        "archive",
        "clean",
        "--stack",
        "round-robin",
        "--profile",
        "round-robin",
        "--run-id",
        "run-1",
        "--stage",
        "perf",
        *store_args(location),
    ]

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "stages", *clean, *extra]
        return subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, check=False)

    young = run()
    done = run("--older-than", "0")

    assert young.returncode == 1, young.stderr
    assert "may still be running" in one_line_error(young.stderr, "clean")
    assert done.returncode == 0, done.stderr
    assert (
        "deleted 2 objects of the incomplete run round-robin/round-robin/run-1/perf" in done.stdout
    )
    mark = "cosmos3-nano-reasoner/round-robin/round-robin/run-1/perf/manifest.json"
    assert bucket_keys(s3, location) == [mark]  # `archive clean`'s: the run id stays taken


def test_corrupt_manifests_are_warnings_for_list_and_pull_latest(
    tmp_path: Path, location: ArchiveLocation, s3: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    results = make_results(tmp_path / "results")
    for run_id in ["good-1", "good-2"]:
        archive_run(results, record_for(RoutingProfile.ROUND_ROBIN, run_id), location)
    put_bad_manifests(s3, location)
    pull = ["pull", "--stack", "round-robin", "--profile", "round-robin", *store_args(location)]

    assert archive_cli(["list", *store_args(location)]) == 0
    listed, warnings = capsys.readouterr()
    assert archive_cli([*pull, "--latest", "--dest", str(tmp_path / "latest")]) == 0
    capsys.readouterr()
    assert archive_cli([*pull, "--run-id", "broken", "--dest", str(tmp_path / "broken")]) == 1
    error = one_line_error(capsys.readouterr().err, "pull")

    assert re.findall(r"\bgood-\d\b", listed) == ["good-1", "good-2"]
    assert len(warnings.splitlines()) == 2
    assert all(line.startswith("archive: warning: skipped s3://") for line in warnings.splitlines())
    assert "round-robin/broken/perf/manifest.json is not a valid run manifest" in error
    assert not (tmp_path / "broken").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--resume"], "--resume needs the --run-id"),
        (["--bucket", "ab"], "--bucket must be a bucket name: 3 to 63"),
        (["--bucket", "b@d!"], "--bucket must be a bucket name"),
        (["--prefix", "a//b"], "--prefix: Value error, prefix 'a//b' must be `/`-separated"),
        (["--outputs", "/no/such/outputs.json"], "outputs.json"),
        (["--outputs", "/"], "/ is a directory, not a stack-outputs file"),
    ],
)
def test_push_usage_errors_are_one_line_with_status_2(
    tmp_path: Path,
    location: ArchiveLocation,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    push = push_args(tmp_path, location, make_results(tmp_path / "r"), "run-1")
    if argv == ["--resume"]:
        push.remove("--run-id")
        push.remove("run-1")

    assert archive_cli([*push, *argv]) == 2
    assert message in one_line_error(capsys.readouterr().err, "push")


CLEAN_RR = ["clean", "--stack", "rr", "--profile", "round-robin", "--stage", "perf"]


@pytest.mark.parametrize(
    "argv",
    [
        ["list", "--stack", "a/b"],
        [*CLEAN_RR, "--run-id", ".."],
        [*CLEAN_RR, "--run-id", "r", "--older-than", "-1"],
    ],
)
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        archive_cli([*argv, "--bucket", "results"])

    assert exited.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


GITLAB_TOKEN = "glpat-" + "Cn7f3a9d2e41b8c6Zq0123"  # assembled: a canary, not a real token


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["list", "--stack", GITLAB_TOKEN], "--stack"),
        ([*CLEAN_RR, "--run-id", GITLAB_TOKEN], "--run-id"),
        (["list", "--endpoint-url", f"file://ci:{GITLAB_TOKEN}@{{tmp}}/archive"], "--endpoint-url"),
    ],
)
def test_a_credential_never_becomes_a_key_or_a_folder(
    tmp_path: Path, argv: list[str], option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`file://ci:pa/ss@/dir` would have made `/ss@/dir/<bucket>`: a folder named by a password."""
    argv = [arg.replace("{tmp}", str(tmp_path)) for arg in argv]
    try:
        status = archive_cli([*argv, "--bucket", "results"])
    except SystemExit as exited:
        status = exited.code if isinstance(exited.code, int) else 2

    err = capsys.readouterr().err
    assert status == 2 and option in err and GITLAB_TOKEN not in err


def test_a_region_that_is_no_region_name_is_bad_usage_naming_the_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        archive_cli(["list", "--bucket", "abc", "--region", "us east"])

    assert exited.value.code == 2
    assert "argument --region: 'us east' is not a region name" in capsys.readouterr().err


def test_an_aws_config_file_that_does_not_parse_is_one_line_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config"
    config.write_text("[profile x\naws_secret_access_key = hunter2-never-shown\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))

    status = archive_cli(["list", "--bucket", "abc", "--endpoint-url", "http://127.0.0.1:9"])

    err = capsys.readouterr().err
    assert status == 1 and "Traceback" not in err and "hunter2" not in err
    assert one_line_error(err, "list") == (
        f"archive list: error: the AWS config file {config} does not parse: fix it, or point "
        "AWS_CONFIG_FILE / AWS_SHARED_CREDENTIALS_FILE at another\n"
    )
