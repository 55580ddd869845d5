"""Durations in a Kueue Configuration, read as Go's ``time.ParseDuration`` reads them.

Kueue's durations (``metav1.Duration``) are decoded by Go's parser, so a file is taken or refused by it
(:mod:`projections.go_duration`, whose ``parse_ns`` gives the exact value in nanoseconds). kueue-es's clock
counts milliseconds, so its readers take :func:`ceil_ms`: a deadline ``d`` after an instant is reached when the
whole milliseconds elapsed are at least ``d``, which is exactly when they are at least ``d`` rounded up — and a
positive duration never becomes zero (zero means "off" or "the default" for several fields: ``recoveryTimeout``,
``unscheduledTimeout``, ``usageSamplingInterval``). Comparisons between durations (validation) use nanoseconds.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

import msgspec.inspect as mi


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
