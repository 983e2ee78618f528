"""The Kubernetes CEL environment for cel-python (celpy): the functions CRD rules may call.

celpy implements standard CEL: the operators, the macros (`has`, `all`, `exists`, `exists_one`,
`map`, `filter`), `size`, `contains`, `startsWith`, `endsWith`, `matches` (RE2) and the type
conversions. The API server compiles CRD validation rules in a larger environment: cel-go's
extension libraries plus Kubernetes' own (https://kubernetes.io/docs/reference/using-api/cel/).
This module adds the part of it the DynamoGraphDeployment CRD's rules use:

* strings, from cel-go's `ext.Strings` (https://pkg.go.dev/github.com/google/cel-go/ext#Strings):
  `lowerAscii`, `upperAscii`, `split` (with an optional limit, as Go's `strings.SplitN`), `join`;
* the Kubernetes quantity library, all of it (`tools.cel_quantity`);
* optional values, as far as an `optionalOldSelf` rule needs them on create: `oldSelf` is then
  `optional.none()` (apiextensions.k8s.io/v1 ValidationRule, `optionalOldSelf`), here
  `NO_OLD_SELF`, with `hasValue`, `value` and `orValue` (cel-go's OptionalTypes);
* cross-type numeric comparisons (`1 < 1.5`; celpy only compares a double with an int when the
  double comes first), which the API server's base environment enables
  (k8s.io/apiserver/pkg/cel/environment/base.go: `cel.CrossTypeNumericComparisons(true)`);
* `dyn`, standard CEL that celpy lacks.

`compile_rule` refuses a rule that calls anything else (cel-go's lists, regex, URL, IP and CIDR,
format or semver libraries, `.?` selection, message construction, ...), naming what is missing.
The check is on the parsed rule, not its evaluation, because CEL's `&&` and `||` absorb an error
when the other side decides the result: a missing function would otherwise surface on some
objects only.
"""

from __future__ import annotations

import functools
import string
from typing import Any

import celpy
import lark
from celpy import celtypes
from celpy.evaluation import (
    CELEvalError,
    CELFunction,
    Result,
    base_functions,
    bool_ge,
    bool_gt,
    bool_le,
    bool_lt,
)

from tools.cel_quantity import FUNCTIONS as quantity_functions

# --- Strings -------------------------------------------------------------------------------------

_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
_UPPER = str.maketrans(string.ascii_lowercase, string.ascii_uppercase)
_ALL_PARTS = celtypes.IntType(-1)
_NO_SEPARATOR = celtypes.StringType("")


def _text(value: Result) -> str:
    if not isinstance(value, celtypes.StringType):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return str(value)


def lower_ascii(value: Result) -> Result:
    """Only A-Z change, as in cel-go: `'ÄB'.lowerAscii() == 'Äb'`."""
    return celtypes.StringType(_text(value).translate(_LOWER))


def upper_ascii(value: Result) -> Result:
    return celtypes.StringType(_text(value).translate(_UPPER))


def split(value: Result, separator: Result, limit: Result = _ALL_PARTS) -> Result:
    """Go's `strings.SplitN`: limit 0 gives no parts, a negative limit all of them, n > 0 at most
    n (the last holds the rest); an empty separator splits between characters."""
    if not isinstance(limit, celtypes.IntType):
        raise TypeError(f"the limit of split is an int, got {type(limit).__name__}")
    text, sep, count = _text(value), _text(separator), int(limit)
    if count == 0:
        return celtypes.ListType([])
    if sep:
        parts = text.split(sep, count - 1 if count > 0 else -1)
    else:
        parts = list(text)
        if 0 < count < len(parts):
            parts = [*parts[: count - 1], "".join(parts[count - 1 :])]
    return celtypes.ListType([celtypes.StringType(part) for part in parts])


def join(values: Result, separator: Result = _NO_SEPARATOR) -> Result:
    if not isinstance(values, celtypes.ListType):
        raise TypeError(f"join needs a list of strings, got {type(values).__name__}")
    return celtypes.StringType(_text(separator).join(_text(item) for item in values))


# --- Optional values: oldSelf on create ----------------------------------------------------------


class NoValue:
    """`optional.none()`: what `oldSelf` is on create for a rule with `optionalOldSelf: true`."""

    def __repr__(self) -> str:
        return "optional.none()"


NO_OLD_SELF = NoValue()


def _none_arg(value: object) -> NoValue:
    if not isinstance(value, NoValue):
        raise TypeError(f"expected an optional, got {type(value).__name__}")
    return value


def has_value(value: Result) -> Result:
    _none_arg(value)
    return celtypes.BoolType(False)


def optional_value(value: Result) -> Result:
    _none_arg(value)
    return CELEvalError("optional.none() dereference")


def or_value(value: Result, default: Result) -> Result:
    _none_arg(value)
    return default


# --- Cross-type numeric comparisons -------------------------------------------------------------

_NUMBERS = (celtypes.IntType, celtypes.UintType, celtypes.DoubleType)


def _numeric(compare: CELFunction) -> CELFunction:
    """`compare`, but an int or uint and a double compare by value, whichever comes first."""

    def cross_type(left: Result, right: Result) -> Result:
        mixed = (
            isinstance(left, _NUMBERS)
            and isinstance(right, _NUMBERS)
            and type(left) is not type(right)
        )
        if mixed and celtypes.DoubleType in (type(left), type(right)):
            return compare(celtypes.DoubleType(left), celtypes.DoubleType(right))
        return compare(left, right)

    return cross_type


# --- The environment -----------------------------------------------------------------------------

FUNCTIONS: dict[str, CELFunction] = {
    **quantity_functions,
    "lowerAscii": lower_ascii,
    "upperAscii": upper_ascii,
    "split": split,
    "join": join,
    "hasValue": has_value,
    "value": optional_value,
    "orValue": or_value,
    "dyn": lambda value: value,
    "_<_": _numeric(bool_lt),
    "_<=_": _numeric(bool_le),
    "_>_": _numeric(bool_gt),
    "_>=_": _numeric(bool_ge),
}
"""The Kubernetes additions, by the name a rule calls them (`x.f(y)` calls `f(x, y)` in celpy)."""

MACROS = frozenset({"has", "all", "exists", "exists_one", "map", "filter"})
COMPREHENSIONS = MACROS - {"has"}
VARIABLES = frozenset({"self", "oldSelf"})
"""What a CRD rule sees (apiextensions.k8s.io/v1 ValidationRule: `rule`)."""
TYPE_NAMES = frozenset(
    {"bool", "bytes", "double", "int", "uint", "string", "list", "map", "null_type", "type"}
)
_UNSUPPORTED_SYNTAX = {"member_object": "message construction", "dot_ident": "a leading dot"}


class UnsupportedRule(ValueError):
    """A rule that parses but calls what this environment does not provide."""


@functools.cache
def _environment() -> celpy.Environment:
    return celpy.Environment()


def compile_rule(text: str) -> celpy.Runner:
    """`text` parsed and bound to the Kubernetes functions, ready to evaluate.

    Raises celpy's CELParseError for a syntax error (including CEL syntax celpy 0.5 does not
    parse), UnsupportedRule for a function, variable or construct outside this environment.
    """
    ast = _environment().compile(text)
    missing = unsupported_references(ast)
    if missing:
        raise UnsupportedRule(f"not in this CEL environment: {', '.join(missing)}")
    return _environment().program(ast, functions=FUNCTIONS)


def unsupported_references(ast: lark.Tree[Any]) -> list[str]:
    """The functions, free variables and constructs of a parsed rule that nothing here provides."""
    missing: set[str] = set()
    bound: set[str] = set()
    for node in ast.iter_subtrees():
        if node.data in _UNSUPPORTED_SYNTAX:
            missing.add(_UNSUPPORTED_SYNTAX[str(node.data)])
        if node.data not in ("ident_arg", "member_dot_arg", "dot_ident_arg"):
            continue
        name = str(node.children[1 if node.data == "member_dot_arg" else 0])
        if name in COMPREHENSIONS and isinstance(node.children[-1], lark.Tree):
            bound.update(_first_identifier(node.children[-1]))
        elif name not in MACROS and name not in FUNCTIONS and name not in base_functions:
            missing.add(f"{name}()")
    for node in ast.iter_subtrees():
        name = str(node.children[0]) if node.data == "ident" else ""
        if name and name not in VARIABLES | TYPE_NAMES | bound:
            missing.add(f"variable {name}")
    return sorted(missing)


def _first_identifier(exprlist: lark.Tree[Any]) -> list[str]:
    """The variable a comprehension binds: the first argument of `all(x, ...)`."""
    first = exprlist.children[0]
    if not isinstance(first, lark.Tree):
        return []
    return [str(node.children[0]) for node in first.iter_subtrees() if node.data == "ident"][:1]
