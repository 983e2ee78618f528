"""The API server's rules for a core/v1 Affinity given as stack config. Pure: no Pulumi.

An affinity lands in two places the API server judges differently: the download Job's pod template
(the built-in Job type: strict decoding, then core/validation `validateAffinity`) and the graph's
components' `podTemplate.spec` (the DGD CRD's structural schema: field types and its `required`
lists; the Dynamo operator then makes Deployments from it, whose pod templates get the built-in
validation). `affinity_problems` refuses what either would refuse:

- the shape: only Affinity's fields, each of its JSON type, no `null`; the fields the CRD's schema
  requires present (`key` and `operator` of a requirement, `weight` and `preference` /
  `podAffinityTerm` of a weighted term, `nodeSelectorTerms`, `topologyKey`);
- k8s.io/kubernetes/pkg/apis/core/validation/validation.go: `ValidateNodeSelector` (at least one
  term), `ValidateNodeSelectorRequirement` (operator In, NotIn, Exists, DoesNotExist, Gt, Lt with
  their value counts, the key a label key, the values label values in a required term),
  `ValidateNodeFieldSelectorRequirement` (`metadata.name` only, In or NotIn, one node name),
  `ValidatePreferredSchedulingTerms` and `validateWeightedPodAffinityTerms` (weight 1..100),
  `validatePodAffinityTerm` (topologyKey required and a label key, namespaces RFC 1123 labels,
  `ValidateMatchLabelKeysAndMismatchLabelKeys`);
- k8s.io/apimachinery/pkg/apis/meta/v1/validation: `ValidateLabelSelector` (matchLabels as labels,
  matchExpressions with In, NotIn, Exists, DoesNotExist and their value counts).

Stricter than the API server in one place, on purpose: a matchLabelKeys key also in the term's
labelSelector is refused outright (a pod would be refused once the key is merged in).
Problems name the field's path inside the affinity, never a value.

Over 300 lines: one type's rules, Affinity's, each of its fields beside the Kubernetes function it
mirrors; split, a reader would chase one selector requirement across modules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from components import k8s_values as k8s

NODE_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
LABEL_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
MIN_WEIGHT, MAX_WEIGHT = 1, 100
NODE_NAME_FIELD = "metadata.name"
"""The only field a node selector's matchFields may name (nodeFieldSelectorValidators)."""

Check = Callable[[Any, str], list[str]]
"""A value and its path inside the affinity -> the problems, each starting with a path."""


def affinity_problems(affinity: Mapping[str, Any]) -> list[str]:
    """What the API server refuses of `affinity` (a core/v1 Affinity as a dict)."""
    pod_affinity = _fields(
        {
            "requiredDuringSchedulingIgnoredDuringExecution": _list(_pod_affinity_term),
            "preferredDuringSchedulingIgnoredDuringExecution": _list(_weighted_pod_affinity_term),
        }
    )
    check = _fields(
        {
            "nodeAffinity": _node_affinity,
            "podAffinity": pod_affinity,
            "podAntiAffinity": pod_affinity,
        }
    )
    return check(affinity, "")


# --- shapes -----------------------------------------------------------------------------------------


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _fields(fields: Mapping[str, Check], required: tuple[str, ...] = ()) -> Check:
    """An object with only `fields` (strict decoding refuses others), `required` present."""

    def check(value: Any, path: str) -> list[str]:
        if not isinstance(value, dict):
            return [f"{path}: must be an object (fields: {', '.join(fields)})"]
        problems = [
            f"{_child(path, key)}: unknown field (known here: {', '.join(fields)})"
            for key in value
            if key not in fields
        ]
        problems += [f"{_child(path, key)}: is required" for key in required if key not in value]
        for key, field_check in fields.items():
            if key not in value:
                continue
            if value[key] is None:
                problems.append(f"{_child(path, key)}: must not be null (leave the field out)")
            else:
                problems += field_check(value[key], _child(path, key))
        return problems

    return check


def _list(item: Check) -> Check:
    def check(value: Any, path: str) -> list[str]:
        if not isinstance(value, list):
            return [f"{path}: must be a list"]
        return [
            problem
            for index, entry in enumerate(value)
            for problem in item(entry, f"{path}[{index}]")
        ]

    return check


STRING_HINT = (
    "must be a string: quote it in the stack file, or add `--type string` to "
    "`pulumi config set --path` (which stores a number or true/false as one)"
)


def _string(value: Any, path: str) -> list[str]:
    return [] if isinstance(value, str) else [f"{path}: {STRING_HINT}"]


def _string_map(value: Any, path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: must be an object of strings"]
    return [
        f"{path}.{key}: {STRING_HINT}" for key, item in value.items() if not isinstance(item, str)
    ]


def _weight(value: Any, path: str) -> list[str]:
    if isinstance(value, bool) or not isinstance(value, int):
        return [f"{path}: must be an integer"]
    if not MIN_WEIGHT <= value <= MAX_WEIGHT:
        return [f"{path}: must be in the range {MIN_WEIGHT}-{MAX_WEIGHT}"]
    return []


def _at(path: str, problems: list[str]) -> list[str]:
    return [f"{path}: {problem}" for problem in problems]


def _label_name(value: str, path: str) -> list[str]:
    """ValidateLabelName: a qualified name."""
    return _at(path, k8s.is_qualified_name(value))


def _label_values(values: list[str], path: str) -> list[str]:
    return [
        problem
        for index, value in enumerate(values)
        for problem in _at(f"{path}[{index}]", k8s.is_valid_label_value(value))
    ]


# --- node affinity ----------------------------------------------------------------------------------

_REQUIREMENT_SHAPE = _fields(
    {"key": _string, "operator": _string, "values": _list(_string)}, required=("key", "operator")
)


def _requirement(operators: tuple[str, ...], check_values: bool = True) -> Check:
    """ValidateNodeSelectorRequirement and ValidateLabelSelectorRequirement: the key, the
    operator, how many values it takes, and the values as label values (in a node selector, only
    in a required term)."""

    def check(value: Any, path: str) -> list[str]:
        if problems := _REQUIREMENT_SHAPE(value, path):
            return problems
        operator, values = value["operator"], value.get("values", [])
        if operator in ("In", "NotIn") and not values:
            problems.append(f"{path}.values: must be specified when `operator` is 'In' or 'NotIn'")
        elif operator in ("Exists", "DoesNotExist") and values:
            problems.append(
                f"{path}.values: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
            )
        elif operator in ("Gt", "Lt") and operator in operators and len(values) != 1:
            problems.append(
                f"{path}.values: must be specified single value when `operator` is 'Lt' or 'Gt'"
            )
        elif operator not in operators:
            problems.append(
                f"{path}.operator: not a valid selector operator (one of {', '.join(operators)})"
            )
        problems += _label_name(value["key"], f"{path}.key")
        return problems + (_label_values(values, f"{path}.values") if check_values else [])

    return check


def _node_field_requirement(value: Any, path: str) -> list[str]:
    """ValidateNodeFieldSelectorRequirement: `metadata.name` In or NotIn one node name."""
    problems = _REQUIREMENT_SHAPE(value, path)
    if problems:
        return problems
    values = value.get("values", [])
    if value["operator"] not in ("In", "NotIn"):
        problems.append(f"{path}.operator: not a valid selector operator (In or NotIn)")
    elif len(values) != 1:
        problems.append(
            f"{path}.values: must be only one value when `operator` is 'In' or 'NotIn' for node "
            "field selector"
        )
    if value["key"] != NODE_NAME_FIELD:
        return [*problems, f"{path}.key: not a valid field selector key ({NODE_NAME_FIELD} only)"]
    return problems + [
        problem
        for index, name in enumerate(values)
        for problem in _at(f"{path}.values[{index}]", k8s.is_dns1123_subdomain(name))
    ]


def _node_selector_term(check_values: bool) -> Check:
    return _fields(
        {
            "matchExpressions": _list(_requirement(NODE_SELECTOR_OPERATORS, check_values)),
            "matchFields": _list(_node_field_requirement),
        }
    )


def _node_selector(value: Any, path: str) -> list[str]:
    terms = "nodeSelectorTerms"
    problems = _fields({terms: _list(_node_selector_term(check_values=True))})(value, path)
    if not problems and not value.get(terms):
        problems.append(f"{_child(path, terms)}: must have at least one node selector term")
    return problems


_node_affinity = _fields(
    {
        "requiredDuringSchedulingIgnoredDuringExecution": _node_selector,
        # Preferred terms may name label values no node has yet (validation allows any value).
        "preferredDuringSchedulingIgnoredDuringExecution": _list(
            _fields(
                {"weight": _weight, "preference": _node_selector_term(check_values=False)},
                required=("weight", "preference"),
            )
        ),
    }
)


# --- pod affinity and anti-affinity -----------------------------------------------------------------


def _label_selector(value: Any, path: str) -> list[str]:
    """ValidateLabelSelector: matchLabels as labels, each requirement."""
    shape = _fields(
        {
            "matchLabels": _string_map,
            "matchExpressions": _list(_requirement(LABEL_SELECTOR_OPERATORS)),
        }
    )
    problems = shape(value, path)
    if problems:
        return problems
    for key, label_value in value.get("matchLabels", {}).items():
        problems += _label_name(key, f"{path}.matchLabels")
        problems += _at(f"{path}.matchLabels", k8s.is_valid_label_value(label_value))
    return problems


def _namespace_name(value: Any, path: str) -> list[str]:
    return _string(value, path) or _at(path, k8s.is_dns1123_label(value))


_POD_AFFINITY_TERM_SHAPE = _fields(
    {
        "labelSelector": _label_selector,
        "namespaces": _list(_namespace_name),
        "topologyKey": _string,
        "namespaceSelector": _label_selector,
        "matchLabelKeys": _list(_string),
        "mismatchLabelKeys": _list(_string),
    },
    required=("topologyKey",),
)


def _pod_affinity_term(value: Any, path: str) -> list[str]:
    """validatePodAffinityTerm."""
    problems = _POD_AFFINITY_TERM_SHAPE(value, path)
    if problems:
        return problems
    topology_key = value["topologyKey"]
    if not topology_key:
        problems.append(f"{path}.topologyKey: can not be empty (e.g. kubernetes.io/hostname)")
    else:
        problems += _label_name(topology_key, f"{path}.topologyKey")
    return problems + _label_keys(value, path)


def _label_keys(term: Mapping[str, Any], path: str) -> list[str]:
    """ValidateMatchLabelKeysAndMismatchLabelKeys (stricter on a key also in labelSelector)."""
    selector = term.get("labelSelector")
    selector_keys = set((selector or {}).get("matchLabels", {})) | {
        expression["key"] for expression in (selector or {}).get("matchExpressions", [])
    }
    problems = []
    for field in ("matchLabelKeys", "mismatchLabelKeys"):
        keys = term.get(field, [])
        if keys and selector is None:
            problems.append(f"{path}.{field}: must not be specified when labelSelector is not set")
            continue
        for index, key in enumerate(keys):
            problems += _label_name(key, f"{path}.{field}[{index}]")
    mismatch = set(term.get("mismatchLabelKeys", []))
    for index, key in enumerate(term.get("matchLabelKeys", [])):
        where = f"{path}.matchLabelKeys[{index}]"
        if key in mismatch:
            problems.append(f"{where}: exists in both matchLabelKeys and mismatchLabelKeys")
        if key in selector_keys:
            problems.append(f"{where}: exists in both matchLabelKeys and labelSelector")
    return problems


_weighted_pod_affinity_term = _fields(
    {"weight": _weight, "podAffinityTerm": _pod_affinity_term},
    required=("weight", "podAffinityTerm"),
)
