"""The Kubernetes quantity library for cel-python: `quantity("64Gi").isGreaterThan(...)`.

As k8s.io/apiserver/pkg/cel/library/quantity.go defines it (documented under "Kubernetes quantity
library" in https://kubernetes.io/docs/reference/using-api/cel/): `quantity`, `isQuantity`,
`sign`, `isInteger`, `asInteger`, `asApproximateFloat`, `add`, `sub`, `compareTo`,
`isGreaterThan`, `isLessThan`. Quantities are exact decimals here, as resource.Quantity is, and
compare by value (`quantity("1") == quantity("1000m")`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import cast

from celpy import celtypes
from celpy.evaluation import CELEvalError, CELFunction, Result

_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+|[numkMGTPE])?"
)
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_INT64 = range(-(2**63), 2**63)


@dataclass(frozen=True)
class Quantity:
    """A Kubernetes resource.Quantity ("64Gi", "500m", "1e3"), compared by value: `1 == 1000m`."""

    value: Decimal
    text: str = field(compare=False)

    @classmethod
    def parse(cls, text: str) -> Quantity:
        """Kubernetes' quantity syntax: a signed decimal, then a binary (Ki..Ei) or decimal
        (n, u, m, k, M, G, T, P, E) suffix or an exponent (e3, E-2)."""
        match = _QUANTITY.fullmatch(text)
        if match is None:
            raise ValueError(f"quantities must match the regular expression {_QUANTITY.pattern}")
        number, suffix = Decimal(match["number"]), match["suffix"] or ""
        if suffix in _BINARY:
            return cls(number * 1024 ** _BINARY[suffix], text)
        exponent = _DECIMAL.get(suffix) if suffix else 0
        if exponent is None:  # an exponent suffix: e3, E-2
            exponent = int(suffix[1:])
        return cls(number.scaleb(exponent), text)


def _quantity_arg(value: object) -> Quantity:
    if not isinstance(value, Quantity):
        raise TypeError(f"expected a quantity, got {type(value).__name__}")
    return value


def _addend(value: object) -> Decimal:
    if isinstance(value, celtypes.IntType):
        return Decimal(int(value))
    return _quantity_arg(value).value


def quantity(value: Result) -> Result:
    try:
        return cast(Result, Quantity.parse(_text(value)))
    except (ValueError, InvalidOperation) as error:
        return CELEvalError(f"invalid quantity {str(value)!r}: {error}")


def is_quantity(value: Result) -> Result:
    return celtypes.BoolType(_QUANTITY.fullmatch(_text(value)) is not None)


def _compare(left: Result, right: Result) -> int:
    a, b = _quantity_arg(left).value, _quantity_arg(right).value
    return (a > b) - (a < b)


def compare_to(left: Result, right: Result) -> Result:
    return celtypes.IntType(_compare(left, right))


def is_greater_than(left: Result, right: Result) -> Result:
    return celtypes.BoolType(_compare(left, right) > 0)


def is_less_than(left: Result, right: Result) -> Result:
    return celtypes.BoolType(_compare(left, right) < 0)


def sign(value: Result) -> Result:
    number = _quantity_arg(value).value
    return celtypes.IntType((number > 0) - (number < 0))


def is_integer(value: Result) -> Result:
    number = _quantity_arg(value).value
    return celtypes.BoolType(number == number.to_integral_value() and int(number) in _INT64)


def as_integer(value: Result) -> Result:
    if not is_integer(value):
        return CELEvalError(f"cannot convert value {_quantity_arg(value).text} to integer")
    return celtypes.IntType(int(_quantity_arg(value).value))


def as_approximate_float(value: Result) -> Result:
    return celtypes.DoubleType(float(_quantity_arg(value).value))


def add(left: Result, right: Result) -> Result:
    total = _quantity_arg(left).value + _addend(right)
    return cast(Result, Quantity(total, str(total)))


def sub(left: Result, right: Result) -> Result:
    difference = _quantity_arg(left).value - _addend(right)
    return cast(Result, Quantity(difference, str(difference)))


def _text(value: Result) -> str:
    if not isinstance(value, celtypes.StringType):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return str(value)


FUNCTIONS: dict[str, CELFunction] = {
    "quantity": quantity,
    "isQuantity": is_quantity,
    "compareTo": compare_to,
    "isGreaterThan": is_greater_than,
    "isLessThan": is_less_than,
    "sign": sign,
    "isInteger": is_integer,
    "asInteger": as_integer,
    "asApproximateFloat": as_approximate_float,
    "add": add,
    "sub": sub,
}
"""The library, by the name a rule calls each function (`q.f(x)` calls `f(q, x)` in celpy)."""
