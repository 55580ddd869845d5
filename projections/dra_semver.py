"""Semantic versions in DRA's CEL, as Kubernetes' CEL library ``kubernetes.Semver`` has them: ``semver(s)`` (and
``semver(s, true)``, which normalizes ``s`` first), ``isSemver(s)`` / ``isSemver(s, true)``, and on a version
``major()``, ``minor()``, ``patch()``, ``compareTo(v)``, ``isGreaterThan(v)`` and ``isLessThan(v)``. A device
attribute of type ``version`` reads as such a value (:func:`attribute_version`).

Parsing follows Semantic Versioning 2.0.0 strictly, as the parser Kubernetes uses does: ``MAJOR.MINOR.PATCH``,
numbers without leading zeroes that fit 64 unsigned bits, then an optional ``-`` and dot-separated pre-release
identifiers (letters, digits and hyphens; a numeric one without leading zeroes), then an optional ``+`` and
dot-separated build identifiers, which do not take part in comparisons. A string that does not parse is refused
with that parser's words. Normalizing drops a leading ``v``, strips leading zeroes off the first three dotted
parts and fills a missing minor or patch with ``0`` (a short version may not carry a pre-release or build part).

Versions compare by major, minor and patch, then a version without pre-release identifiers ranks above one with
them; identifiers compare one by one (numeric ones by value and below alphanumeric ones, alphanumeric ones by
their bytes), and with one list a prefix of the other the shorter ranks lower. ``==`` holds between equal
versions; a version compared with anything else, or ordered with ``<``, is an evaluation error, as cel-go has no
such overload. Pure.
"""

from __future__ import annotations

from typing import Any

from celpy import celtypes

_DIGITS = frozenset("0123456789")
_ALPHANUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-") | _DIGITS
_UINT64 = 2**64
TYPE_NAME = "kubernetes.Semver"
"""cel-go's name of the type."""


class FunctionError(ValueError):
    """A library function's refusal of its argument, whose message is the evaluation error's
    (:func:`projections.dra_cel.matches`)."""


class Semver:
    """A parsed semantic version (a CEL value)."""

    __slots__ = ("build", "major", "minor", "patch", "pre")

    def __init__(self, major: int, minor: int, patch: int, pre: tuple[int | str, ...], build: tuple[str, ...]):
        self.major, self.minor, self.patch, self.pre, self.build = major, minor, patch, pre, build

    def compare(self, other: Semver) -> int:
        """-1, 0 or 1 as ``self`` ranks below, alike or above ``other``."""
        a, b = (self.major, self.minor, self.patch), (other.major, other.minor, other.patch)
        if a != b:
            return 1 if a > b else -1
        if not self.pre or not other.pre:
            return (not self.pre) - (not other.pre)
        for x, y in zip(self.pre, other.pre, strict=False):
            order = _identifier_order(x, y)
            if order:
                return order
        return (len(self.pre) > len(other.pre)) - (len(self.pre) < len(other.pre))

    def __eq__(self, other: object) -> celtypes.BoolType:  # type: ignore[override]
        if not isinstance(other, Semver):
            raise TypeError("no such overload")
        return celtypes.BoolType(self.compare(other) == 0)

    def __ne__(self, other: object) -> celtypes.BoolType:  # type: ignore[override]
        return celtypes.BoolType(not self.__eq__(other))

    def __hash__(self) -> int:
        return hash((self.major, self.minor, self.patch, self.pre))

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += "-" + ".".join(str(p) for p in self.pre)
        return text + ("+" + ".".join(self.build) if self.build else "")

    def __repr__(self) -> str:
        return f"Semver({str(self)!r})"


def _identifier_order(x: int | str, y: int | str) -> int:
    if isinstance(x, int) != isinstance(y, int):
        return -1 if isinstance(x, int) else 1
    return (x > y) - (x < y)  # type: ignore[operator]


def _only(text: str, allowed: frozenset[str]) -> bool:
    return all(c in allowed for c in text)


def _number(text: str, what: str) -> int:
    """A major, minor or patch number (Go's unsigned parse: "" and overflow are its errors)."""
    if not _only(text, _DIGITS):
        raise FunctionError(f"Invalid character(s) found in {what} number {_go_quote(text)}")
    if len(text) > 1 and text[0] == "0":
        raise FunctionError(f"{what.capitalize()} number must not contain leading zeroes {_go_quote(text)}")
    return _uint(text)


def _uint(text: str) -> int:
    if not text:
        raise FunctionError('strconv.ParseUint: parsing "": invalid syntax')
    value = int(text)
    if value >= _UINT64:
        raise FunctionError(f"strconv.ParseUint: parsing {_go_quote(text)}: value out of range")
    return value


def _go_quote(text: str) -> str:
    """``text`` as Go's ``%q`` writes it (the common characters)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'


def parse(text: str) -> Semver:
    """``text`` as a strict semantic version, or ValueError with the parser's message."""
    if not text:
        raise FunctionError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise FunctionError("No Major.Minor.Patch elements found")
    major = _number(parts[0], "major")
    minor = _number(parts[1], "minor")
    rest, build, pre = parts[2], [], []
    if "+" in rest:
        rest, _, tail = rest.partition("+")
        build = tail.split(".")
    if "-" in rest:
        rest, _, tail = rest.partition("-")
        pre = tail.split(".")
    patch = _number(rest, "patch")
    identifiers: list[int | str] = []
    for p in pre:
        if not p:
            raise FunctionError("Prerelease is empty")
        if _only(p, _DIGITS):
            if len(p) > 1 and p[0] == "0":
                raise FunctionError(f"Numeric PreRelease version must not contain leading zeroes {_go_quote(p)}")
            identifiers.append(_uint(p))
        elif _only(p, _ALPHANUM):
            identifiers.append(p)
        else:
            raise FunctionError(f"Invalid character(s) found in prerelease {_go_quote(p)}")
    for b in build:
        if not b:
            raise FunctionError("Build meta data is empty")
        if not _only(b, _ALPHANUM):
            raise FunctionError(f"Invalid character(s) found in build meta data {_go_quote(b)}")
    return Semver(major, minor, patch, tuple(identifiers), tuple(build))


def normalize(text: str) -> str:
    """``text`` normalized as ``semver(s, true)`` does before parsing, or ValueError."""
    text = text.removeprefix("v")
    parts = text.split(".", 2)
    for i, p in enumerate(parts):
        if len(p) > 1:
            p = p.lstrip("0")
            if not p or p[0] not in _DIGITS:
                p = "0" + p
            parts[i] = p
    if len(parts) < 3:
        if "+" in parts[-1] or "-" in parts[-1]:
            raise FunctionError("short version cannot contain PreRelease/Build meta data")
        parts.extend(["0"] * (3 - len(parts)))
    return ".".join(parts)


def _text_arg(value: Any) -> str:
    # a quantity is a string to celpy, not to cel-go
    if not isinstance(value, celtypes.StringType) or type(value).__name__ == "_Quantity":
        raise TypeError("no such overload")
    return str(value)


def _flag_arg(value: Any) -> bool:
    if not isinstance(value, celtypes.BoolType):
        raise TypeError("no such overload")
    return bool(value)


def to_semver(text: Any, normalized: Any = None) -> Semver:
    """CEL's ``semver(s)`` / ``semver(s, normalize)``."""
    s = _text_arg(text)
    return parse(normalize(s) if normalized is not None and _flag_arg(normalized) else s)


def is_semver(text: Any, normalized: Any = None) -> celtypes.BoolType:
    """CEL's ``isSemver(s)`` / ``isSemver(s, normalize)``."""
    s = _text_arg(text)
    wanted = normalized is not None and _flag_arg(normalized)
    try:
        parse(normalize(s) if wanted else s)
    except ValueError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _version(value: Any) -> Semver:
    if not isinstance(value, Semver):
        raise TypeError("no such overload")
    return value


def _int64(value: int) -> celtypes.IntType:
    """An unsigned 64-bit number as Go converts it to a CEL int (wrapping past the int64 range)."""
    return celtypes.IntType(value - _UINT64 if value >= 2**63 else value)


def compare(a: Semver, b: Any) -> celtypes.IntType:
    """``a.compareTo(b)``."""
    return celtypes.IntType(a.compare(_version(b)))


FUNCTIONS = {
    "semver": to_semver,
    "isSemver": is_semver,
    "major": lambda v: _int64(_version(v).major),
    "minor": lambda v: _int64(_version(v).minor),
    "patch": lambda v: _int64(_version(v).patch),
}
"""The library's functions but the comparisons, which :mod:`projections.dra_cel` shares with quantities."""


def attribute_version(name: str, text: str) -> Semver:
    """A device's ``version`` attribute ``name`` as CEL reads it, or ValueError with Kubernetes' message (which
    fails every selector evaluated on the device)."""
    try:
        return parse(text)
    except ValueError as e:
        raise FunctionError(f"attribute {name}: parse semantic version: {e}") from e
