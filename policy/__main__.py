"""The pack's entry point: `policy/analyzer` runs it (`--policy-pack policy/analyzer`), and so does a
modern Python language host for `--policy-pack policy` (as `python policy/`).

Constructing the PolicyPack starts the analyzer's gRPC server and blocks, so it happens only
here; tests import `policy.rules` instead. The CLI puts this directory first on sys.path, hence
the top-level import of `rules`.
"""

import sys
from pathlib import Path

# The project's root after the pack's own packages: `common`, the standard-library floor the
# policies share with the program (the one rule of a secret's name, the credential shapes).
sys.path.append(str(Path(__file__).resolve().parents[1]))

from pulumi_policy import EnforcementLevel, PolicyPack
from rules import POLICIES

PolicyPack(
    name="cosmos3-nano-reasoner-guardrails",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=POLICIES,
)
