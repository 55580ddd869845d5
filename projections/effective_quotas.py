"""Kueue's DynamicQuotaOrchestration gate, as its scheduler sees it: a ClusterQueue's or Cohort's
``status.effectiveQuotas`` (written by a quota orchestrator, Kueue's own or another controller) overrides its
``spec.resourceGroups`` for scheduling while the gate is on.

``status.effectiveQuotas.resourceGroups`` then stands for the spec's resource groups wholly: its flavors, their
order and their quotas (nominal, borrowing and lending limits) are what the ClusterQueue admits with and lends
to its cohort; an empty or absent list is a complete override too (nothing is admitted on it), not a fallback to
the spec. Without ``effectiveQuotas``, or with the gate off, the spec's groups are in force. A value that does not
parse as resource groups, or whose quotas are no quantities, is ignored: Kueue's CRD would refuse it, but
kueue-es's own CRDs keep the status free-form, and a STATE.yaml holds what it holds.

The projection reads these views wherever quota is compiled (the quota tree, the compiled ClusterQueues:
:class:`projections.cluster.ClusterState`); the objects kept in the log and the snapshot stay as observed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec

from events import objects as o
from events.quantity import QuantityError, to_int

Q = TypeVar("Q", o.ClusterQueue, o.Cohort)


def effective_groups(status: Mapping[str, Any]) -> list[o.ResourceGroup] | None:
    """The resource groups ``status.effectiveQuotas`` sets, or None when it sets none (or none that parses, its
    quantities included)."""
    effective = status.get("effectiveQuotas")
    if not isinstance(effective, dict):
        return None
    try:
        groups = msgspec.convert(effective.get("resourceGroups") or [], list[o.ResourceGroup], strict=False)
        for rq in (rq for rg in groups for fq in rg.flavors for rq in fq.resources):
            for quantity in (rq.nominal_quota, rq.borrowing_limit, rq.lending_limit):
                if quantity is not None:
                    to_int(rq.name, quantity)
    except (msgspec.ValidationError, QuantityError):
        return None
    return groups


def orchestrator(obj: o.ClusterQueue | o.Cohort | None, dynamic: bool) -> str:
    """The name of the orchestrator whose effective quotas are in force for ``obj`` (its
    ``status.effectiveQuotas.orchestratorRef.name``, as Kueue v0.20 labels its info gauges with it); empty while
    none are: the gate off (``dynamic`` False), no effective quotas that parse, no name, or no object."""
    if obj is None or not dynamic or effective_groups(obj.status) is None:
        return ""
    ref = obj.status["effectiveQuotas"].get("orchestratorRef")
    name = ref.get("name") if isinstance(ref, dict) else None
    return name if isinstance(name, str) else ""


def in_force(obj: Q, dynamic: bool) -> Q:
    """``obj`` as the scheduler takes it: with its effective resource groups as its spec's while ``dynamic``
    (DynamicQuotaOrchestration on) and its status sets some; else ``obj`` itself."""
    groups = effective_groups(obj.status) if dynamic else None
    if groups is None:
        return obj
    return msgspec.structs.replace(obj, spec=msgspec.structs.replace(obj.spec, resource_groups=groups))


def views(objects: Mapping[str, Q], dynamic: bool) -> Mapping[str, Q]:
    """Every object of ``objects`` as :func:`in_force` takes it (``objects`` itself while the gate is off)."""
    if not dynamic:
        return objects
    return {name: in_force(obj, True) for name, obj in objects.items()}
