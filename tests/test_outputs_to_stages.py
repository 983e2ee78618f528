"""Every shipped stack's outputs, exactly as the engine stores them, through every stage's dry run.

This is the hand-off a pipeline makes: `pulumi stack output --json | python -m stages ... -`. The
outputs are the offline render's (`tools.render`: the real program under mocks, its root outputs
serialized by the SDK's own code), so a key the SDK drops on the way to the engine (a None value)
is missing here too, as it is in `pulumi stack output --json`.
"""

from __future__ import annotations

import gzip
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from stages.cli import main
from stages.core.pod_plans import PERF_PLAN
from tests.stages.cluster.fakes import pod_files
from tools.render import render_stack
from tools.stack_files import SHIPPED_STACKS, example_site_for

GRAPH_STACKS = ("dev", "round-robin", "session-affinity")


def engine_outputs(stack: str) -> dict[str, Any]:
    _, outputs = render_stack(stack, example_site_for(stack))
    return outputs


def run_stage(argv: list[str], outputs: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> int:
    """`pulumi stack output --json | python -m stages <argv> --outputs -`."""
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(outputs, indent=2)))
    return main([*argv, "--outputs", "-"])


def test_every_shipped_stack_is_covered() -> None:
    assert set(GRAPH_STACKS) | {"shared"} == set(SHIPPED_STACKS)


@pytest.mark.parametrize("stack", GRAPH_STACKS)
def test_smoke_dry_run_takes_the_engines_outputs(
    stack: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs = engine_outputs(stack)
    assert run_stage(["smoke", "--dry-run"], outputs, monkeypatch) == 0
    objects = list(yaml.safe_load_all(capsys.readouterr().out))
    assert {o["kind"] for o in objects} == {"ConfigMap", "Service", "Job"}
    assert all(o["metadata"]["namespace"] == outputs["namespace"] for o in objects)


@pytest.mark.slow
@pytest.mark.parametrize("stack", GRAPH_STACKS)
def test_perf_dry_run_takes_the_engines_outputs(
    stack: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs = engine_outputs(stack)
    assert run_stage(["perf", "--dry-run"], outputs, monkeypatch) == 0
    objects = {o["kind"]: o for o in yaml.safe_load_all(capsys.readouterr().out)}
    assert objects["Job"]["metadata"]["namespace"] == outputs["namespace"]
    plan = json.loads(gzip.decompress(pod_files(objects["ConfigMap"])[PERF_PLAN]))
    # The affinity header reaches AIPerf exactly when the engine stored one.
    argv = plan["levels"][0]["argv"]
    assert ("--session-header" in argv) == ("sessionHeader" in outputs)


@pytest.mark.parametrize("stack", GRAPH_STACKS)
def test_archive_push_dry_run_takes_the_engines_outputs(
    stack: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    outputs_file = tmp_path / "outputs.json"
    outputs_file.write_text(json.dumps(engine_outputs(stack)))
    results = tmp_path / "perf"
    results.mkdir()
    (results / "results.json").write_text("{}\n")
    argv = [
        "archive",
        "push",
        "--bucket",
        "results",
        "--stack",
        stack,
        "--stage",
        "perf",
        "--outputs",
        str(outputs_file),
        "--dir",
        str(results),
        "--run-id",
        "r1",
        "--commit",
        "0" * 40,
        "--dry-run",
    ]

    assert main(argv) == 0
    keys = capsys.readouterr().out.split()
    profile = engine_outputs(stack)["profile"]
    assert keys[-1] == f"s3://results/cosmos3-nano-reasoner/{stack}/{profile}/r1/perf/manifest.json"


def test_the_shared_layers_outputs_are_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_stage(["smoke", "--dry-run"], engine_outputs("shared"), monkeypatch) == 2
    assert "shared layer's" in capsys.readouterr().err
