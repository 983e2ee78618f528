"""The CRD's CEL rules evaluated on a manifest, as the API server evaluates them on create.

Semantics, from the apiextensions.k8s.io/v1 ValidationRule reference
(https://kubernetes.io/docs/reference/kubernetes-api/extend-resources/custom-resource-definition-v1/#ValidationRule)
and the CRD guide's "Validation rules" section
(https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#validation-rules):

* a rule is scoped to the schema node that declares it: `self` is that node's value, once per
  element of an array or value of a map under it, and only where the value is present;
* the object is defaulted first, and `self` is typed, pruned and escaped (`tools.cel_values`);
* the rule must evaluate to true; if not, the error is at the node's path plus `fieldPath`, with
  the `messageExpression`'s result (when it is a non-empty one-line string), else `message`, else
  "failed rule: <rule>", labelled by `reason` (FieldValueForbidden: "Forbidden: ...");
* an evaluation error (e.g. "no such key") fails the rule too: "<error> evaluating rule: ...",
  as the apiextensions-apiserver's CEL validator reports it;
* a rule with `optionalOldSelf` runs on create with `oldSelf` absent (`optional.none()`).

Rules that cannot be evaluated (`CelRules.unevaluable`) are reported as CEL_UNEVALUABLE violations
of every DynamoGraphDeployment checked, as is a rule whose evaluation fails inside the engine.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from celpy import celtypes
from celpy.evaluation import CELEvalError

from tools.cel_k8s import NO_OLD_SELF
from tools.cel_values import to_cel, with_defaults
from tools.crd_rules import ITEMS, VALUES, CelRules, CompiledRule, SchemaPath
from tools.violations import (
    CEL_UNEVALUABLE,
    CRD_CEL,
    Manifest,
    PathPart,
    Violation,
    json_path,
    object_name,
)

_REASONS = {
    "FieldValueForbidden": "Forbidden",
    "FieldValueRequired": "Required value",
    "FieldValueDuplicate": "Duplicate value",
}
"""The reasons besides FieldValueInvalid (the default), as the API server labels the error."""


def cel_rule_violations(manifest: Manifest, rules: CelRules) -> list[Violation]:
    """Every CEL rule of the CRD that `manifest` breaks on create, and every rule that could not be
    evaluated (CEL_UNEVALUABLE), each naming the rule."""
    name = object_name(manifest)
    found = [_unevaluable(name, rule.rule.where, rule, rule.problem) for rule in rules.unevaluable]
    defaulted = with_defaults(manifest, rules.schema)
    for node, value, path, scope in _scopes(rules, rules.schema, defaulted, [], ()):
        self_value = to_cel(value, node, root=not scope)
        for rule in rules.at(scope):
            found += _evaluate(rule, self_value, path, name)
    return found


def _scopes(
    rules: CelRules, node: Mapping[str, Any], value: Any, path: list[PathPart], scope: SchemaPath
) -> Iterator[tuple[Mapping[str, Any], Any, list[PathPart], SchemaPath]]:
    """(schema node, value, its path, its schema path) of every present value a rule may see."""
    if value is None or not rules.wanted(scope):
        return
    yield node, value, path, scope
    if isinstance(value, list) and isinstance(node.get("items"), Mapping):
        for index, item in enumerate(value):
            yield from _scopes(rules, node["items"], item, [*path, index], (*scope, ITEMS))
    if not isinstance(value, Mapping):
        return
    properties, additional = node.get("properties") or {}, node.get("additionalProperties")
    for key, item in value.items():
        if key in properties:
            yield from _scopes(rules, properties[key], item, [*path, key], (*scope, key))
        elif isinstance(additional, Mapping):
            yield from _scopes(rules, additional, item, [*path, key], (*scope, VALUES))


def _evaluate(
    compiled: CompiledRule, self_value: celtypes.Value, path: Sequence[PathPart], name: str
) -> list[Violation]:
    rule, where = compiled.rule, json_path(path)
    activation: dict[str, Any] = {"self": self_value}
    if rule.optional_old_self:
        activation["oldSelf"] = NO_OLD_SELF
    assert compiled.program is not None, "only rules without a problem are evaluated"
    try:
        result = compiled.program.evaluate(activation)
    except CELEvalError as error:
        return [
            Violation(name, where, f"{_error_text(error)} evaluating rule: {rule.name}", CRD_CEL)
        ]
    except Exception as error:  # noqa: BLE001 - a failure of celpy or of cel_k8s, reported
        return [_unevaluable(name, where, compiled, f"{type(error).__name__}: {error}")]
    if not isinstance(result, bool | celtypes.BoolType):
        return [_unevaluable(name, where, compiled, f"it gave {type(result).__name__}, not bool")]
    if result:
        return []
    message = _failure_message(compiled, activation)
    return [Violation(name, json_path([*path, *compiled.field_path]), message, CRD_CEL)]


def _failure_message(compiled: CompiledRule, activation: Mapping[str, Any]) -> str:
    """The messageExpression's result when it is usable, else the message, with the reason."""
    rule = compiled.rule
    message = rule.name if rule.message else f"failed rule: {rule.rule.strip()}"
    if compiled.message_program is not None:
        try:
            text = compiled.message_program.evaluate(dict(activation))
        except Exception:  # noqa: BLE001 - the API server falls back to `message` on any error
            text = None
        # celpy's `+` of two strings gives a Python str, not a StringType: accept both.
        if isinstance(text, str) and text.strip() and "\n" not in text:
            message = str(text)
    label = _REASONS.get(rule.reason)
    return f"{label}: {message}" if label else message


def _error_text(error: CELEvalError) -> str:
    """celpy's message without the activation dump it appends to some errors."""
    text = str(error.args[0]) if error.args else str(error)
    return text.split(" (in activation", 1)[0]


def _unevaluable(name: str, where: str, compiled: CompiledRule, problem: str) -> Violation:
    rule = compiled.rule
    message = f"CEL rule {rule.rule!r} of {rule.where or 'the root'} not evaluated: {problem}"
    return Violation(name, where, message, CEL_UNEVALUABLE)
