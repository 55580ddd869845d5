"""Kueue's Workload preemption gates (``MultiKueueOrchestratedPreemption``, KEP-8303), as the fold reads them.

A Workload lists gates in ``spec.preemptionGates`` and their positions in ``status.preemptionGates``. While any
spec gate is closed — ``Closed`` in the status, or not listed there yet, so a workload created gated is gated at
once — the scheduler does not preempt for it: an attempt that would preempt leaves it pending with the
``BlockedOnPreemptionGates`` condition (:mod:`kueue_es.scheduler.cycle`). MultiKueue's manager puts
:data:`MULTIKUEUE_GATE` on every copy it makes on a worker and opens it on one copy at a time
(:mod:`kueue_es.scheduler.preemption_gates`). Kueue's workload controller lists every spec gate in the status,
``Closed`` when first seen (:mod:`kueue_es.scheduler.gate_states`, :func:`on_gates_synced`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from events import objects as o
from events import schema as ev
from events.timefmt import parse_time
from projections.workloads import RemoteCopy

if TYPE_CHECKING:
    from projections.cluster import ClusterState

MULTIKUEUE_GATE = "kueue.x-k8s.io/multikueue"
"""The gate MultiKueue's manager adds to the copies of a workload it makes on workers."""
CONCURRENT_ADMISSION_GATE = "kueue.x-k8s.io/concurrent-admission"
"""The gate ConcurrentAdmission's variant controller puts on every variant it makes and opens on one variant at a
time (:mod:`kueue_es.scheduler.variant_gates`)."""
BLOCKED_ON_PREEMPTION_GATES = "BlockedOnPreemptionGates"
"""The Workload condition a gated attempt sets True (and eviction or a quota reservation sets False)."""
PREEMPTION_GATED = "PreemptionGated"
"""That condition's reason, and the scheduler's requeue reason for the attempt."""
GATED_LEGACY_REASON = "Pending"
"""The QuotaReserved=False reason of such an attempt with UnadmittedWorkloadsObservability off (on, it is
:data:`PREEMPTION_GATED`)."""
GATED_MESSAGE = "Workload requires preemption, but it's gated"
"""Kueue's scheduler's message for such an attempt (the condition's and QuotaReserved=False's)."""
OPEN, CLOSED = "Open", "Closed"


def has_closed_gate(spec_gates: Iterable[o.PreemptionGate], status_gates: Iterable[o.PreemptionGateState]) -> bool:
    """Whether a spec gate is closed: ``Closed`` in the status, or absent from it."""
    positions = {g.name: g.position for g in status_gates}
    return any(positions.get(g.name, CLOSED) == CLOSED for g in spec_gates)


def gate_state(status_gates: Iterable[o.PreemptionGateState], name: str) -> o.PreemptionGateState | None:
    """The status entry of gate ``name`` (None: not listed)."""
    for g in status_gates:
        if g.name == name:
            return g
    return None


def opened_at(status_gates: Iterable[o.PreemptionGateState], name: str) -> int | None:
    """When gate ``name`` was opened, in ms (0 when its entry shows no time), or None: not listed open."""
    gate = gate_state(status_gates, name)
    if gate is None or gate.position != OPEN:
        return None
    return parse_time(gate.last_transition_time) if gate.last_transition_time else 0


def opened_on(copy: RemoteCopy, gate: str, when: str) -> RemoteCopy:
    """A worker's copy with ``gate`` opened at ``when`` (its status entry replaced, or added last)."""
    return RemoteCopy(copy.conditions, copy.topology_pod_sets, opened_in(copy.preemption_gates, gate, when))


def opened_in(gates: tuple[o.PreemptionGateState, ...], gate: str, when: str) -> tuple[o.PreemptionGateState, ...]:
    """``gates`` with ``gate`` opened at ``when`` (its entry replaced, or added last)."""
    entry = o.PreemptionGateState(name=gate, position=OPEN, last_transition_time=when)
    if gate_state(gates, gate) is None:
        return (*gates, entry)
    return tuple(entry if g.name == gate else g for g in gates)


def closed_all(gates: tuple[o.PreemptionGateState, ...], when: str) -> tuple[o.PreemptionGateState, ...]:
    """Every gate ``Closed`` at ``when``, as Kueue's eviction leaves them."""
    return tuple(o.PreemptionGateState(name=g.name, position=CLOSED, last_transition_time=when) for g in gates)


def newer_gates(known: tuple[o.PreemptionGateState, ...], shown: Iterable[o.PreemptionGateState],
                listed: Iterable[str] = ()) -> list[o.PreemptionGateState]:
    """``shown``, each gate as ``known`` has it instead where ``known``'s changed later, then the gates of
    ``listed`` (the spec's) ``known`` has and ``shown`` does not: no writer takes a gate's entry out of a status,
    so a read without it is from before the write that put it there (a variant read back before its gate's
    opening was written)."""
    mine = {g.name: g for g in known}
    out = []
    for g in shown:
        k = mine.get(g.name)
        later = (k is not None and k.last_transition_time and g.last_transition_time
                 and parse_time(k.last_transition_time) > parse_time(g.last_transition_time))
        out.append(k if later else g)
    have = {g.name for g in out}
    out.extend(mine[n] for n in dict.fromkeys(listed) if n in mine and n not in have)
    return out


def on_gates_synced(state: ClusterState, e: ev.PreemptionGatesSynced) -> None:
    """The status lists the spec's gates as the decision has them. Whether the workload is gated does not change:
    a gate added is ``Closed``, as its missing entry read, and an entry dropped is of no spec gate."""
    wl = state.workloads.get(e.key)
    if wl is not None and (not e.uid or e.uid == wl.uid):
        wl.gate_states = tuple(e.gates)
