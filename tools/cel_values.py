"""A manifest's values the way a CRD validation rule sees them: defaulted, pruned, typed, escaped.

The API server defaults an object before it validates it, so a rule reads a defaulted value
(`with_defaults`). A rule's `self` is then typed by the schema and limited to what the schema
declares (`to_cel`); the apiextensions.k8s.io/v1 ValidationRule reference (field `rule`) specifies:

* a field that is null is absent: `has()` is false for it;
* only declared properties are accessible: unknown fields, and properties of "unknown type" (no
  `type`, `x-kubernetes-preserve-unknown-fields`, or arrays and maps of such) are not;
* at the root, and in `x-kubernetes-embedded-resource` objects, `apiVersion`, `kind`,
  `metadata.name` and `metadata.generateName` are accessible, and no other metadata;
* property names are escaped (`__` -> `__underscores__`, `.` -> `__dot__`, `-` -> `__dash__`,
  `/` -> `__slash__`, a CEL reserved word `w` -> `__w__`), names outside
  `[a-zA-Z_.-/][a-zA-Z0-9_.-/]*` are inaccessible; map keys (`additionalProperties`) are not
  escaped: they are read as `self["key"]`.

Not modelled, as no DGD rule needs it: string formats (`date-time`, `duration`, `byte` become
CEL timestamps, durations and bytes in the API server; they stay strings here) and the
order-insensitive equality of `x-kubernetes-list-type: set|map` lists.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from celpy import celtypes
from celpy.adapter import json_to_cel

_ACCESSIBLE = re.compile(r"[a-zA-Z_.\-/][a-zA-Z0-9_.\-/]*")
_RESERVED = frozenset(
    {"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for"}
    | {"function", "if", "import", "let", "loop", "package", "namespace", "return"}
)
_ESCAPES = (("__", "__underscores__"), (".", "__dot__"), ("-", "__dash__"), ("/", "__slash__"))
_OBJECT_IDENTITY = ("apiVersion", "kind")
_ACCESSIBLE_METADATA = ("name", "generateName")


def with_defaults(value: Any, schema: Mapping[str, Any]) -> Any:
    """`value` with every absent (or null, where not nullable) property that the schema gives a
    `default` filled in, at every depth, defaults included: structural defaulting
    (https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#defaulting).
    `value` itself is left unchanged; the result may share its unchanged parts."""
    if isinstance(value, list):
        items = schema.get("items")
        return [
            with_defaults(item, items) if isinstance(items, Mapping) else item for item in value
        ]
    if not isinstance(value, Mapping):
        return value
    properties: Mapping[str, Any] = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    result: dict[str, Any] = {}
    for key, item in value.items():
        child = properties.get(key, additional)
        result[key] = with_defaults(item, child) if isinstance(child, Mapping) else item
    for key, child in properties.items():
        unset = result.get(key) is None and not (key in result and child.get("nullable"))
        if unset and "default" in child:
            result[key] = with_defaults(copy.deepcopy(child["default"]), child)
    return result


def escape_property(name: str) -> str | None:
    """The name a rule uses for the property `name`, or None if rules cannot access it."""
    if not _ACCESSIBLE.fullmatch(name):
        return None
    if name in _RESERVED:
        return f"__{name}__"
    for plain, escaped in _ESCAPES:
        name = name.replace(plain, escaped)
    return name


def to_cel(value: Any, schema: Mapping[str, Any], *, root: bool = False) -> celtypes.Value:
    """`value` as the CEL value a rule scoped to `schema` sees as `self`; None when a rule cannot
    see it (within an object: the field is absent; within an array: CEL null).

    A value of the wrong type (which the schema check reports) is passed as plain JSON.
    """
    if value is None or _unknown_type(schema):
        return None
    kind = schema.get("type")
    if schema.get("x-kubernetes-int-or-string") or kind is None:
        return _json(value)
    if kind == "object" and isinstance(value, Mapping):
        return _object(value, schema, root or bool(schema.get("x-kubernetes-embedded-resource")))
    if kind == "array" and isinstance(value, list):
        items = schema.get("items") or {}
        return celtypes.ListType([to_cel(item, items) for item in value])
    if kind == "number" and isinstance(value, int | float) and not isinstance(value, bool):
        return celtypes.DoubleType(float(value))  # JSON 1 in a `number` field is CEL 1.0
    return _json(value)


def _object(value: Mapping[str, Any], schema: Mapping[str, Any], identity: bool) -> celtypes.Value:
    properties: Mapping[str, Any] = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    if not properties and isinstance(additional, Mapping):
        entries = {key: to_cel(item, additional) for key, item in value.items()}
        return celtypes.MapType(
            {celtypes.StringType(k): v for k, v in entries.items() if v is not None}
        )
    fields: dict[celtypes.Value, celtypes.Value] = {}
    for key, item in value.items():
        name = escape_property(key)
        if identity and key in (*_OBJECT_IDENTITY, "metadata"):
            converted = _identity(key, item)
        elif key in properties and name is not None:
            converted = to_cel(item, properties[key])
        else:
            continue  # pruned by the API server, or not accessible to rules
        if converted is not None and name is not None:
            fields[celtypes.StringType(name)] = converted
    return celtypes.MapType(fields)


def _identity(key: str, value: Any) -> celtypes.Value:
    """apiVersion, kind, and of the metadata only name and generateName."""
    if key in _OBJECT_IDENTITY or not isinstance(value, Mapping):
        return _json(value) if isinstance(value, str) else None
    accessible = {k: value[k] for k in _ACCESSIBLE_METADATA if isinstance(value.get(k), str)}
    return _json(accessible)


def _unknown_type(schema: Mapping[str, Any]) -> bool:
    """An "unknown type" (ValidationRule `rule`): no type and preserve-unknown-fields, or an
    array or map of such; a rule cannot see a property of this type."""
    if schema.get("type") is None:
        return bool(schema.get("x-kubernetes-preserve-unknown-fields")) and not schema.get(
            "x-kubernetes-int-or-string"
        )
    element = schema.get("items") if schema.get("type") == "array" else None
    if schema.get("type") == "object" and not schema.get("properties"):
        element = schema.get("additionalProperties")
    return isinstance(element, Mapping) and _unknown_type(element)


def _json(value: Any) -> celtypes.Value:
    converted: celtypes.Value = json_to_cel(value)
    return converted
