"""The state knows every queue that holds parked workloads or shapes (``ClusterState.parked_queues``).

A cohort flush looks only at the queues in that set, so a queue that parks something without being in it
would never be flushed. The set may keep a queue a little longer than it holds anything; never the reverse.
"""

from __future__ import annotations

import random

from fixtures.eventgen import interpret, op_lists, random_ops, records
from hypothesis import HealthCheck, given, settings

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
