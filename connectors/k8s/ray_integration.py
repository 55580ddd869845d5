"""Kueue's Ray integrations (``ray.io/rayjob``, ``ray.io/raycluster``): a queued ray.io/v1 RayJob or RayCluster runs
only while its Workload is admitted.

KubeRay's objects are none of admission's inputs: as for JobSets and MPIJobs, each integration keeps its own
list+watch of its kind (:mod:`connectors.k8s.watched_jobs`) and takes the steps of Kueue's generic job reconciler
(:mod:`connectors.k8s.jobframework`) with its kind's pieces (:mod:`connectors.k8s.rayjob`,
:mod:`connectors.k8s.raycluster`): a running one without a Workload is suspended (``spec.suspend``) and a suspended
one given ``rayjob-``/``raycluster-<name>-<hash>``; admitted, the head's and worker groups' templates (and a
RayJob's submitter template) get the admission and it is unsuspended; not admitted, it is suspended with its
templates restored in one write; a RayJob's ``Complete``/``Failed`` deployment finishes its Workload (a RayCluster
never finishes); PodsReady follows the cluster's ``ready`` state. Kueue counts no reclaimable pods for either.

A RayJob with a ``clusterSelector`` is not Kueue's (its ``Skip``). A RayCluster whose controller is a RayJob, with
the RayJob integration on, is that RayJob's child (Kueue finds a managed ancestor): when the RayJob is queued (it
has a Workload, or ``manageJobsWithoutQueueName``) the RayCluster gets no Workload of its own and is kept suspended
while the RayJob's Workload is missing or not admitted (Normal ``Suspended`` "Kueue managed child job suspended",
as for a child Job, :mod:`connectors.k8s.child_jobs`). Not done (see the README): rewriting a Workload whose pod sets
no longer match, prebuilt Workloads, MultiKueue's ``managedBy``, elastic autoscaling.
"""

from __future__ import annotations

from typing import Any

import structlog

from connectors.k8s import child_jobs, job_selection
from connectors.k8s import raycluster as rc
from connectors.k8s import rayjob as rj
from connectors.k8s.resources import RAYCLUSTERS, RAYJOBS
from connectors.k8s.watched_jobs import WatchedJobIntegration
from kueue_es.scheduler.config import SchedulerConfig

log = structlog.get_logger("kueue_es.k8s.ray")


class RayJobIntegration(WatchedJobIntegration[rj.RayJob]):
    """The RayJob adapter of the shared job reconciler, with its own list+watch of RayJobs."""

    KIND = rj.KIND
    NOUN = "rayjob"
    RESOURCE = RAYJOBS
    LOG = log
    K = rj
    ITEM = rj.RayJob

    def framework_on(self, config: SchedulerConfig) -> bool:
        return config.manages_rayjobs

    def _managed(self, job: rj.RayJob, config: SchedulerConfig) -> bool:
        return not rj.skipped(job) and super()._managed(job, config)

    def reclaimable_pods(self, job: rj.RayJob) -> tuple[tuple[str, int], ...]:
        return ()

    def pod_priority_class(self, job: rj.RayJob) -> str | None:
        return rj.priority_class(job)


class RayClusterIntegration(WatchedJobIntegration[rc.RayCluster]):
    """The RayCluster adapter of the shared job reconciler, with its own list+watch of RayClusters; one a queued
    RayJob controls is that RayJob's child (module docstring)."""

    KIND = rc.KIND
    NOUN = "raycluster"
    RESOURCE = RAYCLUSTERS
    LOG = log
    K = rc
    ITEM = rc.RayCluster

    def framework_on(self, config: SchedulerConfig) -> bool:
        return config.manages_rayclusters

    def reclaimable_pods(self, job: rc.RayCluster) -> tuple[tuple[str, int], ...]:
        return ()

    def pod_priority_class(self, job: rc.RayCluster) -> str | None:
        return rc.priority_class(job)

    async def reconcile(self, key: str) -> None:
        config = self._config()
        cluster = self.known.get(key)
        if (cluster is not None and self.framework_on(config) and not cluster.metadata.deletion_timestamp
                and job_selection.runs_parent(job_selection.controller(cluster.metadata.owner_references), config)
                and await self._child(cluster, config)):
            return
        await super().reconcile(key)

    async def _child(self, cluster: rc.RayCluster, config: SchedulerConfig) -> bool:
        """A RayCluster under a Kueue-run parent that Kueue queues: no Workload of its own, and suspended while the
        parent's Workload is missing or not admitted. Whether it was such a child."""
        parent = child_jobs.parent_workload(cluster, self.mirror.workloads.values(),  # type: ignore[arg-type]
                                            self.state.workloads)
        if parent is None and not config.manage_jobs_without_queue_name:
            return False
        namespace = self.state.namespaces.get(cluster.metadata.namespace)
        if job_selection.namespace_managed(namespace, config) and child_jobs.held(
                cluster, parent, finished=False):  # type: ignore[arg-type]
            await self._once(cluster.key, "suspend-child", cluster, self._suspend_child(cluster))
        return True

    async def _suspend_child(self, cluster: Any) -> None:
        await self.client.patch(self.RESOURCE, cluster.metadata.name, {
            "metadata": {"resourceVersion": cluster.metadata.resource_version}, "spec": {"suspend": True}},
            cluster.metadata.namespace)
        self.log.info("suspended a child raycluster whose parent's workload is not admitted", raycluster=cluster.key)
        await self._report(cluster, child_jobs.SUSPENDED, message=child_jobs.SUSPENDED_MESSAGE)
