"""README's Quick start, run as written against the real CLI and the local cluster.

Only what the local tier needs is added: the placeholders get the local cluster's context and
class, the NGC key is a fake, the backend is a file folder with a passphrase (fixtures), and the
two lines that need a serving frontend are left out (kwok serves nothing). Then what a user does
next: a second preview shows no change, and `pulumi destroy` stops at the protected layer guard.
"""

from __future__ import annotations

import json
import re

from testenv import cluster as local
from testenv.cluster import objects
from testenv.local_stacks import LocalStacks
from tests.real.readme import section_block

SET_UP_BY_MAKE = ["make venv", "make policy-venv"]
NEEDS_A_FRONTEND = "curl -fsS http://localhost:8000/v1/models"


def quick_start() -> list[str]:
    commands = section_block("### Quick start")
    assert commands[:2] == SET_UP_BY_MAKE, "the real tier's fixtures stand for these two lines"
    assert commands[-1] == NEEDS_A_FRONTEND
    return commands[2:-1]


def local_values(command: str) -> str:
    for placeholder in ("<your-context>", "<your-rwx-class>", "NGC_API_KEY=..."):
        command = command.replace(placeholder, _LOCAL[placeholder])
    return command


_LOCAL = {
    "<your-context>": objects.CONTEXT,
    "<your-rwx-class>": objects.RWX_CLASS,
    # The fixture exports a fake key as NGC_API_KEY; this line must not replace it with "...".
    "NGC_API_KEY=...": 'NGC_API_KEY="$NGC_API_KEY"',
}


def test_the_quick_start_deploys_dev_then_the_layered_stacks(
    stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    printed = [(command, stacks.shell(local_values(command)).stdout) for command in quick_start()]

    ups = [out for command, out in printed if command == "pulumi up --policy-pack policy/analyzer"]
    first_up, shared_up = ups
    assert re.search(r"Resources:\s+\+ 13 created", shared_up), shared_up
    assert re.search(r"Resources:\s+\+ 17 created", first_up), first_up
    graphs = json.loads(local_cluster.kubectl("get", "dynamographdeployments", "-A", "-o", "json"))
    ready = {
        (item["metadata"]["namespace"], item["metadata"]["name"]): _ready(item)
        for item in graphs["items"]
    }
    assert ready == {
        ("cosmos3-dev", "cosmos3-nano-reasoner-agg-h200-round-robin"): "True",
        ("cosmos3-nano-reasoner", "cosmos3-nano-reasoner-agg-h200-round-robin"): "True",
    }
    forward = printed[-1][1].strip()
    assert printed[-1][0] == "pulumi stack output portForwardCommand --stack round-robin"
    assert forward == (
        f"kubectl --context {objects.CONTEXT} -n cosmos3-nano-reasoner port-forward "
        "service/cosmos3-nano-reasoner-agg-h200-round-robin-frontend 8000:8000"
    )


def test_a_second_preview_changes_nothing_and_destroy_stops_at_the_protected_layer(
    stacks: LocalStacks, local_cluster: local.LocalCluster
) -> None:
    for command in quick_start()[:7]:  # dev only: the key, its config, preview, up
        stacks.shell(local_values(command))

    again = stacks.run("preview", "--stack", "dev").stdout
    assert re.search(r"Resources:\s+\d+ unchanged", again) and "to create" not in again, again
    job = json.loads(
        local_cluster.kubectl(
            "get", "job", "cosmos3-nano-reasoner-model-download", "-n", "cosmos3-dev", "-o", "json"
        )
    )
    (owner,) = job["spec"]["template"]["spec"]["initContainers"]
    assert owner["name"] == "cache-owner" and owner["securityContext"]["runAsUser"] == 0
    assert owner["args"] == ["/shared-model-cache", "1000:1000"]

    destroyed = stacks.run("destroy", "--stack", "dev", "--yes", check=False)
    assert destroyed.returncode != 0
    text = " ".join((destroyed.stdout + destroyed.stderr).split())  # the CLI wraps long lines
    guard = (
        "urn:pulumi:dev::cosmos3-nano-reasoner::cosmos3:recipe:Recipe$cosmos3:recipe:LayerGuard"
        "$kubernetes:core/v1:ConfigMap::cosmos3-layer-guard"
    )
    assert f'resource "{guard}" cannot be deleted because it is protected' in text, text
    # The destroy's own preview fails, so nothing at all was deleted.
    left = local_cluster.kubectl("get", "dgd,job,secret,pvc", "-n", "cosmos3-dev", "-o", "name")
    assert {
        "dynamographdeployment.nvidia.com/cosmos3-nano-reasoner-agg-h200-round-robin",
        "job.batch/cosmos3-nano-reasoner-model-download",
        "secret/ngc-api-secret",
        "persistentvolumeclaim/shared-model-cache",
    } <= set(left.split())


def _ready(graph: dict[str, object]) -> str:
    status = graph.get("status") or {}
    assert isinstance(status, dict)
    for condition in status.get("conditions", []):
        if condition["type"] == "Ready":
            return str(condition["status"])
    return "absent"
