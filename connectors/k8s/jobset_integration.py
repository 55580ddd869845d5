"""Kueue's JobSet integration (``jobset.x-k8s.io/jobset``): a queued JobSet runs only while its Workload is admitted.

JobSets are another project's API and none of admission's inputs, so the log does not hold them: like the pod
integration this keeps its own list+watch of them (a relist after 410 Gone; while the JobSet CRD is not served,
none exist and the list is tried again now and then), and reads their Workloads from the mirror — the log's state,
and the Workload as the apiserver stores it. A JobSet is looked at again when it changes, and when anything the log
records touches a Workload a JobSet controls (found by its controller ownerReference), its namespace, a priority
class (a JobSet still without a Workload may wait for it) or the Configuration. Nothing is done while the
Configuration in force leaves ``jobset.x-k8s.io/jobset`` out of ``integrations.frameworks``.

Each pass does what Kueue's generic job reconciler does next (``jobframework/reconciler.go``): the steps are
:mod:`connectors.k8s.jobframework`'s, shared with the Job integration; this module is the JobSet's adapter,
with its own pieces from :mod:`connectors.k8s.jobset`:

* the JobSet **gone or being deleted**: each Workload a JobSet of that name controls is finished ``OwnerNotFound``
  (under ``FinishOrphanedWorkloads``) and loses its finalizer; once the JobSet is gone it is deleted, as the
  garbage collector would (:mod:`connectors.k8s.workload_finalizer`); so is the Workload of an earlier JobSet of
  the same name (another uid);
* **no Workload yet** (the JobSet queued — or, under ``manageJobsWithoutQueueName``, not — in a managed namespace
  and not finished): a running one is suspended first (``Stopped``, "Missing Workload; unable to restore pod templates"); a suspended one with no
  active pods gets ``jobset-<name>-<hash>`` (``CreatedWorkload``), built from the JobSet as stored; a priority class
  the log does not hold holds it back (``WorkloadPriorityClassNotFound`` for a WorkloadPriorityClass, once per
  version), a ``max-exec-time-seconds`` Kueue refuses gets it none;
* the **Workload finished or being deleted**: its finalizer goes once the apiserver shows it finished; one being
  deleted first has its running JobSet stopped ("Workload is deleted");
* the JobSet **finished** (``Completed``/``Failed``): ``WorkloadFinished`` (``Succeeded``/``Failed``);
* **in step**: while the JobSet is suspended and its Workload neither evicted nor holding quota, the queue its
  label names now; the WorkloadPriorityClass its label names now (``UpdatedWorkload``), as for a Job
  (:mod:`connectors.k8s.job_sync`); one write a pass, conditioned on the Workload's resourceVersion;
* **reclaimable pods**: ``ReclaimablePodsChanged`` when the succeeded Jobs' pods differ from the Workload's;
* under waitForPodsReady, ``PodsReadyChanged`` as the JobSet's Jobs become ready (every Job ready or succeeded)
  or not, and ``WaitForStart`` first;
* **admitted** (in the log and as the apiserver stores it) and suspended → start
  (:func:`connectors.k8s.jobset.start_patch`, ``Started``); a merge conflict or an admission lacking a replicated
  Job finishes the Workload ``FailedToStart``;
* **not admitted** and running → stop: suspended and the templates restored in one write
  (:func:`connectors.k8s.jobset.stop_patch`, ``Stopped`` with the eviction's message or "Not admitted by cluster
  queue");
* **evicted**, suspended, no active pods and still holding quota → ``JobStopped``.

Every write is conditioned on the resourceVersion read; a conflict waits for the watch. The Events go through
the log (``JobActed`` of kind JobSet). Not done here (see the README): rewriting a Workload whose pod sets no
longer match the JobSet, prebuilt Workloads, the admission gate annotation, ``UpdatedAdmissionCheck`` and
``FinishedWorkload`` Events on the JobSet, JobSet webhooks, MultiKueue and elastic JobSets.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import structlog

from connectors.k8s import jobset as js
from connectors.k8s import podsetinfo
from connectors.k8s.client import KubeClient
from connectors.k8s.errors import NotFound
from connectors.k8s.job_events import STOPPED
from connectors.k8s.jobframework import JobFrameworkStats, JobReconciler, stored_workloads
from connectors.k8s.journal import Journal
from connectors.k8s.list_watch import Informer
from connectors.k8s.owner_index import OwnerIndex
from connectors.k8s.resources import JOBSETS
from connectors.k8s.workers import KeyedWorkers
from events import objects as o
from events import schema as ev
from projections import gates
from projections.workloads import WorkloadInfo

log = structlog.get_logger("kueue_es.k8s.jobsets")


@dataclass
class JobSetStats(JobFrameworkStats):
    """A JobSet's integration counts only what the shared steps count."""


class _JobSets(Informer[js.JobSet]):
    """The JobSets, listed only while ``listing()`` (the framework on): off, the RBAC may not even allow it."""

    def __init__(self, listing: Callable[[], bool], *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.listing = listing

    async def relist(self) -> str | None:
        if self.listing():
            return await super().relist()
        self.synced.set()
        return None


class JobSetIntegration(JobReconciler[js.JobSet]):
    """The JobSet adapter of the shared job reconciler (:mod:`connectors.k8s.jobframework`), with its own
    list+watch of JobSets."""

    KIND = js.KIND
    NOUN = "jobset"
    RESOURCE = JOBSETS

    def __init__(self, client: KubeClient, journal: Journal, *, retry_s: float = 1.0,
                 append: Callable[[Sequence[ev.AnyEvent]], Awaitable[list[int]]] | None = None,
                 concurrency: int = 16, watch_timeout_s: int = 300, backoff_s: float = 1.0,
                 absent_retry_s: float = 10.0) -> None:
        super().__init__(client, journal, JobSetStats(), log, retry_s=retry_s, append=append)
        self.concurrency = concurrency
        self.absent_retry_s = absent_retry_s
        self.informer = _JobSets(lambda: self._config().manages_jobsets, client, JOBSETS, self._decode, self._mark,
                                 what="jobsets", log=log, watch_timeout_s=watch_timeout_s, backoff_s=backoff_s,
                                 optional=True)
        self.jobsets: dict[str, js.JobSet] = self.informer.known
        """The JobSets, as last listed or watched."""
        self.synced = self.informer.synced
        self._config_recorded = asyncio.Event()
        self.dirty: set[str] = set()
        self.owners = OwnerIndex(_jobset_key)
        """Which JobSet controls which Workloads (any uid)."""
        self.workloads_of = self.owners.owned
        self._decoder = msgspec.json.Decoder(js.JobSet)
        self._signal = journal.subscribe()

    # --- running -------------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Watch the JobSets and reconcile every dirty one, up to ``concurrency`` at a time."""
        for key, obs in self.mirror.workloads.items():
            self.owners.add(key, obs)
        self.mirror.listeners.append(self._on_applied)
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self.informer.run(absent=self._wait_for_framework), name="k8s-jobsets-watch")
                await self.synced.wait()
                self.dirty |= self.workloads_of.keys()  # JobSets gone while no one watched
                await KeyedWorkers(self.reconcile_guarded, self.concurrency).run(
                    self._take, self._signal, self._retry.timeout)
        finally:
            self.mirror.listeners.remove(self._on_applied)

    def _take(self) -> set[str]:
        keys = self.dirty | self._retry.due()
        self.dirty = set()
        return keys

    # --- the JobSets, listed and watched -------------------------------------------------------------------

    async def _wait_for_framework(self) -> None:
        """Until a Configuration is recorded (it may turn the framework on), or ``absent_retry_s`` passed (the
        JobSet CRD may be installed meanwhile)."""
        self._config_recorded.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._config_recorded.wait(), self.absent_retry_s)

    def _decode(self, raw: msgspec.Raw | bytes) -> js.JobSet | None:
        try:
            return self._decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            log.warning("jobset skipped: cannot decode", error=str(exc))
            return None

    def _mark(self, keys: set[str]) -> None:
        if keys:
            self.dirty |= keys
            self._signal.set()

    # --- what the log says about their Workloads -----------------------------------------------------------

    def _on_applied(self, records: list[ev.Record]) -> None:
        """Mark the JobSets the records touch (see the module docstring)."""
        keys: set[str] = set()
        for r in records:
            keys |= self.owners.touched(r.event, self.jobsets)
            if isinstance(r.event, ev.ConfigRecorded):
                self._config_recorded.set()
        self._mark(keys)

    # --- one JobSet ----------------------------------------------------------------------------------------

    def _owned(self, key: str) -> list[tuple[o.Workload, WorkloadInfo | None]]:
        """The Workloads a JobSet of this name controls, as stored (and in the log, when it has them), by key."""
        return stored_workloads(self.mirror, self.workloads_of.get(key, set()))

    async def reconcile(self, key: str) -> None:
        config = self._config()
        if not config.manages_jobsets:
            return
        jobset = self.jobsets.get(key)
        uid = jobset.metadata.uid if jobset is not None and not jobset.metadata.deletion_timestamp else None
        own: list[tuple[o.Workload, WorkloadInfo | None]] = []
        for obs, wl in self._owned(key):
            owner = js.owner_of(obs)
            if owner is not None and owner[1] == uid:
                own.append((obs, wl))
            elif owner is not None:
                await self._orphaned(obs, wl, gone=jobset is None or owner[1] != jobset.metadata.uid)
        if jobset is None or uid is None:
            return
        if not self._managed(jobset, config):
            return  # not Kueue's: no queue name (unless manageJobsWithoutQueueName), or a namespace left out
        if not own:
            await self._without_workload(jobset, js.workload_name(jobset.metadata.name, jobset.metadata.uid,
                                                                  short=self.state.gate(gates.SHORT_WORKLOAD_NAMES)))
            return
        obs, wl = min(own, key=lambda p: (p[0].metadata.creation_timestamp or "", p[0].metadata.name))
        if wl is None:
            return  # stored, not in the log yet: the mirror marks the JobSet again once it is
        await self._with_workload(jobset, obs, wl)

    # --- what the shared reconciler reads of a JobSet -------------------------------------------------------

    def finished(self, job: js.JobSet) -> tuple[str, str] | None:
        return js.finished(job)

    def is_active(self, job: js.JobSet) -> bool:
        return js.is_active(job)

    def pods_ready(self, job: js.JobSet, wl: WorkloadInfo) -> bool:
        return js.pods_ready(job)

    def reclaimable_pods(self, job: js.JobSet) -> tuple[tuple[str, int], ...]:
        return js.reclaimable_pods(job)

    def pod_priority_class(self, job: js.JobSet) -> str | None:
        return js.pods_priority_class(job)

    def workload_for(self, raw: dict[str, Any], name: str) -> dict[str, Any]:
        return js.workload_for(self.state, self._config().keys_to_copy, raw, name)

    # --- actions -------------------------------------------------------------------------------------------

    async def _read(self, jobset: js.JobSet) -> dict[str, Any] | None:
        """The JobSet as stored, when it is still the version the view holds (None: changed or gone meanwhile;
        the watch brings what it is now)."""
        try:
            raw = msgspec.json.decode(await self.client.get(JOBSETS, jobset.metadata.name, jobset.metadata.namespace))
        except NotFound:
            return None
        return raw if raw["metadata"]["resourceVersion"] == jobset.metadata.resource_version else None

    async def _read_to_create(self, job: js.JobSet) -> dict[str, Any] | None:
        return await self._read(job)

    async def _start(self, job: js.JobSet, wl: WorkloadInfo, obs: o.Workload) -> None:
        raw = await self._read(job)
        if raw is None:
            return
        try:
            patch = js.start_patch(raw, js.start_infos(self.state, wl, job))
        except (podsetinfo.MergeConflict, js.BadPodSets) as exc:
            await self._failed_to_start(job, wl, exc)
            return
        await self.client.patch(JOBSETS, job.metadata.name, patch, job.metadata.namespace)
        await self._started(job, wl)

    async def _stop(self, job: js.JobSet, obs: o.Workload, why: str) -> None:
        """Suspend the JobSet and restore its templates as its Workload recorded them, in one write."""
        raw = await self._read(job)
        if raw is None:
            return
        await self.client.patch(JOBSETS, job.metadata.name, js.stop_patch(raw, list(obs.spec.pod_sets)),
                                job.metadata.namespace)
        self.stats.stopped += 1
        log.info("stopped jobset and restored its templates", jobset=job.key, why=why)
        await self._report(job, STOPPED, workload=obs.key, message=why)


def _jobset_key(obs: o.Workload) -> str | None:
    """The key of the JobSet that controls ``obs`` (None: no JobSet does)."""
    owner = js.owner_of(obs)
    return f"{obs.metadata.namespace}/{owner[0]}" if owner is not None else None

