"""The job kinds of other projects' APIs (JobSets, MPIJobs): what their integrations share beyond the shared
reconciler's steps (:mod:`connectors.k8s.jobframework`).

Such objects are none of admission's inputs, so the log does not hold them: each integration keeps its own
list+watch of its kind (an :class:`~connectors.k8s.list_watch.Informer`; a relist after 410 Gone; while the CRD is
not served, none exist and the list is tried again now and then; nothing is listed while the Configuration leaves
the framework out), and reads their Workloads from the mirror — the log's state, and the Workload as the apiserver
stores it. An object is looked at again when it changes, and when anything the log records touches a Workload it
controls (its controller ownerReference), its namespace, a priority class (one still without a Workload may wait
for it) or the Configuration.

:class:`WatchedJobIntegration` is that integration, given the kind's pure decisions as a module (``K``:
:mod:`connectors.k8s.jobset`, :mod:`connectors.k8s.mpijob`) with the same names in each: ``KIND``, ``owner_of``,
``workload_name``, ``controller_ref``, ``finished``, ``is_active``, ``pods_ready``, ``workload_for``,
``start_infos``, ``start_patch``, ``stop_patch``, ``priority_class`` and ``BadPodSets``, and ``job_pod_sets`` (the
pod sets the object makes now, which its Workload is compared with; a kind without it has its Workload never
rewritten and a prebuilt one never found out of sync). A subclass names the kind, its resource and framework, and what differs
(its pods' priority class, reclaimable pods, where suspend is written).

What the shared reconciler does (:mod:`connectors.k8s.jobframework`) it does for these kinds too: a Workload the
object no longer matches rewritten or made anew, a prebuilt Workload (``kueue.x-k8s.io/prebuilt-workload-name``)
adopted and used — the objects are indexed by the Workloads they name, so one arriving marks them —, the
``kueue.x-k8s.io/admission-gated-by`` gates followed. The Events Kueue's reconciler records on the object that a
Job's come from the log for (:mod:`connectors.k8s.job_events`) are reported here, as the log does not hold these
objects: ``FinishedWorkload`` once per finished Workload seen while the object is there (again after a restart,
as Kueue's reconcile of it would), and ``UpdatedAdmissionCheck`` whenever the pending checks' message of a
suspended queued object's Workload that holds quota changes. Of several Workloads an object controls it keeps one,
as a Job does, and deletes the others (``DeletedWorkload``). An object with a Kueue-managed ancestor (a JobSet
under a queued MPIJob, say) is a child, as a Job is (:meth:`~connectors.k8s.jobframework.JobReconciler._as_child`):
no Workload of its own, held suspended while the ancestor's is missing or not admitted.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from types import ModuleType
from typing import Any, TypeVar

import msgspec

from connectors.k8s import job_sync, podsetinfo, prebuilt
from connectors.k8s.client import KubeClient
from connectors.k8s.errors import NotFound
from connectors.k8s.job_events import (
    FINISHED_WORKLOAD,
    QUEUE_LABEL,
    STOPPED,
    UPDATED_ADMISSION_CHECK,
    checks_message,
)
from connectors.k8s.jobframework import JobFrameworkStats, JobReconciler, stored_workloads
from connectors.k8s.journal import Journal
from connectors.k8s.list_watch import Informer, ListedWhile
from connectors.k8s.owner_index import OwnerIndex, following
from connectors.k8s.workers import KeyedWorkers
from connectors.k8s.workload_body import compared_max_execution_seconds
from events import objects as o
from events import schema as ev
from kueue_es.scheduler.config import SchedulerConfig
from projections import gates
from projections.workloads import FINISHED, WorkloadInfo

J = TypeVar("J")


class WatchedJobIntegration(JobReconciler[J]):
    """A job kind of another project's API, with its own list+watch (module docstring)."""

    K: ModuleType
    """The kind's pure decisions (a module, or an object with the same names: a
    :class:`~connectors.k8s.kubeflow.TrainingKind`)."""
    LOG: Any
    """The kind's logger."""
    ITEM: type
    """What is read of one object (a msgspec Struct with ``key`` and ``metadata``)."""

    def __init__(self, client: KubeClient, journal: Journal, *, retry_s: float = 1.0,
                 append: Callable[[Sequence[ev.AnyEvent]], Awaitable[list[int]]] | None = None,
                 concurrency: int = 16, watch_timeout_s: int = 300, backoff_s: float = 1.0,
                 absent_retry_s: float = 10.0) -> None:
        super().__init__(client, journal, JobFrameworkStats(), self.LOG, retry_s=retry_s, append=append)
        self.concurrency = concurrency
        self.absent_retry_s = absent_retry_s
        self.informer: Informer[J] = ListedWhile(lambda: self.framework_on(self._config()), client, self.RESOURCE,
                                             self._decode, self._mark, what=f"{self.NOUN}s", log=self.log,
                                             watch_timeout_s=watch_timeout_s, backoff_s=backoff_s, optional=True)
        self.known: dict[str, J] = self.informer.known
        """The objects, as last listed or watched."""
        self.synced = self.informer.synced
        self._config_recorded = asyncio.Event()
        self.dirty: set[str] = set()
        self.owners = OwnerIndex(self._owner_key)
        """Which object controls which Workloads (any uid)."""
        self.workloads_of = self.owners.owned
        self._decoder = msgspec.json.Decoder(self.ITEM)
        self.named_by: dict[str, set[str]] = {}
        """Workload key -> the objects naming it as their prebuilt Workload (label or annotation)."""
        self._names: dict[str, tuple[str, ...]] = {}
        self._finished_told: set[str] = set()
        """Uids of the finished Workloads whose ``FinishedWorkload`` was reported, until they leave the log."""
        self._checks_told: dict[str, str] = {}
        """Object key -> the ``UpdatedAdmissionCheck`` message last reported on it."""
        self._signal = journal.subscribe()

    def reclaimable_pods(self, job: J) -> tuple[tuple[str, int], ...]:
        """None, unless the kind says otherwise: Kueue counts reclaimable pods for JobSets only among these kinds
        (MPIJobs, training jobs and Ray objects report none)."""
        return ()

    def pod_priority_class(self, job: J) -> str | None:
        """The kind's ``priority_class`` of the object (a kind whose pods' class needs more says so itself)."""
        return self.K.priority_class(job)

    def framework_on(self, config: SchedulerConfig) -> bool:
        """Whether the Configuration lists the kind's framework."""
        raise NotImplementedError

    def side_informers(self) -> list[Informer[Any]]:
        """Informers of other kinds the integration reads besides its own (run beside it; none by default)."""
        return []

    # --- running -------------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Watch the kind and reconcile every dirty object, up to ``concurrency`` at a time."""
        with following(self.mirror, self.owners, self._on_applied):
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self.informer.run(absent=self._wait_for_framework), name=f"k8s-{self.NOUN}s-watch")
                for informer in self.side_informers():
                    tg.create_task(informer.run(absent=self._wait_for_framework), name=f"k8s-{informer.what}-watch")
                await self.synced.wait()
                self.dirty |= self.workloads_of.keys()  # objects gone while no one watched
                await KeyedWorkers(self.reconcile_guarded, self.concurrency).run(
                    self._take, self._signal, self._retry.timeout)

    def _take(self) -> set[str]:
        keys = self.dirty | self._retry.due()
        self.dirty = set()
        return keys

    async def _wait_for_framework(self) -> None:
        """Until a Configuration is recorded (it may turn the framework on), or ``absent_retry_s`` passed (the
        CRD may be installed meanwhile)."""
        self._config_recorded.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._config_recorded.wait(), self.absent_retry_s)

    def _decode(self, raw: msgspec.Raw | bytes) -> J | None:
        try:
            return self._decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            self.log.warning(f"{self.NOUN} skipped: cannot decode", error=str(exc))
            return None

    def _mark(self, keys: set[str]) -> None:
        self._index_prebuilt(keys)
        if keys:
            self.dirty |= keys
            self._signal.set()

    def _on_applied(self, records: list[ev.Record]) -> None:
        """Mark the objects the records touch (see the module docstring)."""
        keys: set[str] = set()
        for r in records:
            keys |= self.owners.touched(r.event, self.known)
            if isinstance(r.event, (ev.ObjectUpserted, ev.ObjectDeleted)):
                keys |= self.named_by.get(r.event.key, set())
            if isinstance(r.event, ev.ObjectDeleted) and r.event.kind == "Workload":
                self._finished_told.discard(r.event.uid)  # gone: nothing more to tell of it
            if isinstance(r.event, ev.ConfigRecorded):
                self._config_recorded.set()
        self._mark(keys)

    def _index_prebuilt(self, keys: set[str]) -> None:
        """Index the objects of ``keys``, as they are now, by the prebuilt Workloads they name."""
        for key in keys:
            for wl_key in self._names.pop(key, ()):
                named = self.named_by.get(wl_key, set())
                named.discard(key)
                if not named:
                    self.named_by.pop(wl_key, None)
            job: Any = self.known.get(key)
            if job is None:
                continue
            names = tuple(f"{job.metadata.namespace}/{n}" for n in prebuilt.names_carried(job))
            if names:
                self._names[key] = names
                for wl_key in names:
                    self.named_by.setdefault(wl_key, set()).add(key)

    def _owner_key(self, obs: o.Workload) -> str | None:
        """The key of the object of this kind that controls ``obs`` (None: none does)."""
        owner = self.K.owner_of(obs)
        return f"{obs.metadata.namespace}/{owner[0]}" if owner is not None else None

    # --- one object ----------------------------------------------------------------------------------------

    def _owned(self, key: str) -> list[tuple[o.Workload, WorkloadInfo | None]]:
        """The Workloads an object of this name controls, as stored (and in the log, when it has them), by key."""
        return stored_workloads(self.mirror, self.workloads_of.get(key, set()))

    async def reconcile(self, key: str) -> None:
        config = self._config()
        if not self.framework_on(config):
            return
        job: Any = self.known.get(key)
        uid = job.metadata.uid if job is not None and not job.metadata.deletion_timestamp else None
        own: list[tuple[o.Workload, WorkloadInfo | None]] = []
        for obs, wl in self._owned(key):
            owner = self.K.owner_of(obs)
            if owner is not None and owner[1] == uid:
                own.append((obs, wl))
            elif owner is not None:
                await self._orphaned(obs, wl, gone=job is None or owner[1] != job.metadata.uid)
        if job is None or uid is None or self._namespace_left_out(job, config):
            return
        if await self._as_child(job, config):
            return  # a Kueue-managed ancestor's Workload is the one queued (a JobSet under a queued MPIJob)
        if not self._managed(job, config):
            return  # not Kueue's: no queue name (unless manageJobsWithoutQueueName), or a namespace left out
        prebuilt_name = prebuilt.name_in(job.metadata, self.state.gate(gates.WORKLOAD_IDENTIFIER_ANNOTATIONS))
        if prebuilt_name:
            await self._with_prebuilt(job, prebuilt_name)
            return
        if self.sliced(job):
            if any(wl is None for _, wl in own):
                return  # stored, not in the log yet: the mirror marks the object again once it is
            if await self._sliced(job, [(obs, wl) for obs, wl in own if wl is not None]):
                return  # an elastic object's pass, on its workload slices
        if not own:
            await self._without_workload(job, self.K.workload_name(
                job.metadata.name, job.metadata.uid, short=self.state.gate(gates.SHORT_WORKLOAD_NAMES)))
            return
        if any(wl is None for _, wl in own):
            return  # stored, not in the log yet: the mirror marks the object again once it is
        keep, extras = self._one_workload(job, [(obs, wl) for obs, wl in own if wl is not None])
        if extras:
            marker = ",".join(f"{w.metadata.uid}@{w.metadata.resource_version}" for w in extras)
            await self._once(key, f"extras:{marker}", job, self._delete_extras(job, extras))
            return  # as Kueue's reconciler: the rest waits for the Workloads that are left
        if keep is not None:
            await self._with_workload(job, *keep)

    def _one_workload(self, job: Any, own: list[tuple[o.Workload, WorkloadInfo]]
                      ) -> tuple[tuple[o.Workload, WorkloadInfo] | None, list[o.Workload]]:
        """The Workload the object keeps among its own, and the others, to delete (Kueue's ``ensureOneWorkload``:
        the oldest that matches it, else the oldest; :func:`connectors.k8s.job_sync.one_workload_of`). A kind
        whose pod sets are not compared keeps the oldest and deletes none."""
        mine = self.job_pod_sets(job, generated=True)
        if mine is None:
            return min(own, key=lambda p: (p[0].metadata.creation_timestamp or "", p[0].metadata.name)), []
        return job_sync.one_workload_of(self.state, mine, own, uid=job.metadata.uid, suspended=bool(job.spec.suspend),
                                        max_exec=self.max_exec(job))

    # --- what the shared reconciler reads of one -----------------------------------------------------------

    def finished(self, job: J) -> tuple[str, str] | None:
        return self.K.finished(job)

    def is_active(self, job: J) -> bool:
        return self.K.is_active(job)

    def pods_ready(self, job: J, wl: WorkloadInfo) -> bool:
        return self.K.pods_ready(job)

    def workload_for(self, raw: dict[str, Any], name: str) -> dict[str, Any]:
        meta = raw["metadata"]
        job: Any = self.known.get(f"{meta['namespace']}/{meta['name']}")
        counts = self.slice_counts(job) if job is not None and self.sliced(job) else None
        return self._sliced_workload(meta, self.K.workload_for(self.state, self._config().keys_to_copy, raw, name),
                                     counts)

    def job_pod_sets(self, job: J, *, generated: bool) -> list[o.PodSet] | None:
        pod_sets = getattr(self.K, "job_pod_sets", None)
        return pod_sets(job) if pod_sets is not None else None

    def max_exec(self, job: Any) -> int | None:
        return compared_max_execution_seconds(job.metadata.labels)

    def controller_ref(self, job: Any) -> dict[str, Any]:
        return self.K.controller_ref(job.metadata.name, job.metadata.uid)

    # --- the Events a Job's come from the log for --------------------------------------------------------------

    async def _release(self, job: J, wl: WorkloadInfo, obs: o.Workload) -> None:
        """``FinishedWorkload`` on the object, once per finished Workload, then the shared step."""
        if wl.phase == FINISHED and wl.uid not in self._finished_told:
            self._finished_told.add(wl.uid)
            await self._report(job, FINISHED_WORKLOAD, workload=wl.key)
        await super()._release(job, wl, obs)

    async def _checks_pending(self, job: Any, wl: WorkloadInfo) -> None:
        """``UpdatedAdmissionCheck`` on a suspended queued object whenever its Workload's pending checks' message
        changes (:func:`connectors.k8s.job_events.checks_message`), from the Workload as stored."""
        if wl.key in self.mirror.pending:
            return
        message = checks_message(wl) if job.spec.suspend and job.metadata.labels.get(QUEUE_LABEL) else ""
        if message == self._checks_told.get(job.key, ""):
            return
        if not message:
            self._checks_told.pop(job.key, None)
            return
        self._checks_told[job.key] = message
        await self._report(job, UPDATED_ADMISSION_CHECK, message=message)

    # --- actions -------------------------------------------------------------------------------------------

    async def _read(self, job: Any) -> dict[str, Any] | None:
        """The object as stored, when it is still the version the view holds (None: changed or gone meanwhile;
        the watch brings what it is now)."""
        try:
            raw = msgspec.json.decode(await self.client.get(self.RESOURCE, job.metadata.name, job.metadata.namespace))
        except NotFound:
            return None
        return raw if raw["metadata"]["resourceVersion"] == job.metadata.resource_version else None

    async def _read_to_create(self, job: J) -> dict[str, Any] | None:
        return await self._read(job)

    async def _read_current(self, job: J) -> dict[str, Any] | None:
        return await self._read(job)

    async def _start(self, job: Any, wl: WorkloadInfo, obs: o.Workload) -> None:
        admission = wl.admission  # the step's: the fold may evict ``wl`` while the object is read
        assert admission is not None
        raw = await self._read(job)
        if raw is None or self._evicted_meanwhile(job, wl, admission):
            return
        try:
            patch = self.K.start_patch(raw, self._start_infos(job, wl, obs))
        except (podsetinfo.MergeConflict, self.K.BadPodSets) as exc:
            await self._failed_to_start(job, wl, exc)
            return
        await self.client.patch(self.RESOURCE, job.metadata.name, patch, job.metadata.namespace)
        await self._started(job, wl, admission.cluster_queue)

    def _start_infos(self, job: Any, wl: WorkloadInfo, obs: o.Workload) -> list[podsetinfo.PodSetInfo]:
        """What starting the object on ``wl`` adds to each of its templates (the kind's ``start_infos``)."""
        return self.K.start_infos(self.state, wl, job)

    def stop_patch(self, raw: dict[str, Any], saved: list[o.PodSet]) -> dict[str, Any]:
        """The patch that suspends the object as stored with its templates restored from ``saved`` (the kind's
        ``stop_patch``)."""
        return self.K.stop_patch(raw, saved)

    async def _stop(self, job: Any, obs: o.Workload, why: str) -> None:
        """Suspend it and restore its templates as its Workload recorded them, in one write."""
        raw = await self._read(job)
        if raw is None:
            return
        patch = self.stop_patch(raw, self.restored_pod_sets(job, obs))
        await self.client.patch(self.RESOURCE, job.metadata.name, patch, job.metadata.namespace)
        self.stats.stopped += 1
        self.log.info(f"stopped {self.NOUN} and restored its templates", why=why, **{self.NOUN: job.key})
        await self._report(job, STOPPED, workload=obs.key, message=why)
