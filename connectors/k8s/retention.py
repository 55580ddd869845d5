"""Carry out RetentionExpired decisions (Kueue's ``objectRetentionPolicies.workloads``): delete what they name.

The scheduler decides, from time in the log, that a retention period ran out; here the object goes:

* ``Workload`` (``afterFinished``): the finished Workload loses the ``kueue.x-k8s.io/resource-in-use``
  finalizer if it still holds it (:mod:`connectors.k8s.workload_finalizer`), then is deleted, conditioned on its
  uid;
* ``Job`` (``afterDeactivatedByKueue``): the Workload's job goes, of whatever kind, as Kueue's one job
  reconciler, which every integration runs through, deletes it (``jobframework/reconciler.go``
  ``handleWorkloadAfterDeactivatedPolicy``): the Workload's controller owner (a Job, JobSet, MPIJob, RayJob,
  AppWrapper, ... or a single Pod) where the integration running its kind is enabled; for a pod group (a plain
  one, a StatefulSet's, a LeaderWorkerSet's) the group's Pods, the set keeping them left alone (Kueue's pod
  reconciler deletes a Pod of the group a pass until none is left). Each is deleted with background
  propagation, conditioned on its uid; the Workload then goes as any orphan's does (the integration, or the
  garbage collector).

Already gone (404), or recreated meanwhile (409 on the uid precondition), counts as done: the decision ends in
one ``DecisionApplied``, appended once the deletions were accepted. A Workload whose job no enabled
integration runs (no owner, or one of another kind) has nothing deleted, as in Kueue: the decision ends in a
``DecisionRejected`` saying so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import structlog

from connectors.k8s import job_selection, workload_finalizer
from connectors.k8s.decision_workers import MarkedKeysWorker
from connectors.k8s.errors import Conflict, Forbidden, NotFound
from connectors.k8s.pod_group import IS_GROUP_ANNOTATION
from connectors.k8s.resources import BY_KIND, Resource
from events import objects as o
from events import schema as ev
from kueue_es.scheduler.config import DEFAULT, POD_FRAMEWORK, SchedulerConfig
from kueue_es.scheduler.config_record import in_force

log = structlog.get_logger("kueue_es.k8s.retention")
TAG = "RetentionExpired"
UNKNOWN_OWNER = "UnknownWorkloadOwner"
"""Why a deactivated Workload's retention deleted nothing: no enabled integration runs its job."""
PODS = BY_KIND["Pod"]


@dataclass
class RetentionStats:
    workloads_deleted: int = 0
    jobs_deleted: int = 0
    """Jobs (of any kind) and pods of pod groups deleted after their deactivation retention."""
    rejected: int = 0
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
                await self._delete(BY_KIND["Workload"], obs.metadata.name, obs.metadata.namespace, wl.uid)
                self.stats.workloads_deleted += 1
                log.info("deleted finished workload due to elapsed retention", workload=key)
        elif wl is not None and wl.retention_target == "Job":
            obs = self.mirror.workloads.get(key)
            if obs is not None:  # gone: so is its job, or it is no longer this Workload's
                jobs, why = jobs_to_delete(obs, in_force(self.mirror.state) or DEFAULT)
                for resource, ref in jobs:
                    try:
                        await self._delete(resource, ref.name, obs.metadata.namespace, ref.uid,
                                           propagation="Background")
                    except Forbidden as exc:  # the role grants no delete: trying again cannot help
                        await self._rejected(key, wl.uid, offsets, str(exc), reason="Forbidden")
                        return
                    self.stats.jobs_deleted += 1
                    log.info("deleted job: deactivation retention period expired", kind=ref.kind,
                             name=ref.name, workload=key)
                if why:
                    await self._rejected(key, wl.uid, offsets, why)
                    return
        t = int(time.time() * 1000)
        self._reported.update(offsets)
        await self.append([ev.DecisionApplied(time=t, key=key, uid=wl.uid if wl is not None else "", decision=off,
                                              id=f"applied-{off}") for off in offsets])

    async def _rejected(self, key: str, uid: str, offsets: list[int], message: str, *,
                        reason: str = UNKNOWN_OWNER) -> None:
        t = int(time.time() * 1000)
        self._reported.update(offsets)
        self.stats.rejected += len(offsets)
        log.info("deactivation retention deleted nothing", workload=key, message=message)
        await self.append([ev.DecisionRejected(time=t, key=key, uid=uid, decision=off, reason=reason,
                                               message=message, id=f"rejected-{off}") for off in offsets])

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

    async def _delete(self, resource: Resource, name: str, namespace: str, uid: str, **options: str) -> None:
        try:
            await self.client.delete(resource, name, namespace, uid=uid, **options)
        except (NotFound, Conflict):
            pass  # gone already, or a new object of that name: not ours to delete


def jobs_to_delete(obs: o.Workload, config: SchedulerConfig
                   ) -> tuple[list[tuple[Resource, o.OwnerReference]], str]:
    """What Kueue's job reconciler deletes once Workload ``obs``'s deactivation retention ran out, under the
    Configuration ``config``: a pod group's Pods (its owners), else its controller owner of a kind an enabled
    integration runs; and, when that is nothing, why (empty: something is deleted)."""
    refs = obs.metadata.owner_references
    if obs.metadata.annotations.get(IS_GROUP_ANNOTATION) == "true":
        if POD_FRAMEWORK not in config.enabled_frameworks:
            return [], "nothing deleted: the pod integration, which runs pod groups, is not enabled"
        pods = [(PODS, r) for r in refs if r.kind == PODS.kind and r.api_version == PODS.api_version]
        return pods, "" if pods else "nothing deleted: the pod group has no Pods"
    ref = next((r for r in refs if r.controller), None)
    if ref is None:
        return [], "nothing deleted: the Workload has no owner running it"
    owner = (ref.api_version, ref.kind)
    if owner in config.external_job_kinds:  # its controller's to delete (its kind may be named as a built-in)
        return [], (f"nothing deleted: its owner {ref.api_version} {ref.kind} {ref.name} is run by an "
                    "external controller")
    resource = job_selection.owner_resource(ref)
    if resource is None or not job_selection.runs_parent(owner, config):
        return [], (f"nothing deleted: its owner {ref.api_version} {ref.kind} {ref.name} is run by no "
                    "enabled integration")
    return [(resource, ref)], ""
