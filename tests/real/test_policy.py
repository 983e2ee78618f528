"""The policy pack under the real engine: `pulumi preview --policy-pack policy/analyzer` passes on
every shipped stack, and fails on a violation planted in the project copy's program.

`policy/analyzer` is the pack as an executable analyzer, which the CLI starts itself (no language
host in between): the local tier's Python language host (sdk v3.68.0) cannot run a pack directory
(docs/engine.md, "What the old Python language host cannot do")."""

from __future__ import annotations

import re

from testenv.local_stacks import LAYER_SITE, SITE, LocalStacks
from tests.real.support import LAYER_SECRETS

PACK = "policy/analyzer"
PACK_NAME = "cosmos3-nano-reasoner-guardrails"


def test_every_shipped_stack_passes_the_pack(stacks: LocalStacks) -> None:
    stacks.configure("dev", LAYER_SITE, LAYER_SECRETS)
    stacks.configure("shared", LAYER_SITE, LAYER_SECRETS)
    stacks.run("up", "--yes", "--stack", "shared", "--policy-pack", PACK)
    for profile in ("round-robin", "session-affinity"):
        stacks.configure(profile, SITE)
    for stack in ("dev", "shared", "round-robin", "session-affinity"):
        preview = stacks.run("preview", "--stack", stack, "--policy-pack", PACK)
        assert re.search(rf"Policies:\s+✅ {PACK_NAME}@v0\.1\.0", preview.stdout) or (
            PACK_NAME in preview.stdout
        ), preview.stdout


def test_a_planted_violation_fails_the_preview(stacks: LocalStacks) -> None:
    manifest = stacks.project / "components" / "graph_manifest.py"
    source = manifest.read_text()
    planted = source.replace('object_annotations(skipAwait="true")', "object_annotations()")
    assert planted != source, "the graph's readiness annotation moved: plant the violation anew"
    manifest.write_text(planted)
    stacks.configure("dev", LAYER_SITE, LAYER_SECRETS)

    preview = stacks.run("preview", "--stack", "dev", "--policy-pack", PACK, check=False)

    assert preview.returncode != 0
    text = preview.stdout + preview.stderr
    assert "graph-readiness-wait" in text and "[mandatory]" in text, text
