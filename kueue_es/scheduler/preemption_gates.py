"""MultiKueueOrchestratedPreemption on a manager: which worker may preempt for a workload, one at a time (KEP-8303).

Every copy of a workload the manager makes on a worker carries the ``kueue.x-k8s.io/multikueue`` preemption gate
(the connector adds it to the copy's spec while the gate is on), closed until the manager opens it: a worker
whose scheduler would preempt for the copy leaves it pending with ``BlockedOnPreemptionGates`` True instead
(:mod:`kueue_es.scheduler.cycle`). From the copies the connector observed (``RemoteWorkloadObserved``: their
conditions and ``status.preemptionGates``) this decides, for a workload holding quota, its MultiKueue check
Pending and on no worker yet:

* among its copies not holding quota there nor finished, the one blocked longest — the earliest
  ``BlockedOnPreemptionGates`` True ``lastTransitionTime``, ties by worker name — whose gate is not open is opened
  (``RemotePreemptionGateOpened``, the decision's log time as the gate's ``lastTransitionTime``), unless
* any copy's gate — one holding quota on its worker or finished there too, as Kueue's
  ``workloadToOpenPreemptionGate`` looks at every remote's open gate — was opened less than
  ``multiKueue.singleClusterPreemptionTimeout`` (5 minutes) ago:
  then nothing is opened until that much log time has passed since (a deadline the scheduler wakes at,
  :func:`kueue_es.scheduler.multikueue.gate_deadlines`), so that a preemption that does not get the copy admitted does not block the others for
  good.

Time is the log's: the decision's own ``time`` and the ``lastTransitionTime`` the copies show, never a clock.
"""

from __future__ import annotations

from events import schema as ev
from events.timefmt import parse_time
from projections.preemption_gates import BLOCKED_ON_PREEMPTION_GATES, MULTIKUEUE_GATE, opened_at
from projections.workloads import RemoteCopy, WorkloadInfo


def _true(copy: RemoteCopy, type_: str) -> str | None:
    """The ``lastTransitionTime`` of the copy's ``type_`` condition when it is True ("" without one), else None."""
    for c in copy.conditions:
        if c.type == type_ and c.status == "True":
            return c.last_transition_time or ""
    return None


def _admissible(copy: RemoteCopy) -> bool:
    """Whether the copy holds no quota on its worker and has not finished there: only such a copy's gate opens."""
    return _true(copy, "QuotaReserved") is None and _true(copy, "Finished") is None


def next_gate(wl: WorkloadInfo, now: int | None, timeout_ms: int) -> tuple[str | None, int | None]:
    """(the worker whose copy's gate opens now, or None; when to look again, or None) for ``wl`` (``now`` None:
    only when a blocked copy may have its gate opened, however far that is from now). The timeout runs from the
    latest gate opened on any copy: one that preempted and now holds quota on its worker, not yet admitted there,
    still keeps the others closed, so that two workers do not preempt for one workload."""
    waiting = []
    last_open: int | None = None
    for name, copy in sorted((wl.remotes or {}).items()):
        opened = opened_at(copy.preemption_gates, MULTIKUEUE_GATE)
        if opened is not None:
            last_open = opened if last_open is None else max(last_open, opened)
            continue
        if not _admissible(copy):
            continue
        blocked = _true(copy, BLOCKED_ON_PREEMPTION_GATES)
        if blocked is not None:
            waiting.append((parse_time(blocked) if blocked else 0, name))
    if not waiting:
        return None, None
    if last_open is not None and (now is None or now - last_open < timeout_ms):
        return None, last_open + timeout_ms
    return min(waiting)[1], None


def open_gate(wl: WorkloadInfo, base: dict, now: int, timeout_ms: int) -> list[ev.Decision]:
    """The gate ``wl``'s manager opens now (none, or one)."""
    cluster, _ = next_gate(wl, now, timeout_ms)
    if cluster is None:
        return []
    return [ev.RemotePreemptionGateOpened(key=wl.key, uid=wl.uid, cluster=cluster, gate=MULTIKUEUE_GATE, **base)]
