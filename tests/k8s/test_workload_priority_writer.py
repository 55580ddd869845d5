"""A Workload's ``spec.priority`` follows the value of its WorkloadPriorityClass (:mod:`connectors.k8s.workload_priority`,
Kueue v0.20's WorkloadPriorityClass controller, #8442), against a recording client: which Workloads the mirror
marks, and what the writer patches."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from fixtures.eventgen import T0, namespace, upsert, workload
from fixtures.jobs import RecordingClient

from connectors.k8s.mirror import Mirror
from connectors.k8s.workload_priority import WorkloadPriorities
from events import objects as o
from events import schema as ev

KEY = "ns0/wl"


class _Journal:
    def __init__(self, mirror: Mirror) -> None:
        self.mirror = mirror


def _wpc(name: str, value: int) -> o.WorkloadPriorityClass:
    return o.WorkloadPriorityClass(metadata=o.ObjectMeta(name=name), value=value)


def _apply(mirror: Mirror, *objs: o.KObject) -> None:
    for obj in objs:
        mirror.apply(ev.Record(mirror.offset + 1, upsert(obj, T0)))


def _mirror(*objs: o.KObject) -> Mirror:
    mirror = Mirror()
    _apply(mirror, namespace("ns0"), *objs)
    return mirror


def _classed(priority: int | None = 200, **meta: Any) -> o.Workload:
    w = workload("ns0", "wl", priority=priority, priority_class="workload-priority-class")
    return msgspec.structs.replace(w, metadata=msgspec.structs.replace(w.metadata, resource_version="5", **meta))


def _synced(mirror: Mirror) -> list[dict[str, Any]]:
    client = RecordingClient()
    writer = WorkloadPriorities(client, _Journal(mirror))  # type: ignore[arg-type]
    asyncio.run(writer.sync(KEY))
    return [body for _, _, body in client.patches]


def test_a_class_value_change_is_written_to_the_workloads_that_reference_it() -> None:
    """Kueue's workload_controller_test "changing the priority value of PriorityClass changes the priority of the
    workload": 200, then 150 once the class says so."""
    mirror = _mirror(_wpc("workload-priority-class", 200), _classed())
    assert _synced(mirror) == []  # already at the class's value
    mirror.dirty_priorities = set()
    _apply(mirror, _wpc("workload-priority-class", 150))
    assert mirror.dirty_priorities == {KEY}
    assert _synced(mirror) == [{"metadata": {"uid": "uid-ns0-wl", "resourceVersion": "5"}, "spec": {"priority": 150}}]


def test_what_marks_a_workload() -> None:
    mirror = _mirror(_wpc("workload-priority-class", 200))
    _apply(mirror, _classed())
    assert mirror.dirty_priorities == {KEY}  # arriving at a class
    mirror.dirty_priorities = set()
    _apply(mirror, _classed(labels={"team": "a"}), _wpc("workload-priority-class", 200))
    assert mirror.dirty_priorities == set()  # same class, same value: Kueue does not look again
    _apply(mirror, _wpc("other", 7), workload("ns0", "free", priority=3))
    assert mirror.dirty_priorities == set()  # no Workload references it; a Workload of no class


def test_left_alone() -> None:
    """A class not (yet) in the log, and a MultiKueue worker's copy, which carries the manager's resolution."""
    assert _synced(_mirror(_classed())) == []
    copy = _classed(labels={"kueue.x-k8s.io/multikueue-origin": "manager"})
    assert _synced(_mirror(_wpc("workload-priority-class", 150), copy)) == []
