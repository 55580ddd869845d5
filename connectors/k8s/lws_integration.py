"""Kueue's LeaderWorkerSet integration (``leaderworkerset.x-k8s.io/leaderworkerset``): each group of a queued
LeaderWorkerSet runs on a Workload made for it, its pods held by the pod integration until that is admitted.

LeaderWorkerSets are another project's API and none of admission's inputs, so the log does not hold them: as the
JobSet and MPIJob integrations do (:mod:`connectors.k8s.watched_jobs`), this keeps its own list+watch of them
(nothing listed while the Configuration leaves the framework out; while the CRD is not served none exist), reads
their Workloads from the mirror, and looks at one again when it changes or anything the log records touches a
Workload it controls, its namespace or the Configuration. It takes the two parts of Kueue's LeaderWorkerSet
reconcilers (``pkg/controller/jobs/leaderworkerset``), with the decisions of :mod:`connectors.k8s.leaderworkerset`:

* **the LeaderWorkerSet reconciler**: for one Kueue holds (a queue name, or ``manageJobsWithoutQueueName``, in a
  managed namespace), one Workload per group index is created (``CreatedWorkload``), those kept follow the set's
  queue name while they hold no quota (Kueue's #4932: a set none of whose groups is ready may change queue; no
  Event) and its WorkloadPriorityClass label (Kueue's ``UpdateWorkloadPriority``: ``UpdatedWorkload``; a class
  missing is one Warning ``WorkloadPriorityClassNotFound`` on the set per set version, no Workload made or
  moved), those of indexes beyond the group count are deleted — the finalizer taken off first, as Kueue
  does (its pods, being
  deleted with the group, are stopped and let go by the pod integration); the Workloads of a LeaderWorkerSet that
  is gone are deleted the same way, as the garbage collector would through their ownerReference;
* **its pod reconciler**: the pods the LeaderWorkerSet controller makes (label ``leaderworkerset.sigs.k8s.io/name``;
  held at creation by the Pod webhook through ``kueue.x-k8s.io/pod-suspending-parent``) are watched too, and
  each, once it carries its group index, made a member of its group's prebuilt pod group
  (:func:`connectors.k8s.leaderworkerset.pod_marks`); from then on the pod integration runs the group on its
  Workload (:mod:`connectors.k8s.pod_prebuilt`: the group's pods made its owners, ungated once it is admitted,
  never finishing, being a serving group). A pod of such a set that ended, or is being deleted, before that loses
  Kueue's finalizer, as Kueue's pod reconciler lets it go. The pods of a set that is gone (deleted with
  ``--cascade=orphan``, or its CRD no longer served) have Kueue's scheduling gates lifted, their finalizer
  kept, as Kueue's reconciler does with no LeaderWorkerSet: nothing would ever admit them.

The reconciler's Events go through the log (``JobActed`` of kind LeaderWorkerSet), recorded on the set from
Kueue's recorder ``leaderworkerset.x-k8s.io/leaderworkerset-kueue-controller``. On a worker, a MultiKueue
manager's copy of a set runs on the Workloads that manager copied (:func:`connectors.k8s.leaderworkerset.plan`).
On a manager, where the set (which has no managedBy) is run by its controller too, its pods stay gated: the pod
integration starts no pod whose Workload has a MultiKueue check (:func:`connectors.k8s.pod_sync.runs_on_a_worker`).
Not done here (see docs/kubernetes.md): the Events of the pod reconciler.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import structlog

from connectors.k8s import job_selection, job_sync
from connectors.k8s import leaderworkerset as lw
from connectors.k8s import workload_finalizer as wf
from connectors.k8s.client import KubeClient
from connectors.k8s.errors import AlreadyExists, Conflict, NotFound
from connectors.k8s.integration_log import IntegrationLog, creation_latency_ms
from connectors.k8s.job_events import CREATED_WORKLOAD, QUEUE_LABEL
from connectors.k8s.job_priority import (
    NOT_FOUND_REASON,
    PriorityClassNotFound,
    WorkloadPriorityClassNotFound,
    not_found_message,
)
from connectors.k8s.jobframework import admission_gate_change, admission_gate_patch
from connectors.k8s.journal import Journal
from connectors.k8s.list_watch import Informer, ListedWhile
from connectors.k8s.owner_index import OwnerIndex, following, once
from connectors.k8s.pod_roles import GROUP_LABEL
from connectors.k8s.pod_webhook import ADMISSION_GATE
from connectors.k8s.pod_webhook import FINALIZER as POD_FINALIZER
from connectors.k8s.podsetinfo import TOPOLOGY_GATE
from connectors.k8s.resources import BY_KIND, LEADER_WORKER_SETS
from connectors.k8s.workers import KeyedWorkers, Retries
from events import objects as o
from events import schema as ev
from events.errors import InvalidInput
from kueue_es.scheduler.config import DEFAULT, SchedulerConfig
from kueue_es.scheduler.config_record import in_force
from projections import gates
from projections.workloads import FINISHED

log = structlog.get_logger("kueue_es.k8s.leaderworkersets")

WORKLOADS = BY_KIND["Workload"]
PODS = BY_KIND["Pod"]
SET_PREFIX, POD_PREFIX = "lws/", "pod/"
"""The work keys: a LeaderWorkerSet's, a pod's."""


class LeaderWorkerSet(o.NamespacedView):
    """A LeaderWorkerSet as listed: its metadata, spec and status kept as read (the Workloads are built from
    them)."""

    spec: dict[str, Any] = {}
    status: dict[str, Any] = {}

    def raw(self) -> dict[str, Any]:
        return {"metadata": msgspec.to_builtins(self.metadata), "spec": self.spec, "status": self.status}


class _PodStatus(o.View):
    phase: str = ""


class _PodSpec(o.View):
    scheduling_gates: list[dict[str, Any]] = []


class SetPod(o.NamespacedView):
    """What is read of a pod of a LeaderWorkerSet."""

    spec: _PodSpec = _PodSpec()
    status: _PodStatus = _PodStatus()

    @property
    def gated(self) -> bool:
        """Still held by Kueue's scheduling gate."""
        return any(g.get("name") == ADMISSION_GATE for g in self.spec.scheduling_gates)

    def without_kueue_gates(self) -> list[dict[str, Any]] | None:
        """Its scheduling gates less Kueue's (admission, topology); None when it has none of Kueue's."""
        kept = [g for g in self.spec.scheduling_gates if g.get("name") not in (ADMISSION_GATE, TOPOLOGY_GATE)]
        return kept if len(kept) < len(self.spec.scheduling_gates) else None


@dataclass
class LwsStats:
    created: int = 0
    deleted: int = 0
    pods_marked: int = 0
    pods_released: int = 0
    pods_ungated: int = 0
    conflicts: int = 0
    errors: int = 0
    invalid: int = 0
    class_missing: int = 0
    reprioritised: int = 0
    finished: int = 0
    """Never counted: what :class:`~connectors.k8s.integration_log.IntegrationLog` counts for the job kinds."""


class LeaderWorkerSetIntegration:
    """The LeaderWorkerSet reconciler and its pod reconciler (module docstring)."""

    KIND = lw.KIND
    ITEM = LeaderWorkerSet

    def __init__(self, client: KubeClient, journal: Journal, *, retry_s: float = 1.0,
                 append: Callable[[Sequence[ev.AnyEvent]], Awaitable[list[int]]] | None = None,
                 concurrency: int = 16, watch_timeout_s: int = 300, backoff_s: float = 1.0,
                 absent_retry_s: float = 10.0) -> None:
        self.client = client
        self.mirror = journal.mirror
        self.state = journal.mirror.state
        self.append = append or journal.append
        self.stats = LwsStats()
        self._log = IntegrationLog(self.append, self.mirror, self.stats, kind=lw.KIND, log=log)
        self.concurrency = concurrency
        self.absent_retry_s = absent_retry_s
        on = lambda: self._config().manages_leaderworkersets  # noqa: E731
        self.sets: Informer[LeaderWorkerSet] = ListedWhile(
            on, client, LEADER_WORKER_SETS, self._decoder(LeaderWorkerSet), self._sets_changed, what="leaderworkersets",
            log=log, watch_timeout_s=watch_timeout_s, backoff_s=backoff_s, optional=True)
        self.pods: Informer[SetPod] = ListedWhile(
            on, client, PODS, self._decoder(SetPod), self._pods_changed, what="leaderworkerset pods", log=log,
            label_selector=lw.SET_NAME_LABEL, watch_timeout_s=watch_timeout_s, backoff_s=backoff_s)
        self.known = self.sets.known
        """The LeaderWorkerSets, as last listed or watched."""
        self.owners = OwnerIndex(self._owner_key)
        self.dirty: set[str] = set()
        self._retry = Retries(retry_s)
        self._signal = journal.subscribe()
        self._config_recorded = asyncio.Event()
        self._class_warned: dict[str, tuple[str, str]] = {}
        """Per set: the missing WorkloadPriorityClasses last reported and the set's version then."""

    def _config(self) -> SchedulerConfig:
        return in_force(self.state) or DEFAULT

    # --- running -------------------------------------------------------------------------------------------

    async def run(self) -> None:
        with following(self.mirror, self.owners, self._on_applied):
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self.sets.run(absent=self._wait_for_framework), name="k8s-leaderworkersets-watch")
                tg.create_task(self.pods.run(absent=self._wait_for_framework), name="k8s-lws-pods-watch")
                await self.sets.synced.wait()
                self.dirty |= {SET_PREFIX + k for k in self.owners.owned}  # sets gone while no one watched
                await KeyedWorkers(self._guarded, self.concurrency).run(self._take, self._signal, self._retry.timeout)

    async def _wait_for_framework(self) -> None:
        self._config_recorded.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._config_recorded.wait(), self.absent_retry_s)

    def _take(self) -> set[str]:
        keys = self.dirty | self._retry.due()
        self.dirty = set()
        return keys

    @staticmethod
    def _decoder(kind: type) -> Callable[[msgspec.Raw | bytes], Any]:
        decoder = msgspec.json.Decoder(kind)

        def decode(raw: msgspec.Raw | bytes) -> Any:
            try:
                return decoder.decode(raw)
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                log.warning("skipped: cannot decode", kind=kind.__name__, error=str(exc))
                return None
        return decode

    def _mark(self, keys: set[str]) -> None:
        if keys:
            self.dirty |= keys
            self._signal.set()

    def _sets_changed(self, keys: set[str]) -> None:
        """A set changed: it, and its pods (which may now be marked)."""
        names = {(k.partition("/")[0], k.partition("/")[2]) for k in keys}
        pods = {k for k, p in self.pods.known.items()
                if (p.metadata.namespace, p.metadata.labels.get(lw.SET_NAME_LABEL, "")) in names}
        self._mark({SET_PREFIX + k for k in keys} | {POD_PREFIX + k for k in pods})

    def _pods_changed(self, keys: set[str]) -> None:
        self._mark({POD_PREFIX + k for k in keys})

    def _on_applied(self, records: list[ev.Record]) -> None:
        keys: set[str] = set()
        for r in records:
            keys |= self.owners.touched(r.event, self.known)
            if isinstance(r.event, ev.ConfigRecorded):
                self._config_recorded.set()
        self._mark({SET_PREFIX + k for k in keys})

    def _owner_key(self, obs: o.Workload) -> str | None:
        owner = lw.owner_of(obs)
        return f"{obs.metadata.namespace}/{owner[0]}" if owner is not None else None

    async def _guarded(self, key: str) -> None:
        await self._retry.attempt(self.reconcile, key, what="leaderworkerset reconcile", stats=self.stats, log=log,
                                  conflict_waits=True, work=key)

    async def reconcile(self, key: str) -> None:
        if not self._config().manages_leaderworkersets:
            return
        if key.startswith(SET_PREFIX):
            await self.reconcile_set(key.removeprefix(SET_PREFIX))
        elif key.startswith(POD_PREFIX):
            await self.reconcile_pod(key.removeprefix(POD_PREFIX))

    # --- the LeaderWorkerSet reconciler --------------------------------------------------------------------

    async def reconcile_set(self, key: str) -> None:
        """Create the missing group Workloads of the set, delete those of no group (module docstring)."""
        lws = self.known.get(key)
        alive = lws is not None and not lws.metadata.deletion_timestamp
        own: list[o.Workload] = []
        for wl_key in sorted(self.owners.owned.get(key, set())):
            obs = self.mirror.workloads.get(wl_key)
            owner = lw.owner_of(obs) if obs is not None else None
            if obs is None or owner is None:
                continue
            if lws is not None and owner[1] == lws.metadata.uid:
                own.append(obs)
            elif lws is None or owner[1] != lws.metadata.uid:
                await self._delete(obs, why="its leaderworkerset is gone")
        if lws is None or not alive or not self._managed(lws):
            self._class_warned.pop(key, None)
            return
        raw = lws.raw()
        short = self.state.gate(gates.SHORT_WORKLOAD_NAMES)
        try:
            create, keep, delete = lw.plan(raw, [w.metadata.name for w in own], short=short)
        except InvalidInput as exc:  # Kueue's reconcile fails so, its Workloads left as they are
            self.stats.invalid += 1
            log.error("leaderworkerset refused: its workloads left as they are", leaderworkerset=lws.key,
                      error=str(exc))
            return
        by_name = {w.metadata.name: w for w in own}
        for name in delete:
            await self._delete(by_name[name], why="its group is gone (scaled down)")
        missing: set[str] = set()
        for name, index in create:
            missing |= await self._create(lws, raw, name, index)
        for name in keep:
            if await self._follow_queue(lws, by_name[name]):
                continue  # the Workload's new version marks the set again: the rest follows then
            missing |= await self._follow_priority(lws, raw, by_name[name])
            await self._follow_admission_gate(lws, by_name[name])
        await self._warn_missing(lws, missing)

    async def _warn_missing(self, lws: LeaderWorkerSet, missing: set[str]) -> None:
        """One Warning ``WorkloadPriorityClassNotFound`` on the set per class missing, however many groups
        looked it up (Kueue's #13820), and once for the set's version: a pass a Workload's change brings (a
        kept Workload's every status change marks the set) adds none, as Kueue's repeats of one Event are
        seen as one (the job kinds' ``_once`` per job version). A new version of the set, or a class found and
        then gone again, is reported again."""
        if not missing:
            self._class_warned.pop(lws.key, None)
            return
        marker = (",".join(sorted(missing)), lws.metadata.resource_version)
        await once(self._class_warned, lws.key, marker, self._report_missing(lws, missing))

    async def _report_missing(self, lws: LeaderWorkerSet, missing: set[str]) -> None:
        for wpc in sorted(missing):
            await self._log.report(lws.key, lws.metadata.uid, NOT_FOUND_REASON,
                                   message=not_found_message(wpc))

    def _managed(self, lws: LeaderWorkerSet) -> bool:
        meta = lws.metadata
        return job_selection.is_managed(meta.labels, job_selection.controller(meta.owner_references),
                                        self.state.namespaces.get(meta.namespace), self._config())

    async def _create(self, lws: LeaderWorkerSet, raw: dict[str, Any], name: str, index: int) -> set[str]:
        """Create group ``index``'s Workload; the WorkloadPriorityClass found missing instead, if one is (for
        :meth:`reconcile_set`'s Warning)."""
        try:
            body = lw.workload_for(self.state, self._config().keys_to_copy, raw, name, index)
        except (WorkloadPriorityClassNotFound, PriorityClassNotFound) as exc:
            self.stats.class_missing += 1
            log.warning("priority class not found: no workload created yet", leaderworkerset=lws.key, error=str(exc))
            # the class arriving in the log marks the set again
            return {exc.name} if isinstance(exc, WorkloadPriorityClassNotFound) else set()
        except InvalidInput as exc:
            self.stats.invalid += 1
            log.error("leaderworkerset refused: no workload created", leaderworkerset=lws.key, error=str(exc))
            return set()
        try:
            created = await self.client.create(WORKLOADS, body, lws.metadata.namespace)
        except AlreadyExists:
            return set()
        self.stats.created += 1
        log.info("created workload", workload=name, group=index, leaderworkerset=lws.key)
        await self._log.report(lws.key, lws.metadata.uid, CREATED_WORKLOAD,
                               workload=f"{lws.metadata.namespace}/{name}",
                               creation_latency_ms=creation_latency_ms(lws.metadata, created))
        return set()

    async def _follow_queue(self, lws: LeaderWorkerSet, obs: o.Workload) -> bool:
        """Give a group's Workload the set's queue name when it differs, as Kueue's reconciler does with the
        Workloads it keeps (``updateWorkload``; a queue change is allowed while no group is ready, #4932), conditioned
        on the Workload's resourceVersion, with no Event; not while it holds quota or is finished (the apiserver
        refuses the change then). Whether it was written."""
        wl = self.state.workloads.get(obs.key)
        queue = lws.metadata.labels.get(QUEUE_LABEL, "")
        if wl is None or queue == obs.spec.queue_name or wl.reserving or wl.phase == FINISHED or wf.deleting(obs):
            return False
        try:
            await self.client.patch(WORKLOADS, obs.metadata.name, job_sync.queue_patch(obs, queue),
                                    obs.metadata.namespace)
        except (NotFound, Conflict):
            return True  # gone, or changed since: its next version marks the set again
        log.info("leaderworkerset changed queue, moved the workload", workload=obs.key, queue=queue,
                 leaderworkerset=lws.key)
        return True

    async def _follow_priority(self, lws: LeaderWorkerSet, raw: dict[str, Any], obs: o.Workload) -> set[str]:
        """Give a group's Workload the WorkloadPriorityClass the set's label names now, as Kueue's reconciler does
        with the Workloads it keeps (:func:`connectors.k8s.job_sync.priority_change`); a class the log does not
        hold leaves the Workload as it is until it arrives (which marks the set again), and is returned (for
        :meth:`reconcile_set`'s Warning)."""
        wl = self.state.workloads.get(obs.key)
        if wl is None:
            return set()
        try:
            change = job_sync.priority_change(self.state, lws.metadata.labels, lw.pod_priority_class(raw), obs, wl)
        except (WorkloadPriorityClassNotFound, PriorityClassNotFound) as exc:
            log.warning("priority class not found: the workload keeps its priority", workload=obs.key,
                        leaderworkerset=lws.key, error=str(exc))
            return {exc.name} if isinstance(exc, WorkloadPriorityClassNotFound) else set()
        if change is None:
            return set()
        await self.client.patch(WORKLOADS, obs.metadata.name, job_sync.priority_patch(obs, *change),
                                obs.metadata.namespace)
        self.stats.reprioritised += 1
        log.info("gave the workload its leaderworkerset's priority class", workload=obs.key, leaderworkerset=lws.key)
        await self._log.report(lws.key, lws.metadata.uid, job_sync.UPDATED_WORKLOAD, workload=obs.key,
                               message=job_sync.priority_updated_message(obs.key))
        return set()

    async def _follow_admission_gate(self, lws: LeaderWorkerSet, obs: o.Workload) -> None:
        """Under ``AdmissionGatedBy``, take from a group's Workload the admission gates the set dropped, as Kueue's
        LeaderWorkerSet reconciler does (a gate is never added: :func:`connectors.k8s.jobframework.admission_gate_change`),
        conditioned on the Workload's resourceVersion; ``UpdatedWorkload`` on the set, as Kueue records it."""
        change = admission_gate_change(self.state, lws.metadata.annotations, obs)
        if change is None:
            return
        with contextlib.suppress(NotFound, Conflict):  # gone, or changed since: its next version marks the set again
            await self.client.patch(WORKLOADS, obs.metadata.name, admission_gate_patch(obs, change[0]),
                                    obs.metadata.namespace)
            log.info("synced the workload's admission gate with its leaderworkerset's", workload=obs.key,
                     gate=change[0], leaderworkerset=lws.key)
            await self._log.report(lws.key, lws.metadata.uid, job_sync.UPDATED_WORKLOAD, workload=obs.key,
                                   message=job_sync.admission_gate_updated_message(change[0]))

    async def _delete(self, obs: o.Workload, *, why: str) -> None:
        """Take Kueue's finalizer off and delete the Workload, as Kueue's reconciler does with one of no group."""
        if wf.holds(obs):
            if await wf.unfinalize(self.client, obs) is None:
                return
        if wf.deleting(obs):
            return
        try:
            await self.client.delete(WORKLOADS, obs.metadata.name, obs.metadata.namespace, uid=obs.metadata.uid)
        except (NotFound, Conflict):
            return
        self.stats.deleted += 1
        log.info("deleted workload", workload=obs.key, why=why)

    # --- its pod reconciler --------------------------------------------------------------------------------

    async def reconcile_pod(self, key: str) -> None:
        pod = self.pods.known.get(key)
        if pod is None or pod.metadata.annotations.get(lw.SUSPENDING_PARENT) != lw.FRAMEWORK_NAME:
            return
        meta = pod.metadata
        if pod.status.phase in ("Succeeded", "Failed") or meta.deletion_timestamp:
            if POD_FINALIZER in meta.finalizers:
                await self._release_pod(pod)
            return
        name = meta.labels.get(lw.SET_NAME_LABEL, "")
        lws = self.known.get(f"{meta.namespace}/{name}")
        if lws is None:
            if pod.without_kueue_gates() is not None and await self._set_gone(meta.namespace, name):
                await self._ungate_pod(pod)
            return
        patch = lw.pod_marks(meta, lws.raw() if lws is not None else None,
                             short=self.state.gate(gates.SHORT_WORKLOAD_NAMES), gated=pod.gated,
                             in_annotations=self.state.gate(gates.WORKLOAD_IDENTIFIER_ANNOTATIONS))
        if patch is None:
            return
        patch["metadata"]["resourceVersion"] = meta.resource_version
        await self.client.patch(PODS, meta.name, patch, meta.namespace)
        self.stats.pods_marked += 1
        marks = patch["metadata"]
        log.info("made the pod a member of its group", pod=key,
                 group=(marks.get("annotations") or {}).get(GROUP_LABEL) or marks["labels"].get(GROUP_LABEL),
                 queue=marks["labels"].get(QUEUE_LABEL))

    async def _set_gone(self, namespace: str, name: str) -> bool:
        """Whether the apiserver has no LeaderWorkerSet ``name`` (one the sets' watch has not shown: the pods'
        watch may run ahead of it). Kueue's reconciler reads the set by name, whatever its uid."""
        try:
            await self.client.get(LEADER_WORKER_SETS, name, namespace)
        except NotFound:
            return True
        return False

    async def _ungate_pod(self, pod: SetPod) -> None:
        """Lift Kueue's scheduling gates from a pod whose LeaderWorkerSet is gone, keeping its finalizer, as
        Kueue's reconciler does (newest ``leaderworkerset_reconciler_test.go``, "should ungate pods if
        leaderworkerset is deleted"); conditioned on the pod's resourceVersion."""
        meta = pod.metadata
        gates = pod.without_kueue_gates()
        with contextlib.suppress(NotFound):
            await self.client.patch(PODS, meta.name, {"metadata": {"resourceVersion": meta.resource_version},
                                                      "spec": {"schedulingGates": gates or None}},
                                    meta.namespace)
            self.stats.pods_ungated += 1
            log.info("ungated a pod of a leaderworkerset that is gone", pod=pod.key)

    async def _release_pod(self, pod: SetPod) -> None:
        meta = pod.metadata
        kept = [f for f in meta.finalizers if f != POD_FINALIZER]
        with contextlib.suppress(NotFound):
            await self.client.patch(PODS, meta.name, {"metadata": {"resourceVersion": meta.resource_version,
                                                                   "finalizers": kept}}, meta.namespace)
            self.stats.pods_released += 1
