"""Go's ``time.ParseDuration``, exactly: Kueue's durations (``metav1.Duration``) are decoded by it.

A sequence of decimal numbers, each with an optional fraction and a unit (``ns``, ``us``, ``µs`` in either of its
two code points, ``ms``, ``s``, ``m``, ``h``), as in ``"300ms"``, ``"1.5h"``, ``"1h30m"``, ``".5s"`` or ``"2."``
(the fraction's digits may be missing, not all digits), with one optional leading sign, or ``"0"`` (signed or not)
alone. No space, no other unit (``"1d"``), no bare number but ``0`` (``"1"``), nothing empty; at most about 292
years either way (an ``int64`` of nanoseconds). A fraction counts to the nanosecond, truncated as Go truncates it
(computed in a float64), so ``"0.5ns"`` is zero.

Here, below the scheduler, because the fold needs Go's reading too: whether a recorded ``waitForPodsReady.timeout``
is zero, which v1beta2 defaults (:mod:`projections.pods_ready`). :mod:`kueue_es.scheduler.config_durations` builds
kueue-es's millisecond readers and the Configuration checks on it.
"""

from __future__ import annotations

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


_SUB_SECOND_UNITS = ((1_000_000, "ms"), (1_000, "\u00b5s"), (1, "ns"))


def format_ns(ns: int) -> str:
    """``ns`` nanoseconds as Go's ``time.Duration.String`` writes them (``"-1m30s"``, ``"1h0m0s"``, ``"1.5µs"``,
    ``"0s"``): how Kueue's validation shows a duration it refuses."""
    if ns == 0:
        return "0s"
    sign, u = ("-" if ns < 0 else ""), abs(ns)
    if u < 1_000_000_000:
        scale, unit = next((scale, unit) for scale, unit in _SUB_SECOND_UNITS if u >= scale)
        return sign + _decimal(u, scale) + unit
    minutes, whole_seconds = divmod(u // 1_000_000_000, 60)
    text = _decimal(whole_seconds * 1_000_000_000 + u % 1_000_000_000, 1_000_000_000) + "s"
    if minutes:
        hours, minutes = divmod(minutes, 60)
        text = f"{minutes}m{text}" if not hours else f"{hours}h{minutes}m{text}"
    return sign + text


def _decimal(value: int, scale: int) -> str:
    """``value / scale`` in decimal, the fraction's trailing zeros (and then its point) left out."""
    whole, rest = divmod(value, scale)
    fraction = str(rest).rjust(len(str(scale)) - 1, "0").rstrip("0") if scale > 1 else ""
    return f"{whole}.{fraction}" if fraction else str(whole)
