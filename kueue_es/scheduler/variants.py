"""``ConcurrentAdmission``: Kueue's variant controller (``concurrent-admission-controller``), as pure rules.

Kueue's workload controller labels each workload of a ClusterQueue with a ``concurrentAdmissionPolicy`` a parent
(``kueue.x-k8s.io/concurrent-admission-parent: "true"``); a parent is never queued itself. The variant controller
then pursues it through one variant Workload per flavor of the ClusterQueue's first resource group and keeps the
family in step. The rules modelled here:

* an evicted variant still holding quota gives it back (its admission is cleared, ``Requeued`` set as the eviction's
  reason has it: True only for ``Preempted`` and ``NodeFailures``), since no Job of its own is stopped for it; while
  its parent holds quota the parent is evicted first (``VariantEvicted``, "Admitted variant was evicted") and the
  variant waits for it.
"""

from __future__ import annotations

from events import schema as ev
from kueue_es.scheduler.siblings import parent_name
from projections.cluster import ClusterState
from projections.workloads import WorkloadInfo

REQUEUED_REASONS = frozenset({"Preempted", "NodeFailures"})
"""Eviction reasons whose cleared variant is Requeued=True (any other: Requeued=False with that reason)."""
VARIANT_EVICTED = "VariantEvicted"
VARIANT_EVICTED_MESSAGE = "Admitted variant was evicted"


def parent_of(state: ClusterState, wl: WorkloadInfo) -> WorkloadInfo | None:
    """The parent Workload of variant ``wl`` as the projection holds it (None: no variant, or no such parent)."""
    name = parent_name(wl)
    return state.workloads.get(f"{wl.namespace}/{name}") if name else None


def evicted_variant(state: ClusterState, wl: WorkloadInfo, base: dict) -> ev.Decision | None:
    """What the variant controller does for ``wl``, evicted while it holds quota (None: ``wl`` is no variant, or
    nothing is to be done until its parent lets go of its quota)."""
    if not parent_name(wl):
        return None
    parent = parent_of(state, wl)
    if parent is not None and parent.reserving:
        if parent.evicted:
            return None  # the parent lets go of its quota first
        return ev.WorkloadEvicted(key=parent.key, uid=parent.uid, reason=VARIANT_EVICTED,
                                  message=VARIANT_EVICTED_MESSAGE, **base)
    evicted = wl.condition("Evicted")
    reason = wl.evicted
    return ev.WorkloadRequeued(key=wl.key, uid=wl.uid, status=reason in REQUEUED_REASONS, reason=reason,
                               message=evicted.message if evicted is not None else "", release=True, **base)
