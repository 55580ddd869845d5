"""An eviction counts only once it is carried out: Kueue counts an eviction (``evicted_workloads_total``, its
LocalQueue and ``once`` twins, ``preempted_workloads_total``, ``pods_ready_to_evicted_time_seconds`` and the
Workload's ``schedulingStats.evictions``) after its status write succeeds (#6360). The fold counts at the
decision; a ``DecisionRejected`` of that decision (the victim gone, a conflict that invalidated it, a
webhook's denial) takes back what it counted, a ``DecisionApplied`` keeps it."""

from __future__ import annotations

import msgspec
import pytest
from fixtures.eventgen import T0, fold, upsert, workload

from events import objects as o
from events import schema as ev
from projections import snapshot
from projections.metrics import MetricsSnapshot, families
from projections.workloads import status_of
from tests.projections.test_proj_metrics import (
    NS,
    Log,
    admit,
    cluster,
    ready,
    release,
    reserve,
    series,
)

EVICTED, ONCE = "kueue_evicted_workloads_total", "kueue_evicted_workloads_once_total"
LQ_EVICTED, PREEMPTED = "kueue_local_queue_evicted_workloads_total", "kueue_preempted_workloads_total"
READY_TO_EVICTED = "kueue_pods_ready_to_evicted_time_seconds"

PREEMPT = (ev.WorkloadPreempted, {"key": "ns/w2", "reason": "InClusterQueue", "message": "m",
                                  "preemptor": "ns/w1"})
TIMEOUT = (ev.WorkloadEvicted, {"key": "ns/w2", "reason": "PodsReadyTimeout",
                                "underlying_cause": "WaitForStart", "message": "m"})
DEACTIVATE = (ev.WorkloadDeactivated, {"key": "ns/w2", "reason": "DeactivatedDueToRequeuingLimitExceeded",
                                       "message": "m"})


def evicted_with_pods_ready(log: Log, decision: tuple[type, dict]) -> int:
    """``ns/w2`` admitted in cq-b (LocalQueue metrics and waitForPodsReady on), its pods ready, then
    ``decision``: the decision's offset."""
    cluster(log)
    log.observe(ev.ConfigRecorded(time=T0, writer="test", document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "featureGates": {"LocalQueueMetrics": True}, "waitForPodsReady": {"timeout": "5m"}}))
    log.decide(T0 + 1000, reserve("ns/w2", "cq-b"), admit("ns/w2"))
    ready(log, "ns/w2", T0 + 2000)
    log.decide(T0 + 5000, decision)
    return len(log.records) - 1


def outcome(log: Log, decision: int, applied: bool, time: int = T0 + 5100) -> None:
    uid = log.state.workloads["ns/w2"].uid if "ns/w2" in log.state.workloads else ""
    if applied:
        log.observe(ev.DecisionApplied(time=time, key="ns/w2", uid=uid, decision=decision))
    else:
        log.observe(ev.DecisionRejected(time=time, key="ns/w2", uid=uid, decision=decision,
                                        reason="Forbidden", message="admission webhook denied the request"))


COUNTED = (EVICTED, LQ_EVICTED, ONCE, READY_TO_EVICTED)


@pytest.mark.parametrize("decision", [PREEMPT, TIMEOUT, DEACTIVATE],
                         ids=["preempted", "evicted", "deactivated"])
def test_a_rejected_eviction_is_not_counted(decision: tuple[type, dict]) -> None:
    log = Log()
    off = evicted_with_pods_ready(log, decision)
    for name in COUNTED:
        assert series(log.state, name), name  # counted at the decision
    assert log.state.workloads["ns/w2"].evictions
    outcome(log, off, applied=False)
    for name in (*COUNTED, PREEMPTED):
        assert series(log.state, name) == {}, name
    wl = log.state.workloads["ns/w2"]
    assert wl.evictions == ()
    assert "schedulingStats" not in status_of(wl)


@pytest.mark.parametrize("decision", [PREEMPT, TIMEOUT, DEACTIVATE],
                         ids=["preempted", "evicted", "deactivated"])
def test_an_applied_eviction_stays_counted_and_a_later_rejection_of_it_takes_nothing_back(
        decision: tuple[type, dict]) -> None:
    log = Log()
    off = evicted_with_pods_ready(log, decision)
    counted = {name: series(log.state, name) for name in (*COUNTED, PREEMPTED)}
    evictions = log.state.workloads["ns/w2"].evictions
    outcome(log, off, applied=True)
    outcome(log, off, applied=False, time=T0 + 5200)  # one outcome per decision: a second one changes nothing
    assert {name: series(log.state, name) for name in counted} == counted
    assert log.state.workloads["ns/w2"].evictions == evictions


def test_a_preemption_rejected_takes_back_only_its_own_counts() -> None:
    """An earlier eviction of the same pair, carried out, stays counted (``once`` too): only the rejected
    one's share goes, and the record's entry keeps the earlier count."""
    log = Log()
    cluster(log)
    log.decide(T0 + 1000, reserve("ns/w2", "cq-b"), admit("ns/w2"))
    log.decide(T0 + 2000, PREEMPT)
    outcome(log, len(log.records) - 1, applied=True, time=T0 + 2100)
    log.decide(T0 + 3000, release("ns/w2"))
    log.decide(T0 + 4000, reserve("ns/w2", "cq-b"), admit("ns/w2"))
    log.decide(T0 + 5000, PREEMPT)
    assert series(log.state, EVICTED) == {("cq-b", "Preempted", "", ""): 2}
    outcome(log, len(log.records) - 1, applied=False)
    assert series(log.state, EVICTED) == {("cq-b", "Preempted", "", ""): 1}
    assert series(log.state, ONCE) == {("cq-b", "Preempted", "", ""): 1}
    assert series(log.state, PREEMPTED) == {("cq-a", "InClusterQueue"): 1}
    assert log.state.workloads["ns/w2"].evictions == (("Preempted", "", 1),)


def test_an_eviction_of_a_workload_deleted_before_it_was_written_is_not_counted() -> None:
    """The writer rejects the decisions of a Workload the log saw deleted (NotFound): the workload is gone
    from the fold by then, its counts are still taken back."""
    log = Log()
    off = evicted_with_pods_ready(log, PREEMPT)
    uid = log.state.workloads["ns/w2"].uid
    log.observe(ev.ObjectDeleted(time=T0 + 5050, kind="Workload", key="ns/w2"))
    log.observe(ev.DecisionRejected(time=T0 + 5100, key="ns/w2", uid=uid, decision=off, reason="NotFound",
                                    message="the Workload no longer exists"))
    for name in (*COUNTED, PREEMPTED):
        assert series(log.state, name) == {}, name


def test_a_rejection_for_a_recreated_workload_leaves_the_new_objects_record_alone() -> None:
    log = Log()
    off = evicted_with_pods_ready(log, TIMEOUT)
    uid = log.state.workloads["ns/w2"].uid
    # a Workload of the same name, another object, showing a record of its own
    again = workload(NS, "w2", uid="another", queue="lq-b", created=T0 + 5050)
    again = msgspec.structs.replace(again, status=o.WorkloadStatus(scheduling_stats=o.SchedulingStats(
        evictions=[o.SchedulingStatsEviction(reason="PodsReadyTimeout", underlying_cause="WaitForStart",
                                             count=1)])))
    log.observe(upsert(again, T0 + 5050))
    log.observe(ev.DecisionRejected(time=T0 + 5100, key="ns/w2", uid=uid, decision=off, reason="UIDChanged",
                                    message="recreated"))
    assert series(log.state, EVICTED) == {}
    assert log.state.workloads["ns/w2"].evictions == (("PodsReadyTimeout", "WaitForStart", 1),)


def test_a_snapshot_between_the_eviction_and_its_rejection_restores_what_to_take_back() -> None:
    log = Log()
    off = evicted_with_pods_ready(log, PREEMPT)
    outcome(log, off, applied=False)
    full = fold(log.records)
    for cut in range(len(log.records) + 1):
        restored = fold(log.records[cut:], snapshot.decode(snapshot.encode(fold(log.records[:cut]))))
        assert families(restored) == families(full), f"snapshot at {cut}"
        assert snapshot.digest(restored) == snapshot.digest(full), f"snapshot at {cut}"
    assert series(full, EVICTED) == {}


def test_a_snapshot_older_than_version_59_remembers_no_eviction_awaiting_its_outcome() -> None:
    """Its writer kept no :class:`CountedEviction`: restored, an eviction decided before it and rejected after
    it stays counted (as the fold counted it before version 59)."""
    log = Log()
    off = evicted_with_pods_ready(log, PREEMPT)
    taken = snapshot.take(log.state)
    assert [c.decision for c in taken.metrics.unconfirmed] == [off]
    m = taken.metrics
    assert m is not None
    # version 58's layout: the metrics without the last field
    old_metrics = msgspec.msgpack.decode(msgspec.msgpack.encode(
        [m.counters, m.histograms, m.cycle, m.attempt, m.evicted_once, m.preemption_skips]),
        type=MetricsSnapshot)
    restored = snapshot.restore(msgspec.structs.replace(taken, version=58, metrics=old_metrics,
                                                        unconfirmed_evictions=[]))  # (a version 64 field)
    assert restored.metrics.unconfirmed == {}
    uid = restored.workloads["ns/w2"].uid
    restored.apply(ev.Record(off + 1, ev.DecisionRejected(time=T0 + 5100, key="ns/w2", uid=uid, decision=off,
                                                          reason="Invalid", message="refused")))
    assert series(restored, EVICTED) == {("cq-b", "Preempted", "", ""): 1}
    assert restored.workloads["ns/w2"].evictions == (("Preempted", "", 1),)
