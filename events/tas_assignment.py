"""A pod set's topology assignment between its logical form (ordered domains) and the v1beta2 wire form.

Minimal stand-in: ``decode`` reads every v1beta2 slice form (universal or individual values with an optional
prefix/suffix, universal or individual pod counts); ``encode`` writes one slice, with ``universal`` wherever all
values (or counts) are equal. Kueue's hostname-prefix encoding is not attempted here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from events import objects as o
from events.errors import InvalidInput


def decode(ta: o.TopologyAssignment) -> list[o.TopologyDomainAssignment]:
    """The ordered domains of ``ta`` (slices concatenated in order)."""
    out: list[o.TopologyDomainAssignment] = []
    n_levels = len(ta.levels)
    for s in ta.slices:
        count = _int(s.get("domainCount"), "domainCount")
        per_level = s.get("valuesPerLevel") or []
        if len(per_level) != n_levels:
            raise InvalidInput(f"topologyAssignment slice: {len(per_level)} valuesPerLevel for {n_levels} levels")
        columns = [_values(v, count) for v in per_level]
        counts = _counts(s.get("podCounts") or {}, count)
        for i in range(count):
            out.append(o.TopologyDomainAssignment(values=[col[i] for col in columns], count=counts[i]))
    return out


def encode(levels: list[str], domains: Sequence[o.TopologyDomainAssignment]) -> o.TopologyAssignment:
    """One slice holding ``domains`` in order (an empty list gives no slices)."""
    if not domains:
        return o.TopologyAssignment(levels=list(levels), slices=[])
    values_per_level: list[dict[str, Any]] = []
    for i in range(len(levels)):
        vals = [d.values[i] for d in domains]
        values_per_level.append({"universal": vals[0]} if len(set(vals)) == 1 else {"individual": {"roots": vals}})
    counts = [d.count for d in domains]
    pod_counts: dict[str, Any] = {"universal": counts[0]} if len(set(counts)) == 1 else {"individual": counts}
    return o.TopologyAssignment(
        levels=list(levels),
        slices=[{"domainCount": len(domains), "valuesPerLevel": values_per_level, "podCounts": pod_counts}],
    )


def _int(v: Any, field: str) -> int:
    if not isinstance(v, int) or v < 1:
        raise InvalidInput(f"topologyAssignment slice: {field} must be a positive integer, got {v!r}")
    return v


def _values(v: dict[str, Any], count: int) -> list[str]:
    if "universal" in v:
        return [str(v["universal"])] * count
    ind = v.get("individual") or {}
    roots = ind.get("roots") or []
    if len(roots) != count:
        raise InvalidInput(f"topologyAssignment slice: {len(roots)} roots for domainCount {count}")
    prefix, suffix = ind.get("prefix") or "", ind.get("suffix") or ""
    return [f"{prefix}{r}{suffix}" for r in roots]


def _counts(v: dict[str, Any], count: int) -> list[int]:
    if "universal" in v:
        return [int(v["universal"])] * count
    ind = v.get("individual") or []
    if len(ind) != count:
        raise InvalidInput(f"topologyAssignment slice: {len(ind)} podCounts for domainCount {count}")
    return [int(c) for c in ind]
