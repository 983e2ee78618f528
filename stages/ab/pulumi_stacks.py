"""The project's stacks, driven through Pulumi's Automation API, for the A/B orchestrator.

The orchestrator deploys the shared layer stack, then each routing profile's stack in turn, reads
its outputs and destroys it again so that the next profile gets the GPUs. Each call here runs one
`pulumi` command in the project directory on a stack selected once a run (`pulumi stack select`),
the way a person would: the program, its config and the backend login are the project's own,
nothing is passed inline. Every `up` refreshes first (`--refresh`), so an object
deleted out of band is created again, and the layer is always updated, never skipped on an
empty preview: a preview counts resource steps only, so a new layer output would never reach the
profile stacks. The CLI runs in a process group of its own (`stages.ab.pulumi_cli`): a Ctrl-C is
forwarded to it once and waited for, never left to kill it mid-update.

- Output: every line `pulumi` prints on stdout reaches `say` as it comes, prefixed with the
  stack, so a long `up` (the model download, the graph's readiness wait) shows where it is.
- Failures: every error of the Automation API (not only its CommandErrors) becomes a
  `DeployError` that names the stack and the command and ends with the last lines `pulumi`
  printed; a missing stack and a stack locked by another update say what to do, and a destroy
  that meets a lock (the CLI of an interrupted update still ending) is retried.
- Secrets: stack outputs come back as `pulumi stack output --json` prints them, a secret output
  as `[secret]`; update summaries are read without `--show-secrets`.
- Stacks of a new backend (the lab's) are made and set here too (`create`), so one run drives
  `pulumi` one way.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from pulumi.automation import (
    CommandError,
    ConcurrentUpdateError,
    ConfigValue,
    InvalidVersionError,
    LocalWorkspace,
    LocalWorkspaceOptions,
    OpMap,
    OutputMap,
    PulumiCommand,
    Stack,
    StackNotFoundError,
    create_stack,
    fully_qualified_stack_name,
    select_stack,
)

from stages.ab.pulumi_cli import DetachedPulumiCommand
from stages.errors import StageFailed

TAIL_LINES = 15
ERROR_LINES = 10
"""How much of pulumi's output a `DeployError` quotes: the diagnostics and the final error."""
SECRET = "[secret]"
"""What `pulumi stack output --json` prints for a secret output (automation/_config.py,
`_SECRET_SENTINEL`, private there)."""
COLOR = "never"
"""Plain text for `say` and for the error tails: no ANSI escapes in logs."""
LOCKED_RETRIES = 20
LOCKED_RETRY_SECONDS = 3.0
"""A destroy that meets the lock of an update still ending is tried again for up to a minute."""


class DeployError(StageFailed):
    """A `pulumi` command on one of the project's stacks failed; the message says which and why."""


@dataclass
class PulumiStacks:
    """The project's stacks, driven through Pulumi's Automation API (the `pulumi` executable)."""

    work_dir: Path
    """The Pulumi project (where Pulumi.yaml is): the clone's root in real use."""
    say: Callable[[str], None]
    """Progress lines."""
    pulumi_root: Path | None = None
    """None: `pulumi` from PATH; else `<pulumi_root>/bin/pulumi`."""
    organization: str | None = None
    """Qualify short stack names as <org>/<project>/<stack>; None: as given."""
    policy_packs: tuple[str, ...] = ()
    """CrossGuard packs every update runs with (`--policy-pack`), e.g. `policy/analyzer`."""
    layer_stack: str | None = None
    """The stack never to destroy: an abandoned run's recovery for it is an `up`."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Set for every `pulumi` command over this process's environment (the lab's local cluster:
    its KUBECONFIG, backend and passphrase); empty in real use, where the user's shell has them."""
    _command: PulumiCommand | None = field(default=None, init=False, repr=False)
    _current: str = field(default="", init=False, repr=False)
    _selected: dict[str, Stack] = field(default_factory=dict, init=False, repr=False)

    def up(self, stack: str) -> dict[str, Any]:
        """`pulumi up --refresh`; then the stack's outputs, as `pulumi stack output --json` prints
        them."""
        selected = self._select(stack)
        self.say(f"{stack}: deploying {selected.name} (pulumi up --refresh)")
        with _as_deploy_error(selected.name, "up"):
            # up() runs `stack output` twice and `stack history` after the update (_stack.py, up);
            # show_secrets=False keeps decrypted config out of that history answer.
            result = selected.up(
                color=COLOR,
                on_output=self._relay(stack),
                show_secrets=False,
                policy_packs=[str(self.work_dir / pack) for pack in self.policy_packs] or None,
                refresh=True,
            )
        self.say(f"{stack}: deployed ({_described(result.summary.resource_changes)})")
        return _as_printed(result.outputs)

    def outputs(self, stack: str) -> dict[str, Any]:
        """The stack's outputs, as `pulumi stack output --json` prints them."""
        selected = self._select(stack)
        with _as_deploy_error(selected.name, "stack output"):
            return _as_printed(selected.outputs())

    def config_value(self, stack: str, key: str) -> str | None:
        """A plain config value of the stack (`pulumi config get KEY`), None for a secret one;
        a DeployError when it cannot be read (a key not set included)."""
        selected = self._select(stack)
        with _as_deploy_error(selected.name, f"config get {key}"):
            value = selected.get_config(key)
        return None if value.secret else value.value

    def destroy(self, stack: str) -> None:
        """`pulumi destroy` of that stack (a profile stack holds only its graph and its GPUs)."""
        selected = self._select(stack)
        self.say(f"{stack}: destroying {selected.name} (pulumi destroy)")
        for attempt in range(1, LOCKED_RETRIES + 1):
            try:
                with _as_deploy_error(selected.name, "destroy"):
                    result = selected.destroy(
                        color=COLOR, on_output=self._relay(stack), show_secrets=False
                    )
                break
            except _Locked:
                if attempt == LOCKED_RETRIES:
                    raise
                self.say(f"{stack}: locked by an update still ending; trying again")
                time.sleep(LOCKED_RETRY_SECONDS)
        self.say(f"{stack}: destroyed ({_described(result.summary.resource_changes)})")

    def create(
        self, stack: str, config: Mapping[str, str], secrets: Mapping[str, str] = {}
    ) -> None:
        """`pulumi stack init` and `pulumi config set [--secret]` of each value: a stack of a new
        backend (the lab's); a user's stacks exist already and are only selected."""
        name = self.qualified(stack)
        values = {key: ConfigValue(value) for key, value in config.items()}
        values |= {key: ConfigValue(value, secret=True) for key, value in secrets.items()}
        with _as_deploy_error(name, "stack init"):
            created = create_stack(name, work_dir=str(self.work_dir), opts=self._options())
            created.set_all_config(values)
        self._selected[name] = created

    def qualified(self, stack: str) -> str:
        """The name the commands get: <org>/<project>/<stack> when an organization is set."""
        if self.organization is None or "/" in stack:
            return stack
        return fully_qualified_stack_name(self.organization, self._project_name(), stack)

    def _select(self, stack: str) -> Stack:
        """The stack, selected at its first use only: each command names it (`--stack`), so a
        select per command would start the CLI again, four times a profile's pass."""
        name = self.qualified(stack)
        self._current = stack
        if name not in self._selected:
            with _as_deploy_error(name, "stack select"):
                opts = self._options()
                self._selected[name] = select_stack(name, work_dir=str(self.work_dir), opts=opts)
        return self._selected[name]

    def _options(self) -> LocalWorkspaceOptions:
        return LocalWorkspaceOptions(pulumi_command=self._pulumi(), env_vars=dict(self.env))

    def require_cli(self) -> None:
        """Fail before anything is deployed when no usable `pulumi` is there: later, a missing CLI
        would first read as "no outputs of an earlier update"."""
        self._pulumi()

    def _project_name(self) -> str:
        workspace = LocalWorkspace(
            work_dir=str(self.work_dir), pulumi_command=self._pulumi(), env_vars=dict(self.env)
        )
        try:
            return workspace.project_settings().name
        except FileNotFoundError:
            raise DeployError(f"no Pulumi project (Pulumi.yaml) in {self.work_dir}") from None

    def _pulumi(self) -> PulumiCommand:
        # PulumiCommand runs `pulumi version` once, when it is made (_cmd.py, PulumiCommand).
        if self._command is None:
            root = None if self.pulumi_root is None else str(self.pulumi_root)
            where = f"{root}/bin/pulumi" if root else "`pulumi` on PATH"
            try:
                self._command = DetachedPulumiCommand(root, self.say, self._recovery)
            except (OSError, subprocess.SubprocessError, InvalidVersionError) as error:
                raise DeployError(
                    f"cannot use the Pulumi CLI ({where}): {error}; install a Pulumi CLI 3.x "
                    "(https://www.pulumi.com/docs/install/), or `make engine` for the pinned "
                    "3.274.1 (docs/engine.md)"
                ) from None
        return self._command

    def _recovery(self) -> str:
        """What brings the stack the run was working on back, once its `pulumi` has exited."""
        stack, name = self._current, self.qualified(self._current)
        if stack == self.layer_stack:
            return f"once `pulumi` has exited, `pulumi up --stack {name}` finishes the layer"
        return f"once `pulumi` has exited, `pulumi destroy --yes --stack {name}` frees its GPUs"

    def _relay(self, stack: str) -> Callable[[str], None]:
        def relay(line: str) -> None:
            if line.strip():
                self.say(f"{stack} | {line}")

        return relay


class _Locked(DeployError):
    """The stack is locked by another update."""


@contextmanager
def _as_deploy_error(stack: str, command: str) -> Iterator[None]:
    """Every error of the Automation API as a `DeployError`: its CommandErrors
    (automation/errors.py) with pulumi's last lines, anything else (an event stream that broke,
    a result it could not parse) with its type, never a traceback. Interrupts pass."""
    try:
        yield
    except CommandError as error:
        raise _deploy_error(stack, command, error) from None
    except DeployError:
        raise
    except Exception as error:  # noqa: BLE001 -- the SDK raises more than CommandError
        raise DeployError(
            f"`pulumi {command}` of stack {stack} failed: {type(error).__name__}: {error}"
        ) from None


def _deploy_error(stack: str, command: str, error: CommandError) -> DeployError:
    """Which stack, which command, what to do, and the end of pulumi's output."""
    # Only `stack select` names the stack itself: later, "no stack named" is about another one
    # (a stack reference), which create_command_error classifies the same way.
    if isinstance(error, StackNotFoundError) and command == "stack select":
        return DeployError(
            f"stack {stack} does not exist: create it with `pulumi stack init {stack}` in the "
            "project directory and set its config (README, Quick start)"
        )
    if isinstance(error, ConcurrentUpdateError):
        return _Locked(
            f"`pulumi {command}` of stack {stack}: another update of this stack is running; wait "
            "for it to end (if none is, a crashed one left the lock: `pulumi cancel --stack "
            f"{stack}`)\n{_output_tail(error)}"
        )
    errors = _error_lines(error)
    listed = "its errors:\n" + "\n".join(errors) + "\n" if errors else ""
    return DeployError(
        f"`pulumi {command}` of stack {stack} failed; {listed}the end of its output:\n"
        + _output_tail(error)
    )


def _output_lines(error: CommandError) -> list[str]:
    """What pulumi printed, stdout then stderr, blank lines left out."""
    # A CommandError's text is its CommandResult's: "\n code: N\n stdout: ...\n stderr: ..."
    # (automation/errors.py, CommandError.__init__; automation/_cmd.py, CommandResult.__str__).
    head, _, stderr = str(error).rpartition("\n stderr: ")
    _, _, stdout = head.partition("\n stdout: ")
    return [line for line in f"{stdout}\n{stderr}".splitlines() if line.strip()]


def _output_tail(error: CommandError) -> str:
    """The last lines pulumi printed (usually its final `error:` lines)."""
    return "\n".join(_output_lines(error)[-TAIL_LINES:])


def _error_lines(error: CommandError) -> list[str]:
    """Each distinct `error:` line of pulumi's diagnostics, in order, at most ERROR_LINES: the
    tail alone may hold only the program's traceback when the engine cancelled it mid-way."""
    found = dict.fromkeys(
        line.strip() for line in _output_lines(error) if line.strip().startswith("error:")
    )
    return list(found)[:ERROR_LINES]


def _described(changes: OpMap | None) -> str:
    """Resource counts by operation (`same` included), of the operations that did occur."""
    # From the engine's JSON (events.py, SummaryEvent.from_json; _stack.py, history): the keys
    # are plain strings, typed OpType, a str enum whose values they are (OpType.SAME == "same").
    as_json = cast(Mapping[str, int], changes or {})
    return ", ".join(f"{count} {op}" for op, count in as_json.items() if count) or "no resources"


def _as_printed(outputs: OutputMap) -> dict[str, Any]:
    """Plain JSON values as `pulumi stack output --json` prints them: secrets stay `[secret]`."""
    return {key: SECRET if output.secret else output.value for key, output in outputs.items()}
