"""ruff (lint and format) and mypy --strict over the cluster stages and their tests.

tests/guardrails/test_static.py does not cover stages/ yet; this keeps the modules of the cluster
target (and the stage modules they changed) as strict as the Pulumi program until it does.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.stages.cluster_fakes import REPO

SOURCES = [
    "stages/cluster_jobs.py",
    "stages/cluster.py",
    "stages/job_runner.py",
    "stages/kube.py",
    "stages/archive_report.py",
    "stages/targets.py",
    "stages/cli.py",
    "stages/perf.py",
    "stages/incluster",
]
TESTS = [
    "tests/stages/cluster_fakes.py",
    "tests/stages/cluster_pods.py",
    "tests/stages/test_cluster_cli.py",
    "tests/stages/test_cluster_kube_client.py",
    "tests/stages/test_cluster_manifests.py",
    "tests/stages/test_cluster_pods.py",
    "tests/stages/test_cluster_pods_on_lab.py",
    "tests/stages/test_cluster_runner.py",
    "tests/stages/test_cluster_static.py",
    "tests/stages/test_report_archive.py",
]


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *command], cwd=REPO, capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize(
    "command",
    [
        ["ruff", "check", "--no-fix", *SOURCES, *TESTS],
        ["ruff", "format", "--check", "--diff", *SOURCES, *TESTS],
        ["mypy", "--strict", *SOURCES, *TESTS],
    ],
    ids=["ruff-check", "ruff-format", "mypy-strict"],
)
def test_the_cluster_stages_pass_the_static_checks(command: list[str]) -> None:
    result = run(*command)

    assert result.returncode == 0, f"`{' '.join(command)}`:\n{result.stdout}{result.stderr}"
