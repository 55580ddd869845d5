"""The requeue backoff as a deadline: only an active workload's backoff ends by itself (Kueue's workload
controller times it in its active branch alone), so only its ``requeueAt`` is a time the loops must wake at.
An inactive one keeps its backoff until the controller clears it or it is reactivated; were its ``requeueAt``
a deadline, once past it would wake the loops at every turn with nothing to decide."""

from __future__ import annotations

import msgspec
from fixtures.eventgen import T0, cluster_queue, flavor, local_queue, namespace, upsert, workload

from events import schema as ev
from kueue_es.scheduler import DEFAULT, settle
from kueue_es.scheduler.reconcile import next_deadline
from projections.cluster import ClusterState

REQUEUE_AT = T0 + 61_000


def _in_backoff() -> tuple[ClusterState, ev.ObjectUpserted]:
    """A workload evicted by the PodsReady timeout, its quota released, waiting out its backoff."""
    state = ClusterState()
    w = workload("ns0", "w", uid="u0", cpu="1")
    events = [upsert(namespace("ns0"), T0), upsert(flavor("f0"), T0),
              upsert(cluster_queue("cq0", quotas={"f0": 4}), T0),
              upsert(local_queue("ns0", "lq0", "cq0"), T0), upsert(w, T0)]
    for e in events:
        state.apply(ev.Record(state.offset + 1, e))
    settle(state, DEFAULT, now=T0)
    for e in (ev.WorkloadEvicted(time=T0 + 1000, key="ns0/w", uid="u0", reason="PodsReadyTimeout",
                                 message="timeout", requeue_at=REQUEUE_AT, requeue_count=1, cycle=50,
                                 input=state.offset),
              ev.JobStopped(time=T0 + 2000, key="ns0/w", uid="u0")):
        state.apply(ev.Record(state.offset + 1, e))
    settle(state, DEFAULT, now=T0 + 2000)
    assert "ns0/w" in state.backoff and state.workloads["ns0/w"].requeue_at == REQUEUE_AT
    inactive = upsert(msgspec.structs.replace(w, spec=msgspec.structs.replace(w.spec, active=False)),
                      T0 + 3000)
    return state, inactive


def test_an_active_workload_s_backoff_end_is_a_deadline() -> None:
    state, _ = _in_backoff()
    assert next_deadline(state, DEFAULT) == REQUEUE_AT


def test_an_inactive_workload_s_backoff_end_is_no_deadline() -> None:
    state, inactive = _in_backoff()
    state.apply(ev.Record(state.offset + 1, inactive))
    assert "ns0/w" in state.backoff, "not cleared yet: the controller's rules have not looked"
    assert next_deadline(state, DEFAULT) is None, "nothing else in this state has a time"
