"""Bounded reads everywhere (issue 30): every command that reads a file, handed each hostile shape
of one (`tests.support.HOSTILE_SHAPES`: /dev/zero, a FIFO, a directory, a link to /dev/zero, a
sparse GiB, a billion laughs, 10,000 levels), refuses it with a message naming the file and the
limit, with its usage status: no traceback, no hang, nothing read past the limit. The file may be
an argument or one the command finds on disk (a saved prediction, a cluster's `cluster.json`, a
stack file); standard input has the same size limit.
"""

from __future__ import annotations

import io
import re
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from common import REPO_ROOT
from components.routing import RoutingProfile
from lab import __main__ as lab_cli
from stages import cli as stages_cli
from stages.archive import read_record
from stages.archive.records import ArchiveLocation, CorruptManifestError, UnusableStoredFile
from stages.archive.stores import open_bucket
from testenv.cluster import OWNER_MARK
from testenv.cluster import __main__ as cluster_cli
from testenv.engine import Engine
from tests.stages.support import FIXTURES
from tests.support import HOSTILE_SHAPES, LOCAL_TOOLS, hostile_file
from tests.tally import no_hang, record, run_command
from tools import layer_ready, render, validate

FAMILY = "bounded reads"
CALIBRATION = REPO_ROOT / "docs" / "lab-prediction" / "calibration.json"
RESULTS = {p: FIXTURES / f"results-{p.value}.json" for p in RoutingProfile}
CLUSTER_OUTPUTS = REPO_ROOT / "manifests" / "round-robin" / "outputs.json"
LAB_MARKER = REPO_ROOT / "docs" / "lab-prediction" / ".written-files.json"


def stages_main(argv: Sequence[str]) -> int:
    return stages_cli.main(list(argv), local=LOCAL_TOOLS)


@dataclass(frozen=True)
class Reader:
    """A command that reads a file: its `main`, its command line given the file and a scratch
    folder, the status it refuses with, and whether the file is YAML (else JSON)."""

    main: Callable[[list[str]], int]
    argv: Callable[[Path, Path], list[str]]
    status: int = 2
    yaml: bool = False
    found: str | None = None
    """Where the command finds the file in the scratch folder; None: an argument."""
    says: dict[str, str] = field(default_factory=dict)
    """What its refusal names for a shape, where that differs from SAYS."""


READERS = {
    "lab predict --calibration": Reader(
        lab_cli.main, lambda f, tmp: ["predict", "--out", str(tmp / "out"), "--calibration", str(f)]
    ),
    "lab report --calibration": Reader(
        lab_cli.main, lambda f, tmp: ["report", "--out", str(tmp / "out"), "--calibration", str(f)]
    ),
    "lab capacity --calibration": Reader(
        lab_cli.main,
        lambda f, tmp: [
            "capacity",
            "--out",
            str(tmp / "out"),
            "--calibration",
            str(f),
            "--profile",
            "round-robin",
            "--target-rps",
            "1",
            "--max-ttft-p95-ms",
            "100",
        ],
    ),
    "lab calibrate --results": Reader(
        lab_cli.main,
        lambda f, tmp: [
            "calibrate",
            "--out",
            str(tmp / "out"),
            "--results",
            str(f),
            str(RESULTS[RoutingProfile.SESSION_AFFINITY]),
        ],
    ),
    "lab predict --results": Reader(
        lab_cli.main,
        lambda f, tmp: [
            "predict",
            "--out",
            str(tmp / "out"),
            "--calibration",
            str(CALIBRATION),
            "--results",
            str(RESULTS[RoutingProfile.ROUND_ROBIN]),
            str(f),
        ],
    ),
    "lab report: <out>/prediction.json": Reader(
        lab_cli.main,
        lambda f, tmp: ["report", "--out", str(f.parent), "--calibration", str(CALIBRATION)],
        found="lab-out/prediction.json",
    ),
    "stages smoke --outputs": Reader(
        stages_main, lambda f, tmp: ["smoke", "--outputs", str(f), "--dry-run"]
    ),
    "stages perf --outputs": Reader(
        stages_main, lambda f, tmp: ["perf", "--outputs", str(f), "--dry-run"]
    ),
    "stages smoke --kubeconfig": Reader(
        stages_main,
        lambda f, tmp: [
            "smoke",
            "--outputs",
            str(CLUSTER_OUTPUTS),
            "--kubeconfig",
            str(f),
            "--dry-run",
        ],
        yaml=True,
    ),
    "stages report --results": Reader(
        stages_main,
        lambda f, tmp: [
            "report",
            "--results",
            str(f),
            str(RESULTS[RoutingProfile.SESSION_AFFINITY]),
            "--out",
            str(tmp / "report"),
        ],
    ),
    "stages archive push --outputs": Reader(
        stages_main,
        lambda f, tmp: [
            "archive",
            "push",
            "--stack",
            "s",
            "--outputs",
            str(f),
            "--stage",
            "perf",
            "--dir",
            str(FIXTURES),
            "--bucket",
            "b-1",
            "--dry-run",
        ],
    ),
    "tools.render: Pulumi.<stack>.yaml": Reader(
        render.main,
        lambda f, tmp: ["--stack", "dev", "--example-site", "--out", str(tmp / "render")],
        yaml=True,
        found="Pulumi.dev.yaml",
    ),
    "tools.validate --crd": Reader(
        validate.main, lambda f, tmp: ["--stack", "shared", "--crd", str(f)], yaml=True
    ),
    "tools.validate --kubeconfig": Reader(
        validate.main, lambda f, tmp: ["--stack", "shared", "--kubeconfig", str(f)], yaml=True
    ),
    "tools.layer_ready": Reader(layer_ready.main, lambda f, tmp: [str(f)], status=1),
    "testenv.cluster down: cluster.json": Reader(
        cluster_cli.main,
        lambda f, tmp: ["down", "--out", str(tmp)],
        status=1,
        found="cluster.json",
        says={"link to /dev/zero": "is a symbolic link"},  # never followed, in a folder it owns
    ),
}
"""Every command that reads a file a user can hand it or leave on disk. `tools.layer_ready` and
`testenv.cluster` document 1 for every refusal; the others 2 (usage: nothing ran)."""

SAYS = {
    "/dev/zero": "is a character device",
    "fifo": "is a named pipe (FIFO)",
    "directory": "is a directory",
    "link to /dev/zero": "is a character device",
    "oversized": "MiB at most)",
    "alias bomb": "is not JSON",
    "10,000 deep": "nests deeper than 100 levels",
}
"""What a refusal names besides the file: what it is, or the limit it passed."""
SAYS_FOR_YAML = SAYS | {"alias bomb": "has excessive aliasing"}

CASES = [
    pytest.param(reader, shape, id=f"{reader} | {shape}")
    for reader in READERS
    for shape in HOSTILE_SHAPES
    if not (READERS[reader].found and shape == "/dev/zero")  # found on disk: the link is it
]


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`tmp_path` as a checkout whose stack files the tools read (the project's Pulumi.yaml
    beside them), and a folder `testenv.cluster up` made (its mark) with an engine found without
    one being built (`down` only reads `cluster.json` before it stops anything)."""
    shutil.copy(REPO_ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    (tmp_path / OWNER_MARK).write_text("made by python -m testenv.cluster up\n")
    monkeypatch.setattr("tools.stack_files.REPO_ROOT", tmp_path)
    monkeypatch.setattr(cluster_cli, "located", lambda home: Engine(tmp_path / "engine"))
    return tmp_path


@pytest.mark.parametrize(("reader", "shape"), CASES)
def test_every_file_a_command_reads_is_bounded(scratch: Path, reader: str, shape: str) -> None:
    command = READERS[reader]
    found = scratch / (command.found or "input")
    found.parent.mkdir(exist_ok=True)
    shutil.copy(LAB_MARKER, found.parent)  # the lab's own folder (any other command ignores it)
    path = hostile_file(found.parent, shape, found.name)

    status, printed, err = run_command(FAMILY, command.main, command.argv(path, scratch), 30)

    said = printed + err
    assert status == command.status, said
    assert str(path) in said, said
    assert ((SAYS_FOR_YAML if command.yaml else SAYS) | command.says)[shape] in said, said
    assert "Traceback" not in said


@pytest.mark.parametrize("shape", ["/dev/zero", "oversized"])
def test_standard_input_has_the_outputs_files_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    """`--outputs -`: read up to the limit and refused there, as a file would be."""
    with hostile_file(tmp_path, shape).open("rb") as stream:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(stream))

        status, _, err = run_command(FAMILY, stages_main, ["smoke", "--outputs", "-"], 30)

    assert status == 2 and "is over 4 MiB, more than one can be (4 MiB at most)" in err, err


def test_a_result_file_over_the_limit_is_never_archived(tmp_path: Path) -> None:
    results = tmp_path / "perf"
    shutil.copytree(FIXTURES, results)
    hostile_file(results, "oversized", "profile_export.jsonl")
    argv = [
        "archive",
        "push",
        "--stack",
        "s",
        "--outputs",
        str(CLUSTER_OUTPUTS),
        "--stage",
        "perf",
        "--dir",
        str(results),
        "--bucket",
        "b-1",
        "--dry-run",
    ]

    status, _, err = run_command(FAMILY, stages_main, argv, 30)

    assert status == 1, err  # an archive refusal: the stage failed
    assert f"{results / 'profile_export.jsonl'} is 1024.0 MiB" in err and "(64 MiB at most)" in err


@pytest.mark.parametrize("shape", ["fifo", "directory", "oversized"])
def test_a_directory_archive_never_reads_past_a_stored_files_limit(
    tmp_path: Path, shape: str
) -> None:
    """`--endpoint-url file:///dir`: what someone left in the directory is refused, not read; at a
    manifest's key it is a corrupt manifest, which a listing skips with a warning (a link out of
    the directory is refused as it always was: it leaves the archive)."""
    location = ArchiveLocation(bucket="results", endpoint_url=f"file://{tmp_path / 'archive'}")
    bucket = open_bucket(location)
    folder = tmp_path / "archive" / "results" / "run"
    folder.mkdir(parents=True)
    hostile_file(folder, shape, "manifest.json")
    record(FAMILY)

    with no_hang(30), pytest.raises(UnusableStoredFile, match=re.escape(SAYS[shape])):
        bucket.read("run/manifest.json")
    with no_hang(30), pytest.raises(CorruptManifestError, match="is not a valid run manifest"):
        read_record(bucket, "run/manifest.json")
