"""MultiKueueOrchestratedPreemption: Kueue's workload controller keeps ``status.preemptionGates`` in step with the spec.

Whenever it reconciles a Workload under the gate, Kueue makes the status list exactly the gates
``spec.preemptionGates`` names: an entry of a gate the spec no longer names is dropped, and a spec gate the status
does not list yet is added ``Closed``, its ``lastTransitionTime`` the time of that reconcile. So a copy MultiKueue's
manager creates on a worker, gated, shows its gate closed once the worker's Kueue has seen it; the scheduler reads
a gate not listed as closed all the same (:func:`projections.preemption_gates.has_closed_gate`), so nothing but the
status changes. Time is the decision's (the log's), never a clock.
"""

from __future__ import annotations

from collections.abc import Iterable

from events import objects as o
from events import schema as ev
from events.timefmt import format_time
from projections.cluster import ClusterState
from projections.preemption_gates import CLOSED
from projections.workloads import WorkloadInfo


def synced(wl: WorkloadInfo, when: str) -> list[o.PreemptionGateState] | None:
    """``wl``'s status gates as Kueue's controller leaves them at ``when`` (None: already so); a spec that names
    none leaves none."""
    names = wl.spec_gates
    if not names and not wl.gate_states:
        return None
    kept = [g for g in wl.gate_states if g.name in names]
    listed = {g.name for g in kept}
    missing = [n for n in dict.fromkeys(names) if n not in listed]
    if not missing and len(kept) == len(wl.gate_states):
        return None
    return kept + [o.PreemptionGateState(name=n, position=CLOSED, last_transition_time=when) for n in missing]


def sync_decisions(state: ClusterState, keys: Iterable[str] | None, base: dict) -> list[ev.Decision]:
    """The ``PreemptionGatesSynced`` decisions for the workloads of ``keys`` (None: every workload), in key
    order."""
    wls = state.workloads
    if keys is None:
        candidates = sorted(k for k, wl in wls.items() if wl.spec_gates or wl.gate_states)
    else:
        candidates = sorted(k for k in keys if (wl := wls.get(k)) is not None and (wl.spec_gates or wl.gate_states))
    when = format_time(base["time"])
    out: list[ev.Decision] = []
    for key in candidates:
        wl = wls[key]
        gates = synced(wl, when)
        if gates is not None:
            out.append(ev.PreemptionGatesSynced(key=key, uid=wl.uid, gates=gates, **base))
    return out
