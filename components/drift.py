"""Fields kubectl set that this program does not: the next update of the object removes them.

Before every update, pulumi-kubernetes 4.25.0 hands the fields of kubectl's field managers (any
`kubectl*` manager) and of `before-first-apply` to its own (`fixCSAFieldManagers`), then applies
the program's object; server-side apply removes every field its manager owned and the object
leaves out, and the provider's diff never names them. So before each object is applied, the
program reads its field managers (metadata only: never a Secret's data) and warns, in the preview
and in `up`, which fields the update removes (docs/day-two.md, "kubectl and the program").
`applied` and `resource_of` register an object (its manifest, or an Output of it) and warn so.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from functools import partial
from typing import Any

import pulumi

from common.credentials import mask
from components.kubernetes_object import KubernetesObject
from components.live import Live, ObjectRef, Unknown

Manifest = Mapping[str, Any]
Step = tuple[str, Any]
"""One step of a managed-fields path: ("f", field), ("k", ((key, value), ...)), ("v", JSON text),
("i", n)."""

HANDED_OVER = (("kubectl", ("Apply", "Update")), ("before-first-apply", ("Update",)))
"""Field managers whose fields the provider takes over before an update: (name prefix, operations)."""
IGNORED = (
    (
        ("f", "metadata"),
        ("f", "annotations"),
        ("f", "kubectl.kubernetes.io/last-applied-configuration"),
    ),
)
"""kubectl's own bookkeeping: removing it changes nothing."""
SHOWN_PATHS = 12


def warn_kubectl_fields(live: Live, manifest: Manifest, resource: pulumi.Resource) -> None:
    """Warn which fields the next update of `manifest`'s live object removes, if any."""
    ref = ObjectRef.of(manifest)
    found = live.attempt(lambda view: view.metadata(ref))
    if found is None or isinstance(found, Unknown):
        return
    removed = fields_removed(found.get("metadata") or {}, manifest)
    if not removed:
        return
    shown = ", ".join(removed[:SHOWN_PATHS]) + (" ..." if len(removed) > SHOWN_PATHS else "")
    pulumi.log.warn(
        mask(
            f"kubectl set fields on {ref} that this program does not set: {shown}. The next "
            "update of it removes them (pulumi-kubernetes takes kubectl's fields over, then "
            "applies the program's object): set them again afterwards, or through the stack "
            "config where a key exists (docs/day-two.md, kubectl and the program)"
        ),
        resource=resource,
    )


_HEAD = ("apiVersion", "kind")


def applied(
    name: str, manifest: Manifest, opts: pulumi.ResourceOptions, live: Live
) -> KubernetesObject:
    """`manifest`'s object, warned about kubectl's fields."""
    fields = {key: value for key, value in manifest.items() if key not in _HEAD}
    resource = KubernetesObject(name, manifest["apiVersion"], manifest["kind"], fields, opts)
    warn_kubectl_fields(live, manifest, resource)
    return resource


def resource_of(
    name: str,
    shape: Manifest,
    manifest: pulumi.Output[Manifest],
    opts: pulumi.ResourceOptions,
    live: Live | None = None,
) -> KubernetesObject:
    """The object of `shape`'s kind, its fields from `manifest` (an Output of the same object,
    in a namespace known only then); with `live`, warned about kubectl's fields."""
    fields = {key: manifest.apply(partial(_field, key)) for key in shape if key not in _HEAD}
    resource = KubernetesObject(name, shape["apiVersion"], shape["kind"], fields, opts)
    if live is not None:
        manifest.apply(partial(warn_kubectl_fields, live, resource=resource))
    return resource


def _field(key: str, manifest: Manifest) -> Any:
    return manifest[key]


def handed_over(manager: str, operation: str) -> bool:
    """Whether the provider takes the fields of this manager and operation over (`HANDED_OVER`)."""
    return any(manager.startswith(name) and operation in ops for name, ops in HANDED_OVER)


def fields_removed(live_metadata: Manifest, manifest: Manifest) -> list[str]:
    """The paths that kubectl's managers own on the live object, that no other manager (but the
    provider's own) owns too, and that `manifest` does not set: what the next update removes."""
    handed: set[tuple[Step, ...]] = set()
    kept: set[tuple[Step, ...]] = set()
    for entry in live_metadata.get("managedFields") or []:
        if entry.get("subresource"):
            continue  # status and the like: an apply of the object never touches them
        leaves = set(_leaves(entry.get("fieldsV1") or {}, ()))
        manager, operation = str(entry.get("manager") or ""), str(entry.get("operation") or "")
        if handed_over(manager, operation):
            handed |= leaves
        elif not manager.startswith("pulumi-kubernetes"):
            kept |= leaves
    applied = _as_stored(manifest)
    removed = [
        path for path in handed - kept if path not in IGNORED and not _present(applied, path)
    ]
    return sorted(_shown(path) for path in removed)


def _as_stored(manifest: Manifest) -> Manifest:
    """A Secret's `stringData` is stored as `data`: the key is kept whichever way it was set."""
    if "stringData" not in manifest:
        return manifest
    data = dict.fromkeys(manifest["stringData"], "") | dict(manifest.get("data") or {})
    return {**manifest, "data": data}


def _leaves(fields: Mapping[str, Any], prefix: tuple[Step, ...]) -> Iterator[tuple[Step, ...]]:
    """Every owned path of a `fieldsV1` tree: a key with an empty value, or one marked `.`."""
    for key, below in fields.items():
        if key == ".":
            if prefix:
                yield prefix
            continue
        path = (*prefix, _step(key))
        if below:
            yield from _leaves(below, path)
        else:
            yield path


def _step(key: str) -> Step:
    kind, _, value = key.partition(":")
    if kind == "k":  # the list item's key fields, hashable
        return kind, tuple(sorted(json.loads(value).items()))
    if kind == "v":
        return kind, json.dumps(json.loads(value))
    if kind == "i":
        return kind, int(value)
    return "f", value


def _present(node: Any, path: tuple[Step, ...]) -> bool:
    for kind, value in path:
        if kind == "f" and isinstance(node, Mapping) and value in node:
            node = node[value]
        elif kind == "k" and isinstance(node, list):
            node = next((item for item in node if _matches(item, value)), _ABSENT)
        elif kind == "v" and isinstance(node, list):
            return value in {json.dumps(item) for item in node}
        elif kind == "i" and isinstance(node, list) and 0 <= value < len(node):
            node = node[value]
        else:
            return False
        if node is _ABSENT:
            return False
    return True


_ABSENT = object()


def _matches(item: Any, keys: tuple[tuple[str, Any], ...]) -> bool:
    return isinstance(item, Mapping) and all(str(item.get(k)) == str(v) for k, v in keys)


def _shown(path: tuple[Step, ...]) -> str:
    text = ""
    for kind, value in path:
        if kind == "f":
            text += f".{value}" if text else value
        elif kind == "k":
            text += "[" + ",".join(f"{k}={v}" for k, v in value) + "]"
        elif kind == "v":
            text += f"[={value}]"
        else:
            text += f"[{value}]"
    return text
