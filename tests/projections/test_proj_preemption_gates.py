"""The preemption gates a Workload's status lists in the fold (``WorkloadInfo.gate_states``): the entries of gates
its spec no longer names are read too, so the controller can drop them as Kueue's does
(scenario ``multikueue-orchestrated-preemption-gate-states``), and an eviction closes every entry, as Kueue's
does, without gating a workload whose spec names no gate."""

from __future__ import annotations

import msgspec
from fixtures.eventgen import (
    T0,
    admission,
    cluster_queue,
    flavor,
    local_queue,
    namespace,
    shown_reserved,
    upsert,
    workload,
)

from events import objects as o
from events import schema as ev
from projections.cluster import ClusterState

KEY = "team/w"
STALE = o.PreemptionGateState(name="example.com/gone", position="Open", last_transition_time="2024-05-01T07:00:00Z")


def admitted_with(spec_gates: list[str]) -> ClusterState:
    """``team/w`` admitted, its status listing ``example.com/gone`` Open, its spec naming ``spec_gates``."""
    state = ClusterState()
    w = workload("team", "w", queue="lq")
    w = msgspec.structs.replace(w, spec=msgspec.structs.replace(
        w.spec, preemption_gates=[o.PreemptionGate(name=g) for g in spec_gates]))
    w = shown_reserved(w, admission("cq", "f0", 1000), admitted=True)
    w = msgspec.structs.replace(w, status=msgspec.structs.replace(w.status, preemption_gates=[STALE]))
    for e in (upsert(namespace("team"), T0), upsert(flavor("f0"), T0),
              upsert(cluster_queue("cq", quotas={"f0": 4}), T0), upsert(local_queue("team", "lq", "cq"), T0),
              upsert(w, T0)):
        state.apply(ev.Record(state.offset + 1, e))
    return state


def evict(state: ClusterState) -> None:
    uid = state.workloads[KEY].uid
    state.apply(ev.Record(state.offset + 1, ev.WorkloadEvicted(
        time=T0 + 60_000, cycle=1, input=state.offset, key=KEY, uid=uid, reason="Preempted", message="m")))


def test_the_status_entries_of_a_spec_that_names_no_gate_are_read() -> None:
    wl = admitted_with([]).workloads[KEY]
    assert (wl.gate_states, wl.spec_gates, wl.preemption_gated) == ((STALE,), (), False)


def test_an_eviction_closes_every_entry_but_gates_only_a_workload_whose_spec_names_a_gate() -> None:
    ungated = admitted_with([])
    evict(ungated)
    wl = ungated.workloads[KEY]
    assert [(g.name, g.position, g.last_transition_time) for g in wl.gate_states] == [
        ("example.com/gone", "Closed", "2024-05-01T08:01:00Z")]
    assert not wl.preemption_gated, "no spec gate: nothing holds its preemptions back"

    gated = admitted_with(["example.com/gone"])
    assert not gated.workloads[KEY].preemption_gated, "listed Open"
    evict(gated)
    assert gated.workloads[KEY].preemption_gated, "closed by the eviction"


def test_a_deactivation_closes_them_as_any_eviction() -> None:
    """Kueue's controller evicts a deactivated workload through the same Evict, holding quota or not."""
    for spec_gates in ([], ["example.com/gone"]):
        state = admitted_with(spec_gates)
        uid = state.workloads[KEY].uid
        state.apply(ev.Record(state.offset + 1, ev.WorkloadDeactivated(
            time=T0 + 60_000, cycle=1, input=state.offset, key=KEY, uid=uid, reason="Deactivated", message="m")))
        wl = state.workloads[KEY]
        assert [(g.name, g.position, g.last_transition_time) for g in wl.gate_states] == [
            ("example.com/gone", "Closed", "2024-05-01T08:01:00Z")]
        assert wl.preemption_gated == bool(spec_gates)
