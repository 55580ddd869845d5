"""Kueue's WorkloadPriorityClass controller, case by case (``pkg/controller/core/
workloadpriorityclass_controller_test.go``: ``TestWorkloadPriorityClassPredicates``,
``TestWorkloadPriorityClassReconcile``), against what the mirror marks and what kueue-es's priority writer
(:mod:`connectors.k8s.workload_priority`) patches, with a recording client.

Kueue's class predicate reconciles on a class's create and on an update changing ``value``, never on delete or
a generic event; its reconcile writes the class's value into ``spec.priority`` of every Workload whose
``priorityClassRef`` names the class, skipping those already at it. Since Kueue #14963 it skips a Workload
MultiKueue created on this cluster (``kueue.x-k8s.io/multikueue-origin``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from fixtures.eventgen import T0, delete, namespace, upsert, workload
from fixtures.jobs import RecordingClient

from connectors.k8s.mirror import Mirror
from connectors.k8s.workload_priority import WorkloadPriorities
from events import objects as o
from events import schema as ev


class _Journal:
    def __init__(self, mirror: Mirror) -> None:
        self.mirror = mirror


def _wpc(value: int, name: str = "high") -> o.WorkloadPriorityClass:
    return o.WorkloadPriorityClass(metadata=o.ObjectMeta(name=name), value=value)


def _wl(name: str, priority: int, cls: str = "high", **labels: str) -> o.Workload:
    w = workload("default", name, priority=priority, priority_class=cls)
    return msgspec.structs.replace(w, metadata=msgspec.structs.replace(
        w.metadata, resource_version="7", labels={**w.metadata.labels, **labels}))


def _mirror(*objs: o.KObject) -> Mirror:
    mirror = Mirror()
    for obj in (namespace("default"), *objs):
        mirror.apply(ev.Record(mirror.offset + 1, upsert(obj, T0)))
    return mirror


def _patched(mirror: Mirror) -> dict[str, int]:
    """Workload name -> the priority the writer patches, over what the mirror marked."""
    client = RecordingClient()
    writer = WorkloadPriorities(client, _Journal(mirror))  # type: ignore[arg-type]
    for key in sorted(mirror.dirty_priorities):
        asyncio.run(writer.sync(key))
    return {name: body["spec"]["priority"] for _, name, body in client.patches}


# --- TestWorkloadPriorityClassPredicates --------------------------------------------------------------------

PREDICATES: list[tuple[str, o.WorkloadPriorityClass | None, ev.AnyEvent, bool]] = [
    # (Kueue's case, the class before, the event, whether the Workload referencing the class is looked at)
    ("create event should trigger reconcile", None, upsert(_wpc(100), T0), True),
    ("delete event should not trigger reconcile", _wpc(100), delete("WorkloadPriorityClass", "high", T0),
     False),
    ("update event with changed priority should trigger reconcile", _wpc(100), upsert(_wpc(200), T0), True),
    ("update event with unchanged priority should not trigger reconcile", _wpc(100), upsert(_wpc(100), T0),
     False),
]


@pytest.mark.parametrize(("before", "event", "marked"), [c[1:] for c in PREDICATES],
                         ids=[c[0] for c in PREDICATES])
def test_class_predicate(before: o.WorkloadPriorityClass | None, event: ev.AnyEvent, marked: bool) -> None:
    mirror = _mirror(*([before] if before else []), _wl("wl1", 1))
    mirror.dirty_priorities = set()
    mirror.apply(ev.Record(mirror.offset + 1, event))
    assert (mirror.dirty_priorities == {"default/wl1"}) is marked


# --- TestWorkloadPriorityClassReconcile ---------------------------------------------------------------------

RECONCILE: list[tuple[str, tuple[o.Workload, ...], dict[str, int]]] = [
    # (Kueue's case, the Workloads, the priorities written)
    ("reconcile updates workload priority when WPC priority changes", (_wl("wl1", 100),), {"wl1": 1000}),
    ("reconcile updates multiple workloads", (_wl("wl1", 100), _wl("wl2", 200)), {"wl1": 1000, "wl2": 1000}),
    ("reconcile skips workloads with up-to-date priority", (_wl("wl1", 1000),), {}),
    ("reconcile succeeds when no workloads use the WPC", (), {}),
    # Kueue #14963 (merged; issue #13929): the class sweep leaves a MultiKueue copy's priority to its manager.
    ("class sweep skips a Workload MultiKueue created here",
     (_wl("wl1", 100, **{"kueue.x-k8s.io/multikueue-origin": "manager"}),), {}),
    ("a Workload of another class is not touched", (_wl("wl1", 100, cls="low"),), {}),
]


@pytest.mark.parametrize(("workloads", "written"), [c[1:] for c in RECONCILE], ids=[c[0] for c in RECONCILE])
def test_class_reconcile(workloads: tuple[o.Workload, ...], written: dict[str, Any]) -> None:
    mirror = _mirror(_wpc(500), _wpc(7, "low"), *workloads)
    mirror.dirty_priorities = set()
    mirror.apply(ev.Record(mirror.offset + 1, upsert(_wpc(1000), T0)))
    assert _patched(mirror) == written
