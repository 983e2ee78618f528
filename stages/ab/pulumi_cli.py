"""The `pulumi` CLI under the Automation API, so that Ctrl-C never orphans a graph.

The SDK's `PulumiCommand.run` starts the CLI in our process group and reads it through pipes. A
Ctrl-C then reaches both at once: the CLI starts cancelling while the SDK's output thread dies on
its closed pipe, the CLI dies on its closed stdout mid-cancel, and the stack is left locked, the
graph deployed (seen on the real tier; `tests/real/test_ab_interrupts.py` now holds it). Here:

- the CLI leads a process group of its own, so a Ctrl-C at the terminal (sent to the foreground
  group), or a SIGTERM to ours (the stage commands turn it into an interrupt), reaches this
  process only. A group, not a session: the kernel schedules each session as a unit of its own
  (autogroup; `stages.incluster.processes`);
- its output goes to files that a thread follows, so the CLI never writes to a closed pipe, even
  after this process has gone;
- on the first interrupt, an `up` or `preview` gets exactly one SIGINT of its own (the CLI
  cancels: the provider stops waiting and the state is written), a `destroy` none (it is how the
  graph comes down); either way the command is waited for, at most `CANCEL_WAIT_SECONDS`, and
  then the interrupt goes on (the orchestrator then takes the graph down);
- a second interrupt while waiting raises `AbandonRun`, which exits at once with the one command
  that recovers.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TextIO

from pulumi.automation import CommandResult, PulumiCommand
from pulumi.automation.errors import create_command_error

from stages.errors import AbandonRun

CANCEL_WAIT_SECONDS = 300.0
"""How long an interrupted command may take to cancel (or a destroy to finish) before the run
stops waiting; a cancelled `up` took under a second on the real tier."""
_FOLLOW_SECONDS = 0.05
_INTERRUPTIBLE = frozenset({"up", "preview", "refresh"})
"""Commands a first interrupt cancels; anything else (destroy, stack output, ...) is let finish."""

OnOutput = Callable[[str], None]


class DetachedPulumiCommand(PulumiCommand):
    """`PulumiCommand` whose commands run in a process group of their own (see the module
    docstring)."""

    def __init__(
        self, root: str | None, on_interrupt: Callable[[str], None], recovery: Callable[[], str]
    ) -> None:
        super().__init__(root=root)
        self.on_interrupt = on_interrupt
        """Told what happens after the first interrupt."""
        self.recovery = recovery
        """The command that recovers when the run is abandoned (second interrupt)."""

    def run(
        self,
        args: list[str],
        cwd: str,
        additional_env: Mapping[str, str],
        on_output: OnOutput | None = None,
        on_error: OnOutput | None = None,
    ) -> CommandResult:
        argv = args if "--non-interactive" in args else ["--non-interactive", *args]
        env = {**os.environ, **additional_env, "PULUMI_AUTOMATION_API": "true"}
        command = next((word for word in argv if not word.startswith("-")), "")
        with tempfile.TemporaryDirectory(prefix="pulumi-output-") as folder:
            out, err = Path(folder) / "stdout", Path(folder) / "stderr"
            with out.open("w") as out_sink, err.open("w") as err_sink:
                process = subprocess.Popen(
                    [self.command, *argv],
                    stdin=subprocess.DEVNULL,
                    stdout=out_sink,
                    stderr=err_sink,
                    cwd=cwd,
                    env=env,
                    process_group=0,
                )
            followers = [_Follower(out, on_output), _Follower(err, on_error)]
            try:
                code = self._wait(process, command)
            finally:  # also before an interrupt goes on: what the CLI printed comes first
                try:
                    stdout, stderr = (follower.finish() for follower in followers)
                except KeyboardInterrupt:  # only ever after the command ended: a second one
                    raise AbandonRun(self.recovery()) from None
        result = CommandResult(stdout=stdout, stderr=stderr, code=code)
        if code != 0:
            raise create_command_error(result)
        return result

    def _wait(self, process: subprocess.Popen[bytes], command: str) -> int:
        try:
            return process.wait()
        except KeyboardInterrupt:
            pass
        try:  # from here on, another interrupt abandons the run, wherever it lands
            if command in _INTERRUPTIBLE:
                with contextlib.suppress(ProcessLookupError):  # it has just ended
                    os.killpg(process.pid, signal.SIGINT)
                doing = "is cancelling"
            else:
                doing = "is let finish"
            self.on_interrupt(
                f"interrupted: `pulumi {command}` {doing} (at most {CANCEL_WAIT_SECONDS:.0f} s); "
                "Ctrl-C again exits at once"
            )
            process.wait(timeout=CANCEL_WAIT_SECONDS)
        except KeyboardInterrupt:
            raise AbandonRun(self.recovery()) from None
        except subprocess.TimeoutExpired:
            raise AbandonRun(
                f"`pulumi {command}` did not end within {CANCEL_WAIT_SECONDS:.0f} s of the "
                f"interrupt (it still runs, pid {process.pid}); {self.recovery()}"
            ) from None
        raise KeyboardInterrupt


class _Follower:
    """Follows a file the CLI writes, line by line, to a callback; keeps every line."""

    def __init__(self, path: Path, callback: OnOutput | None) -> None:
        self.lines: list[str] = []
        self._done = threading.Event()
        self._callback = callback
        self._stream: TextIO = path.open()
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        pending = ""
        while True:
            exited = self._done.is_set()  # before the read: then the read sees all it wrote
            chunk = self._stream.readline()
            if chunk:
                pending += chunk
                if pending.endswith("\n"):
                    self._emit(pending)
                    pending = ""
                continue
            if exited:
                if pending:
                    self._emit(pending)
                return
            time.sleep(_FOLLOW_SECONDS)

    def _emit(self, line: str) -> None:
        stripped = line.rstrip()
        self.lines.append(stripped)
        if self._callback is not None:
            self._callback(stripped)

    def finish(self) -> str:
        """Once the CLI has exited: read to the end, and return everything, as the SDK would."""
        self._done.set()
        self._thread.join()
        self._stream.close()
        return "\n".join(self.lines)
