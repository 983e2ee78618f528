#!/usr/bin/env python3
"""A stand-in for the `pulumi` executable, for the tests of `stages.ab.pulumi_stacks`: NOT Pulumi.

No Pulumi CLI can be installed on our machines, and the Automation API only shells out to one, so
the tests give it this script as `<root>/bin/pulumi` (conftest.py writes it there with this
interpreter on the shebang line). It answers exactly the command lines that the Automation API of
pulumi 3.272 issues for `select_stack` and `Stack.preview/up/destroy/outputs` of a local program:

    version
    --non-interactive stack select --stack S
    --non-interactive preview --color C --exec-kind auto.local --event-log L [--policy-pack P]
                      --stack S
    --non-interactive up --yes --skip-preview --color C --exec-kind auto.local [--event-log L]
                      [--policy-pack P] --stack S
    --non-interactive destroy --skip-preview --yes --color C --exec-kind auto.local
                      [--event-log L] --stack S
    --non-interactive stack output --json [--show-secrets] --stack S
    --non-interactive stack history --json [--show-secrets] [--page-size N --page P] --stack S

(flags in any order, `--flag=value` too). It appends every command line, as JSON, to the file
named by $FAKE_PULUMI_LOG, then refuses (exit status 255, an `error: ...` line on stderr, as the
CLI does) any command, flag or missing required flag outside that list, so an unexpected flag
fails a test instead of passing silently. $FAKE_PULUMI_STATE names a JSON file of per-stack state
that the tests script and read back (conftest.py, `FakePulumi.add_stack` and `FakePulumi.stack`):

    {"version": "3.272.0", "stacks": {"<name as passed to --stack>": {
        "resources": ["<type> <name>", ...], "deployed": false, "pending": {"update": 1},
        "outputs": {...}, "secretOutputs": [...], "fail": {"up": "<message>"}, "locked": false,
        "history": [...]}}}

`preview`/`up`/`destroy` print what the CLI prints without a terminal (a header naming the stack,
one line per resource step, Diagnostics on failure, Resources:, Duration:) and send engine events
(prelude, diagnostic on failure, summary with `resourceChanges`, cancel) to `--event-log`: over
gRPC (`pulumirpc.Events/StreamEvents`) to a `tcp://` address, as CLIs after 3.205 are asked to, or
as JSON lines to a file for an older `version`.

Not covered: any other command (config, refresh, import, stack init/rm/ls, whoami, ...), inline
programs (`--client`, `--exec-kind auto.inline`), commands without `--stack` (no selected stack is
kept), non-JSON `stack output`, resource-level events, real programs, backends or secrets
encryption.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOG_ENV = "FAKE_PULUMI_LOG"
STATE_ENV = "FAKE_PULUMI_STATE"
DEFAULT_VERSION = "3.272.0"
EXIT_ERROR = 255  # the CLI's main exits with -1 on every error
SECRET = "[secret]"
CONFLICT = "[409] Conflict: Another update is currently in progress."
SYMBOLS = {"create": "+", "update": "~", "delete": "-", "replace": "+-", "same": " "}
DOING = {"create": "creating", "update": "updating", "delete": "deleting", "replace": "replacing"}
DONE = {"create": "created", "update": "updated", "delete": "deleted", "replace": "replaced"}
HEADERS = {"preview": "Previewing update", "update": "Updating", "destroy": "Destroying"}
UPDATE_FLAGS = frozenset({"--stack", "--color", "--exec-kind", "--event-log"})
POLICY_FLAGS = frozenset({"--policy-pack"})
"""`Stack.preview/up(policy_packs=[...])`: one `--policy-pack DIR` each (one pack is covered)."""
GO_AHEAD = frozenset({"--yes", "--skip-preview"})
NOT_INTERACTIVE = (
    "--yes or --skip-preview must be passed in to proceed when running in non-interactive mode"
)


class Refused(Exception):
    """A command line the CLI (or this stand-in) would not run; the message is the stderr line."""


@dataclass(frozen=True)
class Grammar:
    switches: frozenset[str] = frozenset()
    valued: frozenset[str] = frozenset()
    one_of: frozenset[str] = frozenset()
    """At least one of these must be given, else `missing` is the error."""
    missing: str = ""


GRAMMARS: dict[tuple[str, ...], Grammar] = {
    ("version",): Grammar(),
    ("stack", "select"): Grammar(valued=frozenset({"--stack"})),
    ("preview",): Grammar(valued=UPDATE_FLAGS | POLICY_FLAGS),
    # Without a terminal the CLI will not update unless told to go ahead.
    ("up",): Grammar(GO_AHEAD, UPDATE_FLAGS | POLICY_FLAGS, GO_AHEAD, NOT_INTERACTIVE),
    ("destroy",): Grammar(GO_AHEAD, UPDATE_FLAGS, GO_AHEAD, NOT_INTERACTIVE),
    ("stack", "output"): Grammar(
        frozenset({"--json", "--show-secrets"}),
        frozenset({"--stack"}),
        frozenset({"--json"}),
        "fake pulumi: only `stack output --json` is covered",
    ),
    ("stack", "history"): Grammar(
        frozenset({"--json", "--show-secrets"}),
        frozenset({"--stack", "--page-size", "--page"}),
        frozenset({"--json"}),
        "fake pulumi: only `stack history --json` is covered",
    ),
}
CHOICES = {"--color": {"always", "never", "raw", "auto"}, "--exec-kind": {"auto.local"}}


def parse(args: list[str]) -> tuple[tuple[str, ...], dict[str, str | bool]]:
    """The subcommand and its flags, or `Refused` for anything outside GRAMMARS."""
    args = [arg for arg in args if arg != "--non-interactive"]  # a global flag, valid anywhere
    words = tuple(arg for arg in args[:2] if not arg.startswith("-"))
    command = next((words[:n] for n in (2, 1) if words[:n] in GRAMMARS), None)
    if command is None:
        raise Refused(f'unknown command "{" ".join(words)}" for "pulumi"')
    flags = _flags(args[len(command) :], GRAMMARS[command])
    if command != ("version",) and "--stack" not in flags:
        raise Refused("fake pulumi: --stack is required (this stand-in keeps no selected stack)")
    for name, allowed in CHOICES.items():
        if name in flags and flags[name] not in allowed:
            raise Refused(f"invalid argument {flags[name]!r} for {name} (fake pulumi: {allowed})")
    return command, flags


def _flags(args: list[str], grammar: Grammar) -> dict[str, str | bool]:
    flags: dict[str, str | bool] = {}
    rest = iter(args)
    for arg in rest:
        name, has_value, value = arg.partition("=")
        if not name.startswith("--"):
            raise Refused(f"unexpected argument {arg!r}")
        if name in grammar.switches and not has_value:
            flags[name] = True
        elif name in grammar.valued:
            flags[name] = value if has_value else next(rest, "")
            if not flags[name]:
                raise Refused(f"flag needs an argument: {name}")
        else:
            raise Refused(f"unknown flag: {name}")
    if grammar.one_of and not grammar.one_of & flags.keys():
        raise Refused(grammar.missing)
    return flags


class Fake:
    """One invocation: the state file, the stack named by --stack, the flags."""

    def __init__(self, flags: dict[str, str | bool]) -> None:
        self.flags = flags
        self.path = Path(os.environ[STATE_ENV])
        self.state: dict[str, Any] = json.loads(self.path.read_text())
        self.name = str(flags["--stack"])
        if self.name not in self.state["stacks"]:
            raise Refused(f"no stack named '{self.name}' found")
        self.stack: dict[str, Any] = self.state["stacks"][self.name]
        self.events: list[dict[str, Any]] = []

    def save(self) -> None:
        scratch = self.path.with_suffix(".tmp")
        scratch.write_text(json.dumps(self.state, indent=2))
        scratch.replace(self.path)

    def changes(self, kind: str) -> dict[str, int]:
        """What this preview, up or destroy does, by operation (the engine's resourceChanges)."""
        resources, deployed = len(self.stack["resources"]), self.stack["deployed"]
        if kind == "destroy":
            return {"delete": resources} if deployed else {}
        if not deployed:
            return {"create": resources}
        pending = {op: count for op, count in self.stack.get("pending", {}).items() if count}
        same = resources - sum(pending.values())
        return {**pending, **({"same": same} if same else {})}

    def run_update(self, kind: str) -> int:
        """Print the update as the CLI does, send its events, record it; the exit status."""
        if self.stack.get("locked"):
            raise Refused(CONFLICT)
        changes = self.changes(kind)
        failure = self.stack.get("fail", {}).get("up" if kind == "update" else kind)
        print(f"{HEADERS[kind]} ({self.name})\n", flush=True)
        self.event("preludeEvent", {"config": {}})
        self.print_steps(kind, changes, failure)
        if failure:
            self.diagnostics(failure)
            changes = {}
        elif kind == "update":
            self.print_outputs()
        print(f"Resources:\n{_resource_lines(kind, changes)}\n")
        if kind != "preview":
            print("Duration: 1s\n")
            self.record(kind, "failed" if failure else "succeeded", changes)
        self.event("summaryEvent", _summary(changes))
        self.event("cancelEvent", {})
        self.send_events()
        return EXIT_ERROR if failure else 0

    def print_steps(self, kind: str, changes: dict[str, int], failure: str | None) -> None:
        ops = [op for op, count in changes.items() for _ in range(count)]
        for resource, op in list(zip(self.stack["resources"], ops))[: 1 if failure else None]:
            if op == "same":
                continue
            if kind == "preview":
                step = op
            else:
                step = f"{DOING[op]} failed" if failure else f"{DONE[op]} (1s)"
            print(f" {SYMBOLS[op]:<2} {resource} {step}", flush=True)

    def print_outputs(self) -> None:
        if not self.stack.get("outputs"):
            return
        print("Outputs:")
        for key, value in self.stack["outputs"].items():
            shown = SECRET if key in self.stack.get("secretOutputs", []) else value
            print(f"    {key}: {json.dumps(shown)}")
        print()

    def diagnostics(self, message: str) -> None:
        print(f"Diagnostics:\n  pulumi:pulumi:Stack ({self.name.split('/')[-1]}):")
        for line in message.splitlines():
            print(f"    error: {line}")
        print()
        self.event("diagnosticEvent", {"message": message, "color": "never", "severity": "error"})

    def record(self, kind: str, result: str, changes: dict[str, int]) -> None:
        history = self.stack.setdefault("history", [])
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
        history.append(
            {
                "version": len(history) + 1,
                "kind": kind,
                "startTime": now,
                "endTime": now,
                "message": "",
                "environment": {"exec.kind": "auto.local"},
                "config": {},
                "result": result,
                "resourceChanges": changes,
            }
        )

    def event(self, kind: str, body: dict[str, Any]) -> None:
        sequence = len(self.events) + 1
        self.events.append({"sequence": sequence, "timestamp": int(time.time()), kind: body})

    def send_events(self) -> None:
        target = self.flags.get("--event-log")
        if not isinstance(target, str):
            return
        lines = [json.dumps(event) for event in self.events]
        if target.startswith("tcp://"):
            _stream_over_grpc(target.removeprefix("tcp://"), lines)
        else:
            with open(target, "a", encoding="utf-8") as log:
                log.writelines(line + "\n" for line in lines)


def _stream_over_grpc(address: str, lines: list[str]) -> None:
    # The Automation API's events server (automation/_stack.py, _setup_event_log, _EventsServicer).
    import grpc  # type: ignore[import-untyped]  # grpcio ships no type information
    from pulumi.runtime.proto import events_pb2, events_pb2_grpc

    with grpc.insecure_channel(address) as channel:
        stub = events_pb2_grpc.EventsStub(channel)
        requests = [events_pb2.EventRequest(event=line) for line in lines]
        stub.StreamEvents(iter(requests), timeout=30)


def _resource_lines(kind: str, changes: dict[str, int]) -> str:
    lines = []
    for op, count in changes.items():
        if op == "same":
            lines.append(f"    {count} unchanged")
        elif kind == "preview":
            lines.append(f"    {SYMBOLS[op]} {count} to {op}")
        else:
            lines.append(f"    {SYMBOLS[op]} {count} {DONE[op]}")
    return "\n".join(lines)


def _summary(changes: dict[str, int]) -> dict[str, Any]:
    return {"maybeCorrupt": False, "durationSeconds": 1, "resourceChanges": changes}


def stack_output(fake: Fake) -> int:
    outputs = fake.stack.get("outputs", {}) if fake.stack["deployed"] else {}
    if not fake.flags.get("--show-secrets"):
        secret = set(fake.stack.get("secretOutputs", []))
        outputs = {key: SECRET if key in secret else value for key, value in outputs.items()}
    print(json.dumps(outputs, indent=2))
    return 0


def stack_history(fake: Fake) -> int:
    updates = list(reversed(fake.stack.get("history", [])))  # newest first, as the CLI lists them
    if "--page-size" in fake.flags:
        size, page = int(fake.flags["--page-size"]), int(fake.flags.get("--page", 1))
        updates = updates[(page - 1) * size : page * size]
    print(json.dumps(updates, indent=2))
    return 0


def update(fake: Fake, kind: str) -> int:
    status = fake.run_update(kind)
    if status == 0 and kind != "preview":
        fake.stack.update(deployed=kind == "update", pending={})
    if status == 0 and kind == "destroy":
        print(
            "The resources in the stack have been deleted, but the history and configuration "
            "associated with the stack are still maintained.\nIf you want to remove the stack "
            f"completely, run `pulumi stack rm {fake.name}`."
        )
    fake.save()
    return status


def run(args: list[str]) -> int:
    command, flags = parse(args)
    if command == ("version",):
        version = DEFAULT_VERSION
        if os.environ.get(STATE_ENV):
            version = json.loads(Path(os.environ[STATE_ENV]).read_text()).get("version", version)
        print(f"v{version}")
        return 0
    fake = Fake(flags)
    handlers: dict[tuple[str, ...], Callable[[], int]] = {
        ("stack", "select"): lambda: 0,
        ("stack", "output"): lambda: stack_output(fake),
        ("stack", "history"): lambda: stack_history(fake),
        ("preview",): lambda: update(fake, "preview"),
        ("up",): lambda: update(fake, "update"),
        ("destroy",): lambda: update(fake, "destroy"),
    }
    return handlers[command]()


def main() -> int:
    args = sys.argv[1:]
    if os.environ.get(LOG_ENV):
        with open(os.environ[LOG_ENV], "a", encoding="utf-8") as log:
            log.write(json.dumps({"args": args, "cwd": os.getcwd()}) + "\n")
    try:
        return run(args)
    except Refused as refusal:
        print(f"error: {refusal}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
