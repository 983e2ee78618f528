"""`PulumiStacks` against the stand-in `pulumi` (fake_pulumi.py): what the Automation API asks the
CLI, and what the A/B orchestrator makes of the answers."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from pulumi.automation import CommandError, LocalWorkspaceOptions, PulumiCommand, select_stack

from stages.ab.pulumi_stacks import DeployError, PulumiStacks
from stages.errors import EXIT_FAILED
from tests.stages.ab.conftest import ORG, PROJECT, REPO, FakePulumi, golden_outputs

ROUND_ROBIN = f"{ORG}/{PROJECT}/round-robin"
TCP_EVENT_LOG = re.compile(r"tcp://127\.0\.0\.1:\d+")


def select(stack: str = ROUND_ROBIN) -> list[str]:
    return ["--non-interactive", "stack", "select", "--stack", stack]


def preview(event_log: str = "<tcp>", stack: str = ROUND_ROBIN) -> list[str]:
    return [
        "--non-interactive", "preview", "--color", "never", "--exec-kind", "auto.local",
        "--event-log", event_log, "--stack", stack,
    ]  # fmt: skip


def up(stack: str = ROUND_ROBIN) -> list[str]:
    return [
        "--non-interactive", "up", "--yes", "--skip-preview", "--color", "never",
        "--exec-kind", "auto.local", "--stack", stack,
    ]  # fmt: skip


def outputs(stack: str = ROUND_ROBIN) -> list[list[str]]:
    """`Stack.outputs()`: masked, then with secrets, to learn which outputs are secret."""
    return [
        ["--non-interactive", "stack", "output", "--json", "--stack", stack],
        ["--non-interactive", "stack", "output", "--json", "--show-secrets", "--stack", stack],
    ]


def last_update(stack: str = ROUND_ROBIN) -> list[str]:
    """The update summary `up` and `destroy` read afterwards (`Stack.info`), secrets not shown."""
    return [
        "--non-interactive", "stack", "history", "--json", "--page-size", "1", "--page", "1",
        "--stack", stack,
    ]  # fmt: skip


def destroy(stack: str = ROUND_ROBIN) -> list[str]:
    return [
        "--non-interactive", "destroy", "--skip-preview", "--yes", "--color", "never",
        "--exec-kind", "auto.local", "--stack", stack,
    ]  # fmt: skip


def logged(fake: FakePulumi) -> list[list[str]]:
    """The command lines, with the events server's port (a new one each time) as `<tcp>`."""
    return [[TCP_EVENT_LOG.sub("<tcp>", arg) for arg in args] for args in fake.command_lines()]


def test_up_returns_the_outputs_as_stack_output_prints_them(
    fake_pulumi: FakePulumi, stacks: PulumiStacks
) -> None:
    fake_pulumi.add_stack("round-robin", outputs=golden_outputs("round-robin"))

    assert stacks.up("round-robin") == golden_outputs("round-robin")

    assert logged(fake_pulumi) == [["version"], select(), up(), *outputs(), last_update()]
    assert {entry["cwd"] for entry in fake_pulumi.entries()} == {str(REPO)}
    assert fake_pulumi.stack("round-robin")["deployed"]


def test_ensure_up_deploys_a_stack_that_was_never_deployed(
    fake_pulumi: FakePulumi, stacks: PulumiStacks, said: list[str]
) -> None:
    fake_pulumi.add_stack("round-robin", outputs=golden_outputs("round-robin"))

    assert stacks.ensure_up("round-robin") is True

    assert logged(fake_pulumi) == [
        ["version"], select(), preview(), up(), *outputs(), last_update()
    ]  # fmt: skip
    assert "round-robin: the preview shows changes (4 create)" in said
    assert "round-robin: deployed (4 create)" in said


def test_ensure_up_leaves_an_up_to_date_stack_alone(
    fake_pulumi: FakePulumi, stacks: PulumiStacks, said: list[str]
) -> None:
    fake_pulumi.add_stack("shared", deployed=True, outputs=golden_outputs("shared"))

    assert stacks.ensure_up("shared") is False

    shared = f"{ORG}/{PROJECT}/shared"
    assert logged(fake_pulumi) == [["version"], select(shared), preview(stack=shared)]
    assert said[-1] == "shared: up to date, nothing to deploy"


@pytest.mark.parametrize(
    ("cli_version", "event_log"),
    [("3.272.0", "<tcp>"), ("3.205.0", "eventlog.txt")],
    ids=["events-over-grpc", "events-in-a-file"],
)
def test_ensure_up_updates_a_changed_stack(
    fake_pulumi: FakePulumi,
    stacks: PulumiStacks,
    said: list[str],
    cli_version: str,
    event_log: str,
) -> None:
    # The SDK streams engine events over gRPC from CLIs newer than 3.205, from a file before
    # (automation/_stack.py, _setup_event_log): the summary must come through either way.
    fake_pulumi.set_version(cli_version)
    fake_pulumi.add_stack("round-robin", deployed=True, pending={"update": 1})

    assert stacks.ensure_up("round-robin") is True

    preview_line = logged(fake_pulumi)[2]
    assert preview_line[preview_line.index("--event-log") + 1].endswith(event_log)
    assert up() in logged(fake_pulumi)
    assert "round-robin: the preview shows changes (1 update)" in said
    assert fake_pulumi.stack("round-robin")["pending"] == {}


def test_destroy_removes_the_graph_and_its_outputs(
    fake_pulumi: FakePulumi, stacks: PulumiStacks, said: list[str]
) -> None:
    fake_pulumi.add_stack("round-robin", deployed=True, outputs=golden_outputs("round-robin"))

    stacks.destroy("round-robin")

    assert logged(fake_pulumi) == [["version"], select(), destroy(), last_update()]
    assert not fake_pulumi.stack("round-robin")["deployed"]
    assert said[-1] == "round-robin: destroyed (4 delete)"
    assert stacks.outputs("round-robin") == {}


def test_a_secret_output_stays_masked_and_unsaid(
    fake_pulumi: FakePulumi, stacks: PulumiStacks, said: list[str]
) -> None:
    secret = "hunter2-not-for-logs"
    with_secret = golden_outputs("round-robin") | {"registryPassword": secret}
    fake_pulumi.add_stack("round-robin", outputs=with_secret, secretOutputs=["registryPassword"])
    masked = golden_outputs("round-robin") | {"registryPassword": "[secret]"}

    assert stacks.up("round-robin") == masked
    fake_pulumi.clear_log()
    assert stacks.outputs("round-robin") == masked

    assert logged(fake_pulumi) == [select(), *outputs()]
    assert not [line for line in said if secret in line]


def test_progress_lines_reach_say_as_pulumi_prints_them(
    fake_pulumi: FakePulumi, stacks: PulumiStacks, said: list[str]
) -> None:
    fake_pulumi.add_stack("round-robin", outputs={"kubeContext": "h200"})
    stacks.up("round-robin")

    assert said[0] == f"round-robin: deploying {ROUND_ROBIN} (pulumi up)"
    relayed = [line for line in said if line.startswith("round-robin | ")]
    assert relayed[0] == f"round-robin | Updating ({ROUND_ROBIN})"
    assert "round-robin |     + 4 created" in relayed
    assert relayed[-1] == "round-robin | Duration: 1s"
    assert all(line.removeprefix("round-robin | ").strip() for line in relayed)


def test_a_failed_up_names_the_stack_and_ends_with_pulumis_output(
    fake_pulumi: FakePulumi, stacks: PulumiStacks
) -> None:
    fake_pulumi.add_stack(
        "round-robin",
        fail={"up": "resource DynamoGraphDeployment was not Ready after 1200s\nupdate failed"},
    )

    with pytest.raises(DeployError) as failure:
        stacks.up("round-robin")

    message = str(failure.value)
    assert message.startswith(f"`pulumi up` of stack {ROUND_ROBIN} failed")
    assert message.endswith(
        "    error: resource DynamoGraphDeployment was not Ready after 1200s\n"
        "    error: update failed\n"
        "Resources:\n"
        "Duration: 1s"
    )
    assert "Traceback" not in message and "code: 255" not in message
    assert failure.value.exit_status == EXIT_FAILED
    assert not fake_pulumi.stack("round-robin")["deployed"]


def test_a_failed_preview_is_a_deploy_error_and_nothing_is_deployed(
    fake_pulumi: FakePulumi, stacks: PulumiStacks
) -> None:
    fake_pulumi.add_stack("round-robin", fail={"preview": "kubeContext is required"})

    with pytest.raises(DeployError, match=r"(?s)`pulumi preview` of stack .*kubeContext is"):
        stacks.ensure_up("round-robin")

    assert up() not in logged(fake_pulumi)


def test_a_missing_stack_says_how_to_create_it(
    fake_pulumi: FakePulumi, stacks: PulumiStacks
) -> None:
    with pytest.raises(DeployError) as failure:
        stacks.ensure_up("round-robin")

    assert str(failure.value).startswith(
        f"stack {ROUND_ROBIN} does not exist: create it with `pulumi stack init {ROUND_ROBIN}`"
    )
    assert logged(fake_pulumi) == [["version"], select()]


def test_a_locked_stack_says_another_update_is_running(
    fake_pulumi: FakePulumi, stacks: PulumiStacks
) -> None:
    fake_pulumi.add_stack("round-robin", deployed=True, locked=True)

    with pytest.raises(DeployError) as failure:
        stacks.destroy("round-robin")

    message = str(failure.value)
    assert "another update of this stack is running" in message
    assert f"`pulumi cancel --stack {ROUND_ROBIN}`" in message
    assert message.endswith("error: [409] Conflict: Another update is currently in progress.")
    assert fake_pulumi.stack("round-robin")["deployed"]


def test_without_an_organization_names_go_as_given(
    fake_pulumi: FakePulumi, said: list[str]
) -> None:
    fake_pulumi.add_stack("round-robin", qualify=False)
    stacks = PulumiStacks(REPO, said.append, pulumi_root=fake_pulumi.root)

    stacks.up("round-robin")

    assert logged(fake_pulumi)[1:3] == [select("round-robin"), up("round-robin")]


def test_a_missing_cli_is_a_deploy_error(tmp_path: Path, said: list[str]) -> None:
    stacks = PulumiStacks(REPO, said.append, pulumi_root=tmp_path / "nowhere")

    with pytest.raises(DeployError, match=r"cannot use the Pulumi CLI \(.*nowhere/bin/pulumi\)"):
        stacks.outputs("round-robin")


def test_a_directory_without_a_project_is_a_deploy_error(
    fake_pulumi: FakePulumi, tmp_path: Path, said: list[str]
) -> None:
    stacks = PulumiStacks(tmp_path, said.append, pulumi_root=fake_pulumi.root, organization=ORG)

    with pytest.raises(DeployError, match="no Pulumi project"):
        stacks.up("round-robin")


# The stand-in itself: it must refuse what the real CLI (or its own coverage) would not run, or a
# command line the SDK changes would pass unnoticed.


def run_stand_in(fake: FakePulumi, *args: str) -> subprocess.CompletedProcess[str]:
    pulumi = fake.root / "bin" / "pulumi"
    return subprocess.run([pulumi, *args], capture_output=True, text=True, check=False)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ([*up(), "--bogus"], "error: unknown flag: --bogus"),
        ([a for a in up() if a not in ("--yes", "--skip-preview")], "--yes or --skip-preview"),
        (["--non-interactive", "refresh", "--stack", ROUND_ROBIN], 'unknown command "refresh"'),
        (["--non-interactive", "stack", "output", "--stack", ROUND_ROBIN], "only `stack output"),
        (["--non-interactive", "up", "--yes"], "--stack is required"),
        ([*up(), "--exec-kind", "auto.inline"], "invalid argument 'auto.inline'"),
        (["--non-interactive", "stack", "select", "--stack"], "flag needs an argument: --stack"),
    ],
    ids=["unknown-flag", "no-yes", "other-command", "not-json", "no-stack", "inline", "no-value"],
)
def test_the_stand_in_refuses_what_it_does_not_cover(
    fake_pulumi: FakePulumi, args: list[str], error: str
) -> None:
    fake_pulumi.add_stack("round-robin")

    refused = run_stand_in(fake_pulumi, *args)

    assert refused.returncode == 255
    assert error in refused.stderr
    assert refused.stderr.startswith("error: ")
    assert fake_pulumi.command_lines() == [args]
    assert not fake_pulumi.stack("round-robin")["deployed"]


def test_an_sdk_flag_the_stand_in_does_not_know_fails(fake_pulumi: FakePulumi) -> None:
    fake_pulumi.add_stack("round-robin")
    command = PulumiCommand(root=str(fake_pulumi.root))
    stack = select_stack(
        ROUND_ROBIN, work_dir=str(REPO), opts=LocalWorkspaceOptions(pulumi_command=command)
    )

    with pytest.raises(CommandError, match="unknown flag: --diff"):
        stack.up(diff=True)


def test_previews_and_updates_run_the_policy_pack(fake_pulumi: FakePulumi, said: list[str]) -> None:
    fake_pulumi.add_stack("round-robin", outputs=golden_outputs("round-robin"))
    stacks = PulumiStacks(
        REPO, said.append, pulumi_root=fake_pulumi.root, organization=ORG, policy_packs=("policy",)
    )

    stacks.ensure_up("round-robin")

    pack = ["--policy-pack", str(REPO / "policy")]
    updates = [args for args in logged(fake_pulumi) if "preview" in args or "up" in args]
    assert len(updates) == 2 and all(" ".join(pack) in " ".join(args) for args in updates)
