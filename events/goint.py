"""Integers and booleans spelled as Go's ``strconv`` reads them: an integer in base 10 is an optional sign, then
ASCII digits, nothing else; a boolean is one of ``ParseBool``'s twelve spellings.

Kueue parses the values it takes from labels and annotations so (a Job's maximum execution time and minimum
parallelism, a Workload's priority boost, a Job's ``job-completions-equal-parallelism``); kueue-es accepts exactly
the same spellings (no spaces, underscores or other digits, which Python's ``int`` would take; no ``yes``).
"""

from __future__ import annotations

import re

_DECIMAL = re.compile(r"[+-]?[0-9]+")
_TRUE, _FALSE = ("1", "t", "T", "TRUE", "true", "True"), ("0", "f", "F", "FALSE", "false", "False")


def is_go_int(text: str) -> bool:
    """Whether ``text`` is an integer to ``strconv.Atoi`` / ``ParseInt(text, 10, ...)``, whatever its range."""
    return _DECIMAL.fullmatch(text) is not None


def parse_int(text: str, bits: int) -> int | None:
    """``strconv.ParseInt(text, 10, bits)``: the value, or None on any error (syntax or range)."""
    if not is_go_int(text):
        return None
    value = int(text)
    return value if -(2 ** (bits - 1)) <= value < 2 ** (bits - 1) else None


def parse_bool(text: str) -> bool | None:
    """``strconv.ParseBool(text)``: True or False, or None where Go returns an error."""
    return True if text in _TRUE else False if text in _FALSE else None
