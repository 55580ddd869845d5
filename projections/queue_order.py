"""Kueue's queue-order timestamp, and the two switches of the configuration in force that change it.

The time a pending workload queues by is not always its creation: some evictions send it to the back of its
priority band. Which ones depends on ``waitForPodsReady.requeuingStrategy.timestamp`` (``Eviction``, the
default, or ``Creation``) and on the ``PrioritySortingWithinCohort`` gate (beta, on). The gate also decides
whether priority takes part in the order of a cycle's heads, so both are read here, once, from the recorded
Configuration document: every ordering (the ClusterQueue heaps, the cycle, preemption's
``LowerOrNewerEqualPriority``, the visibility API, ``explain``) asks the same :class:`QueueOrder`.
"""

from __future__ import annotations

from typing import Any, Protocol

import msgspec

from events import objects as o
from events.timefmt import parse_time
from projections import config_version, gates

PODS_READY_TIMEOUT, ADMISSION_CHECK = "PodsReadyTimeout", "AdmissionCheck"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
REQUEUING_TIMESTAMPS = ("Eviction", "Creation")
PRIORITY_SORTING_GATE = "PrioritySortingWithinCohort"


class _Queued(Protocol):
    created: int
    conditions: tuple[o.Condition, ...]


class QueueOrder(msgspec.Struct, frozen=True):
    """What the configuration in force says about queue order (Kueue's defaults when built bare)."""

    eviction_timestamp: bool = True
    """``requeuingStrategy.timestamp: Eviction``: a PodsReady-timeout eviction restarts the workload's queue time."""
    priority_sorting: bool = True
    """``PrioritySortingWithinCohort`` on: priority orders a cycle's heads. Off, it does not, and a workload
    preempted to reclaim quota while its preemptor borrowed queues from just after that preemption."""

    def time(self, wl: _Queued) -> int:
        """The queue-order timestamp, ms. The first rule that applies: an eviction for PodsReady timeout (only
        under ``Eviction``), an eviction by an admission check, a preemption while borrowing (only with the gate
        off; one millisecond later, so that the victim queues strictly behind its preemptor), else creation."""
        preempted = None
        for c in wl.conditions:  # most have neither type: one or two comparisons each
            kind = c.type
            if kind == "Evicted":
                if c.status == "True" and c.last_transition_time and (
                        c.reason == ADMISSION_CHECK or (c.reason == PODS_READY_TIMEOUT and self.eviction_timestamp)):
                    return parse_time(c.last_transition_time)
            elif kind == "Preempted" and not self.priority_sorting:
                if c.status == "True" and c.last_transition_time and c.reason == IN_COHORT_RECLAIM_WHILE_BORROWING:
                    preempted = parse_time(c.last_transition_time) + 1
        return wl.created if preempted is None else preempted

    def rank(self, priority: int) -> int:
        """Priority's part in the order of a cycle's heads (smaller first): none when the gate is off."""
        return -priority if self.priority_sorting else 0


DEFAULT_ORDER = QueueOrder()


def order_of(document: dict[str, Any] | None) -> QueueOrder:
    """The queue order a recorded Configuration document sets. The document was validated before it was recorded
    (``kueue_es.scheduler.config``), and the gate is read as Kueue's feature-gate machinery reads it
    (:mod:`projections.gates`). Kueue reads the timestamp whether or not waitForPodsReady is on, and only ``Eviction`` (or none)
    restarts the queue time."""
    document = config_version.as_hub(document)  # a v1beta1 stanza that is off is dropped, its timestamp with it
    if not document:
        return DEFAULT_ORDER
    pods_ready = document.get("waitForPodsReady")
    strategy = pods_ready.get("requeuingStrategy") if isinstance(pods_ready, dict) else None
    timestamp = strategy.get("timestamp") if isinstance(strategy, dict) else None
    sorting = gates.enabled(gates.of_document(document), PRIORITY_SORTING_GATE)
    order = QueueOrder(eviction_timestamp=timestamp in (None, "Eviction"), priority_sorting=sorting)
    return DEFAULT_ORDER if order == DEFAULT_ORDER else order
