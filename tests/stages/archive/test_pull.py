"""Pulling runs back: identical files, checked against the manifest, into an empty directory."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from components.routing import RoutingProfile
from stages.archive import (
    ArchiveError,
    ArchiveLocation,
    archive_run,
    download_record,
    fetch_record,
    latest_run,
    list_runs,
)
from tests.stages.archive.helpers import T0, make_results, outputs_for, pull, record_for, tree


def test_round_trip_restores_identical_files(
    tmp_path: Path, location: ArchiveLocation, s3: Any
) -> None:
    results = make_results(tmp_path / "results")
    record = record_for(RoutingProfile.ROUND_ROBIN, "20261130T120000Z-abc1234")

    stored = archive_run(results, record, location)
    [listed] = list_runs(location)
    pulled = pull(location, stored.run_id, tmp_path / "pulled")

    assert listed == stored
    assert tree(pulled) == tree(results)
    for entry in listed.files:
        data = (pulled / entry.name).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (
            entry.size,
            entry.sha256,
        )
    assert {entry.name for entry in listed.files} == set(tree(results))
    assert listed.stack_outputs() == outputs_for(RoutingProfile.ROUND_ROBIN)


def test_download_detects_a_file_changed_behind_the_archive(
    tmp_path: Path, location: ArchiveLocation, s3: Any
) -> None:
    archive_run(
        make_results(tmp_path / "r"),
        record_for(RoutingProfile.ROUND_ROBIN, "r1"),
        location,
    )
    key = "cosmos3-nano-reasoner/round-robin/round-robin/r1/perf/files/summary.json"
    s3.put_object(Bucket=location.bucket, Key=key, Body=b"tampered")

    with pytest.raises(ArchiveError, match="does not match its manifest"):
        pull(location, "r1", tmp_path / "p")


def test_download_refuses_a_non_empty_directory(tmp_path: Path, location: ArchiveLocation) -> None:
    archive_run(
        make_results(tmp_path / "r"),
        record_for(RoutingProfile.ROUND_ROBIN, "r1"),
        location,
    )
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "old.json").write_text("{}")

    with pytest.raises(ArchiveError, match="not empty"):
        pull(location, "r1", dest)
    assert [path.name for path in dest.iterdir()] == ["old.json"]


def test_report_reads_both_profiles_back(tmp_path: Path, location: ArchiveLocation) -> None:
    for profile in RoutingProfile:
        archive_run(
            make_results(tmp_path / f"old-{profile}", marker=f"old {profile}"),
            record_for(profile, "run-1", T0),
            location,
        )
        archive_run(
            make_results(tmp_path / f"new-{profile}", marker=f"new {profile}"),
            record_for(profile, "run-2", T0 + timedelta(minutes=30)),
            location,
        )

    for profile in RoutingProfile:
        latest = latest_run(location, profile=profile)
        pulled = download_record(location, latest, tmp_path / "pulled" / profile)
        summary = json.loads((pulled / "summary.json").read_text())
        assert (latest.run_id, summary["marker"]) == ("run-2", f"new {profile}")
        assert latest.stack_outputs().profile is profile
    named = fetch_record(location, "session-affinity", "session-affinity", "run-1")
    older = download_record(location, named, tmp_path / "named")
    assert json.loads((older / "summary.json").read_text())["marker"] == ("old session-affinity")
