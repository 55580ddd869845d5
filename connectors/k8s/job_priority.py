"""The priority a batch/v1 Job's Workload is created with, resolved from the log's cluster state as Kueue's job
reconciler resolves it (``pkg/controller/jobframework``, ``pkg/util/priority``).

In order: the Job's label ``kueue.x-k8s.io/priority-class`` names a WorkloadPriorityClass; else the first
``priorityClassName`` of the pod template names a PriorityClass; else the global-default PriorityClass of the
lowest value; else none (priority 0). A label naming a WorkloadPriorityClass that does not exist does not fall
through to the others: Kueue cannot resolve the priority, creates no Workload, and records the Warning
``WorkloadPriorityClassNotFound`` on the Job; the Workload is created once the class exists
(:class:`WorkloadPriorityClassNotFound`). A ``priorityClassName`` naming a PriorityClass that does not exist does
not fall through either: Kueue's lookup of the class fails, so its reconcile fails (and is retried) with no
Workload created, and no Event recorded — only the label's class is reported on the Job. kueue-es creates none
either, until the class exists (:class:`PriorityClassNotFound`).

Pure: the classes are those the log holds, so replaying the log reaches the same answer.
"""

from __future__ import annotations

from collections.abc import Mapping

from connectors.k8s.resources import KUEUE_GROUP
from events import objects as o
from projections.cluster import ClusterState

PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
NOT_FOUND_REASON = "WorkloadPriorityClassNotFound"


class WorkloadPriorityClassNotFound(Exception):  # noqa: N818 - named after Kueue's Event reason
    """The Job's priority-class label names a WorkloadPriorityClass the log does not hold."""

    def __init__(self, name: str) -> None:
        super().__init__(not_found_message(name))
        self.name = name


class PriorityClassNotFound(Exception):  # noqa: N818 - as its WorkloadPriorityClass counterpart
    """The Job's pod template names a PriorityClass (scheduling.k8s.io) the log does not hold."""

    def __init__(self, name: str) -> None:
        super().__init__(f'PriorityClass "{name}" not found')
        self.name = name


def not_found_message(name: str) -> str:
    """The message of Kueue's ``WorkloadPriorityClassNotFound`` Event."""
    return f'WorkloadPriorityClass "{name}" not found'


def missing_class(state: ClusterState, labels: Mapping[str, str]) -> str | None:
    """The WorkloadPriorityClass a Job's labels name and the log does not hold, if any."""
    name = labels.get(PRIORITY_LABEL)
    if name and name not in state.workload_priority_classes:
        return name
    return None


def missing_pod_class(state: ClusterState, labels: Mapping[str, str], pod_priority_class: str | None) -> str | None:
    """The PriorityClass a Job's pod template names, when it decides the priority (no priority-class label) and
    the log does not hold it."""
    if labels.get(PRIORITY_LABEL) or not pod_priority_class or pod_priority_class in state.priority_classes:
        return None
    return pod_priority_class


def workload_priority(state: ClusterState, labels: Mapping[str, str],
                      pod_priority_class: str | None) -> tuple[dict[str, str], int] | None:
    """``(priorityClassRef, priority)`` of the Workload of a Job with ``labels`` whose pod template names
    ``pod_priority_class``; ``None``: no class applies (priority 0). Raises
    :class:`WorkloadPriorityClassNotFound` when the label names a class the log does not hold,
    :class:`PriorityClassNotFound` when, with no label, the pod template does."""
    wpc_name = labels.get(PRIORITY_LABEL)
    if wpc_name:
        wpc: o.WorkloadPriorityClass | None = state.workload_priority_classes.get(wpc_name)
        if wpc is None:
            raise WorkloadPriorityClassNotFound(wpc_name)
        return {"group": KUEUE_GROUP, "kind": "WorkloadPriorityClass", "name": wpc_name}, wpc.value
    if pod_priority_class:
        pc = state.priority_classes.get(pod_priority_class)
        if pc is not None:
            return {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": pod_priority_class}, pc.value
        raise PriorityClassNotFound(pod_priority_class)
    defaults = sorted((pc.value, name) for name, pc in state.priority_classes.items() if pc.global_default)
    if defaults:
        value, name = defaults[0]
        return {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": name}, value
    return None
