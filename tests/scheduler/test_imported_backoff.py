"""A Workload first seen with ``status.requeueState.requeueAt`` (a restart on a new log, a STATE.yaml) is put
on the backoff clock only if something waits on that time, as the log's own fold does (``RequeueAtRaised``):
evicted for PodsReadyTimeout/AdmissionCheck and still holding quota, or Requeued=False for one, or waiting
pending. Kueue's workload controller writes Requeued=True BackoffFinished only over such a Requeued=False
condition; a pending workload that was never evicted (its requeueAt raised by a late Retry check) gets none
when the time passes, only the time cleared (the newest Kueue's pending branch, the count kept)."""

from __future__ import annotations

import msgspec
from fixtures.eventgen import T0, admission, cluster_queue, flavor, local_queue, namespace, upsert, workload

from events import objects as o
from events import schema as ev
from events.timefmt import format_time
from kueue_es.scheduler import DEFAULT
from kueue_es.scheduler.reconcile import next_deadline, reconcile
from projections import snapshot
from projections.cluster import ClusterState

REQUEUE_AT = T0 + 72_000
RETRY = o.AdmissionCheckState(
    name="approval",
    state="Retry",
    last_transition_time=format_time(T0 + 12_000),
    message="later",
    requeue_after_seconds=60,
)


def _cond(type_: str, status: str, reason: str) -> o.Condition:
    return o.Condition(
        type=type_, status=status, reason=reason, message=reason, last_transition_time=format_time(T0)
    )


def _imported(*conditions: o.Condition, adm: o.Admission | None = None, active: bool = True) -> ClusterState:
    """A cluster whose Workload ``ns0/w`` is first seen with ``conditions``, a Retry check and a requeueAt."""
    state = ClusterState()
    w = workload("ns0", "w", uid="u0", cpu="1")
    w = msgspec.structs.replace(
        w,
        spec=msgspec.structs.replace(w.spec, active=active),
        status=o.WorkloadStatus(
            conditions=list(conditions),
            admission=adm,
            admission_checks=[RETRY],
            requeue_state=o.RequeueState(count=1, requeue_at=format_time(REQUEUE_AT)),
        ),
    )
    for e in (
        upsert(namespace("ns0"), T0),
        upsert(flavor("f0"), T0),
        upsert(cluster_queue("cq0", quotas={"f0": 4}), T0),
        upsert(local_queue("ns0", "lq0", "cq0"), T0),
        upsert(w, T0 + 13_000),
    ):
        state.apply(ev.Record(state.offset + 1, e))
    assert state.workloads["ns0/w"].requeue_at == REQUEUE_AT, "the time is shown as imported"
    return state


def _timed(out: list[ev.Decision]) -> list[ev.Decision]:
    """The decisions the requeueAt's passing makes (the pending rules' conditions left aside)."""
    return [d for d in out if isinstance(d, ev.RequeueAtCleared | ev.WorkloadRequeued)]


def _requeued(state: ClusterState) -> list[tuple[str, bool, str]]:
    out = reconcile(state, DEFAULT, REQUEUE_AT + 1000, 1, full=True)
    return [(d.key, d.status, d.reason) for d in out if isinstance(d, ev.WorkloadRequeued)]


def test_a_pending_workload_never_evicted_has_its_time_cleared_when_it_passes() -> None:
    state = _imported(_cond("QuotaReserved", "False", "Pending"))
    assert state.backoff == {"ns0/w": REQUEUE_AT}
    assert next_deadline(state, DEFAULT, afs_samples=False) == REQUEUE_AT
    assert _timed(reconcile(state, DEFAULT, REQUEUE_AT - 1, 1, full=True)) == [], "not before the time"
    out = _timed(reconcile(state, DEFAULT, REQUEUE_AT, 1, full=True))
    assert [(type(d).__name__, d.key) for d in out] == [("RequeueAtCleared", "ns0/w")], (
        "Kueue writes no BackoffFinished without a Requeued=False to end")
    for d in out:
        state.apply(ev.Record(state.offset + 1, msgspec.structs.replace(d, time=REQUEUE_AT)))
    wl = state.workloads["ns0/w"]
    assert (wl.requeue_at, wl.requeue_count) == (None, 1), "the time goes, the count as it was"
    assert "ns0/w" not in state.backoff and next_deadline(state, DEFAULT, afs_samples=False) is None


def test_an_inactive_pending_workload_is_off_the_clock() -> None:
    """Its deactivation clears its requeue state instead (``RequeueStateCleared``)."""
    state = _imported(_cond("QuotaReserved", "False", "Pending"), active=False)
    assert "ns0/w" not in state.backoff


def test_a_workload_that_gave_its_quota_back_waits_out_its_backoff() -> None:
    state = _imported(
        _cond("QuotaReserved", "False", "Pending"),
        _cond("Evicted", "True", "AdmissionCheck"),
        _cond("Requeued", "False", "AdmissionCheck"),
    )
    assert state.backoff == {"ns0/w": REQUEUE_AT}
    assert next_deadline(state, DEFAULT, afs_samples=False) == REQUEUE_AT
    assert _requeued(state) == [("ns0/w", True, "BackoffFinished")]


def test_a_workload_evicted_while_holding_quota_is_on_the_clock() -> None:
    """Only the eviction says so here (no Requeued condition shown): read once the reservation is taken."""
    state = _imported(
        _cond("QuotaReserved", "True", "QuotaReserved"),
        _cond("Admitted", "True", "Admitted"),
        _cond("Evicted", "True", "PodsReadyTimeout"),
        adm=admission("cq0", "f0", 1000),
    )
    wl = state.workloads["ns0/w"]
    assert wl.reserving and wl.evicted == "PodsReadyTimeout"
    assert state.backoff == {"ns0/w": REQUEUE_AT}


def test_a_workload_requeued_false_for_another_reason_gets_no_backoff_finished() -> None:
    """Pending and active, its time is on the clock to be cleared; it ends no backoff (Requeued=False
    Deactivated is the reactivation's to turn True)."""
    state = _imported(
        _cond("QuotaReserved", "False", "Pending"),
        _cond("Evicted", "True", "Preempted"),
        _cond("Requeued", "False", "Deactivated"),
    )
    assert state.backoff == {"ns0/w": REQUEUE_AT}
    out = _timed(reconcile(state, DEFAULT, REQUEUE_AT, 1, full=True))
    assert [type(d).__name__ for d in out if d.key == "ns0/w"] == ["RequeueAtCleared", "WorkloadRequeued"]
    assert _requeued(state) == [("ns0/w", True, "Reactivated")]


def test_a_version_67_snapshot_puts_a_pending_workloads_time_on_the_clock() -> None:
    """Version 67 kept such a time off the clock: restored, it is put on it as the fold puts it now (68)."""
    taken = snapshot.take(_imported(_cond("QuotaReserved", "False", "Pending")))
    assert taken.version == snapshot.SNAPSHOT_VERSION >= 68 and taken.backoff == [("ns0/w", REQUEUE_AT)]
    old = msgspec.structs.replace(taken, version=67, backoff=[])
    restored = snapshot.restore(old)
    assert restored.backoff == {"ns0/w": REQUEUE_AT}
    assert next_deadline(restored, DEFAULT, afs_samples=False) == REQUEUE_AT
    assert snapshot.take(restored) == taken, "as the full fold has it"
    assert snapshot.restore(msgspec.structs.replace(taken, backoff=[])).backoff == {}, (
        "68 on is read as it is")
