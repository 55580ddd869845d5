"""Integers spelled as Go's ``strconv`` reads them in base 10: an optional sign, then ASCII digits, nothing else.

Kueue parses the integers it takes from labels and annotations so (a Job's maximum execution time and minimum
parallelism, a Workload's priority boost); kueue-es accepts exactly the same spellings (no spaces, underscores or
other digits, which Python's ``int`` would take).
"""

from __future__ import annotations

import re

_DECIMAL = re.compile(r"[+-]?[0-9]+")


def is_go_int(text: str) -> bool:
    """Whether ``text`` is an integer to ``strconv.Atoi`` / ``ParseInt(text, 10, ...)``, whatever its range."""
    return _DECIMAL.fullmatch(text) is not None


def parse_int(text: str, bits: int) -> int | None:
    """``strconv.ParseInt(text, 10, bits)``: the value, or None on any error (syntax or range)."""
    if not is_go_int(text):
        return None
    value = int(text)
    return value if -(2 ** (bits - 1)) <= value < 2 ** (bits - 1) else None
