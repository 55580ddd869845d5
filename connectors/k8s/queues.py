"""Write ClusterQueue, LocalQueue and Cohort status from the log, as Kueue's queue and Cohort controllers do.

Level-triggered like the Workload writer: for every queue the mirror marks dirty, the **desired** status is
:mod:`projections.queue_status` over the mirror's state (conditions merged into what the apiserver shows, a
flipped condition stamped with the log's time), the **current** one is the status the log last saw on the object
(or our own last write, if newer). Only when they differ is the ``status`` subresource patched — one JSON merge
patch of the fields Kueue owns that makes them exactly the desired ones (:func:`status_patch`), conditioned on
the object's uid and resourceVersion. A 409 re-reads the object and tries again on the fresh version (up to
``attempts`` times, then later); a 404 drops it (the watch brings the deletion).

Batched like Kueue's (``UpdatesBatchPeriod``): dirty queues are gathered and written at most once per
``batch_s``, so a burst of admissions costs one write per queue, not one per admission. A ClusterQueue being
deleted keeps its status written (Active=False ``Terminating``, counts following its workloads) while the
``resource-in-use`` finalizer holds it, and is left alone once the finalizer is gone, as Kueue v0.20's controller
does (#13680: it used to freeze the status of a deleted ClusterQueue). A Cohort's status is only its
``fairSharing`` (:func:`projections.queue_status.cohort_status`); its other fields are left to their writers.

Under Admission Fair Sharing a LocalQueue's status also carries ``fairSharing``
(:func:`kueue_es.scheduler.afs.local_queue_status`, under the Configuration recorded in force), which moves with
the log's time, a sample every ``usageSamplingInterval``: whenever the log's time passes a LocalQueue's next sample,
that LocalQueue is looked at again. Where Kueue writes none (Admission Fair Sharing off, an inactive LocalQueue)
what the LocalQueue shows is left as it is, as Kueue's controller leaves it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import msgspec
import structlog

from connectors.k8s.client import KubeClient, resource_version_number
from connectors.k8s.errors import Conflict, NotFound
from connectors.k8s.journal import Journal
from connectors.k8s.json_patch import merge_patch_to
from connectors.k8s.resources import BY_KIND
from connectors.k8s.workers import KeyedWorkers, Retries
from kueue_es.scheduler import afs
from kueue_es.scheduler.config_record import in_force
from projections.in_use import FINALIZER
from projections.queue_status import (
    COHORT_FIELDS,
    CQ_FIELDS,
    LQ_FIELDS,
    cluster_queue_status,
    cohort_status,
    local_queue_status,
)

FIELDS = {"ClusterQueue": CQ_FIELDS, "LocalQueue": (*LQ_FIELDS, "fairSharing"), "Cohort": COHORT_FIELDS}

log = structlog.get_logger("kueue_es.k8s.queues")


def status_patch(current: dict[str, Any], desired: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """The ``status`` of the merge patch that makes ``fields`` of ``current`` exactly ``desired``'s: a field
    that goes is ``null``, and so is a key that goes from a map kept, at any depth (a merge patch merges
    nested maps: without it a resource gone from ``consumedResources`` would stay, and the two would never
    agree) — built as the Workload writer builds its own
    (:func:`connectors.k8s.json_patch.merge_patch_to`)."""
    return {f: merge_patch_to(current.get(f), desired.get(f)) for f in fields if f in desired or f in current}


@dataclass
class QueueStats:
    writes: int = 0
    conflicts: int = 0
    errors: int = 0


class QueueStatusWriter:
    def __init__(self, client: KubeClient, journal: Journal, *, batch_s: float = 1.0, attempts: int = 3,
                 retry_s: float = 1.0, concurrency: int = 8) -> None:
        self.client = client
        self.journal = journal
        self.mirror = journal.mirror
        self.batch_s = batch_s
        self.attempts = attempts
        self.concurrency = concurrency
        self.stats = QueueStats()
        self._written: dict[str, tuple[str, int, dict[str, Any]]] = {}
        """Key -> (uid, resourceVersion, status) of our last write, until the log shows that version."""
        self._retry = Retries(retry_s)
        self._next = 0.0
        self._afs_seen: int | None = None
        """The log's time when the LocalQueues' Admission Fair Sharing samples were last looked at."""

    async def run(self) -> None:
        await KeyedWorkers(self.sync_guarded, self.concurrency).run(
            self._take, self.journal.subscribe(), self._timeout)

    def _take(self) -> set[str]:
        keys = self._retry.due()
        self._sampled()
        now = asyncio.get_running_loop().time()
        if self.mirror.dirty_queues and now >= self._next:
            dirty, self.mirror.dirty_queues = self.mirror.dirty_queues, set()
            self._next = now + self.batch_s
            if "*" in dirty:
                state = self.mirror.state
                dirty = {f"ClusterQueue/{n}" for n in state.cluster_queues} | {
                    f"LocalQueue/{k}" for k in state.local_queues} | {f"Cohort/{n}" for n in state.cohorts}
            keys |= dirty
        return keys

    def _sampled(self) -> None:
        """The LocalQueues with a sample since the log's time was last looked at, marked (their status'
        ``lastUpdate`` and ``consumedResources`` move then)."""
        state = self.mirror.state
        config = in_force(state)
        if config is None or config.admission_fair_sharing is None:
            self._afs_seen = None
            return
        if self._afs_seen is not None:
            self.mirror.dirty_queues.update(
                f"LocalQueue/{k}" for k in afs.sampled_between(state, config, self._afs_seen, state.time))
        self._afs_seen = state.time

    def _timeout(self) -> float | None:
        if self.mirror.dirty_queues:
            return max(0.0, self._next - asyncio.get_running_loop().time())
        return self._retry.timeout()

    async def sync_guarded(self, key: str) -> None:
        await self._retry.attempt(self.sync, key, what="queue status write", stats=self.stats, log=log, queue=key)

    async def sync(self, key: str) -> None:
        """Bring one queue's status in the cluster to what the log says (see the module docstring)."""
        kind, _, name = key.partition("/")
        state = self.mirror.state
        table = {"ClusterQueue": state.cluster_queues, "LocalQueue": state.local_queues, "Cohort": state.cohorts}
        obj = table[kind].get(name)  # type: ignore[attr-defined]
        if obj is None or (kind == "ClusterQueue" and obj.metadata.deletion_timestamp
                           and FINALIZER not in obj.metadata.finalizers):
            self._written.pop(key, None)
            return
        fields = FIELDS[kind]
        uid, rv, current = obj.metadata.uid, resource_version_number(obj.metadata.resource_version), obj.status
        written = self._written.get(key)
        if written is not None:
            if written[0] == uid and written[1] > rv:
                rv, current = written[1], written[2]
            else:
                del self._written[key]
        for _ in range(self.attempts):
            desired = self._desired(kind, name, current)
            if desired is None:
                return
            if all(desired.get(f) == current.get(f) for f in fields):
                return
            patch = status_patch(current, desired, fields)
            try:
                out = await self.client.patch(BY_KIND[kind], obj.metadata.name, {
                    "metadata": {"uid": uid, "resourceVersion": str(rv)}, "status": patch},
                    obj.metadata.namespace, subresource="status")
            except Conflict:
                self.stats.conflicts += 1
                try:
                    fresh = msgspec.json.decode(await self.client.get(BY_KIND[kind], obj.metadata.name,
                                                                      obj.metadata.namespace), type=_Fresh)
                except NotFound:
                    return
                if fresh.metadata.uid != uid:
                    return  # recreated: the watch brings the new one
                rv, current = resource_version_number(fresh.metadata.resource_version), fresh.status
                continue
            except NotFound:
                return
            fresh = msgspec.json.decode(out, type=_Fresh)
            self.stats.writes += 1
            self._written[key] = (uid, resource_version_number(fresh.metadata.resource_version), fresh.status)
            log.debug("queue status written", queue=key)
            return
        log.info("queue status write kept conflicting, will retry", queue=key)
        self._retry.later(key)

    def _desired(self, kind: str, name: str, shown: dict[str, Any]) -> dict[str, Any] | None:
        state = self.mirror.state
        if kind == "ClusterQueue":
            return cluster_queue_status(state, name, state.time, shown)
        if kind == "Cohort":
            return cohort_status(state, name)
        out = local_queue_status(state, name, state.time, shown)
        if out is not None:
            config = in_force(state)
            fair = afs.local_queue_status(state, config, name, state.time) if config is not None else None
            fair = fair if fair is not None else shown.get("fairSharing")
            if fair is not None:
                out["fairSharing"] = fair
        return out


class _Meta(msgspec.Struct, rename="camel"):
    uid: str = ""
    resource_version: str = ""


class _Fresh(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)
    status: dict[str, Any] = {}
