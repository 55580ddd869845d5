"""The connector's view of the log: the cluster-state projection plus what only the connector needs.

* ``state`` — :class:`projections.cluster.ClusterState`, the same fold the scheduler decides on; the desired
  Workload status is ``status_of(state.workloads[key])``;
* ``inventory`` — kind → key → (uid, resourceVersion) of every object the log says exists, so a relist (after a
  410, or after a restart, when this is folded from the log again) emits exactly the differences;
* ``workloads`` — the last observed Workload objects (their status as the apiserver has it, their
  resourceVersion for optimistic concurrency, their pod-set templates to restore a stopped Job);
* ``kube_events`` — the Kubernetes Events Kueue would record for the decisions, kept until the decision is
  carried out and then for an event TTL, and for what the job integration did to Jobs, for the recorder
  (:mod:`connectors.k8s.decision_events`, :mod:`connectors.k8s.job_events`);
* ``pending`` — decisions without an outcome (``DecisionApplied``/``DecisionRejected``) yet, per workload;
  ``request_decisions`` — those of them that create or delete a ProvisioningRequest, whole (their applier needs
  their content, also after a restart).

It is a fold like every projection: applying the same records gives the same mirror. ``dirty_workloads``,
``dirty_jobs`` and ``dirty_queues`` collect the keys each record touched, for the writers and the Job integration
to look at (a WorkloadPriorityClass or PriorityClass touches the Jobs without a Workload that name it; a Workload
touches the Jobs that name it as their prebuilt one, indexed in ``named_by``, which is derived from the Jobs alone
and so rebuilt, not checkpointed; the outcome of a Workload's last pending decision touches its Job, which waits for
it before it writes the Workload). ``owned_by`` indexes the Workloads each Job (by name) controls, all of them
(a Job may have more than one: :func:`connectors.k8s.job_sync.one_workload`), ``controlled`` those each object of
any kind (by uid) controls, and ``dirty_orphans`` collects the Workloads left with no owner at all that Kueue
would finish or let go of (:func:`connectors.k8s.workload_finalizer.ownerless`); all are derived from the observed
Workloads, so rebuilt.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from connectors.k8s.decision_events import EventLedger, involved_job
from connectors.k8s.job_events import pending_checks_message
from connectors.k8s.job_priority import PRIORITY_LABEL
from connectors.k8s.prebuilt import names_carried
from connectors.k8s.workload_finalizer import maybe_ownerless
from events import objects as o
from events import schema as ev
from projections import queue_status
from projections.cluster import ClusterState
from projections.in_use import KINDS as FINALIZED
from projections.workloads import PENDING, WORKLOAD_ANNOTATION, WorkloadInfo

WORKLOAD_EVENTS = (ev.Decision, ev.WorkloadFinished, ev.PodsReadyChanged, ev.AdmissionCheckStateChanged,
                   ev.JobStopped, ev.ReclaimablePodsChanged, ev.ReplacementPodsChanged,
                   ev.WorkloadOnHoldChanged)
LEDGER_EVENTS = (ev.Decision, ev.DecisionApplied, ev.DecisionRejected, ev.JobActed, ev.WorkloadFinished,
                 ev.ProvisioningRequestCreateFailed)
OUTCOMES = (ev.DecisionApplied, ev.DecisionRejected)
FAMILY_DECISIONS = (ev.ParentLabelled, ev.VariantCreated, ev.VariantActivation, ev.VariantDeleted)
"""ConcurrentAdmission's decisions that are no status write (:mod:`connectors.k8s.variants` carries them out)."""
FAMILY_TAGS = frozenset(t.__struct_config__.tag for t in FAMILY_DECISIONS)  # type: ignore[attr-defined]
QUEUE_INPUTS = frozenset({"ResourceFlavor", "AdmissionCheck", "Topology", "Cohort"})
"""Kinds whose changes may change any queue's status (activeness, borrowing)."""


class Mirror:
    def __init__(self, state: ClusterState | None = None) -> None:
        self.state = state if state is not None else ClusterState()
        self.inventory: dict[str, dict[str, tuple[str, str]]] = {}
        self.workloads: dict[str, o.Workload] = {}
        self.pending: dict[str, dict[int, str]] = {}
        """Workload key -> {decision offset: decision type} still waiting for an outcome."""
        self.request_decisions: dict[int, ev.ProvisioningRequestCreated | ev.ProvisioningRequestDeleted] = {}
        """Offset -> ProvisioningRequest decision still waiting for an outcome."""
        self.job_of: dict[str, str] = {}
        """Workload key -> key of the Job that owns it (controller ownerReference)."""
        self.workload_of: dict[str, str] = {}
        """Job key -> key of its Workload (the latest one seen)."""
        self.owned_by: dict[str, set[str]] = {}
        """Job key -> keys of every Workload a Job of that name controls (any uid), as last observed."""
        self.controlled: dict[str, set[str]] = {}
        """Controller uid -> keys of the Workloads that object (of any kind) controls, as last observed: a child
        Job's parent's Workloads (:func:`connectors.k8s.child_jobs.parent_workload`)."""
        self.dirty_workloads: set[str] = set()
        self.dirty_jobs: set[str] = set()
        self.dirty_queues: set[str] = set()
        """``ClusterQueue/<name>``, ``LocalQueue/<ns>/<name>``, or ``*`` (all): queues whose status may change."""
        self.dirty_retention: set[str] = set()
        """Workloads with a RetentionExpired decision (what it deletes may still be there)."""
        self.dirty_variants: set[str] = set()
        """Workloads with a ConcurrentAdmission decision that is no status write (:mod:`connectors.k8s.variants`):
        a parent label, a variant to create or delete, a variant's ``spec.active``."""
        self.dirty_finalizers: set[str] = set()
        """``<Kind>/<name>`` of ClusterQueues, ResourceFlavors, AdmissionChecks, Topologies whose
        resource-in-use finalizer may need adding or removing."""
        self.dirty_priorities: set[str] = set()
        """Workloads whose ``spec.priority`` may have to follow their WorkloadPriorityClass's value
        (:mod:`connectors.k8s.workload_priority`): one arriving at a class, or every one of a class created or
        whose value changed."""
        self.dirty_orphans: set[str] = set()
        """Workloads with no owner reference that are being deleted or carry the job-uid label (the Job
        integration finishes them or takes their finalizer off)."""
        self.kube_events = EventLedger()
        self.listeners: list[Callable[[list[ev.Record]], None]] = []
        self.named_by: dict[str, set[str]] = {}
        """Workload key -> the Jobs whose ``kueue.x-k8s.io/prebuilt-workload-name`` (label or annotation,
        whichever the gate reads) names it: looked at again when it comes or goes."""
        for key, job in self.state.jobs.items():
            self._index_prebuilt(key, None, job)

    @property
    def offset(self) -> int:
        return self.state.offset

    def apply_batch(self, records: list[ev.Record]) -> None:
        for r in records:
            self.apply(r)
        for listener in self.listeners:
            listener(records)

    def apply(self, record: ev.Record) -> None:
        e = record.event
        wl_key = _workload_key(e)
        if wl_key:
            self._dirty_queues_of(wl_key)
        if isinstance(e, LEDGER_EVENTS):
            self.kube_events.fold(record, self.state, self.job_of)  # sees the workload as it was before
        job_seen = self.job_of.get(wl_key) if wl_key else None
        job_before = _job_before(self.state, e)
        held = _holding(self.state, e)
        scheduling = _pod_workloads(self.state, e)
        wpc_before = _class_before(self.state, e)
        self.state.apply(record)
        if scheduling:
            self.dirty_workloads.update(scheduling)  # its PodsScheduled condition may have changed
        if held is not None and not held.reserving and held.phase == PENDING:
            self.kube_events.forget_reservation(held.key)  # the rewritten Workload shows none: never written
        if wl_key:
            self._dirty_queues_of(wl_key)
        match e:
            case ev.ObjectUpserted():
                obj = e.obj
                kind = type(obj).__struct_config__.tag  # type: ignore[attr-defined]
                key = obj.key
                self.inventory.setdefault(kind, {})[key] = (obj.metadata.uid, obj.metadata.resource_version)
                if isinstance(obj, o.Workload):
                    if _class_moved(self.workloads.get(key), obj):
                        self.dirty_priorities.add(key)
                    self._index_owned(key, self.workloads.get(key), obj)
                    self.workloads[key] = obj
                    if maybe_ownerless(obj):
                        self.dirty_orphans.add(key)
                    self.dirty_workloads.add(key)
                    self.dirty_jobs.update(self.named_by.get(key, ()))
                    owner = _controller_job(obj)
                    if owner is not None:
                        job_key = f"{obj.metadata.namespace}/{owner}"
                        self.job_of[key] = job_key
                        self.workload_of[job_key] = key
                        self.dirty_jobs.add(job_key)
                elif isinstance(obj, o.Job):
                    self.dirty_jobs.add(key)
                    job_seen = key
                    self._index_prebuilt(key, job_before, obj)
                elif isinstance(obj, o.WorkloadPriorityClass):
                    self._dirty_jobs_waiting_for(key)
                    if wpc_before is None or wpc_before.value != obj.value:
                        self.dirty_priorities.update(k for k, w in self.workloads.items()
                                                     if (ref := w.spec.priority_class_ref) is not None
                                                     and ref.name == key)
                elif isinstance(obj, o.PriorityClass):
                    self._dirty_jobs_waiting_for(key, pod_class=True)
                else:
                    if isinstance(obj, o.Namespace):
                        self._dirty_jobs_in(obj.metadata.name)
                    self._dirty_queues_for(kind, key)
                    self._dirty_finalizers_for(kind, key)
            case ev.ObjectDeleted():
                self.inventory.get(e.kind, {}).pop(e.key, None)
                if e.kind == "Workload":
                    self._index_owned(e.key, self.workloads.pop(e.key, None), None)
                    self.dirty_orphans.discard(e.key)
                    self.dirty_workloads.add(e.key)
                    self.dirty_jobs.update(self.named_by.get(e.key, ()))
                    job_key = self.job_of.pop(e.key, None)
                    if job_key is not None:
                        if self.workload_of.get(job_key) == e.key:
                            del self.workload_of[job_key]
                        self.dirty_jobs.add(job_key)
                elif e.kind == "Job":
                    self.dirty_jobs.add(e.key)
                    job_seen = e.key
                    self._index_prebuilt(e.key, job_before, None)
                else:
                    self._dirty_queues_for(e.kind, e.key)
                    self._dirty_finalizers_for(e.kind, "")
            case ev.ConfigRecorded():
                self.dirty_jobs |= self.state.jobs.keys()  # which namespaces are managed may have changed
                self.dirty_queues.add("*")  # a gate's setting may change queue statuses (TAS, DynamicQuotaOrchestration)
                self._dirty_finalizers_for("ClusterQueue", "")  # and which flavors the quotas in force use
                # and whether a Topology controller runs at all (TopologyAwareScheduling)
                self.dirty_finalizers.update(f"Topology/{name}" for name in self.state.topologies)
            case ev.WorkerQueuesObserved() | ev.MultiKueueClusterObserved():
                self.dirty_queues.add("*")  # a manager's quota automation reads the workers' queues and links
            case ev.ProvisioningRequestCreated() | ev.ProvisioningRequestDeleted():
                self.request_decisions[record.offset] = e
            case ev.DecisionApplied() | ev.DecisionRejected():
                self.request_decisions.pop(e.decision, None)
                decisions = self.pending.get(e.key)
                if decisions is not None:
                    if decisions.pop(e.decision, None) == "ParentLabelled":
                        self.dirty_workloads.add(e.key)  # the status writer waited for the label (writer.py)
                    if not decisions:
                        del self.pending[e.key]
                        self._dirty_job_of(e.key)
            case _:
                pass
        if isinstance(e, WORKLOAD_EVENTS):
            self.dirty_workloads.add(e.key)
            job_key = self.job_of.get(e.key)
            if job_key is not None:
                self.dirty_jobs.add(job_key)
            if isinstance(e, ev.Decision):
                self.pending.setdefault(e.key, {})[record.offset] = type(e).__struct_config__.tag  # type: ignore[attr-defined]
                if isinstance(e, ev.RetentionExpired):
                    self.dirty_retention.add(e.key)
                elif isinstance(e, FAMILY_DECISIONS):
                    self.dirty_variants.add(e.key)
        elif isinstance(e, OUTCOMES):
            job_seen = self.job_of.get(e.key)
        job_seen = job_seen or (self.job_of.get(wl_key) if wl_key else None)
        if job_seen is not None:
            self._pending_checks(record, job_seen)

    def mark_all_dirty(self) -> None:
        """Every key the mirror holds is the workers' to look at: what a fold from the log's first event leaves
        (it marks every key it meets), for a mirror restored from a checkpoint."""
        state = self.state
        self.dirty_workloads |= state.workloads.keys() | self.workloads.keys() | self.pending.keys()
        self.dirty_jobs |= state.jobs.keys() | self.workload_of.keys()
        self.dirty_queues.add("*")
        self.dirty_priorities |= self.workloads.keys()
        self.dirty_retention |= {k for k, decisions in self.pending.items() if "RetentionExpired" in decisions.values()}
        self.dirty_variants |= {k for k, decisions in self.pending.items()
                                if any(tag in FAMILY_TAGS for tag in decisions.values())}
        self.dirty_orphans |= {k for k, w in self.workloads.items() if maybe_ownerless(w)}
        # (the finalizer worker looks at every object of its kinds when it starts, whatever is marked)

    def _pending_checks(self, record: ev.Record, job_key: str) -> None:
        """Kueue's job reconciler, seeing the Job or its Workload change, records the messages of the Workload's
        pending admission checks (:func:`connectors.k8s.job_events.pending_checks_message`); it sees the status
        the Workload was last written with, so while a decision about it waits to be written, nothing."""
        job = self.state.jobs.get(job_key)
        wl_key = self.workload_of.get(job_key)
        wl = self.state.workloads.get(wl_key) if wl_key is not None else None
        if job is not None and wl is not None and wl.key in self.pending:
            return
        self.kube_events.pending_checks(record.offset, record.event, job_key,
                                        involved_job(job) if job is not None else None,
                                        pending_checks_message(job, wl))

    def reindex_owned(self) -> None:
        """``owned_by`` and ``controlled`` anew from the observed Workloads (a mirror restored from a checkpoint)."""
        self.owned_by = {}
        self.controlled = {}
        for key, w in self.workloads.items():
            self._index_owned(key, None, w)

    def _index_owned(self, key: str, before: o.Workload | None, after: o.Workload | None) -> None:
        """Keep ``owned_by`` and ``controlled`` up to date as Workload ``key`` goes from ``before`` to ``after``
        (None: not there)."""
        _move(self.controlled, key, _controller_uid(before), _controller_uid(after))
        old = _controller_job(before) if before is not None else None
        new = _controller_job(after) if after is not None else None
        if old == new:
            return
        namespace = key.partition("/")[0]
        if old is not None:
            keys = self.owned_by.get(f"{namespace}/{old}")
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self.owned_by[f"{namespace}/{old}"]
        if new is not None:
            self.owned_by.setdefault(f"{namespace}/{new}", set()).add(key)

    def _index_prebuilt(self, key: str, before: o.Job | None, after: o.Job | None) -> None:
        """Keep ``named_by`` up to date as Job ``key`` goes from ``before`` to ``after`` (None: not there)."""
        old = names_carried(before) if before is not None else ()
        new = names_carried(after) if after is not None else ()
        if old == new:
            return
        namespace = key.partition("/")[0]
        for name in old:
            jobs = self.named_by.get(f"{namespace}/{name}")
            if jobs is not None:
                jobs.discard(key)
                if not jobs:
                    del self.named_by[f"{namespace}/{name}"]
        for name in new:
            self.named_by.setdefault(f"{namespace}/{name}", set()).add(key)

    def _dirty_jobs_in(self, namespace: str) -> None:
        """The Jobs of a namespace that arrived or changed its labels: whether they are managed may have changed
        (``managedJobsNamespaceSelector``). A scan of the Jobs, at a change of a namespace: rare."""
        prefix = f"{namespace}/"
        self.dirty_jobs.update(key for key in self.state.jobs if key.startswith(prefix))

    def _dirty_job_of(self, wl_key: str) -> None:
        """The Job of a Workload whose last pending decision got its outcome: a pass that waited for it (the
        Job changed while the decision was being written, :mod:`connectors.k8s.job_sync`) is taken again. The
        outcome may be all that comes: a decision the Workload already shows is applied without a write, so
        without a newer Workload from the watch."""
        job_key = self.job_of.get(wl_key)
        if job_key is not None:
            self.dirty_jobs.add(job_key)

    def _dirty_jobs_waiting_for(self, name: str, *, pod_class: bool = False) -> None:
        """The Jobs whose priority-class label (or, ``pod_class``, pod template's PriorityClass) names class
        ``name``: one given no Workload while it was missing gets one now, one whose Workload waits for its new
        class gets it (:mod:`connectors.k8s.job_sync`). (A scan of the Jobs, at a change of a class: rare.)"""
        for key, job in self.state.jobs.items():
            named = (job.spec.template.spec.priority_class_name if pod_class
                     else job.metadata.labels.get(PRIORITY_LABEL))
            if named == name:
                self.dirty_jobs.add(key)

    def seen(self, kind: str, key: str) -> tuple[str, str] | None:
        return self.inventory.get(kind, {}).get(key)

    def _dirty_queues_of(self, wl_key: str) -> None:
        wl = self.state.workloads.get(wl_key)
        if wl is not None:
            if wl.cluster_queue:
                self.dirty_queues.add(f"ClusterQueue/{wl.cluster_queue}")
                self._dirty_cohorts_above(wl.cluster_queue)
                cq = self.state.cluster_queues.get(wl.cluster_queue)
                if cq is not None and cq.metadata.deletion_timestamp:
                    self.dirty_finalizers.add(f"ClusterQueue/{wl.cluster_queue}")
            self.dirty_queues.add(f"LocalQueue/{wl.namespace}/{wl.queue_name}")

    def _dirty_cohorts_above(self, cq: str) -> None:
        """The Cohort objects above ClusterQueue ``cq``, whose weighted shares its usage moves (while Fair Sharing
        is on: otherwise their status does not depend on it)."""
        if not self.state.cohorts or not queue_status.fair_sharing_on(self.state):
            return
        node = self.state.quota.cluster_queues.get(cq)
        parent = node.parent if node is not None else None
        while parent is not None:
            if parent.name in self.state.cohorts:
                self.dirty_queues.add(f"Cohort/{parent.name}")
            parent = parent.parent

    def _dirty_finalizers_for(self, kind: str, key: str) -> None:
        """The object itself (``key``, when it still exists), and the terminating objects it may have used."""
        if kind not in FINALIZED:
            return
        if key:
            self.dirty_finalizers.add(f"{kind}/{key}")
        used: list[tuple[str, Mapping[str, o.KObject]]] = []
        if kind == "ClusterQueue":
            used = [("ResourceFlavor", self.state.flavors), ("AdmissionCheck", self.state.admission_checks)]
        elif kind == "ResourceFlavor":
            used = [("Topology", self.state.topologies)]
        for used_kind, table in used:
            self.dirty_finalizers.update(f"{used_kind}/{name}" for name, obj in table.items()
                                         if obj.metadata.deletion_timestamp)

    def _dirty_queues_for(self, kind: str, key: str) -> None:
        if kind == "ClusterQueue":
            if queue_status.fair_sharing_on(self.state):
                self.dirty_queues.add("*")  # its quota moves what its cohort lends: every share in its tree
                return
            self.dirty_queues.add(f"ClusterQueue/{key}")
            self.dirty_queues.update(f"LocalQueue/{k}" for k, lq in self.state.local_queues.items()
                                     if lq.spec.cluster_queue == key)
        elif kind == "LocalQueue":
            self.dirty_queues.add(f"LocalQueue/{key}")
        elif kind in QUEUE_INPUTS:
            self.dirty_queues.add("*")


def _workload_key(e: ev.AnyEvent) -> str:
    if isinstance(e, WORKLOAD_EVENTS):
        return e.key
    if isinstance(e, ev.ObjectUpserted) and isinstance(e.obj, o.Workload):
        return e.key
    if isinstance(e, ev.ObjectDeleted) and e.kind == "Workload":
        return e.key
    return ""


def _holding(state: ClusterState, e: ev.AnyEvent) -> WorkloadInfo | None:
    """The workload holding quota whose Workload ``e`` upserts (the fold may forget that reservation), else None."""
    if isinstance(e, ev.ObjectUpserted) and isinstance(e.obj, o.Workload):
        wl = state.workloads.get(e.key)
        if wl is not None and wl.reserving and wl.uid == e.obj.metadata.uid:
            return wl
    return None


def _pod_workloads(state: ClusterState, e: ev.AnyEvent) -> tuple[str, ...]:
    """The Workloads a Pod ``e`` upserts or deletes names, before and after ``e``, while Pods' scheduling is tracked
    (WaitForPodsReadyUnscheduledTimeout, :mod:`projections.pods_scheduled`); else none."""
    if isinstance(e, ev.ObjectUpserted) and isinstance(e.obj, o.Pod):
        pods: tuple[o.Pod | None, ...] = (state.pods.get(e.key), e.obj)
    elif isinstance(e, ev.ObjectDeleted) and e.kind == "Pod":
        pods = (state.pods.get(e.key),)
    else:
        return ()
    if not state.tracks_pods_scheduled:
        return ()
    return tuple(sorted({f"{p.metadata.namespace}/{name}" for p in pods if p is not None
                         for name in (p.metadata.annotations.get(WORKLOAD_ANNOTATION),) if name}))


def _job_before(state: ClusterState, e: ev.AnyEvent) -> o.Job | None:
    """The Job ``e`` upserts or deletes, as the state holds it before ``e`` (None: another record, or a new Job)."""
    if isinstance(e, ev.ObjectUpserted) and isinstance(e.obj, o.Job) or (
            isinstance(e, ev.ObjectDeleted) and e.kind == "Job"):
        return state.jobs.get(e.key)
    return None


def _controller_uid(w: o.Workload | None) -> str | None:
    return next((r.uid for r in w.metadata.owner_references if r.controller and r.uid), None) if w else None


def _move(index: dict[str, set[str]], key: str, old: str | None, new: str | None) -> None:
    """``key`` from under ``old`` to under ``new`` in ``index`` (None: under none); an emptied entry goes."""
    if old == new:
        return
    if old is not None:
        keys = index.get(old)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del index[old]
    if new is not None:
        index.setdefault(new, set()).add(key)


def _controller_job(w: o.Workload) -> str | None:
    """The name of the batch/v1 Job controlling ``w``: a controller of another apiVersion of Job is not one
    (Kueue's EquivalentToWorkload wants the Job's kind, apiVersion and name)."""
    for ref in w.metadata.owner_references:
        if ref.controller and ref.kind == "Job" and ref.api_version == "batch/v1":
            return ref.name
    return None


def _class_before(state: ClusterState, e: ev.AnyEvent) -> o.WorkloadPriorityClass | None:
    """The WorkloadPriorityClass an upsert of one replaces (None: another event, or a class new to the log)."""
    if isinstance(e, ev.ObjectUpserted) and isinstance(e.obj, o.WorkloadPriorityClass):
        return state.workload_priority_classes.get(e.obj.key)
    return None


def _class_moved(before: o.Workload | None, after: o.Workload) -> bool:
    """Whether ``after`` arrives at a priority class: new, or referencing another one than ``before`` did."""
    ref = after.spec.priority_class_ref
    return ref is not None and (before is None or before.spec.priority_class_ref != ref)
