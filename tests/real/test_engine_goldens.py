"""The golden files only the engine can write (tools/engine_goldens.py): every shipped stack's
URNs, and the pull-request diff of a TTL change, as the real CLI prints them now."""

from __future__ import annotations

from testenv.local_stacks import LocalStacks
from tools import engine_goldens


def test_the_engines_goldens_are_the_committed_ones(stacks: LocalStacks) -> None:
    engine_goldens.deploy_shipped_stacks(stacks)

    drift = engine_goldens.drift(engine_goldens.engine_files(stacks))

    assert drift == "", (
        "the engine's output drifted from manifests/engine/ (a changed URN needs an alias, "
        "decision 0011); after an intended change run `python -m tools.engine_goldens --update`"
        f"\n{drift}"
    )
