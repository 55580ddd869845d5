"""The CEL device selectors of DRA (DeviceClasses, claim requests, ``deviceClassMappings`` sources) as Kueue
evaluates them when it charges counter sources: an expression over ``device`` — its ``driver``, its
``attributes`` and ``capacity`` by domain then name (a name without a domain is in the driver's), a domain the
device has nothing in reading as an empty map — that must give a bool.

An attribute reads as its value (``int``, ``bool``, ``string``; a ``version`` as its string); a capacity as a
quantity, which ``quantity("...")`` makes too and ``compareTo``, ``isGreaterThan`` and ``isLessThan`` compare.
Parsing is done by ``celpy`` (cel-python); what does not parse is a compilation error, anything that fails while
evaluating (a missing key, a type mismatch, a name that is not declared, a result that is not a bool) an
evaluation error. The details are celpy's, not cel-go's.

Pure: no I/O, no clock; compiled programs are kept by expression (:func:`compile_selector`).
"""

from __future__ import annotations

import sys
from decimal import Decimal
from functools import lru_cache
from typing import Any, NamedTuple

import celpy
from celpy import celtypes

from events import objects as o
from events.quantity import QuantityError, parse_quantity


class Compiled(NamedTuple):
    program: Any
    """The celpy program, None with :attr:`error`."""
    error: str = ""


class _Quantity(celtypes.StringType):
    """A Kubernetes quantity in CEL: compared by value, never as text."""

    value: Decimal

    def __new__(cls, text: str, value: Decimal) -> _Quantity:
        q = super().__new__(cls, text)
        q.value = value
        return q


def _quantity(text: Any) -> _Quantity:
    try:
        return _Quantity(str(text), parse_quantity(str(text)))
    except QuantityError as e:
        raise ValueError(f"quantities must match the regular expression: {text}") from e


def _compare(a: Any, b: Any) -> celtypes.IntType:
    if not isinstance(a, _Quantity) or not isinstance(b, _Quantity):
        raise TypeError("compareTo needs two quantities")
    return celtypes.IntType((a.value > b.value) - (a.value < b.value))


_FUNCTIONS = {
    "quantity": _quantity,
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: celtypes.BoolType(_compare(a, b) > 0),
    "isLessThan": lambda a, b: celtypes.BoolType(_compare(a, b) < 0),
}


CEL_RECURSION_LIMIT = 2500
"""The interpreter's recursion limit celpy sets whenever an environment is made (for CEL's nesting minimums)."""
TOO_DEEP = "expression nested too deeply for kueue-es's CEL interpreter"
"""The error of an expression cel-python cannot parse or evaluate within :data:`CEL_RECURSION_LIMIT` (a hundred
levels of parentheses do not evaluate; Kubernetes' CEL takes more): the workload is refused with it rather than the fold failing."""


def _deepen() -> int:
    """Raise the interpreter's recursion limit to :data:`CEL_RECURSION_LIMIT` while CEL parses or evaluates, and
    return the limit to put back (:func:`_restore`): the process's limit is never left changed (a limit changed
    in the middle of a run — this module imported, or its environment made, during the first DRA charge — is what
    hypothesis refuses in a test)."""
    limit = sys.getrecursionlimit()
    if limit < CEL_RECURSION_LIMIT:
        sys.setrecursionlimit(CEL_RECURSION_LIMIT)
    return limit


def _restore(limit: int) -> None:
    if limit < CEL_RECURSION_LIMIT:
        sys.setrecursionlimit(limit)


@lru_cache(maxsize=1)
def _environment() -> celpy.Environment:
    """The CEL environment (its parser is built on first use: a tenth of a second); the recursion limit celpy sets
    as it makes it is put back as it was."""
    limit = sys.getrecursionlimit()
    try:
        return celpy.Environment()
    finally:
        sys.setrecursionlimit(limit)


@lru_cache(maxsize=1024)
def compile_selector(expression: str) -> Compiled:
    """``expression`` compiled (kept by expression, as Kueue keeps its compiled selectors)."""
    limit = _deepen()
    try:
        env = _environment()
        return Compiled(env.program(env.compile(expression), functions=_FUNCTIONS))
    except celpy.CELParseError as e:
        return Compiled(None, f"syntax error: {' '.join(str(e).split())}")
    except RecursionError:
        return Compiled(None, TOO_DEEP)
    finally:
        _restore(limit)


class _Domains(celtypes.MapType):
    """``device.attributes`` / ``device.capacity``: a domain the device has nothing in is an empty map."""

    def __getitem__(self, key: Any) -> Any:
        return super().get(key, celtypes.MapType({}))


def _attribute(a: o.DeviceAttribute) -> Any:
    if a.int_value is not None:
        return celtypes.IntType(a.int_value)
    if a.bool_value is not None:
        return celtypes.BoolType(a.bool_value)
    return celtypes.StringType(a.string if a.string is not None else a.version or "")


def _by_domain(driver: str, values: dict[str, Any]) -> _Domains:
    found: dict[str, dict[celtypes.StringType, Any]] = {}
    for name in sorted(values):
        domain, _, short = name.rpartition("/")
        found.setdefault(domain or driver, {})[celtypes.StringType(short)] = values[name]
    return _Domains({celtypes.StringType(d): celtypes.MapType(m) for d, m in found.items()})


def device_activation(driver: str, device: o.Device) -> dict[str, Any]:
    """What an expression reads of ``device`` (published by ``driver``)."""
    attributes = _by_domain(driver, {k: _attribute(v) for k, v in device.attributes.items()})
    capacity = _by_domain(driver, {k: _Quantity(str(v.value), _capacity(v.value)) for k, v in device.capacity.items()})
    return {"device": celtypes.MapType({
        celtypes.StringType("driver"): celtypes.StringType(driver),
        celtypes.StringType("attributes"): attributes,
        celtypes.StringType("capacity"): capacity,
    })}


def _capacity(q: o.Quantity) -> Decimal:
    try:
        return parse_quantity(q)
    except QuantityError:
        return Decimal(0)


def matches(program: Any, activation: dict[str, Any]) -> tuple[bool, str]:
    """Whether the device of ``activation`` satisfies ``program``, and the evaluation error ("" when none)."""
    limit = _deepen()
    try:
        result = program.evaluate(activation)
    except celpy.CELEvalError as e:
        return False, _eval_detail(e)
    except (TypeError, ValueError, KeyError, ZeroDivisionError) as e:  # raised by a function
        return False, str(e)
    except RecursionError:
        return False, TOO_DEEP
    finally:
        _restore(limit)
    if isinstance(result, celpy.CELEvalError):
        return False, _eval_detail(result)
    if not isinstance(result, celtypes.BoolType):
        return False, f"CEL result of type {type(result).__name__} should have been a bool"
    return bool(result), ""


def _eval_detail(e: celpy.CELEvalError) -> str:
    """A short, stable message: celpy's first argument (the activation it appends left out), and the key that
    was not found."""
    args = e.args
    head = str(args[0]) if args else "evaluation error"
    head = head.split(" (in activation", 1)[0]
    if head == "no such key" and len(args) > 2 and args[2]:
        return f"no such key: {args[2][0]}"
    return head
