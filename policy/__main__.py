"""The pack's entry point: `policy/analyzer` runs it (`--policy-pack policy/analyzer`), and so does a
modern Python language host for `--policy-pack policy` (as `python policy/`).

Constructing the PolicyPack starts the analyzer's gRPC server and blocks, so it happens only
here; tests import `policy.rules` instead. The CLI puts this directory first on sys.path, hence
the top-level import of `rules`.
"""

from pulumi_policy import EnforcementLevel, PolicyPack
from rules import POLICIES

PolicyPack(
    name="cosmos3-nano-reasoner-guardrails",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=POLICIES,
)
