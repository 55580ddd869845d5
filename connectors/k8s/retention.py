"""Carry out RetentionExpired decisions (Kueue's ``objectRetentionPolicies.workloads``): delete what they name.

The scheduler decides, from time in the log, that a retention period ran out; here the object goes:

* ``Workload`` (``afterFinished``): the finished Workload loses the ``kueue.x-k8s.io/resource-in-use``
  finalizer if it still holds it (:mod:`connectors.k8s.workload_finalizer`), then is deleted, conditioned on its
  uid;
* ``Job`` (``afterDeactivatedByKueue``): the Workload's owner Job is deleted with background propagation,
  conditioned on its uid; its Workload then goes as any orphan's does (the Job integration, or the garbage
  collector).

Already gone (404), or recreated meanwhile (409 on the uid precondition), counts as done: each decision ends in
one ``DecisionApplied``, appended once the deletion was accepted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import structlog

from connectors.k8s import workload_finalizer
from connectors.k8s.decision_workers import MarkedKeysWorker
from connectors.k8s.errors import Conflict, NotFound
from connectors.k8s.resources import BY_KIND
from events import objects as o
from events import schema as ev

log = structlog.get_logger("kueue_es.k8s.retention")
TAG = "RetentionExpired"


@dataclass
class RetentionStats:
    workloads_deleted: int = 0
    jobs_deleted: int = 0
    errors: int = 0


class RetentionEnforcer(MarkedKeysWorker):
    dirty = "dirty_retention"
    what = "retention deletion"
    log = log

    stats_type = RetentionStats

    async def sync(self, key: str) -> None:
        offsets = self.unreported(key, TAG)
        if not offsets:
            return
        wl = self.mirror.state.workloads.get(key)
        if wl is not None and wl.retention_target == "Workload":
            obs = self.mirror.workloads.get(key)
            if obs is not None:
                await self._unfinalize(obs)
                await self._delete("Workload", obs.metadata.name, obs.metadata.namespace, wl.uid)
                self.stats.workloads_deleted += 1
                log.info("deleted finished workload due to elapsed retention", workload=key)
        elif wl is not None and wl.retention_target == "Job":
            job_key = self.mirror.job_of.get(key)
            job = self.mirror.state.jobs.get(job_key) if job_key else None
            if job is not None:
                await self._delete("Job", job.metadata.name, job.metadata.namespace, job.metadata.uid)
                self.stats.jobs_deleted += 1
                log.info("deleted job: deactivation retention period expired", job=job_key, workload=key)
        t = int(time.time() * 1000)
        self._reported.update(offsets)
        await self.append([ev.DecisionApplied(time=t, key=key, uid=wl.uid if wl is not None else "", decision=off,
                                              id=f"applied-{off}") for off in offsets])

    async def _unfinalize(self, obs: o.Workload) -> None:
        """Take the finalizer off first, conditioned on the Workload's resourceVersion: a conflict is retried once
        the watch brought the newer Workload (the decision is still owed its outcome)."""
        if not workload_finalizer.holds(obs):
            return
        try:
            await self.client.patch(BY_KIND["Workload"], obs.metadata.name, workload_finalizer.removal_patch(obs),
                                    obs.metadata.namespace)
        except NotFound:
            pass  # gone already

    async def _delete(self, kind: str, name: str, namespace: str, uid: str) -> None:
        try:
            await self.client.delete(BY_KIND[kind], name, namespace, uid=uid)
        except (NotFound, Conflict):
            pass  # gone already, or a new object of that name: not ours to delete
