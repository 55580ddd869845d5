"""A manager Workload's priority changed while its copies are on the workers (its Job's
``kueue.x-k8s.io/priority-class`` label changed): Kueue's MultiKueue controller brings each copy's
``priorityClassRef`` and ``priority`` in line with the manager's in place (``reconcileGroup`` step 5, Kueue #8464;
its scheduler_test.go "should update the workload's priority class on the worker if it changes on the manager"),
so the worker's Kueue orders and preempts by the manager's priority."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from fixtures.multikueue_states import WorkloadCopyApi
from test_multikueue_connector import KEY, ManagerClient, _connector, _state

from connectors.k8s.multikueue_adapters import priority_patch

HIGH = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}
LOW = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "low"}
POD_CLASS = {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "pods"}


def _wl(ref: dict[str, str] | None, priority: int | None, rv: str = "3") -> dict[str, Any]:
    spec: dict[str, Any] = {"queueName": "lq", "podSets": []}
    if ref is not None:
        spec["priorityClassRef"] = ref
    if priority is not None:
        spec["priority"] = priority
    return {"metadata": {"name": "job-a", "namespace": "default", "uid": "c1", "resourceVersion": rv}, "spec": spec}


def test_a_changed_class_or_value_is_forwarded_to_the_copy_as_the_managers() -> None:
    assert priority_patch(_wl(LOW, 100), _wl(HIGH, 300)) == {"spec": {"priorityClassRef": LOW, "priority": 100}}
    assert priority_patch(_wl(HIGH, 500), _wl(HIGH, 300)) == {"spec": {"priorityClassRef": HIGH, "priority": 500}}, (
        "the class's value changed")


def test_nothing_is_forwarded_when_they_agree_or_the_priority_is_a_pods() -> None:
    """Kueue's ``PriorityChanged``: only a copy on a WorkloadPriorityClass is updated, and never from a manager on a
    PriorityClass (a pod priority is not followed)."""
    assert priority_patch(_wl(HIGH, 300), _wl(HIGH, 300)) is None
    assert priority_patch(_wl(POD_CLASS, 100), _wl(HIGH, 300)) is None
    assert priority_patch(_wl(LOW, 100), _wl(POD_CLASS, 300)) is None
    assert priority_patch(_wl(LOW, 100), _wl(None, 300)) is None


class Manager(ManagerClient):
    """The manager's apiserver: its Workload now on the low class."""

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        return msgspec.json.encode(_wl(LOW, 100, rv="20"))


async def _synced(tmp_path: Path, copy: dict[str, Any]) -> tuple[Any, WorkloadCopyApi, Any]:
    """One pass of the copies' sync, the manager's Workload now on the low class (priority 100) and its copy on
    worker1 ``copy``: the connector, worker1's apiserver and the connector's view of worker1."""
    state = _state(tmp_path)
    state.workloads[KEY] = msgspec.structs.replace(state.workloads[KEY], priority=100, priority_class="low")
    worker = WorkloadCopyApi(copy)
    mk = _connector(state, {"worker1": worker})
    mk.client = Manager(state)  # type: ignore[assignment]
    w = mk.workers["worker1"]
    w.workloads[KEY] = worker.workload
    w.moved.add(KEY)
    await mk.sync_copies("multikueue")
    return mk, worker, w


@pytest.mark.asyncio
async def test_a_priority_changed_on_the_manager_is_written_on_its_copies(tmp_path: Path) -> None:
    mk, worker, w = await _synced(tmp_path, _wl(HIGH, 300))
    assert worker.patches == [{"spec": {"priorityClassRef": LOW, "priority": 100},
                               "metadata": {"resourceVersion": "3"}}], "conditioned on the copy's version"
    assert w.workloads[KEY]["spec"]["priority"] == 100

    w.moved.add(KEY)
    await mk.sync_copies("multikueue")
    assert len(worker.patches) == 1, "written once: the next pass finds the copy in line"


@pytest.mark.asyncio
async def test_a_copy_without_a_class_is_left_as_it_is(tmp_path: Path) -> None:
    """A copy on no WorkloadPriorityClass (its priority set outright, or none) is not one Kueue updates."""
    _, worker, _ = await _synced(tmp_path, _wl(None, 300))
    assert worker.patches == []
