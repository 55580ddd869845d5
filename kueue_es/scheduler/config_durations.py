"""Durations in a Kueue Configuration, read as Go's ``time.ParseDuration`` reads them.

Kueue's durations (``metav1.Duration``) are decoded by Go's parser, so a file is taken or refused by it: a
sequence of decimal numbers, each with an optional fraction and a unit (``ns``, ``us``, ``µs`` in either of its
two code points, ``ms``, ``s``, ``m``, ``h``), as in ``"300ms"``, ``"1.5h"``, ``"1h30m"``, ``".5s"`` or ``"2."``
(the fraction's digits may be missing, not all digits), with one optional leading sign, or ``"0"`` (signed or not)
alone. No space, no other unit (``"1d"``), no bare number but ``0`` (``"1"``), nothing empty; at most about 292
years either way (an ``int64`` of nanoseconds). A fraction counts to the nanosecond, truncated as Go truncates it
(computed in a float64).

:func:`parse_ns` gives the exact value in nanoseconds. kueue-es's clock counts milliseconds, so its readers take
:func:`ceil_ms`: a deadline ``d`` after an instant is reached when the whole milliseconds elapsed are at least
``d``, which is exactly when they are at least ``d`` rounded up — and a positive duration never becomes zero (zero
means "off" or "the default" for several fields: ``recoveryTimeout``, ``unscheduledTimeout``,
``usageSamplingInterval``). Comparisons between durations (validation) use nanoseconds.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

import msgspec.inspect as mi

UNITS_NS = {"ns": 1, "us": 1_000, "\u00b5s": 1_000, "\u03bcs": 1_000, "ms": 1_000_000, "s": 1_000_000_000,
            "m": 60_000_000_000, "h": 3_600_000_000_000}
"""Go's units, in nanoseconds: ``µs`` as the micro sign (U+00B5) and as the Greek mu (U+03BC)."""

_LIMIT = 1 << 63
"""Go's bound on the magnitude before the sign (``-2^63`` ns is the one value only a negative reaches)."""


class DurationError(ValueError):
    """What is wrong with a duration, in words for an error message: ``invalid duration '1d' (unknown unit 'd')``."""


def parse_ns(text: str) -> int:
    """``text`` as Go's ``time.ParseDuration`` reads it, in nanoseconds; :class:`DurationError` where Go refuses it."""
    rest, negative = text, False
    if rest[:1] in ("-", "+"):
        negative, rest = rest[0] == "-", rest[1:]
    if rest == "0":
        return 0
    if not rest:
        raise DurationError(_invalid(text))
    total = 0
    while rest:
        value, rest = _term(text, rest)
        total += value
        if total > _LIMIT:
            raise DurationError(_invalid(text, "out of range"))
    if not negative and total > _LIMIT - 1:
        raise DurationError(_invalid(text, "out of range"))
    return -total if negative else total


def _term(text: str, rest: str) -> tuple[int, str]:
    """The nanoseconds of the first ``<number><unit>`` of ``rest``, and what follows it."""
    whole, rest = _digits(rest)
    frac = ""
    if rest[:1] == ".":
        frac, rest = _digits(rest[1:])
        if not whole and not frac:
            raise DurationError(_invalid(text))
    elif not whole:
        raise DurationError(_invalid(text))
    end = next((i for i, ch in enumerate(rest) if ch == "." or "0" <= ch <= "9"), len(rest))
    unit, rest = rest[:end], rest[end:]
    if not unit:
        raise DurationError(_invalid(text, "missing unit"))
    scale = UNITS_NS.get(unit)
    if scale is None:
        raise DurationError(_invalid(text, f"unknown unit {unit!r}"))
    number = int(whole or "0")
    if number > _LIMIT // scale:
        raise DurationError(_invalid(text, "out of range"))
    value = number * scale
    if frac:
        value += _fraction_ns(frac, scale)
        if value > _LIMIT:
            raise DurationError(_invalid(text, "out of range"))
    return value, rest


def _digits(s: str) -> tuple[str, str]:
    """The leading ASCII digits of ``s`` (Go reads no other digit) and what follows them."""
    end = next((i for i, ch in enumerate(s) if not "0" <= ch <= "9"), len(s))
    return s[:end], s[end:]


def _fraction_ns(frac: str, scale: int) -> int:
    """The nanoseconds of ``0.<frac>`` of a unit of ``scale`` ns, as Go computes them: the fraction's digits up to
    the 19th or so (further ones are dropped), the product in float64, truncated."""
    digits, divisor = 0, 1.0
    for ch in frac:
        if digits > (_LIMIT - 1) // 10:
            break
        following = digits * 10 + ord(ch) - 48
        if following > _LIMIT:
            break
        digits, divisor = following, divisor * 10
    return int(float(digits) * (float(scale) / divisor)) if digits else 0


def _invalid(text: str, why: str = "") -> str:
    return f"invalid duration {text!r}" + (f" ({why})" if why else "")


def ceil_ms(ns: int) -> int:
    """Nanoseconds as kueue-es's milliseconds, rounded up (module docstring)."""
    return -(-ns // 1_000_000)


def map_durations(doc: Any, target: type, pattern: str, fn: Callable[[str, str], str]) -> Any:
    """``doc`` with ``fn(path, value)`` in place of every string of it in a duration field of ``target`` (a string
    type constrained by ``pattern``), called in the document's order; ``doc`` itself is not changed (a changed part
    is a copy)."""
    return _map(doc, _info(target), "", pattern, fn)


@lru_cache(maxsize=8)
def _info(target: type) -> mi.Type:
    return mi.type_info(target)


def _map(value: Any, info: mi.Type, at: str, pattern: str, fn: Callable[[str, str], str]) -> Any:
    if isinstance(info, mi.UnionType):
        for member in info.types:
            value = _map(value, member, at, pattern, fn)
        return value
    if isinstance(info, mi.StrType):
        return fn(at, value) if info.pattern == pattern and isinstance(value, str) else value
    if isinstance(info, mi.StructType) and isinstance(value, dict):
        fields = {f.encode_name: f.type for f in info.fields}
        out = {k: _map(v, fields[k], f"{at}.{k}" if at else k, pattern, fn) if k in fields else v
               for k, v in value.items()}
        return out if any(out[k] is not v for k, v in value.items()) else value
    if isinstance(info, mi.ListType) and isinstance(value, list):
        items = [_map(v, info.item_type, f"{at}[{i}]", pattern, fn) for i, v in enumerate(value)]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    return value


def legacy(_path: str, value: str) -> str:
    """A duration as kueue-es's reading before this module took it, for a document a log recorded then: spaces
    around it ignored, nothing at all zero (both refused now, as Go refuses them)."""
    return value.strip() or "0"
