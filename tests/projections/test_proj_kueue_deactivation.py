"""A workload kueue-es deactivated stays inactive until its spec says otherwise in a new generation.

Kueue's own deactivations (a rejected check, the requeuing limit, the maximum execution time) are decisions in
the log; the apiserver shows ``spec.active: false`` only once the status writer has written it. Meanwhile the
watch brings the Workload back at the generation it was deactivated at (after a status write, say) still saying
``active: true``: that is not a reactivation — a user's reactivation, like any spec change, is a new generation.
Workloads without a generation (files, not an apiserver) keep taking ``spec.active`` as it comes.
"""

from __future__ import annotations

import msgspec
from fixtures.eventgen import T0, admission, cluster_queue, flavor, local_queue, meta, namespace, upsert

from events import objects as o
from events import schema as ev
from projections.cluster import MAX_EXECUTION_EXCEEDED, ClusterState
from projections.workloads import ADMITTED, PENDING

KEY = "team/w"


def workload(generation: int, active: bool = True) -> o.Workload:
    return o.Workload(metadata=meta("w", "team", uid="uid-w", generation=generation),
                      spec=o.WorkloadSpec(queue_name="lq", active=active, maximum_execution_time_seconds=60,
                                          pod_sets=[o.PodSet(name="main", count=1)]))


def admitted(generation: int) -> ClusterState:
    state = ClusterState()
    events: list[ev.AnyEvent] = [
        upsert(namespace("team"), T0), upsert(flavor("f0"), T0), upsert(cluster_queue("cq", quotas={"f0": 4}), T0),
        upsert(local_queue("team", "lq", "cq"), T0), upsert(workload(generation), T0),
        ev.QuotaReserved(time=T0, key=KEY, admission=admission("cq", "f0", 1000), cycle=1, input=0),
        ev.WorkloadAdmitted(time=T0, key=KEY, cycle=1, input=0)]
    for i, e in enumerate(events):
        state.apply(ev.Record(i, e))
    return state


def deactivated(generation: int) -> ClusterState:
    """Admitted at T0, deactivated by a decision when its 60s ran out."""
    state = admitted(generation)
    state.apply(ev.Record(state.offset + 1, ev.WorkloadDeactivated(
        time=T0 + 60_000, key=KEY, reason=MAX_EXECUTION_EXCEEDED, message="m", cycle=2, input=state.offset)))
    return state


def see(state: ClusterState, w: o.Workload, t: int) -> None:
    state.apply(ev.Record(state.offset + 1, upsert(w, t)))


def test_the_generation_it_was_deactivated_at_does_not_reactivate_it() -> None:
    state = deactivated(generation=1)
    wl = state.workloads[KEY]
    assert not wl.active and wl.phase == PENDING and wl.accumulated_seconds == 60
    see(state, workload(1), T0 + 61_000)  # our status write, seen back: the spec is not written yet
    assert not wl.active
    assert KEY not in state.queues["cq"].shapes, "an inactive workload is not queued"
    see(state, workload(2, active=False), T0 + 62_000)  # our spec write
    assert not wl.active
    see(state, workload(3), T0 + 63_000)  # the user reactivates it
    assert wl.active and KEY in state.queues["cq"].shapes


def test_without_a_generation_spec_active_is_taken_as_it_comes() -> None:
    state = deactivated(generation=0)
    see(state, workload(0), T0 + 61_000)
    assert state.workloads[KEY].active


def test_a_change_of_the_limit_alone_moves_the_clock() -> None:
    state = admitted(generation=1)
    assert state.workloads[KEY].phase == ADMITTED
    assert state.max_execution_clock.first() == T0 + 60_000
    longer = workload(2)
    see(state, msgspec.structs.replace(longer, spec=msgspec.structs.replace(
        longer.spec, maximum_execution_time_seconds=90)), T0 + 1000)
    assert state.max_execution_clock.first() == T0 + 90_000
