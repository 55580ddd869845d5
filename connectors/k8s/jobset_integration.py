"""Kueue's JobSet integration (``jobset.x-k8s.io/jobset``): a queued JobSet runs only while its Workload is admitted.

JobSets are another project's API and none of admission's inputs, so the log does not hold them: like the pod
integration this keeps its own list+watch of them (a relist after 410 Gone; while the JobSet CRD is not served,
none exist and the list is tried again now and then), and reads their Workloads from the mirror — the log's state,
and the Workload as the apiserver stores it. A JobSet is looked at again when it changes, and when anything the log
records touches a Workload a JobSet controls (found by its controller ownerReference), its namespace, a priority
class (a JobSet still without a Workload may wait for it) or the Configuration. Nothing is done while the
Configuration in force leaves ``jobset.x-k8s.io/jobset`` out of ``integrations.frameworks``.

Each pass does what Kueue's generic job reconciler does next (``jobframework/reconciler.go``), with the JobSet's
own pieces from :mod:`connectors.k8s.jobset`:

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
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import structlog

from connectors.k8s import job_selection, job_sync, podsetinfo
from connectors.k8s import jobset as js
from connectors.k8s import workload_finalizer as wf
from connectors.k8s.client import KubeClient
from connectors.k8s.errors import AlreadyExists, Conflict, NotFound
from connectors.k8s.integration_log import IntegrationLog
from connectors.k8s.job_events import CREATED_WORKLOAD, MISSING_WORKLOAD, STARTED, STOPPED, stop_message
from connectors.k8s.job_priority import (
    NOT_FOUND_REASON,
    PriorityClassNotFound,
    WorkloadPriorityClassNotFound,
    missing_class,
    missing_pod_class,
    not_found_message,
)
from connectors.k8s.job_sync import UPDATED_WORKLOAD
from connectors.k8s.jobs import OWNER_NOT_FOUND, OWNER_NOT_FOUND_MESSAGE, admission_shown
from connectors.k8s.journal import Journal
from connectors.k8s.list_watch import Informer
from connectors.k8s.owner_index import OwnerIndex, once
from connectors.k8s.pod_sync import pods_ready_transition
from connectors.k8s.resources import BY_KIND, JOBSETS
from connectors.k8s.workers import KeyedWorkers, Retries
from events import objects as o
from events import schema as ev
from events.errors import InvalidInput
from kueue_es.scheduler.config import DEFAULT, SchedulerConfig
from kueue_es.scheduler.config_record import in_force
from projections import gates
from projections.workloads import ADMITTED, FINISHED, WorkloadInfo

log = structlog.get_logger("kueue_es.k8s.jobsets")

WORKLOADS = BY_KIND["Workload"]
FAILED_TO_START = "FailedToStart"


@dataclass
class JobSetStats:
    created: int = 0
    started: int = 0
    stopped: int = 0
    finished: int = 0
    orphans: int = 0
    finalizers_removed: int = 0
    class_missing: int = 0
    reprioritised: int = 0
    requeued: int = 0
    conflicts: int = 0
    errors: int = 0
    invalid: list[str] = field(default_factory=list)
    """JobSets given no Workload: a label Kueue's webhook refuses (``max-exec-time-seconds``)."""
    failed_to_start: list[str] = field(default_factory=list)


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


class JobSetIntegration:
    def __init__(self, client: KubeClient, journal: Journal, *, retry_s: float = 1.0,
                 append: Callable[[Sequence[ev.AnyEvent]], Awaitable[list[int]]] | None = None,
                 concurrency: int = 16, watch_timeout_s: int = 300, backoff_s: float = 1.0,
                 absent_retry_s: float = 10.0) -> None:
        self.client = client
        self.journal = journal
        self.append = append or journal.append
        self.mirror = journal.mirror
        self.state = journal.mirror.state
        self.concurrency = concurrency
        self.absent_retry_s = absent_retry_s
        self.stats = JobSetStats()
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
        self._retry = Retries(retry_s)
        self._acted: dict[str, tuple[str, str]] = {}
        """JobSet key -> (action, JobSet resourceVersion) last done, so a stale view does not repeat it."""
        self._log = IntegrationLog(self.append, self.mirror, self.stats, kind=js.KIND, log=log)

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

    async def reconcile_guarded(self, key: str) -> None:
        await self._retry.attempt(self.reconcile, key, what="jobset reconcile", stats=self.stats, log=log,
                                  jobset=key, conflict_waits=True)

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

    def _config(self) -> SchedulerConfig:
        return in_force(self.state) or DEFAULT

    def _owned(self, key: str) -> list[tuple[o.Workload, WorkloadInfo | None]]:
        """The Workloads a JobSet of this name controls, as stored (and in the log, when it has them), by key."""
        out: list[tuple[o.Workload, WorkloadInfo | None]] = []
        for wl_key in sorted(self.workloads_of.get(key, ())):
            obs = self.mirror.workloads.get(wl_key)
            if obs is not None:
                out.append((obs, self.state.workloads.get(wl_key)))
        return out

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
        if not job_selection.is_managed(jobset.metadata.labels, job_selection.controller(
                jobset.metadata.owner_references), self.state.namespaces.get(jobset.metadata.namespace), config):
            return  # not Kueue's: no queue name (unless manageJobsWithoutQueueName), or a namespace left out
        if not own:
            await self._without_workload(jobset)
            return
        obs, wl = min(own, key=lambda p: (p[0].metadata.creation_timestamp or "", p[0].metadata.name))
        if wl is None:
            return  # stored, not in the log yet: the mirror marks the JobSet again once it is
        if self._acted.get(key, ("",))[0] == "create":
            del self._acted[key]  # seen: if it is ever deleted, it is created again
        running = not jobset.spec.suspend
        done = js.finished(jobset)
        if wl.phase == FINISHED or wf.deleting(obs):
            action = wf.release(obs, wl, job_running=running and done is None)
            if action == wf.STOP:
                await self._once(key, "stop", jobset, self._stop(jobset, obs, wf.WORKLOAD_DELETED))
            elif action == wf.REMOVE:
                await self._unfinalize(obs)
            return
        if done is not None:
            reason, message = done
            await self._append_once(wl, ev.WorkloadFinished(time=_now(), key=wl.key, uid=wl.uid, reason=reason,
                                                            message=message or f"Job {reason.lower()}"))
            return
        if await self._in_step(jobset, obs, wl, running=running):
            return  # as Kueue's reconciler: the rest waits for the Workload that shows it
        reclaimable = js.reclaimable_pods(jobset)
        if reclaimable != wl.reclaimable:
            await self._append_once(wl, ev.ReclaimablePodsChanged(
                time=_now(), key=wl.key, uid=wl.uid,
                reclaimable_pods=[o.ReclaimablePod(name=n, count=c) for n, c in reclaimable]))
            return  # as Kueue's reconciler: the rest waits for the Workload that shows them
        if self.state.waits_for_pods_ready:
            change = pods_ready_transition(wl, running=running, ready=js.pods_ready(jobset))
            if change is not None:
                await self._append_once(wl, ev.PodsReadyChanged(time=_now(), key=wl.key, uid=wl.uid,
                                                                ready=change[0], reason=change[1]))
        admitted = wl.phase == ADMITTED and not wl.evicted and wl.active
        if admitted and not running:
            if admission_shown(wl, obs):
                await self._once(key, "start", jobset, self._start(jobset, wl))
        elif not admitted and running:
            await self._once(key, "stop", jobset, self._stop(jobset, obs, stop_message(wl)))
        elif wl.evicted and wl.reserving and not wl.job_stopped and not js.is_active(jobset):
            await self._append_once(wl, ev.JobStopped(time=_now(), key=wl.key, uid=wl.uid))

    async def _without_workload(self, jobset: js.JobSet) -> None:
        """A managed JobSet with no Workload of its own: suspend it, then make it one (module docstring)."""
        if js.finished(jobset) is not None:
            return
        key = jobset.key
        name = js.workload_name(jobset.metadata.name, jobset.metadata.uid,
                                short=self.state.gate(gates.SHORT_WORKLOAD_NAMES))
        if not jobset.spec.suspend:
            await self._once(key, "suspend", jobset, self._suspend_only(jobset, name))
            return
        if js.is_active(jobset):
            return  # Kueue waits for the pods of a suspended JobSet to go first
        labels = jobset.metadata.labels
        pod_class = js.pods_priority_class(jobset)
        missing = missing_class(self.state, labels)
        if missing is not None:
            await self._once(key, "class-missing", jobset, self._class_missing(jobset, missing))
        elif missing_pod_class(self.state, labels, pod_class) is not None:
            log.warning("PriorityClass not found: no workload created", jobset=key, priority_class=pod_class)
        else:
            await self._once(key, "create", jobset, self._create_workload(jobset, name))

    async def _in_step(self, jobset: js.JobSet, obs: o.Workload, wl: WorkloadInfo, *, running: bool) -> bool:
        """Give the Workload the priority class and queue the JobSet's labels name now, as for a Job
        (:mod:`connectors.k8s.job_sync`); whether the pass ends here."""
        if wl.key in self.mirror.pending:
            return False  # decided from the Workload as stored: wait until it shows every decision
        key, rv = jobset.key, obs.metadata.resource_version
        pod_class = js.pods_priority_class(jobset)
        try:
            priority = job_sync.priority_change(self.state, jobset.metadata.labels, pod_class, obs, wl)
        except (WorkloadPriorityClassNotFound, PriorityClassNotFound) as exc:
            log.warning("the jobset's priority class is not there: its workload keeps its priority", jobset=key,
                        workload=obs.key, error=str(exc))
            return True  # as Kueue's reconcile, which fails on the lookup: the rest waits for the class
        if priority is not None:
            await self._once(key, f"priority@{rv}", jobset, self._set_priority(jobset, obs, *priority))
            return True
        queue = job_sync.queue_change(jobset.metadata.labels, obs, wl, running=running)
        if queue is not None:
            await self._once(key, f"queue@{rv}", jobset, self._set_queue(jobset, obs, queue))
            return True
        return False

    async def _once(self, key: str, action: str, jobset: js.JobSet, work: Any) -> None:
        """Run ``work`` unless the same action already ran on this very version of the JobSet."""
        await once(self._acted, key, (action, jobset.metadata.resource_version), work)

    async def _append_once(self, wl: WorkloadInfo, event: ev.AnyEvent) -> bool:
        return await self._log.append_once(wl, event)

    async def _report(self, jobset: js.JobSet, action: str, **what: str) -> None:
        await self._log.report(jobset.key, jobset.metadata.uid, action, **what)

    # --- actions -------------------------------------------------------------------------------------------

    async def _read(self, jobset: js.JobSet) -> dict[str, Any] | None:
        """The JobSet as stored, when it is still the version the view holds (None: changed or gone meanwhile;
        the watch brings what it is now)."""
        try:
            raw = msgspec.json.decode(await self.client.get(JOBSETS, jobset.metadata.name, jobset.metadata.namespace))
        except NotFound:
            return None
        return raw if raw["metadata"]["resourceVersion"] == jobset.metadata.resource_version else None

    async def _create_workload(self, jobset: js.JobSet, name: str) -> None:
        raw = await self._read(jobset)
        if raw is None:
            return
        try:
            body = js.workload_for(self.state, self._config().keys_to_copy, raw, name)
        except WorkloadPriorityClassNotFound as exc:
            await self._class_missing(jobset, exc.name)
            return
        except PriorityClassNotFound as exc:
            log.warning("PriorityClass not found: no workload created", jobset=jobset.key, priority_class=exc.name)
            return
        except InvalidInput as exc:
            self.stats.invalid.append(jobset.key)
            log.error("jobset refused: no workload created", jobset=jobset.key, error=str(exc))
            return
        try:
            await self.client.create(WORKLOADS, body, jobset.metadata.namespace)
        except AlreadyExists:
            return
        self.stats.created += 1
        log.info("created workload", jobset=jobset.key, workload=name)
        await self._report(jobset, CREATED_WORKLOAD, workload=f"{jobset.metadata.namespace}/{name}")

    async def _class_missing(self, jobset: js.JobSet, wpc_name: str) -> None:
        self.stats.class_missing += 1
        log.warning("WorkloadPriorityClass not found: no workload created", jobset=jobset.key, priority_class=wpc_name)
        await self._report(jobset, NOT_FOUND_REASON, message=not_found_message(wpc_name))

    async def _suspend_only(self, jobset: js.JobSet, name: str) -> None:
        await self.client.patch(JOBSETS, jobset.metadata.name, {
            "metadata": {"resourceVersion": jobset.metadata.resource_version}, "spec": {"suspend": True}},
            jobset.metadata.namespace)
        log.info("suspended a jobset that has no workload yet", jobset=jobset.key)
        await self._report(jobset, STOPPED, workload=f"{jobset.metadata.namespace}/{name}", message=MISSING_WORKLOAD)

    async def _start(self, jobset: js.JobSet, wl: WorkloadInfo) -> None:
        assert wl.admission is not None
        raw = await self._read(jobset)
        if raw is None:
            return
        try:
            patch = js.start_patch(raw, js.start_infos(self.state, wl, jobset))
        except (podsetinfo.MergeConflict, js.BadPodSets) as exc:
            self.stats.failed_to_start.append(jobset.key)
            await self._append_once(wl, ev.WorkloadFinished(time=_now(), key=wl.key, uid=wl.uid, reason=FAILED_TO_START,
                                                            message=f"Failed to start the job: {exc}"))
            return
        await self.client.patch(JOBSETS, jobset.metadata.name, patch, jobset.metadata.namespace)
        self.stats.started += 1
        log.info("started jobset", jobset=jobset.key, workload=wl.key, cluster_queue=wl.admission.cluster_queue)
        await self._report(jobset, STARTED, workload=wl.key, cluster_queue=wl.admission.cluster_queue)

    async def _stop(self, jobset: js.JobSet, obs: o.Workload, why: str) -> None:
        """Suspend the JobSet and restore its templates as its Workload recorded them, in one write."""
        raw = await self._read(jobset)
        if raw is None:
            return
        await self.client.patch(JOBSETS, jobset.metadata.name, js.stop_patch(raw, list(obs.spec.pod_sets)),
                                jobset.metadata.namespace)
        self.stats.stopped += 1
        log.info("stopped jobset and restored its templates", jobset=jobset.key, why=why)
        await self._report(jobset, STOPPED, workload=obs.key, message=why)

    async def _set_priority(self, jobset: js.JobSet, obs: o.Workload, ref: dict[str, str] | None,
                            priority: int | None) -> None:
        await self.client.patch(WORKLOADS, obs.metadata.name, job_sync.priority_patch(obs, ref, priority),
                                obs.metadata.namespace)
        self.stats.reprioritised += 1
        await self._report(jobset, UPDATED_WORKLOAD, workload=obs.key,
                           message=job_sync.priority_updated_message(obs.key))

    async def _set_queue(self, jobset: js.JobSet, obs: o.Workload, queue: str) -> None:
        await self.client.patch(WORKLOADS, obs.metadata.name, job_sync.queue_patch(obs, queue), obs.metadata.namespace)
        self.stats.requeued += 1
        log.info("moved the workload to its jobset's queue", jobset=jobset.key, workload=obs.key, queue=queue)

    async def _orphaned(self, obs: o.Workload, wl: WorkloadInfo | None, *, gone: bool) -> None:
        """A Workload whose JobSet is gone (``gone``: also one of an earlier JobSet of the same name) or being
        deleted: finished ``OwnerNotFound``, its finalizer taken off, and — once its JobSet is gone — deleted."""
        finish, remove = wf.orphan_steps(obs, wl, finish_orphaned=self.state.gate(gates.FINISH_ORPHANED_WORKLOADS))
        if finish and wl is not None:
            await self._append_once(wl, ev.WorkloadFinished(time=_now(), key=wl.key, uid=wl.uid, reason=OWNER_NOT_FOUND,
                                                            message=OWNER_NOT_FOUND_MESSAGE))
        rv = await self._unfinalize(obs) if remove else obs.metadata.resource_version
        if not gone or rv is None or wf.deleting(obs):
            return
        try:
            await self.client.delete(WORKLOADS, obs.metadata.name, obs.metadata.namespace, uid=obs.metadata.uid)
        except (NotFound, Conflict):
            return
        self.stats.orphans += 1
        log.info("deleted the workload of a deleted jobset", workload=obs.key)

    async def _unfinalize(self, obs: o.Workload) -> str | None:
        rv = await wf.unfinalize(self.client, obs)
        if wf.holds(obs) and rv is not None:
            self.stats.finalizers_removed += 1
            log.info("took the finalizer off the workload", workload=obs.key, deleting=wf.deleting(obs))
        return rv


def _jobset_key(obs: o.Workload) -> str | None:
    """The key of the JobSet that controls ``obs`` (None: no JobSet does)."""
    owner = js.owner_of(obs)
    return f"{obs.metadata.namespace}/{owner[0]}" if owner is not None else None


def _now() -> int:
    return int(time.time() * 1000)
