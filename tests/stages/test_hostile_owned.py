"""The stages own only what they wrote (issue 30, family `owned`): `report --out` into its own
folder where links stand at the names it writes or its lock, and `archive pull --dest` of a run
whose manifest names files outside the run, twice, or as a file and a folder; a process log and
a directory archive's object that are links. A user's home is
planted beside each folder (`tests.planted`); afterwards it has its bytes, the command ends with
a documented status and a message, never a traceback.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from components.routing import RoutingProfile
from stages import cli
from stages.archive import ArchiveError, ArchiveLocation, archive_run
from stages.archive.stores import DirectoryBucket
from stages.errors import EXIT_STATUSES
from stages.incluster.processes import start_group_process
from tests.planted import FAMILY, UserHome, snapshot
from tests.stages.archive.helpers import make_results, record_for
from tests.stages.support import FIXTURES
from tests.support import LOCAL_TOOLS as LOCAL
from tests.tally import record, run_command

# Generated hostile cases, each a whole command: seconds in all.
pytestmark = pytest.mark.slow

STATUSES = {code for code, _ in EXIT_STATUSES}
PROPERTIES = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def stages_main(argv: list[str]) -> int:
    return cli.main(argv, local=LOCAL)


def report(out: Path) -> tuple[int, str]:
    results = [str(FIXTURES / f"results-{p.value}.json") for p in RoutingProfile]
    status, _, err = run_command(
        FAMILY, stages_main, ["report", "--results", *results, "--out", str(out)]
    )
    return status, err


# --- report --out: its own folder, links planted where it writes ---------------------------------

REPORT_NAMES = ("report.md", "ab-chart.png", ".run.lock")


@pytest.fixture(scope="module")
def earlier_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stage's own folder from an earlier run, written once and copied by each example."""
    out = tmp_path_factory.mktemp("earlier") / "report"
    assert report(out)[0] == 0
    return out


@settings(PROPERTIES, max_examples=20)
@given(
    linked=st.lists(st.sampled_from(REPORT_NAMES), min_size=1, max_size=3, unique=True),
    to=st.sampled_from(["key", "rc", "notes", "nowhere"]),
)
def test_report_never_writes_through_a_link_in_its_own_folder(
    tmp_path_factory: pytest.TempPathFactory, earlier_report: Path, linked: list[str], to: str
) -> None:
    root = tmp_path_factory.mktemp("report")
    home, out = UserHome(root), root / "report"
    shutil.copytree(earlier_report, out, symlinks=True)
    target = {"key": home.key, "rc": home.rc, "notes": home.notes}.get(to, root / "home" / "new")
    for name in linked:
        (out / name).unlink(missing_ok=True)
        (out / name).symlink_to(target)
    before = snapshot(out)

    status, err = report(out)

    after = snapshot(out)  # the stage's own files written before the refusal may be new
    assert home.counted() == [] and [after[n] for n in linked] == [before[n] for n in linked], err
    assert status == 2 and "is a symbolic link" in err, err


# --- archive pull --dest: a manifest is data ---------------------------------------------------


def archived_run(tmp_path: Path) -> tuple[ArchiveLocation, Path]:
    """One perf run in a directory archive, and its manifest's file."""
    location = ArchiveLocation(bucket="results", endpoint_url=f"file://{tmp_path / 'archive'}")
    archive_run(
        make_results(tmp_path / "results"), record_for(RoutingProfile.ROUND_ROBIN, "r1"), location
    )
    [manifest] = [
        p for p in (tmp_path / "archive").rglob("manifest.json") if "files" not in p.parts
    ]
    return location, manifest


def entry(name: str, data: bytes) -> dict[str, object]:
    return {"name": name, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


# Entries a hostile manifest adds, beside the run's own files.
ENTRIES = {
    "dot": [entry(".", b"x")],
    "dot-dot": [entry("../outside.txt", b"x")],
    "absolute": [entry("/tmp/outside.txt", b"x")],
    "NUL inside": [entry("a\x00b", b"x")],
    "empty part": [entry("a//b", b"x")],
    "twice": [entry("twice.txt", b"1"), entry("twice.txt", b"1")],
    "a file and a folder": [entry("both", b"1"), entry("both/inner.txt", b"1")],
    "a file below an existing file": [entry("summary.json/inner.txt", b"1")],
}


@PROPERTIES
@given(kinds=st.lists(st.sampled_from(sorted(ENTRIES)), min_size=1, max_size=3, unique=True))
def test_pull_writes_nothing_a_manifest_names_outside_its_run(
    tmp_path_factory: pytest.TempPathFactory, kinds: list[str]
) -> None:
    root = tmp_path_factory.mktemp("pull")
    home = UserHome(root)
    location, manifest = archived_run(root)
    record = json.loads(manifest.read_text())
    record["files"] += [item for kind in kinds for item in ENTRIES[kind]]
    manifest.write_text(json.dumps(record))
    dest = root / "pulled"
    argv = ["archive", "pull", "--stack", "round-robin", "--profile", "round-robin"]
    argv += ["--run-id", "r1", "--dest", str(dest), "--bucket", location.bucket]
    argv += ["--endpoint-url", str(location.endpoint_url)]

    status, _, err = run_command(FAMILY, stages_main, argv)

    assert home.counted() == [] and not (root / "outside.txt").exists(), kinds
    assert status == 1 and "pull" in err and err.count("\n") == 1, err
    assert snapshot(dest) == {}, "a refused pull wrote files"


def test_pull_never_reads_an_archived_file_through_a_link(tmp_path: Path) -> None:
    home = UserHome(tmp_path)
    location, manifest = archived_run(tmp_path)
    stored = manifest.parent / "files" / "summary.json"
    stored.unlink()
    stored.symlink_to(home.key)  # another user's archive directory points at a secret
    record = json.loads(manifest.read_text())
    record["files"] = [
        entry("summary.json", home.key.read_bytes()) if item["name"] == "summary.json" else item
        for item in record["files"]
    ]
    manifest.write_text(json.dumps(record))
    argv = ["archive", "pull", "--stack", "round-robin", "--profile", "round-robin", "--run-id"]
    argv += ["r1", "--dest", str(tmp_path / "pulled"), "--bucket", location.bucket]
    argv += ["--endpoint-url", str(location.endpoint_url)]

    status, _, err = run_command(FAMILY, stages_main, argv)

    assert home.counted() == []
    assert status == 1 and "is a symbolic link" in err, err
    assert not (tmp_path / "pulled").exists() or os.listdir(tmp_path / "pulled") == []


def test_a_process_log_is_never_written_through_a_link(tmp_path: Path) -> None:
    """The lab's graph processes and the local pod programs log to a file made afresh."""
    home = UserHome(tmp_path)
    log = tmp_path / "logs" / "frontend.log"
    log.parent.mkdir()
    log.symlink_to(home.rc)

    with pytest.raises(OSError, match="a link or not a regular file stands where a log goes"):
        start_group_process("frontend", ["true"], {}, log, tmp_path)

    record(FAMILY)
    assert home.counted() == [] and log.is_symlink()


def test_the_directory_archive_removes_no_key_through_a_link(tmp_path: Path) -> None:
    """`archive clean` of an interrupted run: a stored object that is a link is not removed."""
    home = UserHome(tmp_path)
    location = ArchiveLocation(bucket="results", endpoint_url=f"file://{tmp_path / 'archive'}")
    bucket = DirectoryBucket(location)
    bucket.put_new("p/round-robin/round-robin/r1/perf/files/a.json", b"{}")
    (
        bucket.root / "p" / "round-robin" / "round-robin" / "r1" / "perf" / "files" / "b.json"
    ).symlink_to(home.key)

    with pytest.raises(ArchiveError, match="is a symbolic link"):
        bucket.delete(["p/round-robin/round-robin/r1/perf/files/b.json"])

    record(FAMILY)
    assert home.counted() == []
