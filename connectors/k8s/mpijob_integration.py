"""Kueue's MPIJob integration (``kubeflow.org/mpijob``): a queued kubeflow.org/v2beta1 MPIJob runs only while its
Workload is admitted.

MPIJobs are the MPI operator's API and none of admission's inputs, so the log does not hold them: as the JobSet
integration does, this keeps its own list+watch of them (a relist after 410 Gone; while the MPIJob CRD is not
served, none exist and the list is tried again now and then), and reads their Workloads from the mirror. An MPIJob
is looked at again when it changes, and when anything the log records touches a Workload an MPIJob controls, its
namespace, a priority class or the Configuration. Nothing is done while the Configuration in force leaves
``kubeflow.org/mpijob`` out of ``integrations.frameworks``.

Each pass takes the steps of Kueue's generic job reconciler (:mod:`connectors.k8s.jobframework`, shared with Jobs
and JobSets); this module is the MPIJob's adapter, with its pieces from :mod:`connectors.k8s.mpijob`: a running
MPIJob without a Workload is suspended (``spec.runPolicy.suspend``) and a suspended one gets
``mpijob-<name>-<hash>``; admitted, each replica's template gets its pod set's admission and the MPIJob is
unsuspended; not admitted, it is suspended with its templates restored in one write; ``Succeeded``/``Failed``
finish its Workload; PodsReady follows its ``Running`` condition; orphaned Workloads are finished and deleted.
Kueue counts no reclaimable pods for an MPIJob, so none are written. Not done here (see the README): MPIJob
webhooks (the default queue and suspend at creation, validation, the Worker's pod-index offset under
``runLauncherAsWorker``), rewriting a Workload whose pod sets no longer match, prebuilt Workloads and MultiKueue.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import structlog

from connectors.k8s import mpijob as mj
from connectors.k8s import podsetinfo
from connectors.k8s.client import KubeClient
from connectors.k8s.errors import NotFound
from connectors.k8s.job_events import STOPPED
from connectors.k8s.jobframework import JobFrameworkStats, JobReconciler, stored_workloads
from connectors.k8s.journal import Journal
from connectors.k8s.list_watch import Informer
from connectors.k8s.owner_index import OwnerIndex
from connectors.k8s.resources import MPIJOBS
from connectors.k8s.workers import KeyedWorkers
from events import objects as o
from events import schema as ev
from projections import gates
from projections.workloads import WorkloadInfo

log = structlog.get_logger("kueue_es.k8s.mpijobs")


@dataclass
class MPIJobStats(JobFrameworkStats):
    """An MPIJob's integration counts only what the shared steps count."""


class _MPIJobs(Informer[mj.MPIJob]):
    """The MPIJobs, listed only while ``listing()`` (the framework on): off, the RBAC may not even allow it."""

    def __init__(self, listing: Callable[[], bool], *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.listing = listing

    async def relist(self) -> str | None:
        if self.listing():
            return await super().relist()
        self.synced.set()
        return None


class MPIJobIntegration(JobReconciler[mj.MPIJob]):
    """The MPIJob adapter of the shared job reconciler (:mod:`connectors.k8s.jobframework`), with its own
    list+watch of MPIJobs."""

    KIND = mj.KIND
    NOUN = "mpijob"
    RESOURCE = MPIJOBS

    def __init__(self, client: KubeClient, journal: Journal, *, retry_s: float = 1.0,
                 append: Callable[[Sequence[ev.AnyEvent]], Awaitable[list[int]]] | None = None,
                 concurrency: int = 16, watch_timeout_s: int = 300, backoff_s: float = 1.0,
                 absent_retry_s: float = 10.0) -> None:
        super().__init__(client, journal, MPIJobStats(), log, retry_s=retry_s, append=append)
        self.concurrency = concurrency
        self.absent_retry_s = absent_retry_s
        self.informer = _MPIJobs(lambda: self._config().manages_mpijobs, client, MPIJOBS, self._decode, self._mark,
                                 what="mpijobs", log=log, watch_timeout_s=watch_timeout_s, backoff_s=backoff_s,
                                 optional=True)
        self.mpijobs: dict[str, mj.MPIJob] = self.informer.known
        """The MPIJobs, as last listed or watched."""
        self.synced = self.informer.synced
        self._config_recorded = asyncio.Event()
        self.dirty: set[str] = set()
        self.owners = OwnerIndex(_mpijob_key)
        """Which MPIJob controls which Workloads (any uid)."""
        self.workloads_of = self.owners.owned
        self._decoder = msgspec.json.Decoder(mj.MPIJob)
        self._signal = journal.subscribe()

    # --- running -------------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Watch the MPIJobs and reconcile every dirty one, up to ``concurrency`` at a time."""
        for key, obs in self.mirror.workloads.items():
            self.owners.add(key, obs)
        self.mirror.listeners.append(self._on_applied)
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self.informer.run(absent=self._wait_for_framework), name="k8s-mpijobs-watch")
                await self.synced.wait()
                self.dirty |= self.workloads_of.keys()  # MPIJobs gone while no one watched
                await KeyedWorkers(self.reconcile_guarded, self.concurrency).run(
                    self._take, self._signal, self._retry.timeout)
        finally:
            self.mirror.listeners.remove(self._on_applied)

    def _take(self) -> set[str]:
        keys = self.dirty | self._retry.due()
        self.dirty = set()
        return keys

    async def _wait_for_framework(self) -> None:
        """Until a Configuration is recorded (it may turn the framework on), or ``absent_retry_s`` passed (the
        MPIJob CRD may be installed meanwhile)."""
        self._config_recorded.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._config_recorded.wait(), self.absent_retry_s)

    def _decode(self, raw: msgspec.Raw | bytes) -> mj.MPIJob | None:
        try:
            return self._decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            log.warning("mpijob skipped: cannot decode", error=str(exc))
            return None

    def _mark(self, keys: set[str]) -> None:
        if keys:
            self.dirty |= keys
            self._signal.set()

    def _on_applied(self, records: list[ev.Record]) -> None:
        """Mark the MPIJobs the records touch (see the module docstring)."""
        keys: set[str] = set()
        for r in records:
            keys |= self.owners.touched(r.event, self.mpijobs)
            if isinstance(r.event, ev.ConfigRecorded):
                self._config_recorded.set()
        self._mark(keys)

    # --- one MPIJob ----------------------------------------------------------------------------------------

    async def reconcile(self, key: str) -> None:
        config = self._config()
        if not config.manages_mpijobs:
            return
        job = self.mpijobs.get(key)
        uid = job.metadata.uid if job is not None and not job.metadata.deletion_timestamp else None
        own: list[tuple[o.Workload, WorkloadInfo | None]] = []
        for obs, wl in stored_workloads(self.mirror, self.workloads_of.get(key, set())):
            owner = mj.owner_of(obs)
            if owner is not None and owner[1] == uid:
                own.append((obs, wl))
            elif owner is not None:
                await self._orphaned(obs, wl, gone=job is None or owner[1] != job.metadata.uid)
        if job is None or uid is None:
            return
        if not self._managed(job, config):
            return  # not Kueue's: no queue name (unless manageJobsWithoutQueueName), or a namespace left out
        if not own:
            await self._without_workload(job, mj.workload_name(job.metadata.name, job.metadata.uid,
                                                               short=self.state.gate(gates.SHORT_WORKLOAD_NAMES)))
            return
        obs, wl = min(own, key=lambda p: (p[0].metadata.creation_timestamp or "", p[0].metadata.name))
        if wl is None:
            return  # stored, not in the log yet: the mirror marks the MPIJob again once it is
        await self._with_workload(job, obs, wl)

    # --- what the shared reconciler reads of an MPIJob ------------------------------------------------------

    def finished(self, job: mj.MPIJob) -> tuple[str, str] | None:
        return mj.finished(job)

    def is_active(self, job: mj.MPIJob) -> bool:
        return mj.is_active(job)

    def pods_ready(self, job: mj.MPIJob, wl: WorkloadInfo) -> bool:
        return mj.pods_ready(job)

    def reclaimable_pods(self, job: mj.MPIJob) -> tuple[tuple[str, int], ...]:
        return ()  # Kueue's MPIJob reports none

    def pod_priority_class(self, job: mj.MPIJob) -> str | None:
        return mj.priority_class(job)

    def workload_for(self, raw: dict[str, Any], name: str) -> dict[str, Any]:
        return mj.workload_for(self.state, self._config().keys_to_copy, raw, name)

    def suspend_spec(self) -> dict[str, Any]:
        return {"runPolicy": {"suspend": True}}

    # --- actions -------------------------------------------------------------------------------------------

    async def _read(self, job: mj.MPIJob) -> dict[str, Any] | None:
        """The MPIJob as stored, when it is still the version the view holds (None: changed or gone meanwhile;
        the watch brings what it is now)."""
        try:
            raw = msgspec.json.decode(await self.client.get(MPIJOBS, job.metadata.name, job.metadata.namespace))
        except NotFound:
            return None
        return raw if raw["metadata"]["resourceVersion"] == job.metadata.resource_version else None

    async def _read_to_create(self, job: mj.MPIJob) -> dict[str, Any] | None:
        return await self._read(job)

    async def _start(self, job: mj.MPIJob, wl: WorkloadInfo, obs: o.Workload) -> None:
        raw = await self._read(job)
        if raw is None:
            return
        try:
            patch = mj.start_patch(raw, mj.start_infos(self.state, wl, job))
        except (podsetinfo.MergeConflict, mj.BadPodSets) as exc:
            await self._failed_to_start(job, wl, exc)
            return
        await self.client.patch(MPIJOBS, job.metadata.name, patch, job.metadata.namespace)
        await self._started(job, wl)

    async def _stop(self, job: mj.MPIJob, obs: o.Workload, why: str) -> None:
        """Suspend the MPIJob and restore its templates as its Workload recorded them, in one write."""
        raw = await self._read(job)
        if raw is None:
            return
        await self.client.patch(MPIJOBS, job.metadata.name, mj.stop_patch(raw, list(obs.spec.pod_sets)),
                                job.metadata.namespace)
        self.stats.stopped += 1
        log.info("stopped mpijob and restored its templates", mpijob=job.key, why=why)
        await self._report(job, STOPPED, workload=obs.key, message=why)


def _mpijob_key(obs: o.Workload) -> str | None:
    """The key of the MPIJob that controls ``obs`` (None: no MPIJob does)."""
    owner = mj.owner_of(obs)
    return f"{obs.metadata.namespace}/{owner[0]}" if owner is not None else None
