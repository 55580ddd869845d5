"""Kubernetes quantities as Kueue counts them: integers, cpu in milli-units, everything else in units.

Parsing rounds up (a request of 1.5 bytes needs 2). Two formatters:

* :func:`canonical_quantity` writes what Kueue's resource formatter writes (``500m``, ``2``, ``1Gi``, ``1G``,
  ``2k``): the string a status field or a message must hold to read as Kueue's — decisions' ``resourceUsage``,
  the scheduler's quota messages, queue status — and what kueue-es's own displays show;
* :func:`format_quantity` is the older approximation kueue-es wrote before; nothing writes it any more. It
  differs from Kueue's for a byte count that is not a whole number of KiB (``1000000000`` where Kueue writes
  ``1G``) and for a whole thousand cores or more (``1000`` for ``1k``). Logs recorded then still hold its
  strings; ``replay --verify`` compares those amounts by value (:mod:`kueue_es.verify`), and tests write such
  logs with it.
"""

from __future__ import annotations

import re
from decimal import MAX_EMAX, MIN_EMIN, ROUND_CEILING, Decimal, InvalidOperation, localcontext
from functools import lru_cache

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1), "k": Decimal(10**3),
            "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12), "P": Decimal(10**15), "E": Decimal(10**18)}
MAX_INT64 = 2**63 - 1
MILLI_RESOURCES = frozenset({"cpu"})
BINARY_RESOURCES_PREFIX = ("memory", "ephemeral-storage", "hugepages-")


class QuantityError(ValueError):
    pass


@lru_cache(maxsize=65536)
def _parse_decimal(text: str) -> Decimal:
    s = text.strip()
    if not s:
        raise QuantityError("empty quantity")
    for suffix, mult in _BINARY.items():
        if s.endswith(suffix):
            return _number(s[: -len(suffix)], text) * mult
    if s[-1] in "numkMGTPE" and not (len(s) > 1 and s[-2] in "eE" and s[-1].isdigit()):
        return _number(s[:-1], text) * _DECIMAL[s[-1]]
    return _number(s, text)


def _number(s: str, original: str) -> Decimal:
    try:
        value = Decimal(s)
    except InvalidOperation:
        raise QuantityError(f"invalid quantity {original!r}") from None
    if not value.is_finite():
        raise QuantityError(f"invalid quantity {original!r}")
    return value


@lru_cache(maxsize=65536)
def to_int(resource: str, quantity: str | int | float) -> int:
    """Kueue's integer value of ``quantity`` for ``resource``: milli for cpu, units otherwise; ≥ 0, saturating."""
    value = _parse_decimal(str(quantity)) if not isinstance(quantity, int) else Decimal(quantity)
    if resource in MILLI_RESOURCES:
        value = value * 1000
    n = int(value.to_integral_value(rounding=ROUND_CEILING))
    return max(0, min(n, MAX_INT64))


def parse_quantity(quantity: str | int | float) -> Decimal:
    """The exact value of a quantity (no unit scaling); raises :class:`QuantityError`."""
    return _parse_decimal(str(quantity))


@lru_cache(maxsize=65536)
def format_quantity(resource: str, value: int) -> str:
    """Canonical quantity string for Kueue's integer ``value`` of ``resource``."""
    if resource in MILLI_RESOURCES:
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    if resource.startswith(BINARY_RESOURCES_PREFIX) and value:
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            mult = _BINARY[suffix]
            if value % mult == 0:
                return f"{value // mult}{suffix}"
        return str(value)
    if value and value % 1000 == 0:
        for suffix, mult in (("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3)):
            if value % mult == 0:
                return f"{value // mult}{suffix}"
    return str(value)


_SI = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_IEC = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


def _decimal_si(value: int, exponent: int) -> str:
    """``value``·10^``exponent`` as Kubernetes writes a DecimalSI quantity: the largest power of a thousand that
    leaves a whole number (``2000`` → ``2k``, ``1500`` → ``1500``; with exponent -3, ``500`` → ``500m``)."""
    if value == 0:
        return "0"
    while value % 10 == 0:
        value //= 10
        exponent += 1
    extra = exponent % 3
    suffix = _SI.get(exponent - extra)
    return f"{value * 10 ** extra}{suffix if suffix is not None else f'e{exponent - extra}'}"  # past E: exponent


def _binary_si(value: int) -> str:
    """A byte count as Kueue writes it: a whole number of KiB (MiB, ...) from 1Ki up in binary units, anything
    else in decimal ones (Kueue formats BinarySI, reads that back, and writes it again: ``2000`` comes out
    ``2k``, ``128000`` ``125Ki``)."""
    if value < 1024:
        return _decimal_si(value, 0)
    power = 0
    while value % 1024 == 0 and power < len(_IEC) - 1:
        value //= 1024
        power += 1
    return f"{value}{_IEC[power]}" if power else _decimal_si(value, 0)


def decimal_string(value: Decimal) -> str:
    """``value`` as Kubernetes writes a DecimalSI quantity (``Quantity.String()``): whole numbers in units, a
    fraction in the largest of milli, micro or nano units that leaves it whole (rounded up to nano units, as the
    API keeps no finer precision): ``0.5`` → ``500m``, ``1.0005`` → ``1000500u``."""
    if value < 0:
        return "-" + decimal_string(-value)
    for exponent in (0, -3, -6):
        scaled = value.scaleb(-exponent)
        if scaled == scaled.to_integral_value():
            return _decimal_si(int(scaled), exponent)
    return _decimal_si(int(value.scaleb(9).to_integral_value(rounding=ROUND_CEILING)), -9)


def quantity_string(quantity: str | int | float) -> str:
    """``quantity`` as Kubernetes prints it after reading it (``resource.ParseQuantity``, then
    ``Quantity.String()``), which is how a webhook's field error shows a quantity it refuses: in the format
    its suffix gives (binary for ``Ki`` to ``Ei``, exponent for ``e3``/``E3``, decimal SI otherwise),
    canonical: ``-1Ki`` stays ``-1Ki``, ``-1.5Ki`` is ``-1536``, ``-1000`` is ``-1k``, ``-5e-1`` is
    ``-500e-3``, ``5e-10`` (rounded up to nano units) is ``1e-9``; except that the parser keeps the text as
    written where it takes it for canonical (``+1Ki``, ``1.500``, ``1E3`` come back as they are). A number
    given as a number, not a string, is read as Python writes it (its own text is gone). Raises
    :class:`QuantityError` on a string that is no quantity."""
    text = str(quantity).strip()
    match = _SPLIT.fullmatch(text)
    if match is None or not text:
        raise QuantityError(f"invalid quantity {quantity!r}")
    if text == "0":
        return text
    num, denom = match["num"].lstrip("0") or "0", match["denom"] or ""
    fmt, power = _suffix(match["suffix"], quantity)
    if _kept_as_written(num, denom, fmt, power):
        return text
    digits = (num + denom).lstrip("0")
    if not digits:
        return "0"
    printed = _printed(digits, -len(denom) + (power if fmt != "binary" else 0), fmt, power)
    return "-" + printed if text.startswith("-") else printed


_SPLIT = re.compile(r"[+-]?(?P<num>[0-9]*)(?:\.(?P<denom>[0-9]*))?(?P<suffix>[eEinumkKMGTP]*[-+]?[0-9]*)")
_BINARY_POWERS = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_POWERS = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def _suffix(suffix: str, quantity: object) -> tuple[str, int]:
    """The format a quantity's ``suffix`` gives (``decimal``, ``binary``, ``exponent``: tried in that order,
    so ``E`` alone is exa) and the power of 10 or 2 it stands for."""
    if suffix in _DECIMAL_POWERS:
        return "decimal", _DECIMAL_POWERS[suffix]
    if suffix in _BINARY_POWERS:
        return "binary", _BINARY_POWERS[suffix]
    if len(suffix) > 1 and suffix[0] in "eE" and re.fullmatch(r"[-+]?[0-9]+", suffix[1:]):
        return "exponent", int(suffix[1:])
    raise QuantityError(f"invalid quantity {quantity!r}")


def _kept_as_written(num: str, denom: str, fmt: str, power: int) -> bool:
    """Whether Kubernetes' parser keeps a quantity's text to print it (``num``: its whole digits without
    leading zeros, ``denom`` its fraction's): on its int64 path, a binary one with no fraction, few enough
    digits and a whole number not a multiple of 8; a decimal or exponent one with at most 18 digits, a scale
    of nano or more that is a power of a thousand, no trailing ``000`` and no leading zero."""
    digits = num + denom
    if fmt == "binary":
        return (not denom and 15 - len(num) - power * 3 // 10 - 1 >= 0 and int(num) << power <= MAX_INT64
                and int(num) % 8 != 0)
    scale = power - len(denom)
    return (len(digits) <= 18 and scale >= -9 and scale % 3 == 0 and not digits.endswith("000")
            and digits[0] != "0")


def _printed(digits: str, exp10: int, fmt: str, power: int) -> str:
    """The positive value ``digits``·10^``exp10`` (times 2^``power`` in ``binary``) in Kubernetes' canonical
    form of ``fmt`` (``binary``, ``decimal``, ``exponent``), once its parser rounded it up to nano units and
    capped a binary one at MaxInt64: binary units for a whole binary value from 1024 up, else the digits with
    a power of a thousand (its decimal SI suffix, none past ``E``, or ``e<power>``). Exact, in decimals (no
    integer of the quantity's length is ever turned to or from text: Python refuses that past 4300 digits)."""
    with localcontext() as ctx:
        ctx.prec, ctx.Emax, ctx.Emin = len(digits) + 40, MAX_EMAX, MIN_EMIN
        value = Decimal(f"{digits}E{exp10}") * (2**power if fmt == "binary" else 1)
        if value.as_tuple().exponent < -9:  # type: ignore[operator]
            value = value.quantize(_NANO, rounding=ROUND_CEILING)
        if fmt == "binary":
            value = min(value, Decimal(MAX_INT64))
            if value >= 1024 and value == value.to_integral_value():
                whole, scale = int(value), 0
                while whole % 1024 == 0 and scale < len(_IEC) - 1:
                    whole, scale = whole // 1024, scale + 1
                return f"{whole}{_IEC[scale]}"
            fmt = "decimal"
        _, places, exponent = value.as_tuple()
    text = "".join(map(str, places))
    kept = text.rstrip("0")
    exp10 = int(exponent) + len(text) - len(kept)
    kept += "0" * (exp10 % 3)
    exp10 -= exp10 % 3
    if fmt == "exponent":
        return f"{kept}e{exp10}" if exp10 else kept
    return f"{kept}{_SI.get(exp10, '')}"  # past E, Kubernetes writes no suffix at all


_NANO = Decimal("1E-9")


@lru_cache(maxsize=65536)
def canonical_quantity(resource: str, value: int, byte_valued: bool = False) -> str:
    """The string Kueue writes for its integer ``value`` of ``resource`` (milli for cpu, units otherwise): cpu as
    milli-units in decimal SI, memory, ephemeral-storage, ``hugepages-*`` and a ``byte_valued`` resource (a
    counter-based DRA resource, :meth:`projections.cluster.ClusterState.byte_valued`) as bytes (binary units when
    whole), everything else in decimal SI; the value is capped at MaxInt64 first, as Kueue's integers are."""
    value = min(value, MAX_INT64)
    if value < 0:
        return "-" + canonical_quantity(resource, -value, byte_valued)
    if resource == "cpu":
        return _decimal_si(value, -3)
    if byte_valued or resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        return _binary_si(value)
    return _decimal_si(value, 0)


def exact_quantity(resource: str, value: int, byte_valued: bool = False) -> str:
    """:func:`canonical_quantity` without its cap: an amount past what an int64 holds (a pod set's exact
    total) in the decimal SI a Kubernetes quantity of that size takes (``9800P``, ``18446744073709551614``; a
    byte count too, which no longer has a whole int64 to write in binary units). Kueue's quota messages name
    amounts so."""
    if -MAX_INT64 <= value <= MAX_INT64:
        return canonical_quantity(resource, value, byte_valued)
    if value < 0:
        return "-" + exact_quantity(resource, -value, byte_valued)
    return _decimal_si(value, -3 if resource == "cpu" else 0)
