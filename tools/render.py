"""Offline render: the exact Kubernetes objects a stack would create, without CLI or cluster.

    python -m tools.render --stack dev --example-site --out build/render/dev

Runs the real program under Pulumi's mock runtime with the stack's config (Pulumi.yaml defaults,
then Pulumi.<stack>.yaml, then --set), writes one YAML file per object and the stack outputs as
JSON. Secrets are never read: the program gets a placeholder secret and every secret value is
masked in what is written, as is anything shaped like a credential (`common.credentials`).

`--out` is the render's own folder (`common.output_folders`): a new or empty one, or one it
rendered into before. It replaces only the files it wrote there, never through a link; anything
else is refused, and so is a marker listing a name outside the folder.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import yaml
from pulumi import RunError

from common.credentials import mask_values, masked_output
from common.output_folders import claimed_folder, os_error_reason
from common.parsers import CommandParser
from tools.offline import (
    ProgramRun,
    run_program,
    shared_layer_outputs,
    shared_stack_name,
    unwrap_secrets,
)
from tools.stack_files import SHIPPED_STACKS, example_site_for, placeholder_secrets

KIND_ORDER = (
    "Namespace",
    "Secret",
    "PersistentVolumeClaim",
    "Job",
    "ConfigMap",
    "DynamoGraphDeployment",
    "PodDisruptionBudget",
)
WRITER = "python -m tools.render"
OUTPUTS_FILE = "outputs.json"


def render_stack(
    stack: str, overrides: dict[str, Any]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The objects (secrets masked, in apply order) and the outputs of one stack; a profile
    stack reads the shipped shared layer's outputs under the `sharedStack` it names."""
    asyncio.set_event_loop(asyncio.new_event_loop())
    layer = shared_layer_outputs(layer_stack=shared_stack_name(stack, overrides))
    run = run_program(stack, overrides, secrets=placeholder_secrets(stack), stack_outputs=layer)
    return rendered_objects(run), run.exports


def rendered_objects(run: ProgramRun) -> list[dict[str, Any]]:
    objects = [
        canonical(mask_values(unwrap_secrets(r.raw_inputs, mask=True)), top_level=True)
        for r in run.kubernetes_objects()
    ]
    rank = {kind: index for index, kind in enumerate(KIND_ORDER)}  # other kinds come last
    return sorted(objects, key=lambda o: (rank.get(o["kind"], len(rank)), o["metadata"]["name"]))


TOP_LEVEL_ORDER = ("apiVersion", "kind", "metadata", "type", "stringData", "spec")


def canonical(value: Any, top_level: bool = False) -> Any:
    """Stable, readable order (the wire format loses key order) and integral numbers (the mock
    runtime carries numbers as protobuf doubles; manifests want 3, not 3.0)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [canonical(item) for item in value]
    if not isinstance(value, dict):
        return value
    order = TOP_LEVEL_ORDER if top_level else ("name",)
    keys = sorted(value, key=lambda key: (order.index(key) if key in order else len(order), key))
    return {key: canonical(value[key]) for key in keys}


def object_file_name(index: int, manifest: dict[str, Any]) -> str:
    return f"{index:02d}-{manifest['kind'].lower()}-{manifest['metadata']['name']}.yaml"


def render_files(objects: list[dict[str, Any]], outputs: dict[str, Any]) -> dict[str, bytes]:
    """The files of a render, by name: one YAML file per object, then the outputs."""
    files = {
        object_file_name(index, manifest): yaml.safe_dump(manifest, sort_keys=False, width=100)
        for index, manifest in enumerate(objects, start=1)
    }
    files[OUTPUTS_FILE] = json.dumps(mask_values(outputs), indent=2, sort_keys=True) + "\n"
    return {name: text.encode() for name, text in files.items()}


def write_render(
    out: Path,
    objects: list[dict[str, Any]],
    outputs: dict[str, Any],
    writer: str = WRITER,
    option: str = "--out",
) -> list[Path]:
    """The render's files in `out`, which must be the writer's own folder; the files it wrote
    there before and no longer writes are removed, nothing else is touched."""
    with claimed_folder(out, writer, option, tracks_files=True) as owned:
        return owned.replace_files(render_files(objects, outputs))


def parse_set(items: list[str]) -> dict[str, Any]:
    """`--set key=value` items as config overrides; ValueError names a malformed item."""
    overrides: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--set {item!r}: write key=value, e.g. --set kubeContext=my-cluster")
        overrides[key] = value
    return overrides


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(prog="python -m tools.render", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", required=True, choices=SHIPPED_STACKS)
    parser.add_argument(
        "--out", type=Path, required=True, help="directory for the YAML and outputs.json"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="config as `pulumi config set` would",
    )
    parser.add_argument(
        "--example-site",
        action="store_true",
        help="fill site values the stack file lacks (kubeContext, modelCacheStorageClass) with examples",
    )
    with masked_output():
        args = parser.parse_args(argv)
        return _render(args)


def _render(args: argparse.Namespace) -> int:
    try:
        overrides = (example_site_for(args.stack) if args.example_site else {}) | parse_set(
            args.set
        )
        objects, outputs = render_stack(args.stack, overrides)
        written = write_render(args.out, objects, outputs)
    except (RunError, ValueError) as error:
        print(f"stack {args.stack}: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"--out {args.out}: cannot write ({os_error_reason(error)})", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
