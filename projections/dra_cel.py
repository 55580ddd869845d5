"""The CEL device selectors of DRA (DeviceClasses, claim requests, ``deviceClassMappings`` sources) as Kueue
evaluates them when it charges counter sources: an expression over ``device`` — its ``driver``, its
``attributes`` and ``capacity`` by domain then name (a name without a domain is in the driver's), a domain the
device has nothing in reading as an empty map — that must give a bool.

An attribute reads as its value (``int``, ``bool``, ``string``; a ``version`` as a semantic version, which
``semver("...")`` makes too, :mod:`projections.dra_semver`); a capacity as a quantity, which ``quantity("...")``
makes too; ``compareTo``, ``isGreaterThan`` and ``isLessThan`` compare two quantities or two versions.
``cel.bind(name, value, expression)`` names a value, as cel-go's bindings extension does (:func:`_expand_bindings`).
Parsing is done by ``celpy`` (cel-python); what does not parse is a compilation error, anything that fails while
evaluating (a missing key, a type mismatch, a name that is not declared, a result that is not a bool) an
evaluation error. The details are celpy's, not cel-go's, but for a result that is not a bool (Kubernetes' error,
:func:`matches`). cel-python checks no types, so the one type check Kubernetes' DRA compiler makes (the result
must be a bool or of unknown type: an attribute) is made here only where the result's type follows from the
expression's shape alone (:func:`static_type`): a literal, arithmetic or a ternary over such, ``device.driver``,
a capacity, ``size``, a conversion, ``quantity``, ``semver``, ``compareTo``, a version's ``major()`` and the like. Such an expression is a compilation error with
cel-go's detail, "must evaluate to bool or the unknown type, not int"; any other expression not giving a bool is
refused only when evaluated on a device.

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
from projections import dra_semver
from projections.dra_semver import Semver


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
        raise dra_semver.FunctionError(f"quantities must match the regular expression: {text}") from e


def _compare(a: Any, b: Any) -> celtypes.IntType:
    """``a.compareTo(b)`` of two quantities or two semantic versions."""
    if isinstance(a, Semver):
        return dra_semver.compare(a, b)
    if not isinstance(a, _Quantity) or not isinstance(b, _Quantity):
        raise TypeError("compareTo needs two quantities or two semantic versions")
    return celtypes.IntType((a.value > b.value) - (a.value < b.value))


_FUNCTIONS = {
    **dra_semver.FUNCTIONS,
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
        return _compile(expression)
    except RecursionError:
        return Compiled(None, TOO_DEEP)
    finally:
        _restore(limit)


def _compile(expression: str) -> Compiled:
    env = _environment()
    try:
        tree = env.compile(expression)
    except celpy.CELParseError as e:
        return Compiled(None, f"syntax error: {' '.join(str(e).split())}")
    kind = static_type(tree)
    if kind is not None and kind != "bool":
        return Compiled(None, f"must evaluate to bool or the unknown type, not {kind}")
    return Compiled(env.program(_expand_bindings(tree), functions=_FUNCTIONS))


def _expand_bindings(tree: Any) -> Any:
    """``tree`` with each ``cel.bind(name, init, body)`` (cel-go's bindings extension, which Kubernetes' DRA
    environment has) rewritten as ``[init].map(name, body)[0]``, which celpy evaluates alike: ``body`` with ``name``
    standing for ``init``. A bind whose name is not an identifier is left as it is (cel-go refuses it)."""
    for member in list(tree.iter_subtrees()):  # innermost first
        call = member.children[0] if member.data == "member" and len(member.children) == 1 else None
        if getattr(call, "data", None) != "member_dot_arg" or len(call.children) != 3:
            continue
        receiver, method, args = call.children
        if (str(method) != "bind" or _ident_name(receiver) != "cel" or len(args.children) != 3
                or _ident_name(args.children[0]) is None):
            continue
        name, init, body = args.children
        index = next(_environment().compile("[v].map(v, v)[0]").find_data("member_index"))
        mapped = index.children[0].children[0]
        next(mapped.children[0].find_data("exprlist")).children = [init]
        mapped.children[2].children = [name, body]
        member.children = [index]
    return tree


_LITERALS = {"INT_LIT": "int", "UINT_LIT": "uint", "FLOAT_LIT": "double", "STRING_LIT": "string",
             "MLSTRING_LIT": "string", "BYTES_LIT": "bytes", "BOOL_LIT": "bool", "NULL_LIT": "null_type"}
"""cel-go's name of the type of each kind of literal."""
_ARITHMETIC = {"addition_add": ("int", "uint", "double", "string", "bytes"), "addition_sub": ("int", "uint", "double"),
               "multiplication_mul": ("int", "uint", "double"), "multiplication_div": ("int", "uint", "double"),
               "multiplication_mod": ("int", "uint")}
"""The operand types (both alike) for which each operator gives that type."""
_CONVERSIONS = {"int": ("int", "uint", "double", "string"), "uint": ("int", "uint", "double", "string"),
                "double": ("int", "uint", "double", "string"),
                "string": ("int", "uint", "double", "string", "bytes", "bool"), "bytes": ("string", "bytes")}
"""The argument types each conversion function takes."""
_PREDICATES = frozenset({"startsWith", "endsWith", "contains", "matches", "exists", "all", "exists_one",
                         "isGreaterThan", "isLessThan"})
"""Methods that give a bool."""
_SIZED = frozenset({"string", "bytes"})
_QUANTITY = "kubernetes.Quantity"
_SEMVER = dra_semver.TYPE_NAME
_SEMVER_PARTS = frozenset({"major", "minor", "patch"})
_WRAPPERS = frozenset({"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary",
                       "member", "primary", "paren_expr"})
"""The nodes of celpy's tree that, with one child, are that child."""


def static_type(node: Any) -> str | None:
    """cel-go's name of the type the parsed expression ``node`` (celpy's tree) gives, when its shape alone decides
    it and it is well typed; None when it depends on the device (an attribute is of unknown type), on what is not
    modelled here, or when cel-go would refuse the expression with another error."""
    while True:
        kids = [k for k in node.children if hasattr(k, "data")]
        if node.data == "expr" and len(kids) == 3:  # ternary
            a, b = static_type(kids[1]), static_type(kids[2])
            return a if a == b and static_type(kids[0]) in (None, "bool") else None
        if node.data in ("conditionalor", "conditionaland", "relation") and len(kids) == 2:
            return "bool"
        if node.data == "unary" and len(kids) == 2:
            inner = static_type(kids[1])
            if kids[0].data == "unary_not":
                return "bool"
            return inner if inner in ("int", "double") else None
        if node.data in ("addition", "multiplication") and len(kids) == 2:
            left, right = static_type(kids[0].children[0]), static_type(kids[1])
            return left if left == right and left in _ARITHMETIC.get(kids[0].data, ()) else None
        if len(kids) == 1 and node.data in _WRAPPERS:
            node = kids[0]
            continue
        break
    return _leaf_type(node, kids)


def _ident_name(node: Any) -> str | None:
    """The name of ``node`` when it is a bare identifier."""
    while getattr(node, "data", None) in _WRAPPERS and len(node.children) == 1:
        node = node.children[0]
    return str(node.children[0]) if getattr(node, "data", None) == "ident" else None


def _is_device(node: Any) -> bool:
    """``node`` is the bare identifier ``device``."""
    return _ident_name(node) == "device"


def _is_capacity_domain(node: Any) -> bool:
    """``node`` is ``device.capacity[domain]`` (or ``device.capacity.domain``): a map of quantities."""
    while getattr(node, "data", None) == "member" and len(node.children) == 1:
        node = node.children[0]
    if getattr(node, "data", None) not in ("member_dot", "member_index"):
        return False
    inner = node.children[0]
    while getattr(inner, "data", None) == "member" and len(inner.children) == 1:
        inner = inner.children[0]
    return (getattr(inner, "data", None) == "member_dot" and [str(t) for t in inner.children[1:]] == ["capacity"]
            and _is_device(inner.children[0]))


def _leaf_type(node: Any, kids: list[Any]) -> str | None:
    tokens = [str(k) for k in node.children if not hasattr(k, "data")]
    if node.data == "literal":
        return _LITERALS.get(node.children[0].type)
    if node.data in ("member_dot", "member_index") and _is_capacity_domain(kids[0]):
        return _QUANTITY
    if node.data == "member_dot":
        return "string" if tokens == ["driver"] and _is_device(kids[0]) else None
    if node.data == "member_dot_arg":
        method = tokens[0]
        args = [static_type(e) for e in kids[1].children] if len(kids) > 1 else []
        if method in _PREDICATES:
            return "bool"
        if method == "compareTo":
            receiver = static_type(kids[0])
            return "int" if receiver in (_QUANTITY, _SEMVER) and args == [receiver] else None
        if method in _SEMVER_PARTS:
            return "int" if static_type(kids[0]) == _SEMVER and not args else None
        if method == "size":
            return "int" if static_type(kids[0]) in _SIZED and not args else None
        return None
    if node.data == "ident_arg":
        name = tokens[0]
        args = [static_type(e) for e in kids[0].children] if kids else []
        if name == "has":
            return "bool"
        if name in ("semver", "isSemver") and args in (["string"], ["string", "bool"]):
            return _SEMVER if name == "semver" else "bool"
        if len(args) != 1:
            return None
        if name == "size":
            return "int" if args[0] in _SIZED else None
        if name == "quantity":
            return _QUANTITY if args[0] == "string" else None
        return name if args[0] in _CONVERSIONS.get(name, ()) else None
    return None


class _Domains(celtypes.MapType):
    """``device.attributes`` / ``device.capacity``: a domain the device has nothing in is an empty map."""

    def __getitem__(self, key: Any) -> Any:
        return super().get(key, celtypes.MapType({}))


def _attribute(name: str, a: o.DeviceAttribute) -> Any:
    """What CEL reads of attribute ``name``; ValueError for a version that does not parse."""
    if a.int_value is not None:
        return celtypes.IntType(a.int_value)
    if a.bool_value is not None:
        return celtypes.BoolType(a.bool_value)
    if a.string is None and a.version is not None:
        return dra_semver.attribute_version(name, a.version)
    return celtypes.StringType(a.string or "")


def _by_domain(driver: str, values: dict[str, Any]) -> _Domains:
    found: dict[str, dict[celtypes.StringType, Any]] = {}
    for name in sorted(values):
        domain, _, short = name.rpartition("/")
        found.setdefault(domain or driver, {})[celtypes.StringType(short)] = values[name]
    return _Domains({celtypes.StringType(d): celtypes.MapType(m) for d, m in found.items()})


_BROKEN = "@broken"
"""The key of an activation that holds, instead of the device, why no selector evaluates on it."""


def device_activation(driver: str, device: o.Device) -> dict[str, Any]:
    """What an expression reads of ``device`` (published by ``driver``). A ``version`` attribute that is not a
    semantic version fails every selector on the device, as in Kubernetes (of several, the first by name)."""
    values = {}
    for k in sorted(device.attributes):
        try:
            values[k] = _attribute(k, device.attributes[k])
        except ValueError as e:
            return {_BROKEN: str(e)}
    attributes = _by_domain(driver, values)
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
    broken = activation.get(_BROKEN)
    if broken is not None:
        return False, broken
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
        return False, _not_bool(result)
    return bool(result), ""


_CONVERSION_ERRORS = (
    (_Quantity, "kubernetes.Quantity", "type conversion error from 'Quantity' to 'bool'"),
    (Semver, _SEMVER, "type conversion error from 'Semver' to 'bool'"),
    (celtypes.StringType, "string", "unsupported native conversion from string to 'bool'"),
    (celtypes.IntType, "int", "unsupported type conversion from 'int' to bool"),
    (celtypes.UintType, "uint", "unsupported type conversion from 'uint' to bool"),
    (celtypes.DoubleType, "double", "type conversion error from Double to 'bool'"),
    (celtypes.BytesType, "bytes", "type conversion error from Bytes to 'bool'"),
    (celtypes.ListType, "list", ""),
    (celtypes.MapType, "map", ""),
)
"""By celpy type (a subclass first): cel-go's name of the type and its error converting a value of it to a bool."""


def _not_bool(result: Any) -> str:
    """Kubernetes' error for a selector's result that is not a bool (cel-go's type name and conversion error; a
    list's, a map's or a null's conversion error is not reproduced)."""
    name, detail = next(((n, d) for kind, n, d in _CONVERSION_ERRORS if isinstance(result, kind)), ("null_type", ""))
    head = f"CEL result of type {name} could not be converted to bool"
    return f"{head}: {detail}" if detail else head


def _eval_detail(e: celpy.CELEvalError) -> str:
    """A short, stable message: celpy's first argument (the activation it appends left out), and the key that
    was not found."""
    args = e.args
    head = str(args[0]) if args else "evaluation error"
    head = head.split(" (in activation", 1)[0]
    if len(args) > 2 and isinstance(args[1], type) and issubclass(args[1], dra_semver.FunctionError) and args[2]:
        return str(args[2][0])  # a library function's own message
    if head == "no such key" and len(args) > 2 and args[2]:
        return f"no such key: {args[2][0]}"
    return head
