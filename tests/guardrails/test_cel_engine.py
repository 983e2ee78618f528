"""The CEL engine on small schemas: Kubernetes' rule semantics and its CEL functions.

tools.cel_check, tools.crd_rules and tools.cel_values against the apiextensions.k8s.io/v1
ValidationRule reference; tools.cel_k8s and tools.cel_quantity against cel-go's strings
extension and Kubernetes' quantity library. No CRD file is needed.
"""

from __future__ import annotations

from typing import Any

import pytest
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError, Result

from tools.cel_check import cel_rule_violations
from tools.cel_k8s import NO_OLD_SELF, UnsupportedRule, compile_rule
from tools.crd_rules import compile_rules
from tools.violations import CEL_UNEVALUABLE, CRD_CEL, Violation


def schema_with(spec: dict[str, Any]) -> dict[str, Any]:
    """A CRD root schema whose `spec` is `spec`."""
    return {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
        },
    }


def check(spec_schema: dict[str, Any], spec: Any, **root: Any) -> list[Violation]:
    manifest = {"apiVersion": "x.io/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": spec}
    return cel_rule_violations(manifest | root, compile_rules(schema_with(spec_schema)))


def obj(rules: list[dict[str, Any]], **properties: Any) -> dict[str, Any]:
    """An object schema with `properties` and the CEL `rules`."""
    return {"type": "object", "properties": properties, "x-kubernetes-validations": rules}


STRING = {"type": "string"}
INTEGER = {"type": "integer"}


def found(violations: list[Violation]) -> list[tuple[str, str, str]]:
    return [(v.path, v.message, v.check) for v in violations]


# --- Messages, paths and reasons -----------------------------------------------------------------


def test_a_rule_without_message_is_named_by_its_text() -> None:
    violations = check(obj([{"rule": "self.size > 1"}], size=INTEGER), {"size": 1})
    assert found(violations) == [("spec", "failed rule: self.size > 1", CRD_CEL)]


def test_message_expression_wins_and_falls_back_to_message() -> None:
    rule = {"rule": "self.size > 1", "message": "too small"}
    schema = obj([rule | {"messageExpression": "'size ' + string(self.size) + ' is too small'"}])
    schema["properties"] = {"size": INTEGER}
    assert found(check(schema, {"size": 1})) == [("spec", "size 1 is too small", CRD_CEL)]
    for unusable in ("''", "'  '", "'two\\nlines'", "self.nothing", "1"):
        schema["x-kubernetes-validations"] = [rule | {"messageExpression": unusable}]
        assert found(check(schema, {"size": 1})) == [("spec", "too small", CRD_CEL)], unusable


def test_field_path_and_reason_shape_the_error() -> None:
    rule = {
        "rule": "!has(self.a) || self.a.size() < 2",
        "message": "a is too long",
        "fieldPath": ".a['b.c']",
        "reason": "FieldValueForbidden",
    }
    violations = check(obj([rule], a={"type": "string"}), {"a": "long"})
    assert found(violations) == [('spec.a["b.c"]', "Forbidden: a is too long", CRD_CEL)]


def test_an_evaluation_error_fails_the_rule_as_the_api_server_does() -> None:
    violations = check(obj([{"rule": "self.mode == 'x'", "message": "m"}], mode=STRING), {})
    ((path, message, kind),) = found(violations)
    assert (path, kind) == ("spec", CRD_CEL)
    assert "mode" in message and message.endswith("evaluating rule: m")


# --- Scopes: where `self` is bound ---------------------------------------------------------------


def test_array_and_map_rules_run_once_per_element_and_value() -> None:
    spec = obj(
        [],
        items={"type": "array", "items": {"type": "integer", "x-kubernetes-validations": [{"rule": "self < 10", "message": "big"}]}},
        limits={"type": "object", "additionalProperties": {"type": "integer", "x-kubernetes-validations": [{"rule": "self >= 0", "message": "negative"}]}},
        unused=obj([{"rule": "false", "message": "never: absent values are not validated"}]),
    )  # fmt: skip
    violations = check(spec, {"items": [1, 20, 30], "limits": {"cpu": -1, "a/b": 2}})
    assert found(violations) == [
        ("spec.items[1]", "big", CRD_CEL),
        ("spec.items[2]", "big", CRD_CEL),
        ("spec.limits.cpu", "negative", CRD_CEL),
    ]


# --- What `self` holds ---------------------------------------------------------------------------


def test_null_unknown_and_unknown_type_fields_are_absent() -> None:
    rule = {"rule": "!has(self.a) && !has(self.extra) && !has(self.free)", "message": "seen"}
    spec = obj([rule], a=STRING, free={"x-kubernetes-preserve-unknown-fields": True})
    assert check(spec, {"a": None, "extra": 1, "free": {"x": 1}}) == []


def test_property_names_are_escaped_and_map_keys_are_not() -> None:
    rule = {"rule": "self.x__dash__prop == 1 && self.__namespace__ == 'n' && self.m['a.b'] == 2"}
    spec = obj(
        [rule],
        **{"x-prop": INTEGER, "namespace": STRING},
        m={"type": "object", "additionalProperties": INTEGER},
    )
    assert check(spec, {"x-prop": 1, "namespace": "n", "m": {"a.b": 2}}) == []


def test_the_root_sees_only_name_and_generate_name_of_the_metadata() -> None:
    root_rule = {"rule": "self.metadata.name == 't' && !has(self.metadata.labels)"}
    schema = schema_with(obj([], size=INTEGER)) | {"x-kubernetes-validations": [root_rule]}
    manifest = {"apiVersion": "x/v1", "kind": "T", "metadata": {"name": "t", "labels": {"a": "b"}}}
    assert cel_rule_violations(manifest, compile_rules(schema)) == []


def test_defaults_apply_before_the_rules() -> None:
    mode = {"type": "string", "default": "IntraPod"}
    assert check(obj([{"rule": "self.mode == 'IntraPod'"}], mode=mode), {}) == []


def test_number_fields_are_doubles_and_compare_with_ints() -> None:
    rule = {"rule": "type(self.w) == double && 0 < self.w && self.w <= 1"}
    assert check(obj([rule], w={"type": "number"}), {"w": 1}) == []


# --- Rules the engine cannot evaluate, and transition rules --------------------------------------

UNEVALUABLE = [
    ("self.a.indexOf('x') > 0", "indexOf()"),
    ("self.?a.orValue('') == ''", "celpy cannot parse it: self.?a"),
    ("true || self.a.nosuch()", "nosuch()"),  # `||` would hide the missing function when true
    ("optional.none() == self", "variable optional"),
]


@pytest.mark.parametrize(("rule", "named"), UNEVALUABLE)
def test_a_rule_that_cannot_be_evaluated_is_reported_by_text_and_path(
    rule: str, named: str
) -> None:
    spec = obj([], inner=obj([{"rule": rule}], a=STRING))
    ((path, message, kind),) = found(check(spec, {}))  # reported even where `inner` is absent
    assert (path, kind) == ("spec.inner", CEL_UNEVALUABLE)
    assert f"CEL rule {rule!r} of spec.inner not evaluated" in message
    assert named in message


def test_a_rule_under_a_junctor_is_unevaluable_not_skipped() -> None:
    spec = obj([], a=STRING) | {"anyOf": [{"x-kubernetes-validations": [{"rule": "true"}]}]}
    ((_, message, kind),) = found(check(spec, {}))
    assert kind == CEL_UNEVALUABLE and "declared under anyOf" in message


def test_transition_rules_are_listed_and_optional_old_self_runs_on_create() -> None:
    rules = compile_rules(
        schema_with(
            obj(
                [
                    {"rule": "self.a == oldSelf.a", "message": "a is immutable"},
                    {"rule": "oldSelf.hasValue() || !has(self.a)", "optionalOldSelf": True},
                ],
                a=STRING,
            )
        )
    )
    assert [r.rule.name for r in rules.transition_only] == ["a is immutable"]
    assert len(rules.evaluated) == 1
    manifest = {"apiVersion": "x/v1", "kind": "T", "metadata": {"name": "t"}, "spec": {"a": "x"}}
    assert found(cel_rule_violations(manifest, rules)) == [
        ("spec", "failed rule: oldSelf.hasValue() || !has(self.a)", CRD_CEL)
    ]


def test_compile_names_what_is_missing() -> None:
    with pytest.raises(UnsupportedRule, match=r"indexOf\(\), variable y"):
        compile_rule("self.indexOf(y) > 0")
    assert isinstance(compile_rule("self.all(x, self.exists(z, z == x))"), object)


def test_a_schema_without_rules_checks_nothing() -> None:
    rules = compile_rules(schema_with({"type": "object", "properties": {"a": STRING}}))
    assert (rules.rules, rules.wanted(()), rules.at(())) == ((), False, [])
    assert check({"type": "object", "properties": {"a": STRING}}, {"a": "x"}) == []


# --- The Kubernetes functions --------------------------------------------------------------------


def evaluate(expression: str, value: Any = None) -> Result:
    return compile_rule(expression).evaluate({"self": json_to_cel(value), "oldSelf": NO_OLD_SELF})


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("'ÄBc'.lowerAscii()", "Äbc"),  # ASCII letters only, as in cel-go
        ("'äbC'.upperAscii()", "äBC"),
        ("'a/b/c'.split('/')", ["a", "b", "c"]),
        ("'a/b/c'.split('/', 2)", ["a", "b/c"]),
        ("'a/b/c'.split('/', 0)", []),
        ("'abc'.split('')", ["a", "b", "c"]),
        ("'abc'.split('', 2)", ["a", "bc"]),
        ("['a', 'b'].join('-')", "a-b"),
        ("['a', 'b'].join()", "ab"),
        ("oldSelf.hasValue()", False),
        ("oldSelf.orValue(3)", 3),
        ("dyn(1) == 1", True),
        ("1 < 1.5 && 1.5 > 1 && 2u >= 1.5", True),
    ],
)
def test_string_optional_and_comparison_functions(expression: str, expected: object) -> None:
    assert evaluate(expression) == json_to_cel(expected)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("64Gi", 64 * 2**30),
        ("500m", 0.5),
        ("1e3", 1000),
        ("1E", 10**18),
        ("1.5k", 1500),
        ("+2", 2),
        ("-1Ki", -1024),
        (".5", 0.5),
        ("0", 0),
    ],
)
def test_quantities_parse_as_kubernetes_reads_them(text: str, value: float) -> None:
    assert evaluate(f"isQuantity('{text}')") == celtypes.BoolType(True)
    assert evaluate(f"quantity('{text}').asApproximateFloat()") == celtypes.DoubleType(value)


@pytest.mark.parametrize("text", ["", "Gi", "1 Gi", "1ki", "1.2.3", "0x10"])
def test_malformed_quantities_are_refused(text: str) -> None:
    assert evaluate(f"isQuantity('{text}')") == celtypes.BoolType(False)
    with pytest.raises(CELEvalError, match="invalid quantity"):
        evaluate(f"quantity('{text}')")


@pytest.mark.parametrize(
    "expression",
    [
        "quantity('1') == quantity('1000m')",
        "quantity('64Gi').isGreaterThan(quantity('0'))",
        "quantity('500m').isLessThan(quantity('1'))",
        "quantity('1Ki').compareTo(quantity('1k')) == 1",
        "quantity('-3').sign() == -1 && quantity('0').sign() == 0",
        "quantity('2k').isInteger() && !quantity('1.5').isInteger()",
        "quantity('2k').asInteger() == 2000",
        "quantity('1Gi').add(1).compareTo(quantity('1073741825')) == 0",
        "quantity('2').sub(quantity('500m')) == quantity('1500m')",
    ],
)
def test_quantity_library(expression: str) -> None:
    assert evaluate(expression) == celtypes.BoolType(True)


def test_quantity_errors() -> None:
    with pytest.raises(CELEvalError, match="cannot convert value 500m to integer"):
        evaluate("quantity('500m').asInteger()")
    with pytest.raises(CELEvalError, match="no such overload"):
        evaluate("quantity('1').isGreaterThan(1)")
    with pytest.raises(CELEvalError, match=r"optional.none\(\) dereference"):
        evaluate("oldSelf.value()")
