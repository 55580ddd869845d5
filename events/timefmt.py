"""Kubernetes timestamps (RFC 3339, second precision, UTC) to and from integer milliseconds."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import lru_cache

RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")
"""A date, a time and a zone, as Kubernetes writes and reads times (Go's ``time.RFC3339``): no time without a
zone, no date alone, none of ISO 8601's other forms."""
ZONELESS = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?")
"""A date and time without a zone: taken as UTC it would be off by the writer's own offset."""


def parse_rfc3339(text: str) -> int:
    """:func:`parse_time` of a strict RFC 3339 time (:data:`RFC3339`); raises ValueError on anything else."""
    if RFC3339.fullmatch(text) is None:
        raise ValueError(f"not an RFC 3339 time: {text!r}")
    return parse_time(text)


@lru_cache(maxsize=65536)
def parse_time(text: str) -> int:
    """RFC 3339 timestamp to ms since the epoch; raises ValueError on anything else."""
    s = text.strip()
    if s.endswith("Z"):
        s = s[:-1] + "+00:00"
    dt = datetime.fromisoformat(s)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def format_time(ms: int) -> str:
    """ms since the epoch to a Kubernetes timestamp (whole seconds, UTC, ``Z``)."""
    return _format_seconds(ms // 1000)


@lru_cache(maxsize=65536)
def _format_seconds(seconds: int) -> str:
    # cached per second, not per ms: events a few ms apart share one entry
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_time_ms(ms: int) -> str:
    """ms since the epoch with millisecond precision, for people reading a timeline."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
