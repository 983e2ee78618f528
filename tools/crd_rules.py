"""The CEL rules a CRD schema carries (`x-kubernetes-validations`): found, compiled, sorted.

Whatever rules the CRD file carries are the rules checked (`tools.cel_check` evaluates them), so a
newer CRD's rules apply as soon as its file is used (`--crd`). Each rule is one of:

* evaluated on create: it compiles in the Kubernetes CEL environment of `tools.cel_k8s`;
* not applicable on create: a transition rule (it reads `oldSelf`) without `optionalOldSelf`,
  which the API server runs on update only (apiextensions.k8s.io/v1 ValidationRule, `rule`:
  "Transition rules by default are applied only on UPDATE requests");
* unevaluable: it does not compile here (a syntax celpy lacks, a function `cel_k8s` lacks, a
  malformed `fieldPath`), or it is declared under allOf/anyOf/oneOf/not, where this engine does not
  look. Such rules are reported by rule text and schema path, never skipped silently.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import celpy
from celpy.celparser import CELParseError

from tools.cel_k8s import UnsupportedRule, compile_rule

ITEMS = "[*]"
"""A schema path step into each element of an array (`items`)."""
VALUES = "{*}"
"""A schema path step into each value of a map (`additionalProperties`)."""
SchemaPath = tuple[str, ...]

_JUNCTORS = ("allOf", "anyOf", "oneOf")
_FIELD_PATH_STEP = re.compile(r"\.([A-Za-z0-9_$-]+)|\['([^']*)'\]")


@dataclass(frozen=True)
class CelRule:
    """One entry of a schema node's `x-kubernetes-validations`, and where it is declared."""

    scope: SchemaPath
    rule: str
    message: str = ""
    message_expression: str = ""
    field_path: str = ""
    reason: str = ""
    optional_old_self: bool = False
    declared_under: str = ""
    """A junctor (allOf, ...) on the way from the root: rules there are not evaluated here."""

    @property
    def where(self) -> str:
        """The schema path, with [*] for array elements and {*} for map values."""
        return "".join(
            step if step in (ITEMS, VALUES) else f".{step}" for step in self.scope
        ).lstrip(".")

    @property
    def name(self) -> str:
        """How the API server names the rule in errors: its message, else its text."""
        return (self.message or self.rule).strip()


@dataclass(frozen=True)
class CompiledRule:
    """A rule ready to evaluate, or `problem`: why it cannot be."""

    rule: CelRule
    program: celpy.Runner | None = None
    message_program: celpy.Runner | None = None
    field_path: tuple[str, ...] = ()
    transition: bool = False
    problem: str = ""

    @property
    def applies_on_create(self) -> bool:
        return not self.transition or self.rule.optional_old_self


@dataclass(frozen=True)
class CelRules:
    """Every CEL rule of one CRD version's schema, compiled."""

    schema: Mapping[str, Any]
    rules: tuple[CompiledRule, ...]
    _by_scope: dict[SchemaPath, list[CompiledRule]] = field(init=False, repr=False)
    _wanted: frozenset[SchemaPath] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # Computed once: the evaluation asks for every node of every manifest.
        by_scope: dict[SchemaPath, list[CompiledRule]] = {}
        for rule in self.evaluated:
            by_scope.setdefault(rule.rule.scope, []).append(rule)
        wanted = {scope[:depth] for scope in by_scope for depth in range(len(scope) + 1)}
        object.__setattr__(self, "_by_scope", by_scope)
        object.__setattr__(self, "_wanted", frozenset(wanted))

    @property
    def evaluated(self) -> list[CompiledRule]:
        return [r for r in self.rules if not r.problem and r.applies_on_create]

    @property
    def transition_only(self) -> list[CompiledRule]:
        return [r for r in self.rules if not r.applies_on_create]

    @property
    def unevaluable(self) -> list[CompiledRule]:
        return [r for r in self.rules if r.problem and r.applies_on_create]

    def at(self, scope: SchemaPath) -> list[CompiledRule]:
        """The rules evaluated on create that are declared at `scope`."""
        return self._by_scope.get(scope, [])

    def wanted(self, scope: SchemaPath) -> bool:
        """Whether a rule evaluated on create is declared at `scope` or below it."""
        return scope in self._wanted


def declared_rules(schema: Mapping[str, Any]) -> list[CelRule]:
    """Every `x-kubernetes-validations` entry of an openAPIV3Schema, in schema order."""
    return list(_declared(schema, (), ""))


def _declared(node: Mapping[str, Any], scope: SchemaPath, under: str) -> Iterator[CelRule]:
    for entry in node.get("x-kubernetes-validations") or []:
        yield CelRule(
            scope=scope,
            rule=str(entry.get("rule", "")),
            message=str(entry.get("message") or ""),
            message_expression=str(entry.get("messageExpression") or ""),
            field_path=str(entry.get("fieldPath") or ""),
            reason=str(entry.get("reason") or ""),
            optional_old_self=bool(entry.get("optionalOldSelf")),
            declared_under=under,
        )
    for name, child in (node.get("properties") or {}).items():
        yield from _declared(child, (*scope, name), under)
    for key, step in (("items", ITEMS), ("additionalProperties", VALUES)):
        if isinstance(node.get(key), Mapping):
            yield from _declared(node[key], (*scope, step), under)
    for junctor in _JUNCTORS:
        for branch in node.get(junctor) or []:
            yield from _declared(branch, scope, under or junctor)
    if isinstance(node.get("not"), Mapping):
        yield from _declared(node["not"], scope, under or "not")


def compile_rules(schema: Mapping[str, Any]) -> CelRules:
    """The CEL rules of `schema` (one version's openAPIV3Schema), each compiled or explained."""
    return CelRules(schema, tuple(compile_one(rule) for rule in declared_rules(schema)))


def compile_one(rule: CelRule) -> CompiledRule:
    """`rule` ready to evaluate, or with the problem that keeps it from being evaluated. A rule
    that names `oldSelf` is a transition rule, as the API server decides on compiling it."""
    transition = re.search(r"\boldSelf\b", rule.rule) is not None
    if rule.declared_under:
        problem = f"declared under {rule.declared_under}, where this engine evaluates no rule"
        return CompiledRule(rule, transition=transition, problem=problem)
    field_path = _field_path_steps(rule.field_path)
    if field_path is None:
        problem = f"fieldPath {rule.field_path!r} is not a relative path like .a['b']"
        return CompiledRule(rule, transition=transition, problem=problem)
    try:
        program = compile_rule(rule.rule)
        message = compile_rule(rule.message_expression) if rule.message_expression else None
    except CELParseError as error:  # its text is the rule with a caret under the trouble
        problem = f"celpy cannot parse it: {' '.join(str(error).split())}"
        return CompiledRule(rule, transition=transition, problem=problem)
    except UnsupportedRule as error:
        return CompiledRule(rule, transition=transition, problem=str(error))
    return CompiledRule(rule, program, message, field_path, transition)


def _field_path_steps(text: str) -> tuple[str, ...] | None:
    steps: list[str] = []
    position = 0
    while position < len(text):
        match = _FIELD_PATH_STEP.match(text, position)
        if match is None:
            return None
        steps.append(match[1] or match[2])
        position = match.end()
    return tuple(steps)


def rules_listing(rules: CelRules) -> list[str]:
    """What the CLI prints about the rules: counts, then each rule that is not evaluated."""
    counts = (
        f"{len(rules.rules)} CEL rules: {len(rules.evaluated)} evaluated on create, "
        f"{len(rules.transition_only)} not applicable on create, "
        f"{len(rules.unevaluable)} unevaluable"
    )
    lines = [counts]
    for compiled in rules.transition_only:
        note = f" (and not evaluable here: {compiled.problem})" if compiled.problem else ""
        rule = compiled.rule
        lines.append(f"not applicable on create (transition rule): {rule.where}: {rule.name}{note}")
    for compiled in rules.unevaluable:
        rule = compiled.rule
        lines.append(f"unevaluable: {rule.where}: {rule.rule!r}: {compiled.problem}")
    return lines
