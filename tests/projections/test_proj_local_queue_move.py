"""A LocalQueue pointed at another ClusterQueue takes its pending workloads along, active (Kueue v0.20).

Kueue's queue manager, when a LocalQueue's ``spec.clusterQueue`` changes, removes the LocalQueue's workloads from
the old ClusterQueue (its heap and its inadmissible set) and pushes every one onto the new ClusterQueue's heap
(#13885): nothing that parked a workload in the old queue — a failed attempt, its shape parked there, its requeue
backoff — parks it in the new one, nor does a shape the new queue has parked.
"""

from __future__ import annotations

import msgspec
from fixtures.eventgen import (
    T0,
    cluster_queue,
    flavor,
    fold,
    local_queue,
    namespace,
    records,
    upsert,
    workload,
)

from events import objects as o
from events import schema as ev
from events.timefmt import format_time
from projections.cluster import ClusterState

NS = "ns"


def parked_no_fit(key: str, time: int) -> ev.WorkloadPending:
    """A failed attempt decided on the setup folded whole (its last offset: a flush after that would send the
    workload back to its heap)."""
    return ev.WorkloadPending(key=key, time=time, cycle=1, input=len(setup()) - 1, reason="Pending",
                              message="no fit", requeue_reason="NoFit", parked=True)


def where(state: ClusterState, key: str) -> tuple[str, str]:
    """(ClusterQueue, "active" or "parked") of a pending workload."""
    for name in sorted(state.queues):
        q = state.queues[name]
        if key in q.entries:
            return name, "active"
        if key in q.inadmissible:
            return name, "parked"
    return "", ""


def setup() -> list[ev.AnyEvent]:
    backoff = msgspec.structs.replace(workload(NS, "backoff", queue="lq-b", cpu="3", created=T0 + 2),
                                      status=o.WorkloadStatus(requeue_state=o.RequeueState(
                                          count=1, requeue_at=format_time(T0 + 3_600_000))))
    return [upsert(x, T0) for x in (
        namespace(NS), flavor("f0"),
        cluster_queue("cq-a", quotas={"f0": 2}), cluster_queue("cq-b", quotas={"f0": 2}),
        local_queue(NS, "lq-a", "cq-a"), local_queue(NS, "lq-b", "cq-b"),
        workload(NS, "a-big", queue="lq-a", cpu="3", created=T0),
        workload(NS, "b-big", queue="lq-b", cpu="3", created=T0 + 1),
        backoff,
    )]


def test_moved_workloads_arrive_active_whatever_parked_them() -> None:
    recs = records([setup(), [parked_no_fit(f"{NS}/a-big", T0 + 1000), parked_no_fit(f"{NS}/b-big", T0 + 1000)]])
    state = fold(recs)
    # a-big parked its shape in cq-a; b-big (same shape) and the workload in backoff are parked in cq-b
    assert [where(state, f"{NS}/{n}") for n in ("a-big", "b-big", "backoff")] == [
        ("cq-a", "parked"), ("cq-b", "parked"), ("cq-b", "parked")]
    fold(records([[upsert(local_queue(NS, "lq-b", "cq-a"), T0 + 2000)]]), state)
    assert [where(state, f"{NS}/{n}") for n in ("a-big", "b-big", "backoff")] == [
        ("cq-a", "parked"), ("cq-a", "active"), ("cq-a", "active")]
    assert not state.queues["cq-b"].entries and not state.queues["cq-b"].inadmissible


def test_a_spec_change_keeping_the_cluster_queue_unparks_nothing_parked_by_shape_or_backoff() -> None:
    state = fold(records([setup(), [parked_no_fit(f"{NS}/b-big", T0 + 1000)]]))
    lq = local_queue(NS, "lq-b", "cq-b")
    weighted = msgspec.structs.replace(lq, spec=msgspec.structs.replace(lq.spec, fair_sharing=o.FairSharing(
        weight="2")))
    fold(records([[upsert(weighted, T0 + 2000)]]), state)
    assert [where(state, f"{NS}/{n}") for n in ("b-big", "backoff")] == [("cq-b", "parked"), ("cq-b", "parked")]
