"""Keep a Workload's ``spec.priority`` at the value of the WorkloadPriorityClass it references, as Kueue's
WorkloadPriorityClass controller does (v0.20, #8442; its workload_controller_test "changing the priority value of
PriorityClass changes the priority of the workload").

The projection already schedules a Workload of a WorkloadPriorityClass at the class's value
(:meth:`projections.cluster.ClusterState.resolve_priority`); this writes that value where users and other tools
read it. Kueue looks again when a class is created or its ``value`` changes (every Workload referencing it), when
a Workload arrives referencing a class or moves to another one, and, through its informers' initial list, at every
start: the mirror marks those Workloads (:attr:`connectors.k8s.mirror.Mirror.dirty_priorities`) and :meth:`run`
marks all of them once. A Workload whose ``spec.priority`` already holds the value, whose class does not exist
(yet), or that is a MultiKueue worker's copy (``kueue.x-k8s.io/multikueue-origin``: it carries the manager's
resolution, as Kueue's current source leaves it) is left alone. The write is a merge patch of ``spec.priority``
conditioned on the resourceVersion it was computed from (Kueue updates the object); a conflict tries again later,
a 404 drops it.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog

from connectors.k8s.client import KubeClient
from connectors.k8s.journal import Journal
from connectors.k8s.resources import BY_KIND
from connectors.k8s.workers import KeyedWorkers, Retries
from events import objects as o
from kueue_es.scheduler.config import MULTIKUEUE_ORIGIN_LABEL
from projections.cluster import ClusterState

log = structlog.get_logger("kueue_es.k8s.workload_priority")

WPC_REF = ("kueue.x-k8s.io", "WorkloadPriorityClass")


@dataclass
class PriorityStats:
    updated: int = 0
    conflicts: int = 0
    errors: int = 0


def class_value(state: ClusterState, obs: o.Workload) -> int | None:
    """The value ``obs``'s ``spec.priority`` should hold: its WorkloadPriorityClass's, when it references one that
    exists and is not a MultiKueue worker's copy (None: leave it alone)."""
    ref = obs.spec.priority_class_ref
    if ref is None or (ref.group, ref.kind) != WPC_REF or MULTIKUEUE_ORIGIN_LABEL in obs.metadata.labels:
        return None
    wpc = state.workload_priority_classes.get(ref.name)
    return None if wpc is None else wpc.value


class WorkloadPriorities:
    def __init__(self, client: KubeClient, journal: Journal, *, retry_s: float = 1.0, concurrency: int = 8) -> None:
        self.client = client
        self.journal = journal
        self.mirror = journal.mirror
        self.concurrency = concurrency
        self.stats = PriorityStats()
        self._retry = Retries(retry_s)
        self._done: dict[str, str] = {}
        """Key -> resourceVersion we last patched, so a mirror that has not caught up does not repeat it."""

    async def run(self) -> None:
        self.mirror.dirty_priorities.update(self.mirror.workloads)  # Kueue's initial list, at every start
        await KeyedWorkers(self.sync_guarded, self.concurrency).run(
            self._take, self.journal.subscribe(), self._retry.timeout)

    def _take(self) -> set[str]:
        keys = self.mirror.dirty_priorities | self._retry.due()
        self.mirror.dirty_priorities = set()
        return keys

    async def sync_guarded(self, key: str) -> None:
        await self._retry.attempt(self.sync, key, what="workload priority update", stats=self.stats, log=log,
                                  workload=key)

    async def sync(self, key: str) -> None:
        obs = self.mirror.workloads.get(key)
        if obs is None:
            self._done.pop(key, None)
            return
        rv = obs.metadata.resource_version
        value = class_value(self.mirror.state, obs)
        if value is None or obs.spec.priority == value or self._done.get(key) == rv:
            return
        if not await self._retry.written(self.client.patch(BY_KIND["Workload"], obs.metadata.name, {
                "metadata": {"uid": obs.metadata.uid, "resourceVersion": rv}, "spec": {"priority": value}},
                obs.metadata.namespace), key, self.stats):
            return
        self._done[key] = rv
        self.stats.updated += 1
        log.info("workload priority follows its WorkloadPriorityClass", workload=key, priority=value)
