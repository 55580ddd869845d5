"""Kubernetes field errors in the words Kueue prints them (``k8s.io/apimachinery``'s ``field.Error``), for refusals
that should read as Kueue's own: the body after the field's path, which kueue-es puts after ``field `<path>`: ``."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal

from events.errors import InvalidInput, aggregate

_NAMED = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
          '"': '\\"', "\\": "\\\\"}


def go_quote(text: str) -> str:
    """``text`` as Go's ``%q`` writes it: printable characters as they are, the rest escaped."""
    out = []
    for ch in text:
        if ch in _NAMED:
            out.append(_NAMED[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def go_string_slice(type_name: str, values: Sequence[str]) -> str:
    """A slice of a named string type as Go's ``%#v`` writes it (``[]v1beta2.PreemptionStrategy{"A", "B"}``): how
    a field error shows a list it refuses."""
    return f"[]{type_name}{{{', '.join(go_quote(v) for v in values)}}}"


def not_supported(shown: str, supported: Sequence[str]) -> str:
    """``field.NotSupported``'s body: ``shown`` is the refused value as Go shows it (:func:`go_quote` for a
    string, :func:`go_string_slice` for a list); each supported value quoted, in the order Kueue lists them."""
    return f"Unsupported value: {shown}: supported values: {', '.join(go_quote(s) for s in supported)}"


def too_many(count: int, most: int) -> str:
    """``field.TooMany``'s body: the count (an ``int``, shown as Go's %#v shows it) and the limit."""
    return f"Too many: {count}: must have at most {most} items"


def too_long(most: int) -> str:
    """``field.TooLong``'s body, which leaves the value out."""
    return f"Too long: may not be more than {most} bytes"


CEL_NOT_CHECKED = ('field `<nil>`: Invalid value: "null": some validation rules were not checked because the '
                   "object was invalid; correct the existing errors to complete validation")
"""The field error the apiserver lists after a custom resource's schema errors in place of its CRD's CEL rules
when one of those errors stops them (:func:`with_cel_rules`): at no field (apimachinery writes a nil path
``<nil>``) and with no value (``null``)."""
_STOPS_CEL = ("Unsupported value:", "Required value", "Too long:", "Too many:")
"""The openings of the schema errors that stop the CEL rules (apiextensions-apiserver's ``hasBlockingErr``:
an enum value, a required field, a ``maxLength``, a ``maxItems`` or ``maxProperties``; a type error, the
fifth, is refused as the document is decoded, before any other rule is checked)."""


def with_cel_rules(schema: Sequence[str], cel: Sequence[str]) -> list[str]:
    """A custom resource's CRD errors as the apiserver lists them: its schema's (``schema``, ``field `path`:
    body``), then its CEL rules' (``cel``), unless a schema error's type stops those
    (``pkg/registry/customresource/strategy.go``: the CEL validator runs only when ``hasBlockingErr`` finds no
    NotSupported, Required, TooLong, TooMany or TypeInvalid error), in which case :data:`CEL_NOT_CHECKED`
    comes last, whether or not a CEL rule would have failed."""
    if any(_body(error).startswith(_STOPS_CEL) for error in schema):
        return [*schema, CEL_NOT_CHECKED]
    return [*schema, *cel]


def _body(error: str) -> str:
    """The body of a field error ``field `path`: body`` (one in kueue-es's own words, ``field `path` ...``,
    has none that stops the CEL rules)."""
    match = _FIELD_ERROR.match(error)
    return match.group(1) if match else ""


_FIELD_ERROR = re.compile(r"field `[^`]*`: (.*)", re.DOTALL)


OWN_RULE = "(kueue-es's rule: Kueue's validation has none)"
"""Said after a refusal kueue-es makes where the newest Kueue's validation makes none."""

IS_NEGATIVE = "must be greater than or equal to 0"
"""apimachinery's ``IsNegativeErrorMsg``: the detail of Kueue's refusal of a negative number or duration."""


def go_float(value: float) -> str:
    """A float64 as Go's ``%v`` writes it (``strconv``'s ``'g'`` at the shortest precision): the fewest digits that
    read back as ``value``, in exponent form below 0.0001 or from a million up (``1.5e-05``, ``1e+06``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    point = len(digits) + int(exponent) if text != "0" else 1  # digits before the decimal point
    minus = "-" if sign else ""
    power = point - 1
    if power < -4 or power >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{minus}{mantissa}e{'-' if power < 0 else '+'}{abs(power):02d}"
    if point <= 0:
        return f"{minus}0.{'0' * -point}{text}"
    if point >= len(text):
        return minus + text + "0" * (point - len(text))
    return f"{minus}{text[:point]}.{text[point:]}"


def go_float_map(type_name: str, values: Mapping[str, float]) -> str:
    """A map of a named string type to float64 as Go's ``%#v`` writes it
    (``map[v1.ResourceName]float64{"cpu":-1, "memory":0.5}``): keys sorted, as Go's printer sorts them."""
    return f"map[{type_name}]float64{{{', '.join(f'{go_quote(k)}:{go_float(values[k])}' for k in sorted(values))}}}"


def go_bool_map(values: Mapping[str, bool]) -> str:
    """A ``map[string]bool`` as Go's ``%#v`` writes it (``map[string]bool{"A":true, "B":false}``): keys sorted."""
    return f"map[string]bool{{{', '.join(f'{go_quote(k)}:{str(values[k]).lower()}' for k in sorted(values))}}}"


class FieldErrors:
    """Field errors gathered as Kueue's validation gathers them (a ``field.ErrorList``), in the order found, each
    said ``field `<path>`: <body>``; :meth:`refuse` raises them together as Kubernetes prints the list's aggregate
    (the one message alone, ``[a, b]`` for several, a repeated message once)."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def add(self, path: str, body: str) -> None:
        self.messages.append(f"field `{path}`: {body}")

    def refuse(self, source: str) -> None:
        """Raise the errors gathered, naming ``source``; nothing when there are none."""
        message = aggregate(self.messages)
        if message is not None:
            raise InvalidInput(f"{source}: {message}")
