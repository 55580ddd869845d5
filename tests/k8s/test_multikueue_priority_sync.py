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
from test_multikueue_connector import KEY, ManagerClient, _connector, _state

from connectors.k8s.json_patch import merge_patched
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


class Worker1:
    """worker1's apiserver: patches of the Workload copy applied and recorded."""

    def __init__(self, workload: dict[str, Any]) -> None:
        self.workload = workload
        self.patches: list[dict[str, Any]] = []

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "") -> bytes:
        assert resource.kind == "Workload" and subresource == ""
        self.patches.append(body)
        rv = str(int(self.workload["metadata"]["resourceVersion"]) + 1)
        self.workload = merge_patched(self.workload, {**body, "metadata": {"resourceVersion": rv}})
        return msgspec.json.encode(self.workload)


class Manager(ManagerClient):
    """The manager's apiserver: its Workload now on the low class."""

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        return msgspec.json.encode(_wl(LOW, 100, rv="20"))


@pytest.mark.asyncio
async def test_a_priority_changed_on_the_manager_is_written_on_its_copies(tmp_path: Path) -> None:
    state = _state(tmp_path)
    state.workloads[KEY] = msgspec.structs.replace(state.workloads[KEY], priority=100, priority_class="low")
    worker = Worker1(_wl(HIGH, 300))
    mk = _connector(state, {"worker1": worker})
    mk.client = Manager(state)  # type: ignore[assignment]
    w = mk.workers["worker1"]
    w.workloads[KEY] = worker.workload
    w.moved.add(KEY)
    await mk.sync_copies("multikueue")
    assert worker.patches == [{"spec": {"priorityClassRef": LOW, "priority": 100},
                               "metadata": {"resourceVersion": "3"}}], "conditioned on the copy's version"
    assert w.workloads[KEY]["spec"]["priority"] == 100

    w.moved.add(KEY)
    await mk.sync_copies("multikueue")
    assert len(worker.patches) == 1, "written once: the next pass finds the copy in line"


@pytest.mark.asyncio
async def test_a_copy_without_a_class_is_left_as_it_is(tmp_path: Path) -> None:
    """A copy on no WorkloadPriorityClass (its priority set outright, or none) is not one Kueue updates."""
    state = _state(tmp_path)
    state.workloads[KEY] = msgspec.structs.replace(state.workloads[KEY], priority=100, priority_class="low")
    worker = Worker1(_wl(None, 300))
    mk = _connector(state, {"worker1": worker})
    mk.client = Manager(state)  # type: ignore[assignment]
    mk.workers["worker1"].workloads[KEY] = worker.workload
    mk.workers["worker1"].moved.add(KEY)
    await mk.sync_copies("multikueue")
    assert worker.patches == []
