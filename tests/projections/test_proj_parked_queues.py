"""The state knows every queue that holds parked workloads or shapes (``ClusterState.parked_queues``).

A cohort flush looks only at the queues in that set, so a queue that parks something without being in it
would never be flushed. The set may keep a queue a little longer than it holds anything; never the reverse.
"""

from __future__ import annotations

import random

from fixtures.eventgen import CONFIGS, T0, interpret, op_lists, prelude, random_ops, records, upsert, workload
from hypothesis import HealthCheck, given, settings

from events import schema as ev
from projections import snapshot
from projections.cluster import ClusterState


def holding(state: ClusterState) -> set[str]:
    return {name for name, q in state.queues.items() if q.inadmissible or q.parked_shapes}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=op_lists())
def test_every_queue_holding_parked_workloads_is_known(ops) -> None:
    state = ClusterState()
    for r in records(interpret(ops)):
        state.apply(r)
        assert holding(state) <= state.parked_queues
    restored = snapshot.decode(snapshot.encode(state))
    assert restored.parked_queues == holding(restored) == holding(state)


def test_parking_happens_in_the_sequences_checked() -> None:
    """Guard against the property above passing vacuously."""
    state = ClusterState()
    seen = 0
    for r in records(interpret(random_ops(random.Random(5), 400))):
        state.apply(r)
        seen += bool(holding(state))
    assert seen > 20


def test_a_changed_configuration_requeues_parked_workloads() -> None:
    """Kueue takes a new configuration by restarting, and holds nothing as inadmissible after: a recorded
    configuration that replaces a different one puts parked workloads back on the heap. The first one recorded
    and one recorded again unchanged leave them parked."""
    events = [*prelude(T0), upsert(workload("ns0", "big", queue="lq0", cpu="100"), T0)]
    recs = records([events])
    state = ClusterState()
    for r in recs:
        state.apply(r)
    offset = recs[-1].offset

    def apply(e: ev.AnyEvent) -> None:
        nonlocal offset
        offset += 1
        state.apply(ev.Record(offset, e))

    apply(ev.WorkloadPending(time=T0, key="ns0/big", reason="Pending", message="does not fit", parked=True,
                             cycle=1, input=offset))
    queue = state.queues["cq0"]
    assert "ns0/big" in queue.inadmissible and "cq0" in state.parked_queues
    for doc in (CONFIGS[0], CONFIGS[0]):
        apply(ev.ConfigRecorded(time=T0, document=doc))
        assert "ns0/big" in queue.inadmissible
    apply(ev.ConfigRecorded(time=T0, document=CONFIGS[1]))
    assert "ns0/big" not in queue.inadmissible and "ns0/big" in queue.entries
