"""Adopt a recipe deployed by hand (kubectl): a `pulumi import --file` document for one stack.

    python -m tools.adopt --stack dev --out build/adopt/dev.json
    pulumi import --stack dev --file build/adopt/dev.json --generate-code=false --yes
    pulumi preview --stack dev

The program uses the recipe's own names (`ngc-api-secret`, the DGD names), so a user who followed
the recipe by hand has objects the program would create. The pinned provider (4.25.0) would take
them over on create (decision 0011; 4.29+ fails with `AlreadyExists`); importing them instead
records them as they are. Known problem on the real tier: the preview after the import plans to
replace the protected claim over server-set fields (docs/deploying.md). This writes
Pulumi's import-file format (pulumi `pkg/cmd/pulumi/operations/import.go`, `importFile`) for every
Kubernetes object the stack's program would create, with the program's own logical names, types,
parents and explicit provider, so that the imported resources are the ones the program registers
(same URNs). The program runs under Pulumi's mock runtime for this (`tools.offline`), with the
stack's config from `Pulumi.<stack>.yaml`; secrets are never read (names do not depend on them).

- Components (`cosmos3:recipe:*`) are entries with `component: true`, parented as in the program.
- The provider is declared in `resources` with the program's inputs (context, kubeconfig,
  clusterIdentifier), which Pulumi CLI 3.254 and newer support (#23972).
- The model download Job is left out unless `--include-job`: a Job's pod template is immutable, so
  a hand-made Job that differs from the program's would need a replacement. Delete it instead
  (`kubectl delete job ...`; the downloaded model stays in the cache) and let `pulumi up` run the
  program's Job, which finds the model already in the cache.
- Read-only objects (an existing claim with `modelCacheMode: existing`, the shared stack
  reference) are not imported: the program reads them on every update.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from pulumi import RunError

from components.credentials import masked_output
from components.input_files import InputFileError, parsed_json, read_json_object, read_text
from components.output_folders import OutputFolderError, os_error_reason, write_whole
from tools.mock_engine import ProgramRun, Registered
from tools.offline import run_program, shared_layer_outputs, shared_stack_name
from tools.render import kind_rank, parse_set
from tools.stack_files import SHIPPED_STACKS, example_site_for, placeholder_secrets

PROVIDER_TYPE = "pulumi:providers:kubernetes"
JOB_TYPE = "kubernetes:batch/v1:Job"
PROVIDER_INPUTS = ("context", "kubeconfig", "clusterIdentifier")


def import_document(run: ProgramRun, include_job: bool = False) -> dict[str, Any]:
    """The `pulumi import --file` document for what `run` registered."""
    provider = run.one(PROVIDER_TYPE)
    adopted = sorted(
        (r for r in run.kubernetes_objects() if include_job or r.type != JOB_TYPE),
        key=lambda r: (kind_rank(r.kind), r.name),
    )
    components = _ancestors(run, adopted)
    keys = {r.urn: _key(r) for r in [*components, provider, *adopted]}
    entries = [_provider_entry(provider, keys)]
    entries += [_component_entry(r, keys) for r in components]
    entries += [_object_entry(r, keys, keys[provider.urn]) for r in adopted]
    return {"resources": entries}


def _ancestors(run: ProgramRun, adopted: list[Registered]) -> list[Registered]:
    """Every component above the adopted objects, parents before children."""
    found: dict[str, Registered] = {}
    for resource in adopted:
        chain = []
        parent = resource.parent
        while parent and parent.split("::")[-2] != "pulumi:pulumi:Stack":
            component = run.by_urn(parent)
            chain.append(component)
            parent = component.parent
        for component in reversed(chain):
            found.setdefault(component.urn, component)
    return list(found.values())


def _key(resource: Registered) -> str:
    # Names in the document only have to be unique; a component and its child resource share
    # the logical name (`cosmos3-namespace`), so components get a suffix.
    return resource.name if resource.custom else f"{resource.name} (component)"


def _parent_key(resource: Registered, keys: dict[str, str]) -> dict[str, str]:
    return {"parent": keys[resource.parent]} if resource.parent in keys else {}


def _provider_entry(provider: Registered, keys: dict[str, str]) -> dict[str, Any]:
    return {
        "type": PROVIDER_TYPE,
        "name": keys[provider.urn],
        "logicalName": provider.name,
        "version": metadata.version("pulumi_kubernetes"),
        "inputs": {key: provider.inputs[key] for key in PROVIDER_INPUTS if key in provider.inputs},
    }


def _component_entry(component: Registered, keys: dict[str, str]) -> dict[str, Any]:
    return {
        "type": component.type,
        "name": keys[component.urn],
        "logicalName": component.name,
        "component": True,
        **_parent_key(component, keys),
    }


def _object_entry(obj: Registered, keys: dict[str, str], provider: str) -> dict[str, Any]:
    return {
        "type": obj.type,
        "name": keys[obj.urn],
        "logicalName": obj.name,
        "id": object_id(obj.inputs["metadata"]),
        "provider": provider,
        "version": metadata.version("pulumi_kubernetes"),
        **_parent_key(obj, keys),
    }


def object_id(meta: dict[str, Any]) -> str:
    """pulumi-kubernetes' import id: `<namespace>/<name>`, or `<name>` for a cluster object."""
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta["name"])


def adopt(
    stack: str,
    overrides: dict[str, Any],
    shared_outputs: dict[str, Any] | None = None,
    include_job: bool = False,
) -> dict[str, Any]:
    asyncio.set_event_loop(asyncio.new_event_loop())
    layer = shared_layer_outputs(layer_stack=shared_stack_name(stack, overrides))
    if shared_outputs is not None:
        layer = {name: shared_outputs for name in layer}
    run = run_program(stack, overrides, secrets=placeholder_secrets(stack), stack_outputs=layer)
    return import_document(run, include_job)


def check_out(out: Path) -> None:
    """`--out` is a new file or an import document written before; never anything else."""
    if out.is_dir():
        raise OutputFolderError(f"--out {out} is a folder: name the import document's file")
    if not out.exists():
        return
    try:
        document = parsed_json(read_text(out, "import document"), str(out), "--out")
    except InputFileError:
        document = None
    if not (isinstance(document, dict) and isinstance(document.get("resources"), list)):
        raise OutputFolderError(
            f"--out {out} exists and is not an import document this tool wrote: it replaces "
            "only its own; choose another path, e.g. build/adopt/<stack>.json"
        )


def main(argv: list[str] | None = None) -> int:
    with masked_output():
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.adopt", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--stack", required=True, choices=SHIPPED_STACKS)
    parser.add_argument("--out", type=Path, required=True, help="where to write the document")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="config as `pulumi config set` would")  # fmt: skip
    parser.add_argument("--example-site", action="store_true",
                        help="fill site values the stack file lacks with the examples (docs/configuration.md)")  # fmt: skip
    parser.add_argument("--shared-outputs", type=Path,
                        help="profile stacks: `pulumi stack output --json` of the shared stack "
                        "(its namespace names where the graph is)")  # fmt: skip
    parser.add_argument("--include-job", action="store_true",
                        help="also adopt the model download Job (see the module help)")  # fmt: skip
    args = parser.parse_args(argv)
    try:
        check_out(args.out)
        overrides = (example_site_for(args.stack) if args.example_site else {}) | parse_set(
            args.set
        )
        shared = None
        if args.shared_outputs:
            shared = read_json_object(args.shared_outputs, "--shared-outputs file")
        document = adopt(args.stack, overrides, shared, args.include_job)
    except (RunError, OSError, ValueError) as error:
        print(f"adopt {args.stack}: {error}", file=sys.stderr)
        return 2
    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_whole(args.out, (json.dumps(document, indent=2) + "\n").encode())
    except OSError as error:
        print(f"adopt {args.stack}: --out {args.out}: {os_error_reason(error)}", file=sys.stderr)
        return 1
    adopted = [e for e in document["resources"] if "id" in e]
    for entry in adopted:
        print(f"{entry['type']} {entry['id']}")
    print(
        f"{len(adopted)} objects in {args.out}: "
        f"pulumi import --stack {args.stack} --file {args.out} --generate-code=false"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
