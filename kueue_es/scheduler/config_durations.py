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

from collections.abc import Iterator
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


def durations_in(doc: Any, target: type, pattern: str) -> Iterator[tuple[str, Any]]:
    """The (path, value) of every value of ``doc`` in a duration field of ``target`` (a string type constrained by
    ``pattern``), in the document's order: what Go's parser reads, for the range no pattern says."""
    yield from _walk(doc, _info(target), "", pattern)


@lru_cache(maxsize=8)
def _info(target: type) -> mi.Type:
    return mi.type_info(target)


def _walk(value: Any, info: mi.Type, at: str, pattern: str) -> Iterator[tuple[str, Any]]:
    if isinstance(info, mi.UnionType):
        for member in info.types:
            yield from _walk(value, member, at, pattern)
    elif isinstance(info, mi.StrType):
        if info.pattern == pattern and isinstance(value, str):
            yield at, value
    elif isinstance(info, mi.StructType) and isinstance(value, dict):
        fields = {f.encode_name: f.type for f in info.fields}
        for key, item in value.items():
            if key in fields:
                yield from _walk(item, fields[key], f"{at}.{key}" if at else key, pattern)
    elif isinstance(info, mi.ListType) and isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk(item, info.item_type, f"{at}[{i}]", pattern)
