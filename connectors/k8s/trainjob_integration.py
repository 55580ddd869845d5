"""Kueue's Kubeflow Trainer integration (``trainer.kubeflow.org/trainjob``): a queued trainer.kubeflow.org/v1alpha1
TrainJob runs only while its Workload is admitted.

TrainJobs are none of admission's inputs: as for JobSets and Ray objects, the integration keeps its own list+watch
of them (:mod:`connectors.k8s.watched_jobs`), and of the runtimes they name (TrainingRuntimes,
ClusterTrainingRuntimes: a TrainJob's pod sets are its runtime's JobSet template's), and takes the steps of Kueue's
generic job reconciler (:mod:`connectors.k8s.jobframework`) with the TrainJob's pieces
(:mod:`connectors.k8s.trainjob`): a running one without a Workload is suspended (``spec.suspend``) and a suspended
one given ``trainjob-<name>-<hash>`` — once its runtime is there: until then it waits, as Kueue's reconcile fails on
it and is retried, and the runtime's arrival (or change) marks it again; admitted, the admission is written as
``spec.podTemplateOverrides`` entries while it is suspended, then it is unsuspended; not admitted, it is suspended,
and once no Job is active Kueue's entries are removed (a TrainJob suspended with them still there counts as running
until then); its ``Complete``/``Failed`` condition finishes its Workload; PodsReady and reclaimable pods follow
``status.jobsStatus`` against the derived JobSet.

The JobSet the Trainer makes for a queued TrainJob is controlled by it: with the TrainJob integration on it is the
TrainJob's child (:func:`connectors.k8s.child_jobs.managed_ancestor`, over the parents registry the connector
shares), no Workload of its own. A Workload the TrainJob no longer matches — its ``numNodes``, trainer resources,
overrides or runtime changed — is rewritten while the TrainJob is suspended and the Workload holds no quota, else
made anew, as for every kind (:meth:`job_pod_sets`: its JobSet's pod sets now). MultiKueue runs a TrainJob on a
worker (:mod:`connectors.k8s.multikueue`).
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import structlog

from connectors.k8s import podsetinfo
from connectors.k8s import trainjob as tj
from connectors.k8s.job_events import STOPPED
from connectors.k8s.list_watch import ListedWhile
from connectors.k8s.resources import CLUSTER_TRAINING_RUNTIMES, TRAINING_RUNTIMES, TRAINJOBS
from connectors.k8s.watched_jobs import WatchedJobIntegration
from events import objects as o
from kueue_es.scheduler.config import SchedulerConfig
from projections.workloads import WorkloadInfo

log = structlog.get_logger("kueue_es.k8s.trainjob")


class TrainJobIntegration(WatchedJobIntegration[tj.TrainJob]):
    """The TrainJob adapter of the shared job reconciler, with its own list+watch of TrainJobs and of their
    runtimes (module docstring)."""

    KIND = tj.KIND
    NOUN = "trainjob"
    RESOURCE = TRAINJOBS
    LOG = log
    K = tj
    ITEM = tj.TrainJob

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._runtime_decoder = msgspec.json.Decoder(tj.Runtime)
        self.runtimes = self._runtime_informer(TRAINING_RUNTIMES)
        """The TrainingRuntimes, by ``<namespace>/<name>``."""
        self.cluster_runtimes = self._runtime_informer(CLUSTER_TRAINING_RUNTIMES)
        """The ClusterTrainingRuntimes, by ``/<name>``."""

    def _runtime_informer(self, resource: Any) -> ListedWhile[tj.Runtime]:
        return ListedWhile(lambda: self.framework_on(self._config()), self.client, resource, self._decode_runtime,
                           self._runtimes_changed, what=resource.plural, log=self.log,
                           watch_timeout_s=self.informer.watch_timeout_s, backoff_s=self.informer.backoff_s,
                           optional=True)

    def framework_on(self, config: SchedulerConfig) -> bool:
        return config.manages_trainjobs

    async def run(self) -> None:
        """Watch the runtimes beside the TrainJobs; TrainJobs are reconciled once the runtimes are listed."""
        async with asyncio.TaskGroup() as tg:
            for informer in (self.runtimes, self.cluster_runtimes):
                tg.create_task(informer.run(absent=self._wait_for_framework), name=f"k8s-{informer.what}-watch")
            await self.runtimes.synced.wait()
            await self.cluster_runtimes.synced.wait()
            await super().run()

    # --- the runtimes ---------------------------------------------------------------------------------------

    def _decode_runtime(self, raw: msgspec.Raw | bytes) -> tj.Runtime | None:
        try:
            return self._runtime_decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            self.log.warning("training runtime skipped: cannot decode", error=str(exc))
            return None

    def _runtimes_changed(self, keys: set[str]) -> None:
        """Mark the TrainJobs naming a runtime that came, changed or went."""
        self._mark({key for key, job in self.known.items()
                    if (wanted := tj.runtime_wanted(job)) is not None and wanted[1] in keys})

    def runtime_spec(self, job: tj.TrainJob) -> dict[str, Any] | None:
        """The spec of the runtime the TrainJob names, as listed (None: not there, or of no kind the Trainer
        has)."""
        wanted = tj.runtime_wanted(job)
        if wanted is None:
            return None
        cluster, key = wanted
        found = (self.cluster_runtimes if cluster else self.runtimes).known.get(key)
        return found.spec if found is not None else None

    def _not_done(self, job: tj.TrainJob) -> None:
        """Forget the action being taken on this version of the TrainJob: its runtime is missing, and its arrival
        marks the TrainJob again."""
        self._acted.pop(job.key, None)

    # --- what the shared reconciler reads of one -----------------------------------------------------------

    def is_running(self, job: tj.TrainJob) -> bool:
        """Unsuspended, or suspended with Kueue's overrides still written (its stop is not finished)."""
        return not job.spec.suspend or tj.admission_written(job)

    def restoring(self, job: tj.TrainJob) -> bool:
        return job.spec.suspend and tj.admission_written(job)

    def pods_ready(self, job: tj.TrainJob, wl: WorkloadInfo) -> bool:
        return tj.pods_ready(job, self.runtime_spec(job))

    def reclaimable_pods(self, job: tj.TrainJob) -> tuple[tuple[str, int], ...]:
        return tj.reclaimable_pods(job, self.runtime_spec(job))

    def pod_priority_class(self, job: tj.TrainJob) -> str | None:
        spec = self.runtime_spec(job)
        return tj.priority_class(job, spec) if spec is not None else None

    def workload_for(self, raw: dict[str, Any], name: str) -> dict[str, Any]:
        spec = self.runtime_spec(msgspec.convert(raw, tj.TrainJob))
        assert spec is not None, "_read_to_create and _read_current read only a TrainJob whose runtime is there"
        return tj.workload_for(self.state, self._config().keys_to_copy, raw, spec, name)

    def job_pod_sets(self, job: tj.TrainJob, *, generated: bool) -> list[o.PodSet] | None:
        """The pod sets of its JobSet now (:func:`trainjob.job_pod_sets`); without its runtime none to compare
        (Kueue's reconcile fails on the lookup, and the runtime's arrival marks the TrainJob again)."""
        spec = self.runtime_spec(job)
        return tj.job_pod_sets(job, spec) if spec is not None else None

    # --- actions -------------------------------------------------------------------------------------------

    async def _without_workload(self, job: tj.TrainJob, name: str, **kwargs: Any) -> None:
        """Suspended first as any job; given a Workload only once its runtime is there."""
        if self.runtime_spec(job) is None and job.spec.suspend and self.finished(job) is None:
            self.log.info("runtime not found: no workload yet", runtime=job.spec.runtime_ref.name, trainjob=job.key)
        await super()._without_workload(job, name, **{**kwargs, "create": self.runtime_spec(job) is not None
                                                       and kwargs.get("create", True)})

    async def _read_to_create(self, job: tj.TrainJob) -> dict[str, Any] | None:
        raw = await self._read(job)
        if raw is None or self.runtime_spec(msgspec.convert(raw, tj.TrainJob)) is None:
            self._not_done(job)
            return None
        return raw

    async def _read_current(self, job: tj.TrainJob) -> dict[str, Any] | None:
        """The TrainJob as stored, to rewrite its Workload from — only while its runtime is there (it may have gone
        since the pass compared them)."""
        raw = await super()._read_current(job)
        if raw is None or self.runtime_spec(msgspec.convert(raw, tj.TrainJob)) is None:
            return None
        return raw

    async def _start(self, job: tj.TrainJob, wl: WorkloadInfo, obs: Any) -> None:
        """Kueue's overrides for the admission written while the TrainJob is suspended
        (:func:`trainjob.start_patch`), then it unsuspended on the version that write made
        (:func:`trainjob.unsuspend_patch`): the Trainer refuses the two in one write. Should the second fail, the
        suspended TrainJob with Kueue's overrides is restored (:meth:`restoring`) and started again."""
        admission = wl.admission  # the step's: the fold may evict ``wl`` while the object is read
        assert admission is not None
        spec = self.runtime_spec(job)
        raw = await self._read(job) if spec is not None else None
        if raw is None or spec is None:
            self._not_done(job)
            return
        if self._evicted_meanwhile(job, wl, admission):
            return
        try:
            patch = tj.start_patch(raw, tj.start_infos(self.state, wl, job, spec))
        except (podsetinfo.MergeConflict, tj.BadPodSets) as exc:
            await self._failed_to_start(job, wl, exc)
            return
        ns, name = job.metadata.namespace, job.metadata.name
        written = msgspec.json.decode(await self.client.patch(self.RESOURCE, name, patch, ns))
        await self.client.patch(self.RESOURCE, name, tj.unsuspend_patch(written), ns)
        await self._started(job, wl, admission.cluster_queue)

    async def _stop(self, job: tj.TrainJob, obs: Any, why: str) -> None:
        """Suspend it (``Stopped`` with ``why``); a later pass, once no Job is active, removes Kueue's overrides —
        the Trainer refuses changing them on a running TrainJob."""
        raw = await self._read(job)
        if raw is None:
            return
        ns, name = job.metadata.namespace, job.metadata.name
        if not job.spec.suspend:
            await self.client.patch(self.RESOURCE, name, tj.suspend_patch(raw), ns)
            self.stats.stopped += 1
            self.log.info("stopped trainjob", why=why, trainjob=job.key)
            await self._report(job, STOPPED, workload=obs.key, message=why)
        elif not tj.is_active(job) and tj.admission_written(job):
            await self.client.patch(self.RESOURCE, name, tj.restore_patch(raw), ns)
            self.log.info("restored trainjob's pod template overrides", trainjob=job.key)
