"""Tolerations added to a pod's: Kueue merges a flavor's or an admission check's tolerations into a pod template
(starting a job, building a ProvisioningRequest's PodTemplate) without repeating one already there."""

from __future__ import annotations

import msgspec

from events import objects as o


def _defaulted(t: o.Toleration) -> o.Toleration:
    """The toleration as the apiserver stores it: an empty operator is ``Equal``."""
    return msgspec.structs.replace(t, operator="Equal") if t.operator == "" else t


def added(into: list[o.Toleration], other: list[o.Toleration]) -> list[o.Toleration]:
    """``into`` with each toleration of ``other`` that is none of them yet, an empty operator taken as ``Equal``
    (Kueue #11147): the one already there is kept as written, so no Pod gets the same toleration twice."""
    out = list(into)
    seen = [_defaulted(t) for t in into]
    for t in other:
        if _defaulted(t) not in seen:
            out.append(t)
            seen.append(_defaulted(t))
    return out
