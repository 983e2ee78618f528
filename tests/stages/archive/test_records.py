"""RunRecord: what a manifest holds, its run id and commit, and what it refuses to describe."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from components.routing import RoutingProfile
from stages.archive import RunRecord, current_commit, new_run_id
from tests.stages.archive.helpers import outputs_for, record_for


def test_commit_and_default_run_id() -> None:
    created = datetime(2026, 11, 30, 18, 42, 0, tzinfo=UTC)
    commit = "0518aea" + "0" * 33
    record = RunRecord.create(
        stack="dev",
        stage="smoke",
        outputs=outputs_for(RoutingProfile.ROUND_ROBIN),
        commit=commit,
        created_at=created,
    )

    assert record.run_id == "20261130T184200Z-0518aea"
    assert new_run_id(created, "unknown") == "20261130T184200Z"
    assert re.fullmatch(r"[0-9a-f]{40}", current_commit())
    assert current_commit(Path("/")) == "unknown"


def test_a_commit_that_is_no_git_commit_is_masked_and_never_shortened_into_a_run_id() -> None:
    created = datetime(2026, 11, 30, 18, 42, 0, tzinfo=UTC)
    token = "glpat-" + "Cn7f3a9d2e41b8c6Zq0123"  # assembled: a canary, not a real token
    record = RunRecord.create(
        stack="dev",
        stage="smoke",
        outputs=outputs_for(RoutingProfile.ROUND_ROBIN),
        commit=f"release {token}",
        created_at=created,
    )

    assert record.run_id == "20261130T184200Z"
    assert record.commit == "release <secret>"
    assert "glpat" not in record.model_dump_json()
    old = record.model_dump(mode="json") | {"commit": token}  # written by an older version
    assert RunRecord.model_validate(old).commit == "<secret>"


def test_records_reject_unsafe_names_and_inconsistent_profiles() -> None:
    good = record_for(RoutingProfile.ROUND_ROBIN, "run-1").model_dump(mode="json")
    file_entry = {"name": "a.json", "size": 1, "sha256": "0" * 64}
    broken = {
        "run id with a slash": {**good, "run_id": "a/b"},
        "stack with a dot first": {**good, "stack": "..up"},
        "profile not the outputs'": {**good, "profile": "session-affinity"},
        "time without a zone": {**good, "created_at": "2026-11-30T12:00:00"},
        "file escaping the run": {**good, "files": [{**file_entry, "name": "../x"}]},
        "absolute file name": {**good, "files": [{**file_entry, "name": "/etc/x"}]},
    }

    assert RunRecord.model_validate(good) == record_for(RoutingProfile.ROUND_ROBIN, "run-1")
    assert [case for case, data in broken.items() if validates(data)] == []


def validates(data: dict[str, Any]) -> bool:
    try:
        RunRecord.model_validate(data)
    except ValidationError:
        return False
    return True
