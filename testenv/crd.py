"""The DynamoGraphDeployment CRD: NVIDIA's file, an input of the test environment, never copied in.

The local control plane installs it (`testenv.cluster`), `tools.validate` judges every graph
against it, `make lab` runs graphs under it. Where it is read from, the first that is given wins:

1. the command's `--crd FILE` (`python -m testenv.cluster up`, `python -m tools.validate`);
2. `$COSMOS3_DGD_CRD`;
3. `../shared/reference/nvidia.com_dynamographdeployments.yaml` beside the clone, where the
   project's CI keeps it.

A CRD that is not there stops the command at once, saying how to get one (`CrdMissing`); a
path that is no regular file within `MAX_CRD_BYTES` (a directory, a device, a FIFO), or a file
nested too deep or with excessive aliasing (`common.yaml_input`), is refused naming it. A CRD
whose v1beta1 schema differs from the one the project was tested with is used, with a warning
naming both (`schema_note`). `crd_path` and `schema_note` use the standard library only, so
`make lab` checks the CRD before it builds or installs anything.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from common import REPO_ROOT
from common.input_files import MAX_CRD_BYTES, InputFileError, InputFileMissing, check_regular_file

ENV = "COSMOS3_DGD_CRD"
FILE_NAME = "nvidia.com_dynamographdeployments.yaml"
DEFAULT = REPO_ROOT.parent / "shared" / "reference" / FILE_NAME
GRAPH_GROUP = "nvidia.com"
GRAPH_KIND = "DynamoGraphDeployment"
GRAPH_VERSION = "v1beta1"
CRD_NAME = "dynamographdeployments.nvidia.com"

TESTED = (
    "ai-dynamo/dynamo main at df7deed0 (2026-08-20), "
    "deploy/operator/config/crd/bases/nvidia.com_dynamographdeployments.yaml"
)
TESTED_SCHEMA_SHA256 = "dae2d6b1e8a2fa6e06afe50a0081b979c0b7e04f3c524de762070d4ac37b4e50"
"""sha256 of the tested CRD's v1beta1 `openAPIV3Schema`, as compact JSON with sorted keys: what
`kubectl get crd ... -o yaml` of the same version holds too, whatever else it adds."""

HOW_TO_GET = (
    "get it from a cluster with the Dynamo platform installed: "
    f"`kubectl get crd {CRD_NAME} -o yaml > dgd-crd.yaml`, or from Dynamo's repository "
    f"(the project was tested with {TESTED}); then pass `--crd dgd-crd.yaml` or set "
    f"{ENV}=dgd-crd.yaml"
)


class CrdError(ValueError):
    """A CRD file that is missing, unreadable, or not the DynamoGraphDeployment's."""


class CrdMissing(CrdError):
    """No CRD where it was looked for; the message says how to get one."""


def crd_path(given: Path | None = None, environ: Mapping[str, str] = os.environ) -> Path:
    """The CRD to use: `given`, else `$COSMOS3_DGD_CRD`, else the one beside the clone."""
    if given is not None:
        where, path = "--crd", given
    elif environ.get(ENV):
        where, path = f"${ENV}", Path(environ[ENV])
    else:
        where, path = f"the default ({ENV} unset)", DEFAULT
    try:
        check_regular_file(path, "CRD file", MAX_CRD_BYTES)
    except InputFileMissing:
        raise CrdMissing(
            f"no DynamoGraphDeployment CRD at {path} ({where}): {HOW_TO_GET}"
        ) from None
    except InputFileError as error:  # a directory, a device, a FIFO, too big
        raise CrdError(f"{error} ({where})") from None
    return path


def load_crd(path: Path, version: str = GRAPH_VERSION) -> dict[str, Any]:
    """The whole DGD CRD from a file, as an API server can install it: its kind, name and spec
    (what `kubectl get crd -o yaml` adds beside them, such as status and resourceVersion, goes).
    Accepts a `kind: List` holding it too, or several documents, among other CRDs."""
    crds = [doc for doc in _documents(path) if doc.get("kind") == "CustomResourceDefinition"]
    if not crds:
        raise CrdError(
            f"{path}: no whole CustomResourceDefinition {CRD_NAME} in it (the API server installs "
            f"the whole CRD): {HOW_TO_GET}"
        )
    document = next((crd for crd in crds if _defines_the_graph(crd)), crds[0])  # else refused
    version_schema(path, document, version)  # the DGD's, serving `version`
    return {
        "apiVersion": document.get("apiVersion", "apiextensions.k8s.io/v1"),
        "kind": "CustomResourceDefinition",
        "metadata": {"name": _mapping(document.get("metadata")).get("name", CRD_NAME)},
        "spec": dict(document["spec"]),
    }


def schema_note(crd: Mapping[str, Any], path: Path, version: str = GRAPH_VERSION) -> str | None:
    """A warning when the CRD's schema is not the tested one (None when it is)."""
    schema = version_schema(path, crd, version)
    text = json.dumps(schema, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(text.encode()).hexdigest()
    if digest == TESTED_SCHEMA_SHA256:
        return None
    return (
        f"warning: the {GRAPH_KIND} CRD at {path} (its {version} schema sha256 {digest[:12]}) is "
        f"not the one this project was tested with ({TESTED}, sha256 "
        f"{TESTED_SCHEMA_SHA256[:12]}); using it"
    )


def version_schema(path: Path, crd: Mapping[str, Any], version: str) -> dict[str, Any]:
    """The DGD's `openAPIV3Schema` for `version` in a CRD document; a CrdError naming what is
    missing or misshapen, never a KeyError."""
    spec = _mapping(crd.get("spec"))
    if not _defines_the_graph(crd):
        found = f"{_mapping(spec.get('names')).get('kind')} in group {spec.get('group')}"
        raise CrdError(f"{path}: the CRD defines {found}, not {GRAPH_KIND} in {GRAPH_GROUP}")
    listed = spec.get("versions")
    versions = [_mapping(served) for served in (listed if isinstance(listed, list) else [])]
    for served in versions:
        if served.get("name") == version:
            schema = _mapping(served.get("schema")).get("openAPIV3Schema")
            if not isinstance(schema, dict):
                raise CrdError(f"{path}: the CRD's {version} has no openAPIV3Schema: {HOW_TO_GET}")
            return schema
    names = [served.get("name") for served in versions]
    raise CrdError(
        f"{path}: the CRD serves {names}, not {version}: is the Dynamo operator too old?"
    )


def _defines_the_graph(crd: Mapping[str, Any]) -> bool:
    spec = _mapping(crd.get("spec"))
    return (
        spec.get("group") == GRAPH_GROUP and _mapping(spec.get("names")).get("kind") == GRAPH_KIND
    )


def _mapping(value: object) -> Mapping[str, Any]:
    """`value` when it is a mapping, else an empty one: a CRD file is anyone's."""
    return value if isinstance(value, Mapping) else {}


def _documents(path: Path) -> Iterator[Mapping[str, Any]]:
    # Not at the top: it needs PyYAML, and crd_path runs before any venv exists (`make lab`).
    from common.yaml_input import read_yaml_file

    try:
        documents = [doc for doc in read_yaml_file(path, "CRD file", MAX_CRD_BYTES) if doc]
    except InputFileError as error:  # missing, a device, too big, not YAML, too deep, a bomb
        raise CrdError(f"cannot read a CRD: {error}") from None
    return _flatten_lists(documents)


def _flatten_lists(documents: Iterable[Any]) -> Iterator[Mapping[str, Any]]:
    for document in documents:
        if isinstance(document, Mapping) and document.get("kind") == "List":
            yield from _flatten_lists(document.get("items") or [])
        elif isinstance(document, Mapping):
            yield document


def main(argv: list[str] | None = None) -> int:
    """`python -m testenv.crd [FILE]`: the CRD's path, or why there is none or it is unusable
    (exit 2)."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    try:
        print(crd_path(Path(args[0]) if args else None))
    except CrdError as error:  # missing, or no regular file within the limit
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
