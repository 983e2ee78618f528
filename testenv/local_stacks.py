"""The project's stacks on the local tier: the engine's `pulumi` in a copy of the project, a file
backend of its own and a passphrase, against a local cluster (testenv/cluster).

What the real-tier tests and `tools.engine_goldens` drive; the commands are the ones a user types
(`pulumi stack init`, `pulumi config set`, `pulumi up --yes`), run non-interactively, because the
README tells users to type them. The lab drives the same project copy (`local_project`) through
the Automation API alone, as the A/B does on a cluster.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common import REPO_ROOT
from testenv import cluster as local
from testenv.cluster import objects
from testenv.project_copy import copy_project

PASSPHRASE = "local-tier-passphrase"
"""Encrypts the stack config of a throwaway file backend; a real backend's secrets are the user's."""
COMMAND_TIMEOUT_SECONDS = 300
OUTPUT_TAIL = 3000
SITE = {"kubeContext": objects.CONTEXT}
"""The config every stack needs on the local cluster."""
LAYER_SITE = SITE | {"modelCacheStorageClass": objects.RWX_CLASS}
"""And a stack that owns the layer (with `ngcApiKey` as a secret)."""


class PulumiFailed(Exception):
    """A `pulumi` command exited non-zero; the message has the command and its output's end."""


def local_project(
    workdir: Path, cluster: local.LocalCluster, extra_env: Mapping[str, str] = {}
) -> tuple[Path, dict[str, str]]:
    """A project copy in `workdir/project`, its venvs linked, and the environment every `pulumi`
    command there runs with: the cluster's, a file backend in `workdir/backend`, a passphrase."""
    project = copy_project(workdir / "project")
    # The program's and the policy pack's venvs, as `make venv policy-venv` made them.
    (project / ".venv").symlink_to(REPO_ROOT / ".venv")
    (project / "policy" / "venv").symlink_to(REPO_ROOT / "policy" / "venv")
    backend = workdir / "backend"
    home = workdir / "home"
    backend.mkdir()
    home.mkdir()
    env = cluster.environment()
    env.update(
        PATH=f"{cluster.engine.bin}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
        HOME=str(home),
        PULUMI_BACKEND_URL=f"file://{backend}",
        PULUMI_CONFIG_PASSPHRASE=PASSPHRASE,
        PULUMI_SKIP_CONFIRMATIONS="true",
        # The language host runs `pip list` at every preview and update; in a new HOME pip would
        # also look for a newer pip each time (a failed request in the tests' network namespace).
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        **extra_env,
    )
    return project, env


@dataclass
class LocalStacks:
    project: Path
    env: dict[str, str]
    transcript: list[str] = field(default_factory=list)

    @classmethod
    def create(
        cls,
        workdir: Path,
        cluster: local.LocalCluster,
        extra_env: Mapping[str, str] = {},
    ) -> LocalStacks:
        """The CLI over `local_project(workdir, cluster, extra_env)`."""
        return cls(*local_project(workdir, cluster, extra_env))

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = ["pulumi", *args, "--non-interactive", "--color=never"]
        return self._run(argv, check, f"pulumi {' '.join(args)}")

    def shell(self, command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """One command line (a README's), run by bash in the project copy."""
        return self._run(["bash", "-euo", "pipefail", "-c", command], check, command)

    def configure(
        self, stack: str, values: Mapping[str, str], secrets: Mapping[str, str] = {}
    ) -> None:
        """`pulumi stack init`, then one `pulumi config set-all` of the values and secrets (one
        CLI start rather than one a key: most of a `pulumi` command's time is its start)."""
        self.run("stack", "init", stack)
        items = [arg for item in values.items() for arg in ("--plaintext", "=".join(item))]
        items += [arg for item in secrets.items() for arg in ("--secret", "=".join(item))]
        if items:
            self.run("config", "set-all", *items, "--stack", stack)

    def deploy(self, stack: str, *options: str) -> None:
        """`stack` brought up as a starting point: `pulumi up --yes --skip-preview`, as the
        Automation API runs it. Where the preview is no part of what a test checks, skipping it
        saves a run of the program, of the language host's `pip list` and of the provider's diffs:
        measured, 4.3 -> 2.4 CPU-seconds for the layer stack's first `up`, 3.2 -> 1.9 for a
        profile's. A test of `up` itself types the command as users do."""
        self.run("up", "--yes", "--skip-preview", "--stack", stack, *options)

    def outputs(self, stack: str) -> dict[str, Any]:
        printed = self.run("stack", "output", "--json", "--stack", stack).stdout
        outputs: dict[str, Any] = json.loads(printed)
        return outputs

    def _run(self, argv: list[str], check: bool, line: str) -> subprocess.CompletedProcess[str]:
        try:
            result = subprocess.run(
                argv,
                cwd=self.project,
                env=self.env,
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT_SECONDS,
                check=False,
            )
        except subprocess.TimeoutExpired as timeout:  # what it printed says where it hung
            output = timeout.stdout or b""
            printed = output.decode(errors="replace") if isinstance(output, bytes) else output
            raise PulumiFailed(
                f"`{line}` ran past {COMMAND_TIMEOUT_SECONDS} s:\n{printed[-OUTPUT_TAIL:]}"
            ) from None
        self.transcript.append(f"$ {line}\n{result.stdout}{result.stderr}")
        if check and result.returncode != 0:
            raise PulumiFailed(
                f"`{line}` exited {result.returncode}:\n"
                f"{result.stdout[-OUTPUT_TAIL:]}\n{result.stderr[-OUTPUT_TAIL:]}"
            )
        return result
