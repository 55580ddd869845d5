"""Each queue's preemptor workload in the fold (``ClusterQueueQueue.preemptor``), which PrioritizePreemptorWorkloads
puts first in a cycle: set when a workload is requeued while waiting for its preemptions, in either queueing strategy
(BestEffortFIFO's sticky workload is the same one there), forgotten (sticky too, Kueue v0.20) when it is requeued for another reason, parked
or leaves the queue, and kept by a snapshot. The scenarios ``prioritize-preemptor-*`` show the scheduling side."""

from __future__ import annotations

import msgspec
import pytest
from fixtures.eventgen import T0, cluster_queue, flavor, local_queue, namespace, upsert, workload

from events import objects as o
from events import schema as ev
from projections import snapshot
from projections.cluster import ClusterState

KEY = "team/w"


def fold(strategy: str) -> ClusterState:
    state = ClusterState()
    for e in (upsert(namespace("team"), T0), upsert(flavor("f0"), T0),
              upsert(cluster_queue("cq", quotas={"f0": 1}, strategy=strategy), T0),
              upsert(local_queue("team", "lq", "cq"), T0), upsert(workload("team", "w", queue="lq"), T0)):
        apply(state, e)
    return state


def apply(state: ClusterState, e: ev.Event) -> None:
    state.apply(ev.Record(state.offset + 1, e))


def pending(state: ClusterState, requeue_reason: str, *, parked: bool = False) -> None:
    uid = state.workloads[KEY].uid
    apply(state, ev.WorkloadPending(time=T0, cycle=1, input=state.offset, key=KEY, uid=uid,
                                    reason="WaitingForPreemptedWorkloads", message="m", requeue_reason=requeue_reason,
                                    parked=parked))


@pytest.mark.parametrize(("strategy", "sticky"), [("BestEffortFIFO", KEY), ("StrictFIFO", None)])
def test_a_workload_waiting_for_its_preemptions_is_its_queues_preemptor_in_either_strategy(
        strategy: str, sticky: str | None) -> None:
    state = fold(strategy)
    pending(state, "PendingPreemption")
    q = state.queues["cq"]
    assert (q.preemptor, q.sticky) == (KEY, sticky)
    restored = snapshot.decode(snapshot.encode(state))
    assert (restored.queues["cq"].preemptor, restored.queues["cq"].sticky) == (KEY, sticky)
    assert snapshot.digest(restored) == snapshot.digest(state)


@pytest.mark.parametrize("reason", ["PreemptionFailed", "FailedAfterNomination", "Generic"])
def test_requeued_for_another_reason_it_is_neither_the_preemptor_nor_sticky(reason: str) -> None:
    """Kueue v0.20 (#14863): any other requeue — its preemption failed, or a later cycle requeued it for another
    reason while it stays in the heap — clears the preemptor, and BestEffortFIFO's sticky head with it."""
    state = fold("BestEffortFIFO")
    pending(state, "PendingPreemption")
    pending(state, reason)
    q = state.queues["cq"]
    assert KEY in q.entries
    assert (q.preemptor, q.sticky) == (None, None)


def test_parked_it_is_no_longer_the_preemptor() -> None:
    state = fold("BestEffortFIFO")
    pending(state, "PendingPreemption")
    pending(state, "PreemptionNoCandidates", parked=True)
    q = state.queues["cq"]
    assert KEY in q.inadmissible and q.preemptor is None


def test_a_snapshot_from_before_version_11_takes_the_sticky_workload_as_the_preemptor() -> None:
    state = fold("BestEffortFIFO")
    pending(state, "PendingPreemption")
    old = msgspec.to_builtins(snapshot.take(state))
    old[0] = 10
    queue = old[snapshot.Snapshot.__struct_fields__.index("queues")][0]
    del queue[snapshot.QueueSnapshot.__struct_fields__.index("preemptor"):]
    restored = snapshot.decode(msgspec.msgpack.encode(old))
    assert restored.queues["cq"].preemptor == KEY
    assert snapshot.digest(restored) == snapshot.digest(state)


@pytest.mark.parametrize("strategy", ["BestEffortFIFO", "StrictFIFO"])
def test_an_update_in_place_keeps_the_sticky_head_but_a_new_generation_is_not_the_preemptor(
        strategy: str) -> None:
    """Kueue's ``PushOrUpdate`` of an updated pending workload forgets neither the sticky head nor the
    preemptor (only ``delete`` and a requeue for another reason do); ``IsPreemptor`` compares the generation
    it was evaluated at, so a new spec (here a new priority) is no longer the preemptor
    (cluster_queue_test.go, TestClusterQueueIsPreemptor). The sticky head does not look at the generation."""
    state = fold(strategy)
    pending(state, "PendingPreemption")
    apply(state, upsert(workload("team", "w", queue="lq", priority=7), T0))
    q = state.queues["cq"]
    assert KEY in q.entries
    assert (q.preemptor, q.sticky) == (None, KEY if strategy == "BestEffortFIFO" else None)


def test_moved_to_another_local_queue_it_is_neither_the_preemptor_nor_sticky() -> None:
    """Another LocalQueue: Kueue deletes the workload from its queues (``deleteAndForgetWorkloadWithoutLock``)
    before it adds it again, which forgets it as the preemptor and the sticky head."""
    state = fold("BestEffortFIFO")
    apply(state, upsert(local_queue("team", "other", "cq"), T0))
    pending(state, "PendingPreemption")
    apply(state, upsert(workload("team", "w", queue="other"), T0))
    q = state.queues["cq"]
    assert KEY in q.entries
    assert (q.preemptor, q.sticky) == (None, None)


def _gen(w: o.Workload, generation: int, **spec: object) -> o.Workload:
    w = msgspec.structs.replace(w, metadata=msgspec.structs.replace(w.metadata, generation=generation))
    return msgspec.structs.replace(w, spec=msgspec.structs.replace(w.spec, **spec)) if spec else w


def test_a_new_generation_kueue_es_does_not_queue_on_is_not_the_preemptor() -> None:
    """``IsPreemptor`` compares generations, whatever the new spec changed: here only
    ``maximumExecutionTimeSeconds``, which leaves the workload where it is queued. An echo of the same
    generation (a status write) keeps it the preemptor."""
    state = fold("BestEffortFIFO")
    apply(state, upsert(_gen(workload("team", "w", queue="lq"), 1), T0))
    pending(state, "PendingPreemption")
    apply(state, upsert(_gen(workload("team", "w", queue="lq"), 1), T0))
    q = state.queues["cq"]
    assert (q.preemptor, q.sticky) == (KEY, KEY)
    apply(state, upsert(_gen(workload("team", "w", queue="lq"), 2, maximum_execution_time_seconds=600), T0))
    assert (q.preemptor, q.sticky) == (None, KEY)
