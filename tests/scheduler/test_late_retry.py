"""A Retry check that sets its delay after the eviction, or while the workload waits (KEP-3258): the decision
that pushes ``status.requeueState.requeueAt`` out (``RequeueAtRaised``) as the log stores it and the fold
takes it. Its timelines are the scenarios ``admission-check-retry-after-eviction`` and ``-while-pending``."""

from __future__ import annotations

import pytest
from fixtures.eventgen import upsert, workload

from events import schema as ev
from events.codec import decode_batch, encode_batch
from events.timefmt import parse_time
from projections.cluster import ClusterState

T = parse_time("2024-01-01T00:00:12Z")
RAISED = ev.RequeueAtRaised(time=T, key="ns/wl", uid="u", cycle=3, input=7, requeue_at=T + 60_000)


@pytest.mark.parametrize("lazy", [False, True])
def test_the_decision_reads_back_as_written(lazy: bool) -> None:
    (record,) = decode_batch(encode_batch([RAISED]), 41, lazy=lazy)
    assert record == ev.Record(41, RAISED)
    assert "RequeueAtRaised" in ev.EVENT_TYPES and ev.RequeueAtRaised in ev.DECISION_TYPES


def test_the_fold_never_brings_requeue_at_back_nor_counts_a_requeue() -> None:
    state = ClusterState()
    w = workload("ns", "wl", uid="u", created=T - 12_000)
    for offset, e in enumerate([upsert(w, T - 12_000), RAISED,
                                ev.RequeueAtRaised(time=T, key="ns/wl", uid="u", cycle=4, input=8,
                                                   requeue_at=T + 5_000)]):
        state.apply(ev.Record(offset, e))
    wl = state.workloads["ns/wl"]
    assert (wl.requeue_at, wl.requeue_count) == (T + 60_000, 0)
    assert state.backoff == {"ns/wl": T + 60_000}, "no Requeued=False to end, but the time is cleared then"


CLEARED = ev.RequeueAtCleared(time=T + 60_000, key="ns/wl", uid="u", cycle=5, input=9)


@pytest.mark.parametrize("lazy", [False, True])
def test_the_clearing_reads_back_as_written(lazy: bool) -> None:
    (record,) = decode_batch(encode_batch([CLEARED]), 42, lazy=lazy)
    assert record == ev.Record(42, CLEARED)
    assert "RequeueAtCleared" in ev.EVENT_TYPES and ev.RequeueAtCleared in ev.DECISION_TYPES


def test_the_clearing_drops_the_time_alone() -> None:
    """The count, the conditions and the clock: only the time goes (the newest Kueue's pending branch)."""
    state = ClusterState()
    w = workload("ns", "wl", uid="u", created=T - 12_000)
    for offset, e in enumerate([upsert(w, T - 12_000), RAISED, CLEARED]):
        state.apply(ev.Record(offset, e))
    wl = state.workloads["ns/wl"]
    assert (wl.requeue_at, wl.requeue_count, wl.condition("Requeued")) == (None, 0, None)
    assert "ns/wl" not in state.backoff and state.backoff_due.first() is None
