"""Kueue's plain-Pod integration, for single Pods: a Pod its webhook gated runs only once its Workload is admitted.

The Pods it manages are the ones the Pod webhook (:mod:`connectors.k8s.pod_webhook`) labelled
``kueue.x-k8s.io/managed=true``. They are not the log's: the log keeps Pods only as topology-aware scheduling needs
them (non-terminal, bound or TAS-gated, trimmed), while this needs a managed Pod from its creation, gated, to its
end, succeeded or failed, until Kueue's finalizer lets it go. So it keeps its own list+watch of exactly those Pods
(label selector, every phase; a relist after 410 Gone), and reads their Workloads from the mirror — the log's
state, and the Workload as the apiserver stores it. A Pod is looked at again when it changes, and when anything
the log records touches its Workload (found by the Workload's controller ownerReference), its namespace, a
priority class (a Pod still without a Workload may be waiting for it) or the Configuration.

Nothing happens while the Kueue Configuration in force leaves the ``pod`` framework out (Kueue's default). With
it in, each pass does the one :class:`connectors.k8s.pod_sync.Step` Kueue's reconciler would do next:

* **create** ``pod-<name>-<hash>`` (owned by the Pod, one pod set ``main`` of one pod with the Pod's spec as
  template, :func:`connectors.k8s.pod_sync.workload_for`) for a gated Pod with a queue name in a managed
  namespace; ``CreatedWorkload`` on the Pod. A priority class the log does not hold yet holds it back until it
  does; a ``max-exec-time-seconds`` that is not an int32 above 0 gives it no maximum execution time;
* **start** once its Workload is admitted, in the log and as the apiserver stores it (as for Jobs: never on a
  decision whose status write is still to come): the admission gate lifted and the flavors' ``nodeLabels`` and
  tolerations, the pod-set label, the queue labels and the Ready checks' updates merged into the Pod, one patch
  conditioned on its resourceVersion; ``Started`` "Admitted by clusterQueue <cq>". A merge conflict finishes the
  Workload ``FailedToStart``;
* **stop**, as Kueue stops a Pod, which cannot be suspended: the condition ``TerminationTarget`` (reason
  ``WorkloadEvictedDueTo<reason>``, ``NotAdmitted`` or ``NoMatchingWorkload``, message why) through
  ``pods/status``, then the Pod is deleted; ``Stopped`` with why. The quota of an evicted Workload is given back
  at once (``JobStopped``: Kueue counts no pod of a single Pod active), also when it was evicted before its Pod
  started;
* **finish** the Workload (``Succeeded``/``Failed``, with the Pod's ``status.message``) once the Pod ended;
* **finalize**: drop Kueue's finalizer from a Pod being deleted, an ended one without a Workload, or one whose
  Workload finished (``FinishedWorkload`` on the Pod then);
* the Pod **gone** (or a new Pod of the same name): its Workload is finished (``OwnerNotFound``, under
  ``FinishOrphanedWorkloads``) and deleted, as the garbage collector would delete it;
* **in step** with the Pod (a group's first Pod; :mod:`connectors.k8s.job_sync`, as for a Job): the
  WorkloadPriorityClass its label names now (``UpdatedWorkload``), and, while it is gated and the Workload neither
  evicted nor holding quota, the queue its label names now; a label naming a WorkloadPriorityClass the log does not
  hold gets the Pod no Workload and a ``JobActed`` ``WorkloadPriorityClassNotFound`` (Kueue's Warning) once per
  version of the Pod, and its Workload once the class is there;
* ``UpdatedAdmissionCheck`` on each Pod while some is gated and the Workload holds quota without being admitted,
  whenever its Pending checks' messages change (:func:`connectors.k8s.job_events.checks_message`);
* the Workload's ``kueue.x-k8s.io/resource-in-use`` **finalizer** (given at creation) is taken off as a Job's
  (:mod:`connectors.k8s.workload_finalizer`): once the apiserver shows the Workload finished, after its Pods are
  finalized; once it is being deleted, after its Pods are stopped (``WorkloadDeleted``, "Workload is deleted");
  when its Pod is being deleted (finished ``OwnerNotFound`` first) or gone, or no Pod of its group is left; and
  before kueue-es deletes it.

Under waitForPodsReady the Workload's PodsReady follows the Pod's ``Ready`` condition, as for Jobs (a group's:
every Pod of the group ``Ready``, as Kueue's ``PodsReady`` for a group). The Events
go through the log (``JobActed`` of kind Pod, from ``pod-kueue-controller``), so a restart records none twice.
Pod groups (``kueue.x-k8s.io/pod-group-name``) are reconciled as one, under one key (``group/<namespace>/<group>``,
to which a group's Pod's own key is mapped, as Kueue's Pod event handler maps it, so no two passes of one group
ever run at once; what was done to a Pod is forgotten once the watch sees it go):
:mod:`connectors.k8s.pod_group` decides, one Workload named after the group, every Pod started, stopped, finished
and finalized with it; under ``PodIntegrationValidateGroupOwner`` a Workload of its name not made for a group is not
taken (nothing is done to the group then but the Warning ``WorkloadNameConflict`` on its first Pod). A
Workload the group matches first gets every Pod the group keeps among its owners (a replacement Pod too;
``OwnerReferencesAdded`` on the Workload, a ``JobActed`` of kind Workload), as Kueue's pod reconciler. Under TopologyAwareScheduling a Pod's pod set carries the topology request of its TAS
annotations (:func:`connectors.k8s.pod_sync.pod_set`) and, placed by topology, it starts still behind the
topology gate its webhook added, which the ungater (:mod:`connectors.k8s.ungater`) lifts onto its domain. A Pod or
group naming a prebuilt Workload runs on that one, adopted, never created (:mod:`connectors.k8s.pod_prebuilt`). A
group's Workload none of whose Pods has its roles any more is, before anything else is done with it, rewritten in
place from the group's Pods while one of them is gated or ended and it holds no quota (``UpdatedWorkload``, as
newer Kueue), else deleted (``DeletedWorkload``), the group then getting a new one. With the ``statefulset``
framework on, a group a StatefulSet holds also follows Kueue's StatefulSet reconciler
(:mod:`connectors.k8s.statefulset_groups`: its pods let go and relabelled, the set among its Workload's owners, the
Workload on hold at zero replicas and resized when scaled up). A gated Pod's Workload
holding no quota whose ``maximumExecutionTimeSeconds`` is no longer the Pod's ``max-exec-time-seconds`` (the label
may change while gated) is rewritten from the Pod (``UpdatedWorkload``); a group's then no longer matches (above).
Not done: rewriting a Workload whose pod sets no longer match its Pod (a single Pod's), or deleting a single
Pod's Workload that no longer matches it while holding quota (Kueue deletes it and makes a new one).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import msgspec
import structlog

from connectors.k8s import (
    copied_metadata,
    job_selection,
    job_sync,
    leaderworkerset,
    pod_group,
    pod_prebuilt,
    pod_sync,
    podsetinfo,
    prebuilt,
    statefulsets,
)
from connectors.k8s import workload_finalizer as wf
from connectors.k8s.client import MERGE_PATCH, KubeClient
from connectors.k8s.deployment_uid import OwnerReads, deployment_uid
from connectors.k8s.errors import AlreadyExists, Conflict, NotFound
from connectors.k8s.integration_log import IntegrationLog, creation_latency_ms
from connectors.k8s.job_events import (
    CREATED_WORKLOAD,
    STARTED,
    STOPPED,
    UPDATED_ADMISSION_CHECK,
    checks_message,
)
from connectors.k8s.job_priority import (
    NOT_FOUND_REASON,
    PriorityClassNotFound,
    WorkloadPriorityClassNotFound,
    missing_class,
    not_found_message,
)
from connectors.k8s.job_sync import DELETED_WORKLOAD, UPDATED_WORKLOAD
from connectors.k8s.jobframework import (
    CLASS_MISSING,
    admission_gate_change,
    admission_gate_patch,
    admission_shown,
    eviction_unshown,
)
from connectors.k8s.journal import Journal
from connectors.k8s.list_watch import Informer
from connectors.k8s.owner_index import OwnerIndex, following, once
from connectors.k8s.pod_roles import GROUP_LABEL, ROLE_HASH_ANNOTATION, role_hash
from connectors.k8s.pod_sync import ManagedPod, Step
from connectors.k8s.pod_webhook import ADMISSION_GATE, MANAGED, MANAGED_LABEL
from connectors.k8s.pods_ready import is_admitted, pods_ready_transition
from connectors.k8s.resources import BY_KIND, JOB_UID_LABEL
from connectors.k8s.statefulset_groups import StatefulSetGroups, holding_uid
from connectors.k8s.statefulsets import StatefulSetRevisions
from connectors.k8s.workers import KeyedWorkers, Retries
from connectors.k8s.workload_body import compared_max_execution_seconds
from events import objects as o
from events import schema as ev
from events.errors import InvalidInput
from kueue_es.scheduler.config import DEFAULT, SchedulerConfig
from kueue_es.scheduler.config_record import in_force
from projections import gates
from projections.workloads import (
    FINISHED,
    WAITING_FOR_REPLACEMENT_PODS,
    WorkloadInfo,
    on_hold,
    replacement_pods_condition,
)

log = structlog.get_logger("kueue_es.k8s.pods")

PODS = BY_KIND["Pod"]
WORKLOADS = BY_KIND["Workload"]
SELECTOR = f"{MANAGED_LABEL}={MANAGED}"
STRATEGIC_MERGE = "application/strategic-merge-patch+json"
FINISHED_WORKLOAD = "FinishedWorkload"
GROUP_PREFIX = "group/"
"""A reconcile key ``group/<namespace>/<group>``: the pod group's, as Kueue's event handler keys it."""


@dataclass
class PodStats:
    created: int = 0
    started: int = 0
    stopped: int = 0
    finished: int = 0
    finalized: int = 0
    released: int = 0
    orphans: int = 0
    finalizers_removed: int = 0
    """Workloads the resource-in-use finalizer was taken off."""
    class_missing: int = 0
    """Times a Pod (a group) was given no Workload because its WorkloadPriorityClass is not there (yet)."""
    reprioritised: int = 0
    """Workloads given the priority class their Pod's label names now."""
    requeued: int = 0
    """Workloads given the queue name their gated Pod's label names now."""
    excess: int = 0
    adopted: int = 0
    """Prebuilt Workloads a Pod was made the controller of, or a group's Pods the owners of."""
    name_conflicts: int = 0
    """Times a group was refused the Workload of its name, not made for a group (``PodIntegrationValidateGroupOwner``)."""
    conflicts: int = 0
    errors: int = 0
    invalid: list[str] = field(default_factory=list)
    """Pods (or groups) given no Workload: what their builder cannot read (:class:`InvalidInput`)."""
    failed_to_start: list[str] = field(default_factory=list)
    out_of_sync: list[str] = field(default_factory=list)
    """Prebuilt Workloads finished for no longer matching their Pod or group."""
    deleted: int = 0
    """Group Workloads deleted for no longer matching their group (none of its Pods has their roles)."""
    updated: int = 0
    """Group Workloads rewritten in place for no longer matching their group, while holding no quota."""
    let_go: int = 0
    """Pods of a StatefulSet ungated and finalized (its older revision's in a rolling update; all once it is gone)."""
    relabelled: int = 0
    """Gated pods of a StatefulSet given the set's changed queue name."""


class PodIntegration:
    def __init__(self, client: KubeClient, journal: Journal, *, retry_s: float = 1.0,
                 append: Callable[[Sequence[ev.AnyEvent]], Awaitable[list[int]]] | None = None,
                 concurrency: int = 16, watch_timeout_s: int = 300, backoff_s: float = 1.0) -> None:
        self.client = client
        self.journal = journal
        self.append = append or journal.append
        self.mirror = journal.mirror
        self.state = journal.mirror.state
        self.concurrency = concurrency
        self.stats = PodStats()
        self.informer = Informer(client, PODS, self._decode, self._mark, what="managed pods", log=log,
                                 label_selector=SELECTOR, watch_timeout_s=watch_timeout_s, backoff_s=backoff_s,
                                 on_deleted=self._unname, on_listed=self._sweep)
        self.pods: dict[str, ManagedPod] = self.informer.known
        """The managed Pods, as last listed or watched."""
        self.synced = self.informer.synced
        self.dirty: set[str] = set()
        self.owners = OwnerIndex(_pod_key)
        """Which Pod controls which Workloads (any uid: a Pod made anew under one name)."""
        self.workloads_of = self.owners.owned
        self._decoder = msgspec.json.Decoder(ManagedPod)
        self._signal = journal.subscribe()
        self._retry = Retries(retry_s)
        self._acted: dict[str, tuple[str, object]] = {}
        """Pod key -> (action, Pod resourceVersion) last done, so a stale view does not repeat it (and Workload
        key -> ("orphan", its resourceVersion) once deleted for want of its Pod)."""
        self._log = IntegrationLog(self.append, self.mirror, self.stats, kind="Pod", log=log)
        self._workloads_log = IntegrationLog(self.append, self.mirror, self.stats, kind="Workload", log=log)
        """What is recorded on a group's Workload (``OwnerReferencesAdded``)."""
        self.members: dict[str, set[str]] = {}
        """Group key (``<namespace>/<group>``, also its Workload's key) -> keys of the managed Pods in it."""
        self.group_of: dict[str, str] = {}
        """Pod key -> its group's key."""
        self.gone_groups: set[str] = set()
        """Keys of the groups none of whose Pods is left while their Workload is still there to let go
        (:meth:`_group_gone`): no member marks such a group any more, so its Workload's records do — a let-go
        refused because the Workload moved on meanwhile (a status write of a record the group's own passes
        appended) is done again on the newer version, as Kueue's reconciler is requeued after a conflict."""
        self.kept_by_set: dict[str, str] = {}
        """Group key -> key of the StatefulSet that keeps its Workload while none of its Pods is left
        (:meth:`StatefulSetGroups.kept_by_owner`): nothing else marks such a group, so the set's changes, its going
        above all, do."""
        self.named_by: dict[str, set[str]] = {}
        """Workload key -> reconcile keys (a single Pod's, a group's ``group/...``) of the Pods naming it as their
        prebuilt Workload (label or annotation, whichever the gate reads), so its arrival wakes them."""
        self._checks: dict[str, tuple[str, str]] = {}
        """Pod key -> (Workload uid, ``UpdatedAdmissionCheck`` message) last recorded on it."""
        self._stopped: dict[str, str] = {}
        """Pod key -> uid of the Pod stopped (marked and deleted) under it: its versions in between (the condition
        written, the deletion not seen yet) are not stopped again. Forgotten once the watch sees the Pod go."""
        self.statefulsets = StatefulSetRevisions(client, self._on_statefulsets, watch_timeout_s, backoff_s)
        """The StatefulSets' status revisions, for the groups they hold (Kueue's StatefulSet reconciler)."""
        self.sets = StatefulSetGroups(client, self.statefulsets, self.kept_by_set, stats=self.stats,
                                      append=self.append, mirror=self.mirror, append_once=self._append_once,
                                      patch_once=self._patch_once, patch_pod=self._patch_pod)
        """Kueue's StatefulSet reconciler's rules for the groups StatefulSets hold."""
        self.deployment_owners = OwnerReads(client)
        """The ReplicaSets and Deployments of Deployments' pods, read once a pass (:mod:`connectors.k8s.deployment_uid`)."""

    # --- running -------------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Watch the managed Pods and reconcile every dirty one, up to ``concurrency`` at a time."""
        with following(self.mirror, self.owners, self._on_applied):
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self.informer.run(), name="k8s-pods-watch")
                tg.create_task(self.statefulsets.run(), name="k8s-statefulsets-watch")
                await self.synced.wait()  # the first list swept (:meth:`_sweep`)
                await KeyedWorkers(self.reconcile_guarded, self.concurrency).run(
                    self._take, self._signal, self._retry.timeout)

    def _take(self) -> set[str]:
        keys = self.dirty | self._retry.due()
        self.dirty = set()
        self.deployment_owners.new_pass()
        return keys

    async def reconcile_guarded(self, key: str) -> None:
        await self._retry.attempt(self.reconcile, key, what="pod reconcile", stats=self.stats, log=log,
                                  pod=key, conflict_waits=True)

    # --- the managed Pods, listed and watched --------------------------------------------------------------

    def _decode(self, raw: msgspec.Raw | bytes) -> ManagedPod | None:
        """The Pod as the integration reads it; a group's Pod without the webhook's role annotation is given its
        role here (Kueue computes it then from the spec), and is recorded as its group's member."""
        try:
            pod = self._decoder.decode(raw)
            meta = pod.metadata
            if self.state.gate(gates.WORKLOAD_IDENTIFIER_ANNOTATIONS) and meta.annotations.get(GROUP_LABEL):
                pod = msgspec.structs.replace(pod, group=pod_group.group_name(meta.labels, meta.annotations))
            if pod_group.group_of(pod) and ROLE_HASH_ANNOTATION not in pod.metadata.annotations:
                spec = msgspec.json.decode(raw).get("spec") or {}
                annotations = {**pod.metadata.annotations, ROLE_HASH_ANNOTATION: role_hash(spec)}
                pod = msgspec.structs.replace(pod, metadata=msgspec.structs.replace(pod.metadata,
                                                                                    annotations=annotations))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            log.warning("managed pod skipped: cannot decode", error=str(exc))
            return None
        group = pod_group.group_key(pod)
        self._leave_former_group(pod.key, group)
        if group:
            self.group_of[pod.key] = group
            self.members.setdefault(group, set()).add(pod.key)
        for wl_key in _names_carried(pod):
            self.named_by.setdefault(wl_key, set()).add(_request_of(pod))
        return pod

    def _leave_former_group(self, key: str, group: str) -> None:
        """A Pod of ``key`` read in another group than the one recorded, or in none: a namesake made anew, so the
        Pod of that group is gone (a relist reads the new one before it reports the old one gone). Its group forgets
        it and is looked at again; the key is the new Pod's to reconcile."""
        former = self.group_of.get(key)
        if former is None or former == group:
            return
        del self.group_of[key]
        self.members.get(former, set()).discard(key)
        self._forget_pod(key)
        self._mark({GROUP_PREFIX + former})

    def _unname(self, pod: ManagedPod) -> None:
        """Forget a Pod gone as one naming a prebuilt Workload: its reconcile key (a group's Pod: its group's) stops
        naming it, unless another Pod under that key still does — a namesake made anew (a relist reports the old
        Pod gone after reading the new one), or another Pod of the group."""
        group, request = pod_group.group_key(pod), _request_of(pod)
        still: set[str] = set()
        for key in sorted({pod.key, *(self.members.get(group, ()) if group else ())}):
            current = self.pods.get(key)
            if current is not None and current.metadata.uid != pod.metadata.uid and _request_of(current) == request:
                still.update(_names_carried(current))
        for wl_key in _names_carried(pod):
            if wl_key in still:
                continue
            named = self.named_by.get(wl_key, set())
            named.discard(request)
            if not named:
                self.named_by.pop(wl_key, None)

    def _sweep(self) -> None:
        """After each list of the managed Pods (at start, and the relist after a 410 Gone), mark every Pod that
        controls a Workload and every group Workload none of whose Pods the list holds: what went while no one
        watched, or out of the watch's selection (a gone group whose Pod the apiserver still had then), is let go
        now, as Kueue's informers redeliver every Pod and Workload on a relist, not only on a restart."""
        self._mark(set(self.workloads_of) | {GROUP_PREFIX + k for k, obs in self.mirror.workloads.items()
                                             if pod_group.is_group_workload(obs) and k not in self.members})

    def _request(self, key: str) -> str:
        """The reconcile key for a Pod's key: its group's (``group/<namespace>/<group>``) for a group's Pod, as
        Kueue's Pod event handler maps it, so one group is never reconciled by two passes at once."""
        group = self.group_of.get(key)
        return GROUP_PREFIX + group if group is not None else key

    def _mark(self, keys: set[str]) -> None:
        if keys:
            self.dirty |= {self._request(k) for k in keys}
            self._signal.set()

    def _on_statefulsets(self, keys: set[str]) -> None:
        """StatefulSets whose revisions changed, or that came or went: the groups of their pods are dirty."""
        self._mark({GROUP_PREFIX + g for g in self.sets.groups_of(keys, self.pods, self.group_of)})

    # --- what the log says about their Workloads --------------------------------------------------------------

    def _on_applied(self, records: list[ev.Record]) -> None:
        """Mark the Pods the records touch (see the module docstring)."""
        keys: set[str] = set()
        for r in records:
            e = r.event
            keys |= self.owners.touched(e, self.pods)
            if isinstance(e, ev.ObjectDeleted) and e.kind == "Workload":
                self._acted.pop(e.key, None)
                self.gone_groups.discard(e.key)
                self.kept_by_set.pop(e.key, None)
                if e.key not in self.members:  # the Workload of a group that is gone: nothing left to do for it
                    self._acted.pop(GROUP_PREFIX + e.key, None)
            if (isinstance(e, ev.ObjectUpserted) and isinstance(e.obj, o.Workload)
                    or isinstance(e, ev.ObjectDeleted) and e.kind == "Workload"):
                keys |= self.named_by.get(e.key, set())
            if e.key in self.members or e.key in self.gone_groups or e.key in self.kept_by_set:  # its Workload
                keys.add(GROUP_PREFIX + e.key)
            elif isinstance(e, (ev.WorkloadEvicted, ev.WorkloadPreempted)):  # a group's with no Pod left: quota back
                keys.add(GROUP_PREFIX + e.key)
        self._mark(keys)

    # --- one Pod -------------------------------------------------------------------------------------------

    def _config(self) -> SchedulerConfig:
        return in_force(self.state) or DEFAULT

    async def reconcile(self, key: str) -> None:
        config = self._config()
        if not config.manages_pods:
            return
        request = self._request(key)
        if request != key:  # marked before its Pod joined a group: the group's own key runs its pass
            self._mark({request})
            return
        if key.startswith(GROUP_PREFIX):
            await self._reconcile_group(config, key.removeprefix(GROUP_PREFIX))
            return
        pod = self.pods.get(key)
        for wl_key in sorted(self.workloads_of.get(key, ())):
            obs = self.mirror.workloads.get(wl_key)
            owner = pod_sync.owner_pod(obs) if obs is not None else None
            if owner is not None and (pod is None or owner[1] != pod.metadata.uid):
                await self._orphaned(key, wl_key, obs, owner[1])  # type: ignore[arg-type]
        if pod is None:
            self._forget_pod(key)
            return
        if not pod_sync.is_managed(pod):
            return
        prebuilt_name = pod_prebuilt.name_for(pod, self.state.gate(gates.WORKLOAD_IDENTIFIER_ANNOTATIONS))
        wl_key = f"{pod.metadata.namespace}/{prebuilt_name or self._workload_name(pod)}"
        wl, obs = self.state.workloads.get(wl_key), self.mirror.workloads.get(wl_key)
        if wl is None or obs is None or (obs.metadata.uid and wl.uid and obs.metadata.uid != wl.uid):
            wl = obs = None
        if pod.metadata.deletion_timestamp and obs is not None and pod_sync.owner_pod(obs) == (pod.key, pod.metadata.uid):
            rv = await self._let_go(wl_key, obs)  # as Kueue's reconciler, first thing: its Workload's finalizer goes
            if rv is not None and wf.holds(obs):
                obs = wf.unfinalized(obs, rv)  # not taken off again below (_release)
        managed = job_selection.is_managed(pod.metadata.labels, job_selection.controller(pod.metadata.owner_references),
                                           self.state.namespaces.get(pod.metadata.namespace), config)
        if prebuilt_name and wl is not None and obs is not None and managed and not pod.metadata.deletion_timestamp:
            usable = await self._prebuilt_usable(pod, wl, obs)
            if usable is None:
                return  # adopted just now: the rest waits for the Workload that shows it
            if not usable:
                wl = obs = None
        if wl is not None and managed and not pod.metadata.deletion_timestamp and self.state.waits_for_pods_ready:
            change = pod_sync.pods_ready_change(pod, wl)
            if change is not None:
                await self._append_once(wl, ev.PodsReadyChanged(time=_now(), key=wl.key, uid=wl.uid,
                                                                ready=change[0], reason=change[1]))
        if (wl is not None and obs is not None and managed and not prebuilt_name and pod_sync.is_gated(pod)
                and not pod.metadata.deletion_timestamp and pod_sync.ended(pod) is None and not wl.reserving
                and wl.phase != FINISHED and not wf.deleting(obs) and wl.key not in self.mirror.pending
                and wl.max_execution_seconds != compared_max_execution_seconds(pod.metadata.labels)):
            rv = obs.metadata.resource_version
            await self._once(pod, f"max-exec@{rv}", self._update_single(pod, obs))
            return  # as Kueue's reconciler: the rest waits for the Workload that shows it
        if (wl is not None and obs is not None and managed and not pod.metadata.deletion_timestamp
                and pod_sync.ended(pod) is None
                and await self._sync_workload(pod, wl, obs, running=not pod_sync.is_gated(pod),
                                              generated=not prebuilt_name)):
            return  # as Kueue's reconciler: the rest waits for the Workload that shows it
        if wl is not None and obs is not None and managed and not wf.deleting(obs):
            await self._admission_checks([pod], wl, held=pod_sync.is_gated(pod) and pod_sync.ended(pod) is None)
        shown = wl is not None and obs is not None and admission_shown(wl, obs)
        step = pod_sync.next_step(pod, wl, managed=managed, admission_shown=shown, prebuilt=bool(prebuilt_name),
                                  wl_deleting=obs is not None and wf.deleting(obs),
                                  remote=pod_sync.runs_on_a_worker(self.state, wl),
                                  eviction_unshown=wl is not None and eviction_unshown(self.state, wl, obs))
        await self._carry_out(pod, step, wl, obs, wl_key)
        if managed:
            await self._release(wl, obs)

    async def _sync_workload(self, anchor: ManagedPod, wl: WorkloadInfo, obs: o.Workload, *, running: bool,
                             generated: bool, holder: statefulsets.StatefulSetRevision | None = None) -> bool:
        """Keep the Workload in step with its Pod (a group's: with the Pod standing for it, ``anchor``), as Kueue's
        reconciler does for any job it runs (:mod:`connectors.k8s.job_sync`): a ``generated`` one (not prebuilt)
        the WorkloadPriorityClass the Pod's label names now (``UpdatedWorkload``), and any one, while the Pod is held back (not ``running``: gated) and the
        Workload neither evicted nor holding quota, the queue its label names (no Event; not a LeaderWorkerSet
        group's, which its set moves, Kueue's #11191: pods relabelled after would move it back), and under
        ``AdmissionGatedBy`` the Pod's admission gate when that only removes gates (a group's a StatefulSet
        holds: the set's, as Kueue's StatefulSet reconciler, ``UpdatedWorkload`` then on the set). Not for a Workload
        finished or being deleted, nor while a decision about it waits to be written. Whether the pass ends here
        (something was written, or the class is awaited)."""
        if wl.phase == FINISHED or wf.deleting(obs) or wl.key in self.mirror.pending:
            return False
        labels, rv = anchor.metadata.labels, obs.metadata.resource_version
        try:
            priority = job_sync.priority_change(self.state, labels, anchor.spec.priority_class_name or None, obs,
                                                wl) if generated else None
        except (WorkloadPriorityClassNotFound, PriorityClassNotFound) as exc:
            await self._once(anchor, f"priority-missing@{rv}", self._priority_missing(anchor, obs, exc))
            return True  # as Kueue's reconcile, which fails on the lookup: the rest waits for the class
        if priority is not None:
            await self._once(anchor, f"priority@{rv}", self._set_priority(anchor, obs, *priority))
            return True
        queue = None if leaderworkerset.owner_of(obs) else job_sync.queue_change(labels, obs, wl, running=running)
        if queue is not None:
            await self._once(anchor, f"queue@{rv}", self._set_queue(anchor, obs, queue))
            return True
        source = holder.metadata.annotations if holder is not None else anchor.metadata.annotations
        gate = admission_gate_change(self.state, source, obs)
        if gate is not None:
            await self._once(anchor, f"admission-gate@{rv}", self._set_admission_gate(anchor, obs, gate[0], holder))
            return True
        return False

    async def _set_admission_gate(self, pod: ManagedPod, obs: o.Workload, gate: str | None,
                                  holder: statefulsets.StatefulSetRevision | None) -> None:
        """The Pod's admission gate (None: removed) onto its Workload, conditioned on its resourceVersion;
        ``UpdatedWorkload`` on the Pod (a group's: the Pod standing for it; on the StatefulSet ``holder`` holding
        it), as Kueue's reconcilers record."""
        await self.client.patch(WORKLOADS, obs.metadata.name, admission_gate_patch(obs, gate), obs.metadata.namespace)
        message = job_sync.admission_gate_updated_message(gate)
        if holder is not None:
            await self.sets.gate_synced(holder, obs, gate, message)
            return
        log.info("synced the workload's admission gate with its pod's", pod=pod.key, workload=obs.key, gate=gate)
        await self._report(pod, UPDATED_WORKLOAD, workload=obs.key, message=message)

    async def _admission_checks(self, pods: Sequence[ManagedPod], wl: WorkloadInfo, *, held: bool) -> None:
        """Kueue's ``UpdatedAdmissionCheck`` on each of the Pods (a group's: all of them) while some is held back
        (``held``: gated) and the Workload holds quota but is not admitted: its Pending checks' messages
        (:func:`connectors.k8s.job_events.checks_message`), from the status last written (not while a decision
        about it waits to be written), recorded again only when they change (Kueue's recorder folds repeats)."""
        if wl.key in self.mirror.pending:
            return
        message = checks_message(wl) if held else ""
        for pod in pods:
            if not message:
                self._checks.pop(pod.key, None)
            elif self._checks.get(pod.key) != (wl.uid, message):
                self._checks[pod.key] = (wl.uid, message)
                await self._report(pod, UPDATED_ADMISSION_CHECK, workload=wl.key, message=message)

    async def _set_priority(self, pod: ManagedPod, obs: o.Workload, ref: dict[str, str] | None,
                            priority: int | None) -> None:
        await self.client.patch(WORKLOADS, obs.metadata.name, job_sync.priority_patch(obs, ref, priority),
                                obs.metadata.namespace)
        self.stats.reprioritised += 1
        log.info("gave the workload its pod's priority class", pod=pod.key, workload=obs.key,
                 priority_class=ref["name"] if ref else None, priority=priority)
        await self._report(pod, UPDATED_WORKLOAD, workload=obs.key, message=job_sync.priority_updated_message(obs.key))

    async def _priority_missing(self, pod: ManagedPod, obs: o.Workload,
                                exc: WorkloadPriorityClassNotFound | PriorityClassNotFound) -> None:
        """As for a Job: Kueue's reconcile fails on the lookup and is retried; the Workload keeps its priority until
        the class is in the log (which marks the Pod dirty). A missing WorkloadPriorityClass is reported on the Pod
        (the Warning ``WorkloadPriorityClassNotFound``, as at creation), a missing PriorityClass is not."""
        log.warning("the pod's priority class is not there: its workload keeps its priority", pod=pod.key,
                    workload=obs.key, error=str(exc))
        if isinstance(exc, WorkloadPriorityClassNotFound):
            await self._report(pod, NOT_FOUND_REASON, message=not_found_message(exc.name))

    async def _set_queue(self, pod: ManagedPod, obs: o.Workload, queue: str) -> None:
        await self.client.patch(WORKLOADS, obs.metadata.name, job_sync.queue_patch(obs, queue), obs.metadata.namespace)
        self.stats.requeued += 1
        log.info("moved the workload to its pod's queue", pod=pod.key, workload=obs.key, queue=queue,
                 previous=obs.spec.queue_name)

    async def _class_missing(self, pod: ManagedPod, wpc_name: str) -> None:
        """As for a Job: no Workload for a Pod (a group, ``pod`` the Pod standing for it) whose
        WorkloadPriorityClass is missing, and the Warning ``WorkloadPriorityClassNotFound`` on the Pod."""
        self.stats.class_missing += 1
        log.warning("WorkloadPriorityClass not found: no workload created", pod=pod.key, priority_class=wpc_name)
        await self._report(pod, NOT_FOUND_REASON, message=not_found_message(wpc_name))

    async def _release(self, wl: WorkloadInfo | None, obs: o.Workload | None) -> None:
        """Take the finalizer off a Workload that finished (once the apiserver shows it) or is being deleted, once
        this pass did what Kueue does with its Pods then (finalized them; stopped them)."""
        if wl is not None and obs is not None and (wl.phase == FINISHED or wf.deleting(obs)):
            if wf.release(obs, wl, job_running=False) == wf.REMOVE:
                await self._unfinalize(obs)

    async def _let_go(self, wl_key: str, obs: o.Workload) -> str | None:
        """The Workload of a Pod that is gone or being deleted (or of a pod group none of whose Pods is left), as a
        Job's (:func:`connectors.k8s.workload_finalizer.let_go`): finished ``OwnerNotFound`` (under
        ``FinishOrphanedWorkloads``), then its finalizer taken off — on a later version, the one showing it
        finished, which the watch brings and which
        marks the Pod (or the group) again. Its resourceVersion after that (None: gone, or finished but not shown
        so yet)."""
        return await wf.let_go(obs, self.state.workloads.get(wl_key),
                               finish_orphaned=self.state.gate(gates.FINISH_ORPHANED_WORKLOADS),
                               append=self._append_once, unfinalize=self._unfinalize)

    async def _unfinalize(self, obs: o.Workload) -> str | None:
        rv = await wf.unfinalize(self.client, obs)
        if wf.holds(obs) and rv is not None:
            self.stats.finalizers_removed += 1
            log.info("took the finalizer off the workload", workload=obs.key, deleting=wf.deleting(obs))
        return rv

    async def _carry_out(self, pod: ManagedPod, step: Step, wl: WorkloadInfo | None, obs: o.Workload | None,
                         wl_key: str) -> None:
        match step.action:
            case pod_sync.CREATE:
                missing = missing_class(self.state, pod.metadata.labels)
                if missing is not None:
                    await self._once(pod, CLASS_MISSING, self._class_missing(pod, missing))
                else:
                    await self._once(pod, "create", self._create(pod, wl_key.partition("/")[2]))
            case pod_sync.START:
                assert wl is not None and obs is not None
                await self._once(pod, "start", self._start(pod, wl))
            case pod_sync.STOP:
                if self._stopped.get(pod.key) != pod.metadata.uid:
                    await self._once(pod, "stop", self._stop(pod, step, wl))
            case pod_sync.RELEASE:
                assert wl is not None
                await self._give_back_quota(wl)
            case pod_sync.FINISH:
                assert wl is not None
                await self._finish(wl, step.reason, step.message)
            case pod_sync.FINALIZE:
                await self._once(pod, "finalize", self._finalize(pod, wl_key if step.finished_workload else ""))
            case _:
                pass

    async def _give_back_quota(self, wl: WorkloadInfo) -> None:
        """Give back the quota of ``wl``, whose Pods no longer run (``JobStopped``)."""
        if await self._append_once(wl, ev.JobStopped(time=_now(), key=wl.key, uid=wl.uid)):
            self.stats.released += 1

    async def _finish(self, wl: WorkloadInfo, reason: str, message: str) -> None:
        await self._append_once(wl, ev.WorkloadFinished(time=_now(), key=wl.key, uid=wl.uid, reason=reason,
                                                        message=message))

    def _workload_name(self, pod: ManagedPod) -> str:
        """The Workload the Pod (this uid) controls, whatever its name, else the name to create it under."""
        for wl_key in sorted(self.workloads_of.get(pod.key, ())):
            obs = self.mirror.workloads.get(wl_key)
            owner = pod_sync.owner_pod(obs) if obs is not None else None
            if owner is not None and owner[1] == pod.metadata.uid:
                return wl_key.partition("/")[2]
        return pod_sync.workload_name(pod.metadata.name, pod.metadata.uid,
                                      short=self.state.gate(gates.SHORT_WORKLOAD_NAMES))

    async def _once(self, pod: ManagedPod, action: str, work: Any) -> None:
        """Run ``work`` unless the same action already ran on this very version of the Pod."""
        await once(self._acted, pod.key, (action, pod.metadata.resource_version), work)

    async def _append_once(self, wl: WorkloadInfo, event: ev.AnyEvent) -> bool:
        return await self._log.append_once(wl, event)

    async def _report(self, pod: ManagedPod, action: str, **what: str) -> None:
        await self._log.report(pod.key, pod.metadata.uid, action, **what)

    # --- actions -------------------------------------------------------------------------------------------

    async def _create(self, pod: ManagedPod, name: str) -> None:
        ns = pod.metadata.namespace
        try:
            raw = msgspec.json.decode(await self.client.get(PODS, pod.metadata.name, ns))
        except NotFound:
            return
        if raw["metadata"]["uid"] != pod.metadata.uid:
            return  # made anew meanwhile; the watch brings the new one
        try:
            body = pod_sync.workload_for(self.state, raw, name)
            if self.state.gate(gates.DEPLOYMENT_JOB_UID_LABEL):
                owner_uid = await deployment_uid(self.deployment_owners, raw,
                                                 self._config().manage_jobs_without_queue_name)
                if owner_uid:
                    body["metadata"]["labels"][JOB_UID_LABEL] = owner_uid
        except (WorkloadPriorityClassNotFound, PriorityClassNotFound) as exc:
            self._acted.pop(pod.key, None)  # the same version of the Pod gets its Workload once the class is there
            log.warning("the pod's priority class is not there: no workload created yet", pod=pod.key, error=str(exc))
            return
        except InvalidInput as exc:
            self.stats.invalid.append(pod.key)
            log.error("pod refused: no workload created", pod=pod.key, error=str(exc))
            return
        try:
            created = await self.client.create(WORKLOADS, body, ns)
        except AlreadyExists:
            return
        self.stats.created += 1
        log.info("created workload", pod=pod.key, workload=name)
        await self._log.report(pod.key, pod.metadata.uid, CREATED_WORKLOAD, workload=f"{ns}/{name}",
                               creation_latency_ms=creation_latency_ms(pod.metadata, created))

    async def _update_single(self, pod: ManagedPod, obs: o.Workload) -> None:
        """Rewrite the spec of the gated Pod's Workload, which holds no quota and whose maximum execution time is no
        longer the Pod's (Kueue's ``EquivalentToWorkload`` compares it first), from the Pod as stored (built as at
        creation), conditioned on its resourceVersion; ``UpdatedWorkload`` on the Pod, as Kueue's reconciler
        updates a not matching Workload of a suspended job."""
        try:
            raw = msgspec.json.decode(await self.client.get(PODS, pod.metadata.name, pod.metadata.namespace))
        except NotFound:
            return
        if raw["metadata"]["uid"] != pod.metadata.uid:
            return  # made anew meanwhile; the watch brings the new one
        try:
            body = pod_sync.workload_for(self.state, raw, obs.metadata.name)
        except (WorkloadPriorityClassNotFound, PriorityClassNotFound, InvalidInput) as exc:
            log.warning("the pod's workload cannot be rebuilt: not updated", pod=pod.key, error=str(exc))
            return
        try:
            await self.client.patch(WORKLOADS, obs.metadata.name, job_sync.spec_patch(obs, body["spec"]),
                                    obs.metadata.namespace)
        except (NotFound, Conflict):
            return  # gone or changed meanwhile: the watch brings the newer one
        self.stats.updated += 1
        log.info("updated the workload its pod no longer matches", pod=pod.key, workload=obs.key)
        await self._report(pod, UPDATED_WORKLOAD, workload=obs.key, message=job_sync.updated_message(obs.key))

    async def _start(self, pod: ManagedPod, wl: WorkloadInfo, pod_set: str = "main", *,
                     group: bool = False) -> None:
        """Start the Pod with what the admission of its pod set (``main``; a ``group``'s Pod: its role's)
        adds. The admission is read once: the fold may take it away while the Pod is written (the Workload
        evicted meanwhile), and the start is reported on the one it was made on, as is the admission gate's
        removal (``pod_scheduling_gate_removal_seconds``) when the Pod carried it."""
        admission = wl.admission
        assert admission is not None
        psas = admission.pod_set_assignments
        psa = next((p for p in psas if p.name == pod_set), psas[0] if psas and pod_set == "main" else None)
        try:
            info = (podsetinfo.start_info(self.state, wl, psa) if psa is not None else podsetinfo.PodSetInfo(
                labels={podsetinfo.PODSET_LABEL: pod_set, **podsetinfo.workload_labels(self.state, wl)}))
            patch = pod_sync.start_patch(pod, info)
        except podsetinfo.MergeConflict as exc:
            self.stats.failed_to_start.append(pod.key)
            await self._append_once(wl, ev.WorkloadFinished(time=_now(), key=wl.key, uid=wl.uid, reason="FailedToStart",
                                                            message=str(exc)))  # Kueue's error text as it is
            return
        await self.client.patch(PODS, pod.metadata.name, patch, pod.metadata.namespace)
        self.stats.started += 1
        log.info("started pod", pod=pod.key, workload=wl.key, cluster_queue=admission.cluster_queue)
        if pod_sync.is_gated(pod):
            await self._log.gate_removed(pod.key, pod.metadata.uid, ADMISSION_GATE, wl, group=group)
        await self._report(pod, STARTED, workload=wl.key, cluster_queue=admission.cluster_queue)

    async def _stop(self, pod: ManagedPod, step: Step, wl: WorkloadInfo | None) -> None:
        """Mark the Pod ``TerminationTarget`` and delete it (``Stopped``); an evicted Workload's quota then goes.
        The Pod counts as stopped from the first write, so no later view of it (marked, not yet deleted) stops it
        again; a failed write gives it back."""
        name, ns = pod.metadata.name, pod.metadata.namespace
        self._stopped[pod.key] = pod.metadata.uid
        try:
            await self.client.patch(PODS, name, pod_sync.termination_condition(step.reason, step.message, _rfc3339()),
                                    ns, subresource="status", content_type=STRATEGIC_MERGE)
            await self.client.delete(PODS, name, ns, uid=pod.metadata.uid)
        except NotFound:
            return
        except BaseException:
            if self._stopped.get(pod.key) == pod.metadata.uid:
                del self._stopped[pod.key]
            raise
        self.stats.stopped += 1
        log.info("stopped pod", pod=pod.key, reason=step.reason)
        await self._report(pod, STOPPED, workload=wl.key if wl is not None else "", message=step.message)
        if step.release and wl is not None and await self._append_once(
                wl, ev.JobStopped(time=_now(), key=wl.key, uid=wl.uid)):
            self.stats.released += 1

    async def _patch_pod(self, pod: ManagedPod, patch: dict[str, Any]) -> bool:
        """Merge-patch the Pod; False when it is gone meanwhile (nothing left to do for it)."""
        try:
            await self.client.patch(PODS, pod.metadata.name, patch, pod.metadata.namespace)
        except NotFound:
            return False
        return True

    async def _finalize(self, pod: ManagedPod, finished_workload: str) -> None:
        """Drop Kueue's finalizer; ``finished_workload``: the Workload whose finish Kueue reports on the Pod."""
        strict = self.state.gate(gates.REMOVE_FINALIZERS_WITH_STRICT_PATCH)
        if not await self._patch_pod(pod, pod_sync.finalize_patch(pod, strict=strict)):
            return
        self.stats.finalized += 1
        log.info("finalized pod", pod=pod.key)
        if finished_workload:
            await self._report(pod, FINISHED_WORKLOAD, workload=finished_workload)

    @contextlib.contextmanager
    def _marked(self, key: str, marker: tuple[str, object]) -> Iterator[None]:
        """``key`` marked done with ``marker`` (the write it stands for) while the body writes it; forgotten if
        the write fails in any way, so the next pass does it again (unless another pass recorded its own
        meanwhile), as :func:`connectors.k8s.owner_index.once` forgets a failed run. A failure other than a
        conflict leaves the Workload unchanged: no newer version would come to mark it again."""
        self._acted[key] = marker
        try:
            yield
        except BaseException:
            if self._acted.get(key) == marker:
                del self._acted[key]
            raise

    async def _orphaned(self, pod_key: str, wl_key: str, obs: o.Workload, owner_uid: str) -> None:
        """The Pod that controls Workload ``wl_key`` is gone (the apiserver says so): finish the Workload (under
        ``FinishOrphanedWorkloads``), take its finalizer off and delete it, as the garbage collector would."""
        marker = ("orphan", obs.metadata.resource_version)
        if self._acted.get(wl_key) == marker:
            return  # done: the watch brings the Workload's deletion
        if pod_key not in self.pods:  # out of the watch's selection is not gone: ask
            namespace, _, name = pod_key.partition("/")
            try:
                raw = msgspec.json.decode(await self.client.get(PODS, name, namespace))
            except NotFound:
                raw = None
            if raw is not None and raw["metadata"].get("uid") == owner_uid:
                return
        try:
            with self._marked(wl_key, marker):
                if not await wf.delete_unfinalized(self.client, obs, await self._let_go(wl_key, obs)):
                    return
        except Conflict:
            return  # changed meanwhile: the watch brings the newer Workload
        self.stats.orphans += 1
        log.info("deleted the workload of a pod that is gone", pod=pod_key, workload=wl_key)

    # --- pod groups ----------------------------------------------------------------------------------------

    async def _reconcile_group(self, config: SchedulerConfig, group: str) -> None:
        """Do what Kueue's reconciler does next with a pod group (:func:`connectors.k8s.pod_group.next_step`)."""
        self._forget_gone_members(group)
        pods = sorted((self.pods[k] for k in self.members.get(group, ())), key=lambda p: p.metadata.name)
        if not pods:
            self.members.pop(group, None)
            await self._group_gone(group)
            return
        self.gone_groups.discard(group)
        self.kept_by_set.pop(group, None)
        pods = [p for p in pods if pod_sync.is_managed(p)]
        deleting = [p for p in pods if p.metadata.deletion_timestamp and not pod_group.runnable_or_succeeded(p)]
        first = pods[0] if pods else None
        prebuilt_name = "" if first is None else pod_prebuilt.name_for(
            first, self.state.gate(gates.WORKLOAD_IDENTIFIER_ANNOTATIONS))
        gated = self.state.gate(gates.ADMISSION_GATED_BY)
        copied = not prebuilt_name and self.statefulsets.synced.is_set()
        held_by = await self.sets.holding_statefulset(config, pods) if first is not None and (gated or copied) else None
        if copied and held_by is not None:
            prebuilt_name = held_by.copied_workload  # on a worker, a MultiKueue copy's Workload: the group runs on it
        holder = held_by if gated else None  # under the gate, the admission gate is the set's (Kueue's set reconciler)
        wl_key = f"{group.partition('/')[0]}/{prebuilt_name}" if prebuilt_name else group
        wl, obs = self.state.workloads.get(wl_key), self.mirror.workloads.get(wl_key)
        if wl is None or obs is None or (obs.metadata.uid and wl.uid and obs.metadata.uid != wl.uid):
            wl = obs = None
        managed = first is not None and job_selection.is_managed(
            first.metadata.labels, job_selection.controller(first.metadata.owner_references),
            self.state.namespaces.get(first.metadata.namespace), config)
        if managed and first is not None and not prebuilt_name and await self._refused_adoption(group, first):
            return  # as Kueue's reconciler: nothing more, to the Pods or to that Workload
        if prebuilt_name and wl is not None and obs is not None and managed:
            usable = await self._group_prebuilt_usable(group, pods, wl, obs)
            if usable is None:
                return  # owners added just now: the rest waits for the Workload that shows them
            if not usable:
                wl = obs = None
        own = pod_group.of_its_roles(pods, wl) if wl is not None and not prebuilt_name else pods  # what Kueue keeps
        # a Workload its set holds at zero (or keeps on hold) is the set's to hold, resize and release (Kueue v0.20's
        # set reconciler, #12233/#15279), not one to delete or rewrite as its group no longer matching
        matching = (wl is None or bool(prebuilt_name) or not pod_group.no_longer_matching(pods, wl)
                    or (held_by is not None and (on_hold(wl) or held_by.view.replicas == 0)))
        if matching and wl is not None and obs is not None and managed and not prebuilt_name and \
                await self._owned_by_kept_pods(group, pods, wl, obs):
            return  # as for a prebuilt one: the rest waits for the Workload that shows its new owners
        if matching:  # else, as Kueue's reconciler, the Workload goes first
            if await self._keep_in_step(pods, own, wl, obs, managed=managed, generated=not prebuilt_name,
                                        holder=holder):
                return
            if (obs is not None and managed and not prebuilt_name and held_by is not None and not wf.deleting(obs)
                    and await self.sets.owned_by_statefulset(group, obs, held_by)):
                return  # the rest waits for the Workload that shows its owners
            if (wl is not None and obs is not None and managed and not prebuilt_name and held_by is not None
                    and not wf.deleting(obs) and await self.sets.held_by_statefulset(group, wl, obs, held_by)):
                return  # the rest waits for the Workload that shows it
        statefulset = await self.sets.statefulset_of(config, pods)  # before the step reads the fold's state
        shown = wl is not None and obs is not None and admission_shown(wl, obs)
        step = pod_group.next_step(pods, wl, managed=managed, admission_shown=shown, prebuilt=bool(prebuilt_name),
                                   fast_quota_release=self.state.gate(gates.FAST_QUOTA_RELEASE_IN_POD_INTEGRATION),
                                   wl_deleting=obs is not None and wf.deleting(obs), statefulset=statefulset,
                                   remote=pod_sync.runs_on_a_worker(self.state, wl),
                                   eviction_unshown=wl is not None and eviction_unshown(self.state, wl, obs),
                                   reclaim=self.state.reclaim_enabled)
        if wl is not None and on_hold(wl) and step.remove:
            step = replace(step, remove=())  # counted against a size the set's scale-up is still to give it
        for pod in step.relabel:  # the step's only work: the pods' watch brings them back relabelled
            await self._once(pod, "relabel", self.sets.relabel_pod(pod, step.relabel_queue))
        for pod in step.finalize:
            await self._once(pod, "finalize", self._finalize(pod, ""))
        for pod in step.remove:
            await self._once(pod, "excess", self._remove_excess(pod))
        await self._carry_out_group(group, step, wl, first, holder)
        for pod in step.let_go:
            await self._once(pod, "let-go", self.sets.let_go_pod(pod))
        if managed:
            await self._release(wl, obs)
        if wl is None and not managed:
            for pod in deleting:  # not Kueue's to hold: let it go
                if pod_sync.finalizable(pod):
                    await self._once(pod, "finalize", self._finalize(pod, ""))

    def _forget_gone_members(self, group: str) -> None:
        """Forget the group's Pods the watch saw go: their membership and what was recorded as done to them."""
        members = self.members.get(group, set())
        for key in sorted(members - self.pods.keys()):
            members.discard(key)
            self.group_of.pop(key, None)
            self._forget_pod(key)

    def _forget_pod(self, key: str) -> None:
        """Forget what was done to the Pod of ``key``, which is gone: a namesake made anew starts afresh."""
        self._acted.pop(key, None)
        self._stopped.pop(key, None)
        self._checks.pop(key, None)

    async def _keep_in_step(self, pods: list[ManagedPod], own: list[ManagedPod], wl: WorkloadInfo | None,
                            obs: o.Workload | None, *, managed: bool, generated: bool,
                            holder: statefulsets.StatefulSetRevision | None) -> bool:
        """The group's Workload kept in step with its Pods before anything else (PodsReady, waiting for replacement
        Pods, priority and queue, the admission gate, of its StatefulSet ``holder`` when one holds it, admission
        checks' messages); whether the pass ends here, as Kueue's does."""
        if wl is not None and managed and self.state.waits_for_pods_ready:
            change = pods_ready_transition(wl, running=any(pod_sync.is_running(p) for p in own),
                                           ready=pod_group.pods_ready(own, succeeded_ready=self.state.gate(
                                               gates.POD_INTEGRATION_COUNT_SUCCEEDED_PODS_AS_READY),
                                               max_not_ready=self.state.gate(gates.WAIT_FOR_PODS_READY_MAX_NOT_READY)))
            if change is not None:
                await self._append_once(wl, ev.PodsReadyChanged(time=_now(), key=wl.key, uid=wl.uid,
                                                                ready=change[0], reason=change[1]))
        if wl is not None and managed and wl.phase != FINISHED and await self._replacement_pods(
                wl, pods, counted=generated):
            return True  # as Kueue's reconciler: the rest waits for the Workload that shows the condition
        held = any(pod_sync.is_gated(p) or pod_sync.ended(p) is not None for p in own)  # Kueue's IsSuspended
        if wl is not None and obs is not None and managed and await self._sync_workload(
                pods[0], wl, obs, running=not held, generated=generated, holder=holder):
            return True  # as Kueue's reconciler: the rest waits for the Workload that shows it
        if wl is not None and obs is not None and managed and not wf.deleting(obs):
            await self._admission_checks(pods, wl, held=held)
        return False

    async def _owned_by_kept_pods(self, group: str, pods: list[ManagedPod], wl: WorkloadInfo,
                                  obs: o.Workload) -> bool:
        """Make every Pod the group keeps (:func:`connectors.k8s.pod_group.kept`: a replacement Pod too) an owner of
        its matching Workload, as Kueue's pod reconciler does once it finds it (so the garbage collector does not take
        it once the Pods it was made of are gone); ``OwnerReferencesAdded`` "Added N owner reference(s)" on the
        Workload. Whether the pass ends here: written, or written and not yet shown by the watch."""
        patch = pod_prebuilt.owners_patch(pod_group.kept(pods, wl), obs)
        if patch is None:
            return False
        if not await self._patch_once(group, "owners", obs, patch):
            return True
        added = len(patch["metadata"]["ownerReferences"]) - len(obs.metadata.owner_references)
        log.info("made the pod group's pods owners of its workload", group=group, workload=obs.key, added=added)
        await self._workloads_log.report(wl.key, wl.uid, pod_group.OWNER_REFERENCES_ADDED, workload=wl.key,
                                         message=pod_group.owners_added_message(added))
        return True

    async def _patch_once(self, group: str, what: str, obs: o.Workload, patch: Any,
                          content_type: str = MERGE_PATCH) -> bool:
        """Patch the group's Workload ``obs`` once per version of it (``what`` names the write): whether it was
        written now. Not when already written for this version, nor when it is gone or changed meanwhile (its
        watch brings the newer one, and the write is tried again on that)."""
        marker = (what, obs.metadata.uid, obs.metadata.resource_version)
        if self._acted.get(GROUP_PREFIX + group) == marker:
            return False
        self._acted[GROUP_PREFIX + group] = marker
        try:
            await self.client.patch(WORKLOADS, obs.metadata.name, patch, obs.metadata.namespace,
                                    content_type=content_type)
        except (NotFound, Conflict):
            self._acted.pop(GROUP_PREFIX + group, None)
            return False
        except BaseException:
            self._acted.pop(GROUP_PREFIX + group, None)
            raise
        return True

    async def _refused_adoption(self, group: str, first: ManagedPod) -> bool:
        """Whether the group's name is taken by a Workload not made for a group, which it does not take under
        ``PodIntegrationValidateGroupOwner`` (:func:`connectors.k8s.pod_group.refuses_adoption`): it then gets no
        Workload while that one is there, and the Warning ``WorkloadNameConflict`` on ``first`` (the Pod standing
        for it), once per version of that Pod and of the Workload (Kueue records it at every reconcile and its
        recorder folds the repeats). The Workload's deletion marks the group dirty, so it then gets its own."""
        obs = self.mirror.workloads.get(group)
        if not pod_group.refuses_adoption(obs, self.state.gate(gates.POD_INTEGRATION_VALIDATE_GROUP_OWNER)):
            return False
        assert obs is not None
        marker = (pod_group.WORKLOAD_NAME_CONFLICT, obs.metadata.uid, obs.metadata.resource_version,
                  first.metadata.resource_version)
        if self._acted.get(GROUP_PREFIX + group) != marker:
            self._acted[GROUP_PREFIX + group] = marker
            self.stats.name_conflicts += 1
            log.warning("a workload not made for a pod group has the group's name: not taken", group=group)
            await self._report(first, pod_group.WORKLOAD_NAME_CONFLICT,
                               message=pod_group.name_conflict_message(group.partition("/")[2]))
        return True

    async def _group_gone(self, group: str) -> None:
        """No Pod of the group is left in the watch: unless another owner keeps it
        (:meth:`StatefulSetGroups.kept_by_owner`: a StatefulSet, which puts it on hold at zero and releases it when
        scaled up (:meth:`StatefulSetGroups.held_by_statefulset`), a LeaderWorkerSet), once the apiserver has none
        of the Pods its Workload names as owners, the Workload is let go (:meth:`_let_go`) and deleted, as the
        garbage collector would."""
        obs = self.mirror.workloads.get(group)
        if obs is None or not pod_group.is_group_workload(obs):
            self._acted.pop(GROUP_PREFIX + group, None)  # nothing left to do for the group
            self.gone_groups.discard(group)
            return
        kept, sts = await self.sets.kept_by_owner(group, obs)
        if kept:
            self.gone_groups.discard(group)
            wl = self.state.workloads.get(group)
            if (sts is not None and wl is not None and self._config().manages_statefulsets and not wf.deleting(obs)
                    and await self.sets.held_by_statefulset(group, wl, obs, sts)):
                return  # on hold, or its hold cleared: the rest waits for the Workload that shows it
            self._acted.pop(GROUP_PREFIX + group, None)
            if wf.deleting(obs) and wf.holds(obs):
                # someone deleted it: with no Pod left to stop, its finalizer goes (workload_finalizer's rule)
                with contextlib.suppress(Conflict):  # changed meanwhile: the watch brings the newer one
                    await self._unfinalize(obs)
                return
            # Evicted, with no Pod left to stop, it gives its quota back now (Kueue's #14578), as a group's does
            # once none of its Pods runs.
            if wl is not None and wl.uid == obs.metadata.uid and wl.evicted and wl.reserving and not wl.job_stopped:
                await self._give_back_quota(wl)
            return
        self.gone_groups.add(group)
        marker = ("orphan", obs.metadata.resource_version)
        if self._acted.get(GROUP_PREFIX + group) == marker:
            return  # done: the watch brings the Workload's deletion
        for ref in obs.metadata.owner_references:
            if ref.kind == "Pod" and await self._exists(obs.metadata.namespace, ref.name, ref.uid):
                return  # out of the watch's selection is not gone
        try:
            with self._marked(GROUP_PREFIX + group, marker):
                if not await wf.delete_unfinalized(self.client, obs, await self._let_go(group, obs)):
                    return
        except Conflict:
            self.stats.conflicts += 1
            log.info("the workload of a pod group that is gone moved on: let go on its next version", group=group)
            return  # changed meanwhile: the watch brings the newer Workload, which marks the group (gone_groups)
        self.stats.orphans += 1
        log.info("deleted the workload of a pod group that is gone", group=group)

    async def _exists(self, namespace: str, name: str, uid: str) -> bool:
        """Whether the apiserver has Pod ``name`` of that ``uid``."""
        try:
            raw = msgspec.json.decode(await self.client.get(PODS, name, namespace))
        except NotFound:
            return False
        return raw["metadata"].get("uid") == uid

    async def _replacement_pods(self, wl: WorkloadInfo, pods: list[ManagedPod], counted: bool = True) -> bool:
        """Put in the log that the group's Workload waits for replacement Pods (or no longer does) when its
        ``WaitingForReplacementPods`` condition is to change; whether it did. ``counted``: Kueue counted the
        absent Pods (not for a prebuilt Workload, which it finds by name: none are)."""
        waiting = counted and pod_group.absent_pods(pods, wl) > 0
        wanted = replacement_pods_condition(wl, waiting)
        current = wl.condition(WAITING_FOR_REPLACEMENT_PODS)
        if wanted is None or (current is not None and (current.status, current.reason, current.message) == wanted):
            return False
        await self._append_once(wl, ev.ReplacementPodsChanged(time=_now(), key=wl.key, uid=wl.uid, waiting=waiting))
        return True

    async def _carry_out_group(self, group: str, step: pod_group.GroupStep, wl: WorkloadInfo | None,
                               first: ManagedPod | None, holder: statefulsets.StatefulSetRevision | None) -> None:
        match step.action:
            case pod_group.CREATE:
                missing = missing_class(self.state, step.kept[0].metadata.labels) if step.kept else None
                if missing is not None:
                    marker = (CLASS_MISSING, tuple(p.metadata.resource_version for p in step.kept))
                    if self._acted.get(GROUP_PREFIX + group) != marker:
                        self._acted[GROUP_PREFIX + group] = marker
                        await self._class_missing(step.kept[0], missing)
                    return
                marker = ("create", tuple(p.metadata.resource_version for p in step.kept))
                if self._acted.get(GROUP_PREFIX + group) != marker:
                    with self._marked(GROUP_PREFIX + group, marker):
                        await self._create_group(group, list(step.kept), holder)
            case pod_group.START:
                assert wl is not None
                admission = wl.admission
                for pod in step.pods:
                    if wl.admission is not admission or not is_admitted(wl):
                        break  # evicted meanwhile: the pass the eviction's record marks stops what was started
                    await self._once(pod, "start", self._start(pod, wl, pod_group.role_of(pod), group=True))
            case pod_group.STOP:
                stop = Step(pod_sync.STOP, step.reason, step.message)
                for pod in step.pods:
                    if self._stopped.get(pod.key) != pod.metadata.uid:
                        await self._once(pod, "stop", self._stop(pod, stop, wl))
            case pod_group.RELEASE:
                assert wl is not None
                await self._give_back_quota(wl)
            case pod_group.DELETE:
                assert wl is not None and first is not None
                stop = Step(pod_sync.STOP, step.reason, step.message)
                for pod in step.pods:
                    if self._stopped.get(pod.key) != pod.metadata.uid:
                        await self._once(pod, "stop", self._stop(pod, stop, wl))
                await self._delete_not_matching(group, wl, first)
            case pod_group.UPDATE:
                assert wl is not None
                marker = ("update", wl.key, tuple(p.metadata.resource_version for p in step.kept))
                if self._acted.get(GROUP_PREFIX + group) != marker:
                    self._acted[GROUP_PREFIX + group] = marker
                    try:
                        await self._update_group(group, wl, list(step.kept))
                    except BaseException:
                        self._acted.pop(GROUP_PREFIX + group, None)
                        raise
            case pod_group.FINISH:
                assert wl is not None
                await self._finish(wl, step.reason, step.message)
            case pod_group.FINALIZE:
                for pod in step.pods:  # none finished without a Workload (a prebuilt one missing): no Event
                    await self._once(pod, "finalize", self._finalize(pod, wl.key if wl is not None else ""))
            case pod_group.RECLAIM:
                assert wl is not None
                await self._append_once(wl, ev.ReclaimablePodsChanged(
                    time=_now(), key=wl.key, uid=wl.uid,
                    reclaimable_pods=[o.ReclaimablePod(name=n, count=c) for n, c in step.reclaimable]))
            case pod_group.WAIT | pod_group.INVALID:
                if self._acted.get(GROUP_PREFIX + group) != (step.action, step.message):
                    self._acted[GROUP_PREFIX + group] = (step.action, step.message)
                    log.info("pod group gets no workload yet", group=group, reason=step.message)
                    if step.reason == pod_group.ERR_WORKLOAD_COMPOSE and step.pods:
                        await self._report(step.pods[0], pod_group.ERR_WORKLOAD_COMPOSE, message=step.message)
            case _:
                pass

    async def _delete_not_matching(self, group: str, wl: WorkloadInfo, first: ManagedPod) -> None:
        """Delete the group's Workload, which none of its Pods has a role of any more, its finalizer first,
        conditioned on its uid and resourceVersion; ``DeletedWorkload`` on the Pod standing for the group. The
        group then gets a new one as any group without one."""
        obs = self.mirror.workloads.get(wl.key)
        if obs is None:
            return
        marker = ("delete", obs.metadata.resource_version)
        if self._acted.get(GROUP_PREFIX + group) == marker:
            return  # done: the watch brings the Workload's deletion
        try:
            with self._marked(GROUP_PREFIX + group, marker):
                if not await wf.delete_unfinalized(self.client, obs, await self._unfinalize(obs)):
                    return
        except Conflict:
            return  # changed meanwhile: the watch brings the newer Workload
        self.stats.deleted += 1
        log.info("deleted the workload its pod group no longer matches", group=group, workload=obs.key)
        await self._report(first, DELETED_WORKLOAD, workload=obs.key, message=job_sync.deleted_message(obs.key))

    async def _update_group(self, group: str, wl: WorkloadInfo, kept: list[ManagedPod]) -> None:
        """Rewrite the spec of the group's Workload, which it no longer matches, from its Pods as stored (built as
        at creation), conditioned on the Workload's resourceVersion; ``UpdatedWorkload`` on the Pod standing for
        the group. The Pods not yet among its owners become owners in the same write (Kueue adds them on its next
        pass over the matching Workload), so that it is not taken for one whose Pods are all gone."""
        obs = self.mirror.workloads.get(wl.key)
        raws = await self._stored(group, kept)
        if obs is None or raws is None:
            return
        try:
            body = pod_group.workload_for(self.state, raws)
        except (WorkloadPriorityClassNotFound, PriorityClassNotFound) as exc:
            self._acted.pop(GROUP_PREFIX + group, None)
            log.warning("the pod group's priority class is not there: its workload is not updated", group=group,
                        error=str(exc))
            return
        except (InvalidInput, ValueError) as exc:
            self.stats.invalid.append(group)
            log.error("pod group refused: its workload is not updated", group=group, error=str(exc))
            return
        patch = job_sync.spec_patch(obs, body["spec"])
        patch["metadata"]["ownerReferences"] = pod_group.owners_with(obs, raws)
        try:
            await self.client.patch(WORKLOADS, obs.metadata.name, patch, obs.metadata.namespace)
        except (NotFound, Conflict):
            self._acted.pop(GROUP_PREFIX + group, None)
            return  # gone or changed meanwhile: the watch brings the newer one
        self.stats.updated += 1
        log.info("updated the workload its pod group no longer matches", group=group, workload=obs.key)
        await self._report(kept[0], UPDATED_WORKLOAD, workload=obs.key, message=job_sync.updated_message(obs.key))

    async def _stored(self, group: str, pods: list[ManagedPod]) -> list[dict[str, Any]] | None:
        """The group's Pods as stored, in order; None when one is gone or made anew meanwhile."""
        namespace = group.partition("/")[0]
        raws = []
        for pod in pods:
            try:
                raw = msgspec.json.decode(await self.client.get(PODS, pod.metadata.name, namespace))
            except NotFound:
                return None
            if raw["metadata"]["uid"] != pod.metadata.uid:
                return None
            raws.append(raw)
        return raws

    async def _create_group(self, group: str, kept: list[ManagedPod],
                            holder: statefulsets.StatefulSetRevision | None) -> None:
        """Create the group's Workload from its Pods as stored (any gone or made anew meanwhile: not yet); one a
        StatefulSet holds carries the set's uid as its job uid and (``holder``, under ``AdmissionGatedBy``) takes the
        set's admission gate, as Kueue's StatefulSet reconciler gives them."""
        namespace = group.partition("/")[0]
        raws = await self._stored(group, kept)
        if raws is None:
            return
        try:
            body = pod_group.workload_for(self.state, raws)
            set_uid = holding_uid(self._config(), kept)
            if set_uid is not None:
                body["metadata"]["labels"] = {**body["metadata"].get("labels", {}), JOB_UID_LABEL: set_uid}
            if holder is not None:
                body["metadata"]["annotations"].update(copied_metadata.gated_annotations(
                    self.state, holder.metadata.annotations, copied_metadata.ADMISSION_GATE_ONLY))
        except (WorkloadPriorityClassNotFound, PriorityClassNotFound) as exc:
            self._acted.pop(GROUP_PREFIX + group, None)  # created once the class is there
            log.warning("the pod group's priority class is not there: no workload created yet", group=group,
                        error=str(exc))
            return
        except (InvalidInput, ValueError) as exc:
            self.stats.invalid.append(group)
            log.error("pod group refused: no workload created", group=group, error=str(exc))
            return
        try:
            created = await self.client.create(WORKLOADS, body, namespace)
        except AlreadyExists:
            return
        self.stats.created += 1
        log.info("created workload", group=group, workload=group)
        await self._log.report(kept[0].key, kept[0].metadata.uid, CREATED_WORKLOAD, workload=group,
                               creation_latency_ms=creation_latency_ms(kept[0].metadata, created))

    # --- prebuilt Workloads --------------------------------------------------------------------------------------

    async def _prebuilt_usable(self, pod: ManagedPod, wl: WorkloadInfo, obs: o.Workload) -> bool | None:
        """Whether the single Pod runs on the prebuilt Workload it names (:mod:`connectors.k8s.pod_prebuilt`):
        True once it controls it and the two match; False when another object controls it or it is out of sync
        (then finished ``OutOfSync``) — the Pod then waits as for a missing one; None once it was just adopted."""
        verdict = pod_prebuilt.single_verdict(self.state, pod, obs, wl)
        if verdict == pod_prebuilt.ADOPT:
            await self._once(pod, "adopt", self._patch_prebuilt(obs, pod_prebuilt.adoption_patch(pod, obs), pod.key))
            return None
        if verdict == pod_prebuilt.OUT_OF_SYNC:
            await self._out_of_sync(wl, pod.key)
        return verdict == pod_prebuilt.USABLE

    async def _group_prebuilt_usable(self, group: str, pods: list[ManagedPod], wl: WorkloadInfo,
                                     obs: o.Workload) -> bool | None:
        """:meth:`_prebuilt_usable` for a pod group: its Pods are made owners of the Workload first."""
        verdict = pod_prebuilt.group_verdict(pods, obs, wl)
        if verdict == pod_prebuilt.ADD_OWNERS:
            marker = ("owners", obs.metadata.resource_version)
            if self._acted.get(GROUP_PREFIX + group) != marker:
                self._acted[GROUP_PREFIX + group] = marker
                patch = pod_prebuilt.owners_patch(pods, obs)
                assert patch is not None
                try:
                    written = await self._patch_prebuilt(obs, patch, group)
                except BaseException:
                    self._acted.pop(GROUP_PREFIX + group, None)
                    raise
                if written:
                    added = len(patch["metadata"]["ownerReferences"]) - len(obs.metadata.owner_references)
                    await self._workloads_log.report(wl.key, wl.uid, pod_group.OWNER_REFERENCES_ADDED,
                                                     workload=wl.key, message=pod_group.owners_added_message(added))
            return None
        if verdict == pod_prebuilt.OUT_OF_SYNC:
            await self._out_of_sync(wl, group)
        return verdict == pod_prebuilt.USABLE

    async def _patch_prebuilt(self, obs: o.Workload, patch: dict[str, Any], whose: str) -> bool:
        """Write a prebuilt Workload's new owners, conditioned on its resourceVersion (gone meanwhile: its deletion
        comes with the watch); whether it was written."""
        try:
            await self.client.patch(WORKLOADS, obs.metadata.name, patch, obs.metadata.namespace)
        except NotFound:
            return False
        self.stats.adopted += 1
        log.info("adopted a prebuilt workload", pod=whose, workload=obs.key)
        return True

    async def _out_of_sync(self, wl: WorkloadInfo, whose: str) -> None:
        if wl.phase != FINISHED and await self._append_once(wl, ev.WorkloadFinished(
                time=_now(), key=wl.key, uid=wl.uid, reason=prebuilt.OUT_OF_SYNC, message=prebuilt.OUT_OF_SYNC_MESSAGE)):
            self.stats.out_of_sync.append(wl.key)
            log.warning("prebuilt workload out of sync with its pods: finished", pod=whose, workload=wl.key)

    async def _remove_excess(self, pod: ManagedPod) -> None:
        """Finalize and delete a Pod beyond its group's count (``ExcessPodDeleted``)."""
        try:
            if pod_sync.finalizable(pod):
                await self.client.patch(PODS, pod.metadata.name, pod_sync.finalize_patch(pod), pod.metadata.namespace)
            if not pod.metadata.deletion_timestamp:
                await self.client.delete(PODS, pod.metadata.name, pod.metadata.namespace, uid=pod.metadata.uid)
        except NotFound:
            return
        self.stats.excess += 1
        log.info("deleted an excess pod of its group", pod=pod.key)
        await self._report(pod, pod_group.EXCESS_POD_DELETED, message="Excess pod deleted")


def _pod_key(obs: o.Workload) -> str | None:
    """The key of the Pod that controls ``obs`` (None: no Pod does)."""
    owner = pod_sync.owner_pod(obs)
    return owner[0] if owner is not None else None


def _request_of(pod: ManagedPod) -> str:
    """The Pod's reconcile key: its group's (``group/<namespace>/<group>``) for a group's Pod, else its own."""
    group = pod_group.group_key(pod)
    return GROUP_PREFIX + group if group else pod.key


def _names_carried(pod: ManagedPod) -> list[str]:
    """Keys of the Workloads the Pod's prebuilt label or annotation names, whichever the gate reads."""
    names = {pod.metadata.labels.get(prebuilt.KEY, ""), pod.metadata.annotations.get(prebuilt.KEY, "")} - {""}
    return [f"{pod.metadata.namespace}/{n}" for n in sorted(names)]


def _now() -> int:
    return int(time.time() * 1000)


def _rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
