"""The project's config as the Pulumi CLI hands it to the program, read from the checkout.

`Pulumi.yaml` declares every key with its default; `Pulumi.<stack>.yaml` sets what differs; explicit
overrides play `pulumi config set`. Values reach the program as strings, structured values as
JSON, like the CLI sends them. A broken file is a `StackFileError` naming the file, the line and
the fix.

Both files are read the way the CLI reads them. The CLI parses YAML with Go's yaml.v3, whose schema
is YAML 1.2's core schema: `on`, `yes`, `no` and `off` are strings, `0o17` is octal, `017` is
seventeen, `2026-01-02` is a string, and a key set twice is an error. PyYAML's `safe_load` is YAML
1.1, where `namespace: on` would be `true`. Like yaml.v3, a file nested too deep or with excessive
aliasing (a billion laughs) is refused before anything of it is constructed (`common.yaml_input`).

A stack file's config value that is a scalar reaches the program as its text, exactly as written
(pulumi `pkg/resource/config/value.go` unmarshals a value as a string first, and yaml.v3 hands a
scalar to a string as its source text): `workerReplicas: 08` is the text `08`, `namespace: on` is
`on`, an empty value or `~` is the empty text. Lists and maps are typed values (the CLI sends them
as JSON).
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from common import REPO_ROOT
from common.input_files import MAX_PULUMI_FILE_BYTES, read_text
from common.yaml_input import check_composed, check_nesting
from components.settings import PROJECT

SHIPPED_STACKS = ("dev", "shared", "round-robin", "session-affinity")
ORGANIZATION = "organization"
"""The organization of a DIY backend (Pulumi Cloud uses your own); the shipped stacks assume it."""
SHARED_STACK = f"{ORGANIZATION}/{PROJECT}/shared"
SECRET_PLACEHOLDER = "offline-placeholder-secret"
"""Stands in for a secret the render cannot decrypt; it is masked in everything written."""

# Example site values: what a user sets per cluster before the first `pulumi up` (README, Quick
# start). The offline render fills them in with --example-site, the golden manifests use them.
EXAMPLE_SITE = {"kubeContext": "h200-cluster", "modelCacheStorageClass": "rwx-nfs"}


def cli_value(value: Any) -> str:
    """Config values reach the program as strings; structured values as JSON, like the CLI."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def declared_config() -> dict[str, Any]:
    """The `config:` block of Pulumi.yaml: declarations of this project, plain values of others."""
    declared = _as_read(project_config, REPO_ROOT / "Pulumi.yaml")
    if not declared:
        raise StackFileError(
            f"{REPO_ROOT / 'Pulumi.yaml'} declares no config: it is not this project's"
        )
    return declared


def stack_file_config(stack: str) -> dict[str, Any]:
    """`Pulumi.<stack>.yaml`'s config as the CLI hands it over (an empty file: no config)."""
    return _as_read(config_values, REPO_ROOT / f"Pulumi.{stack}.yaml")


def _as_read(reader: Callable[[Path], dict[str, Any]], path: Path) -> dict[str, Any]:
    """`reader(path)`, read again only when the file changed: composing YAML in Python takes
    25 ms for Pulumi.yaml, and property tests build a stack's config hundreds of times."""
    try:
        status = path.stat()
    except OSError:
        return dict(reader(path))  # its own error, naming the file
    read = _read_once(reader, path, status.st_ino, status.st_mtime_ns, status.st_size)
    return copy.deepcopy(read)


@functools.lru_cache(maxsize=16)
def _read_once(
    reader: Callable[[Path], dict[str, Any]], path: Path, *identity: int
) -> dict[str, Any]:
    return dict(reader(path))


def qualified(key: str) -> str:
    return key if ":" in key else f"{PROJECT}:{key}"


def cli_config(stack: str, overrides: dict[str, Any] | None = None) -> dict[str, str]:
    """Project defaults, then the stack file, then `overrides` (None values remove a key)."""
    config: dict[str, str] = {}
    for key, declaration in declared_config().items():
        if isinstance(declaration, dict) and "default" in declaration:
            config[qualified(key)] = cli_value(declaration["default"])
        elif not isinstance(declaration, dict):
            config[qualified(key)] = cli_value(declaration)
    for key, value in stack_file_config(stack).items():
        if isinstance(value, dict) and "secure" in value:
            continue  # encrypted by the CLI; supplied as a secret by the caller instead
        config[qualified(key)] = cli_value(value)
    for key, value in (overrides or {}).items():
        if value is None:
            config.pop(qualified(key), None)
        else:
            config[qualified(key)] = cli_value(value)
    return config


def owns_layer(stack: str) -> bool:
    """True for stacks that create namespace, secrets and cache (no sharedStack in the file)."""
    return not stack_file_config(stack).get(qualified("sharedStack"))


def example_site_for(stack: str) -> dict[str, Any]:
    """The example site values a stack still lacks (values its file sets are kept)."""
    needed = (
        dict(EXAMPLE_SITE) if owns_layer(stack) else {"kubeContext": EXAMPLE_SITE["kubeContext"]}
    )
    present = stack_file_config(stack)
    return {key: value for key, value in needed.items() if qualified(key) not in present}


def placeholder_secrets(stack: str) -> dict[str, str]:
    """Secrets the stack needs, as masked placeholders: the render never sees real secrets.

    The NGC key for a stack that owns the layer, and every secret the stack file sets (a
    mirror's `registryPassword: {secure: ...}`): `cli_config` leaves those encrypted values out,
    so without a placeholder the program would find a legal mirror stack's password missing."""
    set_secretly = {
        key.rpartition(":")[2]: SECRET_PLACEHOLDER
        for key, value in stack_file_config(stack).items()
        if isinstance(value, dict) and "secure" in value
    }
    return ({"ngcApiKey": SECRET_PLACEHOLDER} if owns_layer(stack) else {}) | set_secretly


class StackFileError(ValueError):
    """A project or stack file the CLI would not read as the program needs it."""


class _CoreSchemaLoader(yaml.SafeLoader):
    """PyYAML's safe loader with YAML 1.2's core schema instead of 1.1's implicit types."""


_CoreSchemaLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag == "tag:yaml.org,2002:merge"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_FLOAT = (
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
for _tag, _pattern, _first in (
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", list("-+0123456789")),
    ("tag:yaml.org,2002:float", _FLOAT, list("-+.0123456789")),
):
    _CoreSchemaLoader.add_implicit_resolver(_tag, re.compile(_pattern), _first)


def _core_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = str(loader.construct_scalar(node))
    if text.startswith(("0o", "0x")):
        return int(text[2:], 8 if text[1] == "o" else 16)
    return int(text, 10)  # YAML 1.2: a leading zero is decimal, not octal


_CoreSchemaLoader.add_constructor("tag:yaml.org,2002:int", _core_int)


@contextmanager
def _readable(path: Path) -> Iterator[None]:
    """YAML's own errors (and a nesting too deep to construct) as a StackFileError naming `path`."""
    try:
        yield
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise StackFileError(f"{path} is not valid YAML{where}: {error.problem}") from None
    except yaml.YAMLError as error:
        detail = " ".join(str(error).split())[:200]
        raise StackFileError(f"{path} is not valid YAML: {detail}") from None
    except RecursionError:
        raise StackFileError(f"{path} is not valid YAML: nested too deep") from None


def load_mapping(path: Path) -> tuple[yaml.SafeLoader, yaml.MappingNode | None]:
    """The file's top-level mapping node (None for an empty file), with the loader that can
    construct its parts; a file that is not YAML, or not a mapping, is a StackFileError."""
    text = read_text(path, "Pulumi file", MAX_PULUMI_FILE_BYTES)
    with _readable(path):
        check_nesting(text, str(path), "Pulumi file")  # before composing, which recurses
        loader = _CoreSchemaLoader(text)
        node = loader.get_single_node()
    if node is not None:
        check_composed(node, str(path), "Pulumi file")  # before constructing any of it
    if node is not None and not isinstance(node, yaml.MappingNode):
        raise StackFileError(f"{path} must be a YAML mapping (`config:` and its keys)")
    return loader, node


def pairs(path: Path, node: yaml.MappingNode, what: str) -> list[tuple[str, yaml.Node]]:
    """A mapping's (key text, value node) pairs; a key set twice or not a text is an error."""
    seen: set[str] = set()
    found = []
    for key, value in node.value:
        if not isinstance(key, yaml.ScalarNode):
            raise StackFileError(f"{path} line {key.start_mark.line + 1}: a {what} key is a text")
        if key.value in seen:
            raise StackFileError(
                f"{path} line {key.start_mark.line + 1}: {key.value} is set twice in {what}; "
                "the Pulumi CLI refuses the file: keep one"
            )
        seen.add(key.value)
        found.append((key.value, value))
    return found


def section(path: Path, name: str) -> tuple[yaml.SafeLoader, list[tuple[str, yaml.Node]]]:
    """The (key, value node) pairs of the file's top-level `name:` mapping (none if absent)."""
    loader, top = load_mapping(path)
    if top is None:
        return loader, []
    for key, value in pairs(path, top, "the file"):
        if key != name:
            continue
        if isinstance(value, yaml.ScalarNode) and typed(path, loader, value) is None:
            return loader, []  # `config:` with nothing under it
        if not isinstance(value, yaml.MappingNode):
            line = value.start_mark.line + 1
            raise StackFileError(f"{path} line {line}: `{name}:` must be a mapping of keys")
        return loader, pairs(path, value, f"`{name}:`")
    return loader, []


def typed(path: Path, loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    """A node's value under the core schema."""
    with _readable(path):
        return loader.construct_object(node, deep=True)


def config_values(path: Path) -> dict[str, Any]:
    """A stack file's `config:` as the CLI hands it to the program: scalars as their text (a
    null as the empty text), lists and maps typed, `secure:` values as they are."""
    loader, found = section(path, "config")
    config: dict[str, Any] = {}
    for key, node in found:
        if isinstance(node, yaml.ScalarNode):
            config[key] = "" if typed(path, loader, node) is None else node.value
        else:
            config[key] = typed(path, loader, node)
    return config


def project_config(path: Path) -> dict[str, Any]:
    """The `config:` block of a project file (Pulumi.yaml): declarations with typed defaults."""
    loader, found = section(path, "config")
    return {key: typed(path, loader, node) for key, node in found}
