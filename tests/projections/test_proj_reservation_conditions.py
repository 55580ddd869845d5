"""The conditions a reservation writes besides QuotaReserved=True: Kueue's scheduler turns a True Evicted,
Preempted or BlockedOnPreemptionGates condition False ("Previously: ..."), each where it stands, and leaves the
others as they are."""

from __future__ import annotations

import msgspec
from fixtures.eventgen import T0, admission, cluster_queue, flavor, local_queue, namespace, upsert, workload

from events import objects as o
from events import schema as ev
from events.schema import Record
from events.timefmt import format_time
from projections.cluster import ClusterState

BEFORE = "2023-12-31T00:00:00Z"


def _cond(type_: str, status: str, reason: str, message: str) -> o.Condition:
    return o.Condition(type=type_, status=status, reason=reason, message=message, last_transition_time=BEFORE)


def _reserved(conditions: list[o.Condition]) -> tuple[o.Condition, ...]:
    """The conditions of a pending workload first seen with ``conditions``, once quota is reserved for it."""
    shown = msgspec.structs.replace(workload("ns", "w", queue="lq", created=T0),
                                    status=o.WorkloadStatus(conditions=conditions))
    state = ClusterState()
    events = [upsert(x, T0) for x in (namespace("ns"), flavor("f0"), cluster_queue("cq"), local_queue("ns", "lq", "cq"),
                                      shown)]
    events.append(ev.QuotaReserved(time=T0 + 5000, key="ns/w", cycle=1, input=4, admission=admission("cq", "f0", 1000)))
    for i, e in enumerate(events):
        state.apply(Record(i, e))
    return state.workloads["ns/w"].conditions


def test_a_reservation_turns_true_evictions_and_preemptions_false_where_they_stand() -> None:
    now = format_time(T0 + 5000)
    got = _reserved([
        _cond("Preempted", "True", "InClusterQueue", "preempted by ns/x"),
        _cond("QuotaReserved", "False", "Preempted", "was preempted"),
        _cond("Requeued", "True", "Preempted", "requeued"),
        _cond("Evicted", "True", "Preempted", "evicted by ns/x"),
        _cond("BlockedOnPreemptionGates", "False", "Open", "open"),
    ])
    assert [(c.type, c.status, c.reason, c.message, c.last_transition_time) for c in got] == [
        ("Preempted", "False", "QuotaReserved", "Previously: preempted by ns/x", now),
        ("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq", now),
        ("Requeued", "True", "Preempted", "requeued", BEFORE),
        ("Evicted", "False", "QuotaReserved", "Previously: evicted by ns/x", now),
        ("BlockedOnPreemptionGates", "False", "Open", "open", BEFORE),
    ]


def test_only_the_first_condition_of_a_type_is_read_and_written() -> None:
    """A status listing a type twice (the apiserver keys conditions by type: only a hand-written log) is read as
    the fold reads any condition, by its first entry."""
    got = _reserved([
        _cond("Evicted", "False", "QuotaReserved", "first"),
        _cond("Evicted", "True", "Preempted", "second"),
        _cond("Preempted", "True", "InCohort", "one"),
        _cond("Preempted", "True", "InCohort", "two"),
    ])
    assert [(c.type, c.status, c.message) for c in got] == [
        ("Evicted", "False", "first"), ("Evicted", "True", "second"),
        ("Preempted", "False", "Previously: one"), ("Preempted", "True", "two"),
        ("QuotaReserved", "True", "Quota reserved in ClusterQueue cq"),
    ]


def test_the_conditions_a_reservation_sets_are_written_whole() -> None:
    """A condition the reservation sets is a new one (as ``o.Condition(...)`` with the fields set builds it):
    nothing of the one it replaces is kept but, while its status holds, the transition time."""
    now = format_time(T0 + 5000)
    got = _reserved([
        msgspec.structs.replace(_cond("Preempted", "True", "InClusterQueue", "by ns/x"),
                                observed_generation=2),
        msgspec.structs.replace(_cond("QuotaReserved", "False", "Pending", "waiting"), observed_generation=3),
    ])
    assert got == (
        o.Condition(type="Preempted", status="False", reason="QuotaReserved", message="Previously: by ns/x",
                    last_transition_time=now),
        o.Condition(type="QuotaReserved", status="True", reason="QuotaReserved",
                    message="Quota reserved in ClusterQueue cq", last_transition_time=now),
    )
    assert all(type(c) is o.Condition for c in got)
