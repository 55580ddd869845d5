"""The ``observedGeneration`` of the Workload conditions the fold sets: Kueue writes the Workload's
``metadata.generation`` as it was when it set the condition (``pkg/workload``: SetQuotaReservation,
SyncAdmittedCondition, SetEvictedCondition, SetRequeuedCondition, SetFinishedCondition, ...), but a
Preempted=True, which ``SetPreemptedCondition`` writes with none."""

from __future__ import annotations

import msgspec
from fixtures.eventgen import T0, admission, cluster_queue, flavor, local_queue, namespace, upsert, workload

from events import objects as o
from events import schema as ev
from events.schema import Record
from projections import snapshot
from projections.cluster import ClusterState
from projections.workloads import status_of

KEY = "ns/w"


def _at(generation: int, cpu: str = "1") -> o.Workload:
    w = workload("ns", "w", queue="lq", created=T0, cpu=cpu)
    return msgspec.structs.replace(w, metadata=msgspec.structs.replace(w.metadata, generation=generation))


def _fold(*events: ev.AnyEvent) -> ClusterState:
    state = ClusterState()
    objects = (namespace("ns"), flavor("f0"), cluster_queue("cq"), local_queue("ns", "lq", "cq"))
    setup = [upsert(x, T0) for x in objects]
    for i, e in enumerate([*setup, *events]):
        state.apply(Record(i, e))
    return state


def _generations(state: ClusterState) -> dict[str, tuple[str, int]]:
    return {c.type: (c.status, c.observed_generation) for c in state.workloads[KEY].conditions}


def _reserved(at: int) -> ev.QuotaReserved:
    return ev.QuotaReserved(time=at, key=KEY, cycle=1, input=4, admission=admission("cq", "f0", 1000))


def _pending(at: int) -> ev.WorkloadPending:
    return ev.WorkloadPending(time=at, key=KEY, cycle=1, input=4, reason="Pending", message="waiting")


def test_the_conditions_of_an_admission_carry_the_workloads_generation() -> None:
    state = _fold(upsert(_at(3), T0), _reserved(T0 + 1000),
                  ev.WorkloadAdmitted(time=T0 + 2000, key=KEY, cycle=1, input=5))
    assert _generations(state) == {"QuotaReserved": ("True", 3), "Admitted": ("True", 3)}
    written = status_of(state.workloads[KEY])["conditions"]
    assert [c["observedGeneration"] for c in written] == [3, 3]  # as the writer sends them


def test_a_pending_workloads_condition_carries_its_generation() -> None:
    state = _fold(upsert(_at(2), T0), _pending(T0 + 1000))
    assert _generations(state)["QuotaReserved"] == ("False", 2)


def test_a_preemption_writes_preempted_without_a_generation_and_evicted_with_it() -> None:
    state = _fold(upsert(_at(4), T0), _reserved(T0 + 1000),
                  ev.WorkloadAdmitted(time=T0 + 2000, key=KEY, cycle=1, input=5),
                  ev.WorkloadPreempted(time=T0 + 3000, key=KEY, cycle=2, input=6, reason="InClusterQueue",
                                       message="Preempted to accommodate a higher priority Workload"))
    got = _generations(state)
    assert got["Preempted"] == ("True", 0)
    assert got["Evicted"] == ("True", 4)


def test_a_condition_set_after_a_spec_change_carries_the_new_generation_the_others_keep_theirs() -> None:
    """A QuotaReserved=False set before the Workload's spec changed keeps the generation it was set at (Kueue
    does not rewrite a condition for a new generation) until it is set again."""
    state = _fold(upsert(_at(1), T0), _pending(T0 + 1000), upsert(_at(2, cpu="2"), T0 + 2000))
    assert _generations(state)["QuotaReserved"] == ("False", 1)
    state.apply(Record(7, _reserved(T0 + 3000)))
    assert _generations(state)["QuotaReserved"] == ("True", 2)


def test_a_reservation_resets_a_true_preempted_with_the_generation() -> None:
    shown = msgspec.structs.replace(_at(6), status=o.WorkloadStatus(conditions=[o.Condition(
        type="Preempted", status="True", reason="InClusterQueue", message="by ns/x",
        last_transition_time="2023-12-31T00:00:00Z")]))
    state = _fold(upsert(shown, T0), _reserved(T0 + 1000))
    assert _generations(state) == {"Preempted": ("False", 6), "QuotaReserved": ("True", 6)}


def test_a_finished_workload_carries_its_generation() -> None:
    state = _fold(upsert(_at(5), T0), _reserved(T0 + 1000),
                  ev.WorkloadAdmitted(time=T0 + 2000, key=KEY, cycle=1, input=5),
                  ev.WorkloadFinished(time=T0 + 3000, key=KEY))
    assert _generations(state)["Finished"] == ("True", 5)


def test_a_workload_of_no_generation_carries_none() -> None:
    """An imported Workload written without ``metadata.generation``: none to observe, none written."""
    state = _fold(upsert(_at(0), T0), _reserved(T0 + 1000))
    assert _generations(state) == {"QuotaReserved": ("True", 0)}
    assert "observedGeneration" not in status_of(state.workloads[KEY])["conditions"][0]


def test_a_snapshot_keeps_the_generations() -> None:
    state = _fold(upsert(_at(3), T0), _reserved(T0 + 1000))
    restored = snapshot.decode(snapshot.encode(state))
    assert _generations(restored) == {"QuotaReserved": ("True", 3)}
