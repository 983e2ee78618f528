"""Fixtures for the A/B orchestrator's tests: a stand-in `pulumi` executable (fake_pulumi.py) under
`tmp_path/pulumi/bin/pulumi`, with its scripted stacks and its log of command lines."""

from __future__ import annotations

import json
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stages.ab.pulumi_stacks import PulumiStacks

REPO = Path(__file__).resolve().parents[3]
PROJECT = "cosmos3-nano-reasoner"
ORG = "acme"
STAND_IN = Path(__file__).with_name("fake_pulumi.py")


def golden_outputs(stack: str) -> dict[str, Any]:
    """The outputs the real program exports for a shipped stack, as the engine stores them."""
    outputs: dict[str, Any] = json.loads((REPO / "manifests" / stack / "outputs.json").read_text())
    return outputs


def graph_resources(stack: str) -> list[str]:
    """What a profile stack holds, as `<type> <name>` lines of pulumi's display."""
    graph = f"{PROJECT}-agg-h200-{stack}"
    return [
        f"pulumi:pulumi:Stack {PROJECT}-{stack}",
        f"cosmos3:recipe:Recipe {PROJECT}",
        f"cosmos3:recipe:GraphDeployment {graph}",
        f"kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment {graph}",
    ]


@dataclass
class FakePulumi:
    """The stand-in's install root, its state file (scripted stacks) and its command-line log."""

    root: Path
    state_path: Path
    log_path: Path

    def add_stack(self, name: str, qualify: bool = True, **fields: Any) -> None:
        """Script a stack (fields as in fake_pulumi.py's docstring), known by its qualified name
        unless `qualify` is False."""
        state = self._state()
        key = f"{ORG}/{PROJECT}/{name}" if qualify else name
        state["stacks"][key] = {"resources": graph_resources(name), "deployed": False} | fields
        self._save(state)

    def set_version(self, version: str) -> None:
        """The version `pulumi version` answers (the SDK picks the event-log transport by it)."""
        self._save(self._state() | {"version": version})

    def stack(self, name: str) -> dict[str, Any]:
        stack: dict[str, Any] = self._state()["stacks"][f"{ORG}/{PROJECT}/{name}"]
        return stack

    def command_lines(self) -> list[list[str]]:
        """Every argv the stand-in received, in order (without the executable)."""
        return [entry["args"] for entry in self.entries()]

    def entries(self) -> list[dict[str, Any]]:
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text().splitlines()]

    def clear_log(self) -> None:
        self.log_path.unlink(missing_ok=True)

    def _state(self) -> dict[str, Any]:
        state: dict[str, Any] = json.loads(self.state_path.read_text())
        return state

    def _save(self, state: dict[str, Any]) -> None:
        self.state_path.write_text(json.dumps(state, indent=2))


@pytest.fixture
def fake_pulumi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakePulumi:
    """The stand-in installed as `<root>/bin/pulumi`, run by this interpreter, with no stacks."""
    executable = tmp_path / "pulumi" / "bin" / "pulumi"
    executable.parent.mkdir(parents=True)
    source = STAND_IN.read_text().split("\n", 1)[1]  # its own shebang line replaced
    executable.write_text(f"#!{sys.executable}\n{source}")
    executable.chmod(executable.stat().st_mode | stat.S_IXUSR)
    fake = FakePulumi(tmp_path / "pulumi", tmp_path / "state.json", tmp_path / "commands.jsonl")
    fake.state_path.write_text(json.dumps({"version": "3.272.0", "stacks": {}}))
    monkeypatch.setenv("FAKE_PULUMI_STATE", str(fake.state_path))
    monkeypatch.setenv("FAKE_PULUMI_LOG", str(fake.log_path))
    monkeypatch.delenv("PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK", raising=False)
    return fake


@pytest.fixture
def said() -> list[str]:
    """The progress lines a `PulumiStacks` said."""
    return []


@pytest.fixture
def stacks(fake_pulumi: FakePulumi, said: list[str]) -> PulumiStacks:
    """The project's stacks (this repository's Pulumi.yaml), driven through the stand-in."""
    return PulumiStacks(REPO, said.append, pulumi_root=fake_pulumi.root, organization=ORG)
