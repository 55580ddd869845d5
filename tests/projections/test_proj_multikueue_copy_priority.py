"""A MultiKueue worker's copy of a manager's Workload (``kueue.x-k8s.io/multikueue-origin``) carries the priority
the manager resolved: its ``spec.priority``, which the manager keeps in line with its own Workload (Kueue #8464).
A WorkloadPriorityClass of the same name on the worker is not the class it was resolved from (management and
worker clusters define their classes apart; Kueue #14963, #13929): Kueue's scheduler decides with
``spec.priority``, and its class controller leaves a copy's alone, as kueue-es's does
(:mod:`connectors.k8s.workload_priority`). So the fold schedules a copy at its ``spec.priority``, not at the
worker's class value, at its arrival and when that class's value changes; a Workload of the worker's own still
takes its class's value."""

from __future__ import annotations

import msgspec
from fixtures.eventgen import (
    T0,
    cluster_queue,
    flavor,
    local_queue,
    namespace,
    priority_class,
    upsert,
    workload,
)

from events import objects as o
from events import schema as ev
from events.codec import decode_batch, encode_batch
from projections.cluster import ClusterState

ORIGIN = "kueue.x-k8s.io/multikueue-origin"


def _copy(name: str, priority: int, *, rv: str = "1") -> o.Workload:
    w = workload("team", name, queue="lq", priority=priority, priority_class="high")
    return msgspec.structs.replace(w, metadata=msgspec.structs.replace(w.metadata, labels={ORIGIN: "multikueue"},
                                                                       resource_version=rv))


def _fold(*workloads: o.Workload, lazy: bool = False) -> ClusterState:
    """The state after the worker's set-up and ``workloads``, the events decoded from their log encoding lazily
    (as a restart or a replay reads them) or applied as they are (as the live service does)."""
    events = [upsert(namespace("team"), T0), upsert(flavor("f0"), T0), upsert(priority_class("high", 999), T0),
              upsert(cluster_queue("cq", quotas={"f0": 0}), T0), upsert(local_queue("team", "lq", "cq"), T0),
              *(upsert(w, T0) for w in workloads)]
    state = ClusterState()
    records = decode_batch(encode_batch(events), 0, lazy=True) if lazy else [
        ev.Record(i + 1, e) for i, e in enumerate(events)]
    for record in records:
        state.apply(record)
    return state


def _priorities(state: ClusterState) -> dict[str, int]:
    return {wl.name: wl.priority for wl in state.workloads.values()}


def test_a_copy_is_scheduled_at_the_priority_the_manager_resolved() -> None:
    state = _fold(_copy("copy", 100), workload("team", "own", queue="lq", priority=100, priority_class="high"))
    assert _priorities(state) == {"copy": 100, "own": 999}
    assert state.workloads["team/copy"].priority_class == "high"


def test_the_worker_class_value_changing_leaves_a_copy_at_the_managers_priority() -> None:
    state = _fold(_copy("copy", 100), workload("team", "own", queue="lq", priority=100, priority_class="high"))
    state.apply(ev.Record(state.offset + 1, upsert(priority_class("high", 500), T0)))
    assert _priorities(state) == {"copy": 100, "own": 500}


def test_a_copy_follows_the_priority_the_manager_writes_on_it() -> None:
    state = _fold(_copy("copy", 100))
    state.apply(ev.Record(state.offset + 1, upsert(_copy("copy", 300, rv="2"), T0)))
    assert _priorities(state) == {"copy": 300}


def test_a_lazily_decoded_copy_is_scheduled_at_the_priority_the_manager_resolved() -> None:
    state = _fold(_copy("copy", 100), workload("team", "own", queue="lq", priority=100, priority_class="high"),
                  lazy=True)
    assert _priorities(state) == {"copy": 100, "own": 999}
