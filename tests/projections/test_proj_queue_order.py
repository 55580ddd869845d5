"""Kueue's queue-order timestamp under the configuration in force, and the heaps that order by it.

The rules on one workload's conditions (which eviction moves the time, which does not, what the
``PrioritySortingWithinCohort`` gate adds), what a recorded Configuration document says, and the projection
re-keying its queues when a new configuration changes the order — also across a snapshot.
"""

from __future__ import annotations

import msgspec
import pytest
from fixtures.eventgen import T0, local_queue, namespace, upsert, workload

from events import objects as o
from events import schema as ev
from events.timefmt import format_time
from projections import snapshot
from projections.cluster import ClusterState
from projections.queue_order import DEFAULT_ORDER, QueueOrder, order_of

CONFIG = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}
CREATION = {**CONFIG, "waitForPodsReady": {"requeuingStrategy": {"timestamp": "Creation"}}}
NO_PRIORITY_SORTING = {**CONFIG, "featureGates": {"PrioritySortingWithinCohort": False}}
CREATED, LATER = T0, T0 + 60_000


class _Wl:
    def __init__(self, *conditions: tuple[str, str, str, int]) -> None:
        self.created = CREATED
        self.conditions = tuple(o.Condition(type=t, status=s, reason=r, message="", last_transition_time=format_time(at))
                                for t, s, r, at in conditions)


def test_the_documents_order() -> None:
    assert order_of(None) is DEFAULT_ORDER and order_of(CONFIG) is DEFAULT_ORDER
    assert order_of({**CONFIG, "waitForPodsReady": {"requeuingStrategy": {"timestamp": "Eviction"}}}) == DEFAULT_ORDER
    assert order_of(CREATION) == QueueOrder(eviction_timestamp=False)
    # Kueue reads the timestamp even when waitForPodsReady is off
    assert order_of({**CREATION, "featureGates": {"DisableWaitForPodsReady": True}}).eviction_timestamp is False
    assert order_of(NO_PRIORITY_SORTING) == QueueOrder(priority_sorting=False)
    assert order_of({**CONFIG, "featureGates": {"AllBeta": False}}) == QueueOrder(priority_sorting=False)
    assert order_of({**CONFIG, "featureGates": {"AllBeta": False, "PrioritySortingWithinCohort": True}}) == DEFAULT_ORDER


@pytest.mark.parametrize(("conditions", "default", "creation", "no_sorting"), [
    ((), CREATED, CREATED, CREATED),
    ((("Evicted", "True", "PodsReadyTimeout", LATER),), LATER, CREATED, LATER),
    ((("Evicted", "False", "PodsReadyTimeout", LATER),), CREATED, CREATED, CREATED),
    ((("Evicted", "True", "AdmissionCheck", LATER),), LATER, LATER, LATER),
    ((("Evicted", "True", "Preempted", LATER),), CREATED, CREATED, CREATED),
    ((("Evicted", "True", "Preempted", LATER), ("Preempted", "True", "InCohortReclaimWhileBorrowing", LATER)),
     CREATED, CREATED, LATER + 1),
    ((("Preempted", "True", "InCohortReclamation", LATER),), CREATED, CREATED, CREATED),
    ((("Preempted", "False", "InCohortReclaimWhileBorrowing", LATER),), CREATED, CREATED, CREATED),
    # an eviction rule goes before the preemption rule, whatever the order of the conditions
    ((("Preempted", "True", "InCohortReclaimWhileBorrowing", LATER + 5), ("Evicted", "True", "AdmissionCheck", LATER)),
     LATER, LATER, LATER),
])
def test_the_rules(conditions, default: int, creation: int, no_sorting: int) -> None:
    wl = _Wl(*conditions)
    assert DEFAULT_ORDER.time(wl) == default
    assert order_of(CREATION).time(wl) == creation
    assert order_of(NO_PRIORITY_SORTING).time(wl) == no_sorting


def test_priority_ranks_heads_only_while_the_gate_is_on() -> None:
    assert DEFAULT_ORDER.rank(5) < DEFAULT_ORDER.rank(1)
    assert order_of(NO_PRIORITY_SORTING).rank(5) == order_of(NO_PRIORITY_SORTING).rank(1)


# --- the projection ----------------------------------------------------------------------------------------


def _apply(state: ClusterState, *events: ev.AnyEvent) -> None:
    for e in events:
        state.apply(ev.Record(state.offset + 1, e))


def _timed_out(name: str, created: int, evicted_at: int) -> o.Workload:
    """A pending workload that an eviction for PodsReady timeout sent back to its queue."""
    w = workload("ns0", name, uid=f"u-{name}", queue="lq0", created=created)
    return msgspec.structs.replace(w, status=o.WorkloadStatus(conditions=[
        o.Condition(type="Evicted", status="True", reason="PodsReadyTimeout", message="timeout",
                    last_transition_time=format_time(evicted_at)),
        o.Condition(type="Requeued", status="True", reason="BackoffFinished", message="done",
                    last_transition_time=format_time(evicted_at))]))


def _queue_of(state: ClusterState) -> list[str]:
    return state.queues["cq0"].ordered()


def test_the_heaps_follow_the_configuration_in_force_and_a_snapshot_keeps_it() -> None:
    state = ClusterState()
    _apply(state, upsert(namespace("ns0"), T0), upsert(local_queue("ns0", "lq0", "cq0"), T0),
           upsert(_timed_out("evicted", CREATED, LATER), LATER),
           upsert(workload("ns0", "newer", uid="u-newer", queue="lq0", created=CREATED + 1_000), LATER))
    assert _queue_of(state) == ["ns0/newer", "ns0/evicted"], "the eviction restarted its queue time"
    _apply(state, ev.ConfigRecorded(time=LATER, document=CREATION))
    assert state.queue_order == QueueOrder(eviction_timestamp=False)
    assert _queue_of(state) == ["ns0/evicted", "ns0/newer"], "Creation: it queues by its creation again"
    restored = snapshot.decode(snapshot.encode(state))
    assert restored.queue_order == state.queue_order and _queue_of(restored) == _queue_of(state)
    assert snapshot.digest(restored) == snapshot.digest(state)
    _apply(restored, upsert(workload("ns0", "oldest", uid="u-oldest", queue="lq0", created=CREATED - 1_000), LATER))
    assert _queue_of(restored) == ["ns0/oldest", "ns0/evicted", "ns0/newer"]
    _apply(restored, ev.ConfigRecorded(time=LATER, document=CONFIG))
    assert restored.queue_order is DEFAULT_ORDER
    assert _queue_of(restored) == ["ns0/oldest", "ns0/newer", "ns0/evicted"]


def test_parked_workloads_take_the_new_order_too() -> None:
    state = ClusterState()
    _apply(state, upsert(namespace("ns0"), T0), upsert(local_queue("ns0", "lq0", "cq0"), T0),
           upsert(_timed_out("evicted", CREATED, LATER), LATER))
    q = state.queues["cq0"]
    q.park("ns0/evicted", bulk=False)
    _apply(state, ev.ConfigRecorded(time=LATER, document=CREATION))
    assert q.inadmissible["ns0/evicted"][1] == CREATED
