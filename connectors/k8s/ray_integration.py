"""Kueue's Ray integrations (``ray.io/rayjob``, ``ray.io/raycluster``, ``ray.io/rayservice``): a queued ray.io/v1
RayJob, RayCluster or RayService runs only while its Workload is admitted.

KubeRay's objects are none of admission's inputs: as for JobSets and MPIJobs, each integration keeps its own
list+watch of its kind (:mod:`connectors.k8s.watched_jobs`) and takes the steps of Kueue's generic job reconciler
(:mod:`connectors.k8s.jobframework`) with its kind's pieces (:mod:`connectors.k8s.rayjob`,
:mod:`connectors.k8s.raycluster`): a running one without a Workload is suspended (``spec.suspend``) and a suspended
one given ``rayjob-``/``raycluster-<name>-<hash>``; admitted, the head's and worker groups' templates (and a
RayJob's submitter template) get the admission and it is unsuspended; not admitted, it is suspended with its
templates restored in one write; a RayJob's ``Complete``/``Failed`` deployment finishes its Workload (a RayCluster
never finishes); PodsReady follows the cluster's ``ready`` state. Kueue counts no reclaimable pods for either.

A RayJob with a ``clusterSelector`` is not Kueue's (its ``Skip``). A RayCluster with a Kueue-managed ancestor —
with the RayJob integration on, a RayJob up its controller chain that names a queue, or any under
``manageJobsWithoutQueueName`` (:func:`connectors.k8s.child_jobs.managed_ancestor`, over the parents registry the
connector shares among the job reconcilers) — is that ancestor's child, as a child Job is
(:meth:`JobReconciler._as_child <connectors.k8s.jobframework.JobReconciler._as_child>`, a step of the shared
reconciler): no Workload of its own, kept suspended while the ancestor's newest unfinished Workload is missing or
not admitted (Normal ``Suspended`` "Kueue managed child job suspended"). The RayJob's submitter Job is found the
RayJob's child the same way by the Job integration. A prebuilt Workload is used (the shared watched-job steps); so
MultiKueue runs a RayJob, RayCluster or RayService on a worker (:mod:`connectors.k8s.multikueue`). An elastic
RayCluster (``kueue.x-k8s.io/elastic-job: "true"`` under ``ElasticJobsViaWorkloadSlices``) runs on workload slices,
the shared reconciler's slice pass (:meth:`JobReconciler._sliced <connectors.k8s.jobframework.JobReconciler._sliced>`)
over its pod counts (:func:`connectors.k8s.raycluster.counts`), started with the chain's name on its templates and
its pods (KubeRay's ``ray.io/cluster`` label) released pod set by pod set. So does an elastic RayJob, its worker
counts those of the RayCluster it runs on under the autoscaler (:func:`connectors.k8s.rayjob.counts`): the RayJob
integration lists and watches RayClusters for it, a change of one marking the RayJob that controls it
(:class:`OnRayCluster`); so does an elastic RayService, counted by its active RayCluster. Each scales up in part
when annotated ``kueue.x-k8s.io/elastic-job-scale-up-strategy: partial`` (KEP-12100, the shared pass's). A
Workload the object no longer matches (its worker replicas, a template's resources or tolerations changed) is
rewritten while the object is suspended and holds no quota, else deleted and made anew, a running object stopped
first with its templates restored (:class:`ComparedUnlessSliced`; Kueue's ``rayjob``/``raycluster`` integration
tests' "gets suspended when parallelism changes"); of several it keeps the one that matches and deletes the others.

A RayService (:mod:`connectors.k8s.rayservice`) is run the same way, its suspend flag and templates those of its
``spec.rayClusterConfig``: ``rayservice-<name>-<hash>``, never finished, active and PodsReady by its ``Ready``
condition. The RayClusters KubeRay makes for a queued one are its children, as a RayJob's (the parents registry
holds the RayServices listed). Under ``DeferRayServiceFinalizationForRedisCleanup`` a RayService being deleted with
GCS fault tolerance is not reconciled (Kueue's ``Skip``): its Workload stays as it is until the RayService is gone.
"""

from __future__ import annotations

from typing import Any

import msgspec
import structlog

from connectors.k8s import multikueue_ray_autoscaling as mk_autoscaling
from connectors.k8s import podsetinfo, workload_slices
from connectors.k8s import raycluster as rc
from connectors.k8s import rayjob as rj
from connectors.k8s import rayservice as rs
from connectors.k8s.list_watch import Informer, ListedWhile
from connectors.k8s.resources import RAYCLUSTERS, RAYJOBS, RAYSERVICES
from connectors.k8s.watched_jobs import WatchedJobIntegration
from events import objects as o
from kueue_es.scheduler.config import SchedulerConfig
from projections import gates
from projections.workloads import WorkloadInfo

log = structlog.get_logger("kueue_es.k8s.ray")


class ComparedUnlessSliced(WatchedJobIntegration[Any]):
    """A Ray kind whose Workload is compared with the pod sets it makes now (the kind's ``job_pod_sets``), so one
    it no longer matches is rewritten or made anew, as Kueue's ``EquivalentToWorkload`` does; an elastic one's
    slices follow its counts instead (the slice pass), as Kueue's workload-slice step does, named over its
    cluster revision too (:meth:`slice_version`)."""

    def job_pod_sets(self, job: Any, *, generated: bool) -> list[o.PodSet] | None:
        return None if self.sliced(job) else self.K.job_pod_sets(job)

    def slice_version(self, job: Any) -> str:
        """The generation and the recorded cluster revision
        (:func:`connectors.k8s.raycluster.slice_name_extra`)."""
        return rc.slice_name_extra(job.metadata.generation, job.metadata.annotations)


class OnRayCluster(ComparedUnlessSliced):
    """A Ray kind that runs on a RayCluster KubeRay makes for it (RayJob, RayService), with a list+watch of the
    RayClusters besides its own: an elastic one's worker counts are its cluster's under the autoscaler (the kind's
    ``counts``, over the cluster its ``cluster_name`` names) and its pods are that cluster's."""

    SLICED = True
    SCALES_UP_IN_PART = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._cluster_decoder = msgspec.json.Decoder(rc.RayCluster)
        self.clusters: Informer[rc.RayCluster] = ListedWhile(
            lambda: self.framework_on(self._config()), self.client, RAYCLUSTERS, self._decode_cluster,
            self._cluster_changed, what=f"{self.NOUN}s' rayclusters", log=self.log, optional=True,
            on_deleted=lambda cluster: self._cluster_changed({cluster.key}, cluster))
        """The RayClusters, as listed and watched: a change of one such an object controls marks that object."""

    def side_informers(self) -> list[Informer[Any]]:
        return [self.clusters]

    async def reconcile(self, key: str) -> None:
        """The shared steps; an elastic object's only once the RayClusters are listed (its counts are read there)."""
        job = self.known.get(key)
        if job is not None and self.sliced(job) and not self.clusters.synced.is_set():
            self._retry.later(key, 1.0)
            return
        await super().reconcile(key)

    def _decode_cluster(self, raw: msgspec.Raw | bytes) -> rc.RayCluster | None:
        try:
            return self._cluster_decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            self.log.warning("raycluster skipped: cannot decode", error=str(exc))
            return None

    def _cluster_changed(self, keys: set[str], gone: rc.RayCluster | None = None) -> None:
        """Mark the objects of this kind that control the RayClusters of ``keys`` (``gone``: one deleted)."""
        marked: set[str] = set()
        for key in keys:
            cluster = gone if gone is not None else self.clusters.known.get(key)
            owner = None if cluster is None else next(
                (r for r in cluster.metadata.owner_references if r.controller and r.kind == self.KIND), None)
            if cluster is not None and owner is not None:
                marked.add(f"{cluster.metadata.namespace}/{owner.name}")
        self._mark(marked)

    def _live_cluster(self, job: Any) -> rc.RayCluster | None:
        """The RayCluster the object runs on, when it controls it."""
        cluster = self.clusters.known.get(f"{job.metadata.namespace}/{self.K.cluster_name(job)}")
        if cluster is None or not any(r.controller and r.uid == job.metadata.uid
                                      for r in cluster.metadata.owner_references):
            return None
        return cluster

    def slice_counts(self, job: Any) -> dict[str, int] | None:
        counts = self.K.counts(job, self._live_cluster(job))
        if counts is None or self.K is not rj:
            return counts
        return mk_autoscaling.reflected_counts(self.state.gate(mk_autoscaling.GATE), job.spec.managed_by,
                                               job.metadata.annotations, counts)

    def stop_patch(self, raw: dict[str, Any], saved: list[o.PodSet]) -> dict[str, Any]:
        """A RayJob's suspending patch drops its reflected counts (:func:`~connectors.k8s.multikueue_ray_autoscaling.
        cleared_on_stop`); a RayService's is the kind's."""
        patch = self.K.stop_patch(raw, saved)
        return mk_autoscaling.cleared_on_stop(self.state.gate(mk_autoscaling.GATE), patch, raw) if self.K is rj else patch

    def slice_pod_selector(self, job: Any) -> str:
        name = self.K.cluster_name(job)
        return f"{rc.CLUSTER_LABEL}={name}" if name else ""

    def slice_pods_version(self, job: Any) -> str:
        cluster = self._live_cluster(job)
        return f"@{cluster.metadata.resource_version}" if cluster is not None else ""

    def _start_infos(self, job: Any, wl: WorkloadInfo, obs: o.Workload) -> list[podsetinfo.PodSetInfo]:
        """Each template's admission, an elastic slice's chain name with it (the cluster's pods carry it)."""
        return self.K.start_infos(self.state, wl, job, workload_slices.pod_slice_name(self.state, obs))


class RayJobIntegration(OnRayCluster):
    """The RayJob adapter of the shared job reconciler, with its own list+watch of RayJobs, and of the RayClusters
    KubeRay makes for them (:class:`OnRayCluster`)."""

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


class RayClusterIntegration(ComparedUnlessSliced):
    """The RayCluster adapter of the shared job reconciler, with its own list+watch of RayClusters; one a queued
    RayJob controls is that RayJob's child (module docstring)."""

    KIND = rc.KIND
    NOUN = "raycluster"
    RESOURCE = RAYCLUSTERS
    LOG = log
    K = rc
    ITEM = rc.RayCluster

    SLICED = True
    SCALES_UP_IN_PART = True

    def framework_on(self, config: SchedulerConfig) -> bool:
        return config.manages_rayclusters

    def slice_counts(self, job: rc.RayCluster) -> dict[str, int]:
        return mk_autoscaling.reflected_counts(self.state.gate(mk_autoscaling.GATE), job.spec.managed_by,
                                               job.metadata.annotations, rc.counts(job.spec))

    def stop_patch(self, raw: dict[str, Any], saved: list[o.PodSet]) -> dict[str, Any]:
        """Its suspending patch drops its reflected counts (:func:`~connectors.k8s.multikueue_ray_autoscaling.
        cleared_on_stop`)."""
        return mk_autoscaling.cleared_on_stop(self.state.gate(mk_autoscaling.GATE), rc.stop_patch(raw, saved), raw)

    def slice_pod_selector(self, job: rc.RayCluster) -> str:
        return rc.pod_selector(job)

    def _start_infos(self, job: rc.RayCluster, wl: WorkloadInfo, obs: o.Workload) -> list[podsetinfo.PodSetInfo]:
        """Each template's admission, an elastic slice's chain name with it (its pods carry it)."""
        return rc.start_infos(self.state, wl, job, workload_slices.pod_slice_name(self.state, obs))


class RayServiceIntegration(OnRayCluster):
    """The RayService adapter of the shared job reconciler, with its own list+watch of RayServices; suspended and
    started at ``spec.rayClusterConfig`` (module docstring)."""

    KIND = rs.KIND
    NOUN = "rayservice"
    RESOURCE = RAYSERVICES
    LOG = log
    K = rs
    ITEM = rs.RayService

    def framework_on(self, config: SchedulerConfig) -> bool:
        return config.manages_rayservices

    def suspend_spec(self) -> dict[str, Any]:
        return {rs.CLUSTER_CONFIG: {"suspend": True}}

    async def reconcile(self, key: str) -> None:
        """Kueue's ``Skip`` first (:func:`connectors.k8s.rayservice.skipped`), then the shared steps."""
        service = self.known.get(key)
        if service is not None and rs.skipped(service, self.state.gate(gates.DEFER_RAY_SERVICE_FINALIZATION)):
            return
        await super().reconcile(key)
