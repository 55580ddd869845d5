"""Admission history: a pure fold of the log into one timeline per workload.

``AuditTrail.apply(record)`` reads nothing but the record and, when given one, the cluster-state fold beside it
(no clock, no I/O), and never iterates a set or dict in an order that depends on hashing, so the same log gives the
same timelines in any process. It tracks what it needs itself: which ClusterQueue each LocalQueue points to, and
where each workload stands (pending in a queue, reserving quota in a ClusterQueue, admitted, finished), mirroring
the rules of :class:`projections.cluster.ClusterState` for when a decision takes effect. A decision the state fold would
ignore (for example an admission of a workload that holds no reservation) is still recorded, with
``ignored`` set, because the audit is the log's history.

Steps, each with the offset and time of the event that caused it:

* ``Submitted`` — the workload was first seen (again, after being re-created with a new uid);
* ``Queued`` — it entered a ClusterQueue's queue (its LocalQueue exists and points to one, no
  ``kueue.x-k8s.io/admission-gated-by`` annotation holds it back under the AdmissionGatedBy gate, and Kueue
  charges its DRA claims and the extended resources DeviceClasses serve: :mod:`projections.dra`, under the
  ResourceClaimTemplates, DeviceClasses and configuration in force);
* ``QuotaReserved`` — cluster queue, flavors per pod set and resource, pod counts;
* ``Admitted``;
* ``Pending`` — an admission attempt failed, with reason and message; consecutive identical attempts
  collapse into one step with ``repeat`` and ``lastOffset``/``lastTime``;
* ``Preempted`` (with ``preemptor``; ``underlyingCause`` for a victim a PreemptionConfig's rules chose) and
  ``Evicted`` (with reason);
* ``JobStopped``, ``PodsReady``, ``ReclaimablePods`` (``message`` lists them, ``podSet=count``) — what the
  cluster reported back;
* ``AdmissionCheck`` — a check's new state (``reason`` is ``check=State``), reported by another controller or
  decided by kueue-es's own ProvisioningRequest controller (then with ``cycle``); with the cluster-state fold beside
  the audit (``state``), also a state a check's controller set on the Workload, at the offset of the upsert that
  showed it, once, when the fold takes it (``observed``: see :meth:`ClusterState._take_external_checks
  <projections.cluster.ClusterState._take_external_checks>`);
* ``ProvisioningRequest`` — kueue-es decided to create (``reason`` ``Created``) or delete (``Deleted:
  <why>``) one of the workload's ProvisioningRequests (``message`` names it);
* ``Requeued`` — with ``released`` when the reservation was cleared; with the cluster-state fold beside the audit,
  also a reservation the fold forgot because its Workload was rewritten with other pod sets before the reservation
  was written (``SpecChanged``, ``observed``);
* ``Unreserved`` — its reservation taken back without an eviction (a ``QuotaReservationUnset`` decision, with its
  reason; or a StatefulSet's Workload put on hold while the set is at zero replicas, reason ``OnHold``, after which
  it is not queued until the hold is released, or a Pending decision taken before the hold rewrites its
  condition, and a ``Queued`` step shows it back);
* ``Deactivated``, ``Finished``, ``Deleted``;
* ``RequeueStateCleared`` — an inactive workload's requeue count and backoff dropped (it owes none
  reactivated);
* ``RequeueAtRaised`` — its ``requeueAt`` pushed out by an admission check that set a retry delay after its
  eviction, or while it waited (the message gives the new time);
* ``RequeueAtCleared`` — that time dropped once it passed while the workload waited pending (no
  Requeued=False backoff to end);
* ``Rejected`` — a decision about the workload did not reach the cluster (``decision`` is its offset); a
  rejected preemption or eviction the fold took back (the workload as it was before it) marks that step and
  this one ``takenBack``: it did not happen.

Workloads first seen with a status (admitted before the log began) get ``QuotaReserved``/``Admitted``/
``Finished`` steps marked ``observed``. A decision's step names the offset of the Kueue Configuration in force
when it was made (``config``); the recorded configurations are kept in ``configs``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

import msgspec

from events import objects as o
from events import schema as ev
from events.timefmt import format_time
from projections import dra, eviction_stats, gates
from projections.admissionchecks import MULTIKUEUE_CONTROLLER, PROVISIONING_CONTROLLER
from projections.cluster import ClusterState
from projections.workloads import (
    ADMISSION_GATED_BY_ANNOTATION,
    CONCURRENT_ADMISSION_PARENT_LABEL,
    ON_HOLD,
    ON_HOLD_MESSAGE,
    has_quota_reservation,
    owner_uid_of,
)

PENDING, RESERVED, ADMITTED, FINISHED = "Pending", "QuotaReserved", "Admitted", "Finished"
_UNSEEN = object()

STEP_TYPES = (
    "Submitted", "Queued", "QuotaReserved", "Admitted", "Pending", "Preempted", "Evicted", "JobStopped",
    "PodsReady", "AdmissionCheck", "ProvisioningRequest", "Requeued", "Unreserved", "Deactivated", "Finished", "Deleted",
    "Rejected", "ReclaimablePods", "RequeueStateCleared", "RequeueAtRaised", "RequeueAtCleared",
)


class Step(msgspec.Struct, kw_only=True, omit_defaults=True, rename="camel"):
    """One step of a workload's admission history."""

    offset: int
    time: int
    """ms since the epoch, from the event."""
    workload: str
    """``namespace/name``."""
    step: str
    uid: str = ""
    cluster_queue: str = ""
    """The ClusterQueue the workload was queued in or reserving quota in at this step."""
    local_queue: str = ""
    reason: str = ""
    message: str = ""
    preemptor: str = ""
    underlying_cause: str = ""
    """Preempted: the cause its eviction record gives (ConfigurablePreemptions: the PreemptionConfig whose rules
    chose it; the rules are in the message)."""
    flavors: dict[str, dict[str, str]] = {}
    """Pod set -> resource -> flavor (QuotaReserved)."""
    counts: dict[str, int] = {}
    """Pod set -> pod count (QuotaReserved)."""
    priority: int | None = None
    released: bool = False
    """Requeued: the reservation was cleared and the quota freed."""
    cycle: int | None = None
    """Scheduler cycle of a decision."""
    decision: int | None = None
    """Rejected: offset of the decision that was rejected."""
    repeat: int = 1
    """Pending: how many consecutive identical attempts this step stands for."""
    last_offset: int | None = None
    last_time: int | None = None
    observed: bool = False
    """Taken from a status seen in the cluster, not from a decision in the log."""
    ignored: bool = False
    """A decision the cluster-state fold does not apply (the workload was not in a state it applies to)."""
    config: int | None = None
    """A decision: offset of the Kueue Configuration in force when it was made (None: none recorded)."""
    taken_back: bool = False
    """A ``Preempted`` or ``Evicted`` step the connector rejected and the cluster-state fold took back, and
    that ``Rejected`` step: the workload is as it was before it, so it did not happen (Kueue changes nothing
    when the eviction's status write fails). Known only with the fold beside the audit
    (:meth:`AuditTrail.needs_state`)."""


class _Tracked(msgspec.Struct):
    uid: str
    namespace: str
    queue_name: str
    phase: str = PENDING
    active: bool = True
    reserved_in: str = ""
    queued_in: str = ""
    gate: str = ""
    """Its admission gate (the ``kueue.x-k8s.io/admission-gated-by`` annotation)."""
    claims: tuple[tuple[str, tuple[o.PodResourceClaim, ...]], ...] = ()
    """Its pod sets' DRA claims (pod set name, claims), only when some pod set has any."""
    extended: tuple[o.PodSpec, ...] = ()
    """Its pod sets' pod specs, only when some container asks for an extended resource (which a DeviceClass may
    serve)."""
    parent: bool = False
    """Labelled a ``ConcurrentAdmission`` parent (``kueue.x-k8s.io/concurrent-admission-parent: "true"``): under the
    gate it is pursued through its variants, not queued itself."""
    held: bool = False
    """On hold (``WorkloadOnHoldChanged``: a StatefulSet's Workload while the set is at zero replicas, or seen with
    QuotaReserved=False ``OnHold``): holds no quota and is not queued until released."""
    parent_uid: str = ""
    """A ``ConcurrentAdmission`` variant the log made (``VariantCreated``, no uid yet): its parent's UID, by which its
    read-back from the apiserver is known as the same workload (:func:`projections.variants.adopts`)."""


class AuditTrail:
    """Timelines of every workload (or only of ``keys``), folded from records in log order.

    ``state``: a cluster-state fold (fresh, at the same point of the log) the trail applies every record to as well.
    Whether a Workload upsert changes a check's state is the fold's judgement (which checks are listed, which are
    kueue-es's own, whether the log's word was written yet): the trail takes it from the fold rather than keeping a
    second copy of those rules. Without one, such changes are not shown.

    The fold costs several times the trail, and judges few upserts: a trail started without one says, record by
    record, whether the fold might judge the next one (:meth:`needs_state`). While it says no, the fold's judgement
    adds nothing, so a reader may give the trail its ``state`` only then, folded up to the record before (from a
    checkpoint near it), and skip the fold altogether on a log that never needs it."""

    def __init__(self, keys: Collection[str] | None = None, state: ClusterState | None = None) -> None:
        self.offset = -1
        self.keys = frozenset(keys) if keys is not None else None
        self.state = state
        self.local_queues: dict[str, str] = {}
        """LocalQueue key -> ClusterQueue name (empty while stopped)."""
        self.lq_members: dict[str, dict[str, None]] = {}
        """LocalQueue key -> keys of tracked workloads naming it."""
        self.workloads: dict[str, _Tracked] = {}
        self.timelines: dict[str, list[Step]] = {}
        self._decisions: dict[int, str] = {}
        """Offset of a decision -> its workload, to attribute DecisionRejected."""
        self.configs: list[tuple[int, ev.ConfigRecorded]] = []
        """The Kueue Configurations recorded in the log, with their offsets, in log order."""
        self.gated_by = gates.enabled({}, gates.ADMISSION_GATED_BY)
        """The AdmissionGatedBy gate of the configuration in force: a gated workload is not queued."""
        self.dra_config = (dra.mode_of(None), dra.mapping_of(None), dra.extended_on(None), dra.prioritized_on(None))
        """The DRA mode, device-class mapping and whether served extended resources are charged as devices, under
        the configuration in force (:mod:`projections.dra`)."""
        self.device_classes: dict[str, o.DeviceClass] = {}
        """DeviceClasses by name: a workload asking for a resource one serves in a quantity that is not whole is
        not queued."""
        self.claim_templates: dict[str, dict[str, o.ResourceClaimSpec]] = {}
        """Namespace -> its ResourceClaimTemplates' claim specs by name: a workload whose claims Kueue refuses is
        not queued."""
        self.check_controllers: dict[str, str] = {}
        """AdmissionCheck name -> its controller, as the fold keeps them: whose checks' states it may take."""
        self.multikueue = gates.enabled({}, gates.MULTIKUEUE)
        """The MultiKueue gate of the configuration in force: with it on, kueue-es runs MultiKueue checks."""
        self.concurrent_admission = gates.enabled({}, gates.CONCURRENT_ADMISSION)
        """The ConcurrentAdmission gate of the configuration in force: a workload labelled a parent is not queued."""
        self.generations: dict[str, int | None] = {}
        """Wanted workload -> the ``metadata.generation`` of its first upsert, while there is no ``state``."""
        self.regenerated: set[str] = set()
        """Wanted workloads upserted with another generation than their first, while there is no ``state``."""

    # --- reading the result ---------------------------------------------------------------------------------

    def timeline(self, key: str) -> list[Step]:
        return list(self.timelines.get(key, ()))

    def steps(self) -> list[Step]:
        """Every step of every workload, in log order (then by workload for steps of one event)."""
        out = [s for key in sorted(self.timelines) for s in self.timelines[key]]
        out.sort(key=lambda s: (s.offset, s.workload))
        return out

    # --- the fold -------------------------------------------------------------------------------------------

    def apply_all(self, records: Iterable[ev.Record]) -> AuditTrail:
        for r in records:
            self.apply(r)
        return self

    def needs_state(self, record: ev.Record) -> bool:
        """Whether the cluster-state fold might judge ``record``, the next record, when there is no ``state``: a
        wanted Workload upsert that shows a state of a check kueue-es does not run (the fold may take it:
        :meth:`ClusterState._take_external_checks <projections.cluster.ClusterState._take_external_checks>`), or that
        shows no reservation after an earlier upsert, at a generation not known to be the one the fold holds (it may
        forget the reservation: :meth:`ClusterState._forget_reservation
        <projections.cluster.ClusterState._forget_reservation>`); or the rejection of a preemption or eviction
        the fold applied (it may take it back: :meth:`ClusterState._take_back_eviction
        <projections.cluster.ClusterState._take_back_eviction>`). These are conditions the fold's judgement
        cannot do without, read from the record and what the trail tracks of the log, never from the fold: a
        superset of the records it judges."""
        e = record.event
        if self.state is not None:
            return False
        if isinstance(e, ev.DecisionRejected):  # the fold may take a rejected eviction back
            key = self._decisions.get(e.decision)
            return key is not None and self._eviction_step(key, e.decision) is not None
        if not isinstance(e, ev.ObjectUpserted):
            return False
        w, key = e.obj, e.key
        if not isinstance(w, o.Workload) or (self.keys is not None and key not in self.keys):
            return False
        status = w.status
        if status.admission_checks and any(not self._runs_controller(c.name) for c in status.admission_checks):
            return True
        first = self.generations.get(key, _UNSEEN)
        if first is _UNSEEN:
            return False  # a first upsert makes a new workload
        generation = w.metadata.generation
        if generation and generation == first and key not in self.regenerated:
            return False  # the fold holds this generation: it does not read the pod sets anew
        return not has_quota_reservation(status)  # one showing a reservation keeps it

    def _eviction_step(self, key: str, decision: int) -> Step | None:
        """The ``Preempted`` or ``Evicted`` step of ``key`` at offset ``decision`` that the fold applied, if
        any."""
        for s in reversed(self.timelines.get(key, ())):
            if s.offset == decision:
                return s if s.step in ("Preempted", "Evicted") and not s.ignored else None
            if s.offset < decision:
                return None
        return None

    def _runs_controller(self, check: str) -> bool:
        """Whether kueue-es runs ``check``'s controller, as :func:`projections.admissionchecks.runs_controller` says
        of the AdmissionCheck the fold holds under that name."""
        controller = self.check_controllers.get(check)
        return controller == PROVISIONING_CONTROLLER or (self.multikueue and controller == MULTIKUEUE_CONTROLLER)

    def apply(self, record: ev.Record) -> None:
        e = record.event
        off = record.offset
        self.offset = off
        state = self.state
        if state is not None:
            state.apply(record)
        match e:
            case ev.ObjectUpserted(obj=o.Workload() as w):
                if self._wanted(e.key):
                    if state is None:
                        generation = self.generations.setdefault(e.key, w.metadata.generation)
                        if generation != w.metadata.generation:
                            self.regenerated.add(e.key)
                    self._upsert_workload(off, e, w)
                    if state is not None and state.reservation_forgotten[0] == off:
                        self._reservation_forgotten(off, e)
                    if state is not None and state.checks_taken[0] == off:
                        self._checks_taken(off, e, state)
            case ev.ObjectUpserted(obj=o.LocalQueue() as lq):
                cq = lq.spec.cluster_queue if not lq.spec.stopped else ""
                self._set_local_queue(off, e.time, lq.key, cq)
            case ev.ObjectDeleted(kind="LocalQueue"):
                self._set_local_queue(off, e.time, e.key, None)
            case ev.ObjectUpserted(obj=o.AdmissionCheck() as ac):
                self.check_controllers[ac.metadata.name] = ac.spec.controller_name
            case ev.ObjectDeleted(kind="AdmissionCheck"):
                self.check_controllers.pop(e.key, None)
            case ev.ObjectUpserted(obj=o.ResourceClaimTemplate() as rct):
                ns = rct.metadata.namespace
                if self.claim_templates.get(ns, {}).get(rct.metadata.name) != rct.spec.spec:
                    self.claim_templates.setdefault(ns, {})[rct.metadata.name] = rct.spec.spec
                    self._requeue_claiming(off, e, ns)
            case ev.ObjectDeleted(kind="ResourceClaimTemplate"):
                ns, _, name = e.key.partition("/")
                if self.claim_templates.get(ns, {}).pop(name, None) is not None:
                    self._requeue_claiming(off, e, ns)
            case ev.ObjectUpserted(obj=o.DeviceClass() as dc):
                served = dra.serving_classes(self.device_classes.values())
                self.device_classes[dc.metadata.name] = dc
                if dra.serving_classes(self.device_classes.values()) != served:
                    self._requeue_claiming(off, e, None)
            case ev.ObjectDeleted(kind="DeviceClass"):
                served = dra.serving_classes(self.device_classes.values())
                self.device_classes.pop(e.key, None)
                if dra.serving_classes(self.device_classes.values()) != served:
                    self._requeue_claiming(off, e, None)
            case ev.ObjectDeleted(kind="Workload"):
                t = self.workloads.pop(e.key, None)
                if t is not None:
                    self.lq_members.get(f"{t.namespace}/{t.queue_name}", {}).pop(e.key, None)
                    self._add(off, e, e.key, "Deleted", t)
            case ev.Decision():
                if self._wanted(e.key):
                    self._decisions[off] = e.key
                    self._decision(off, e)
            case ev.WorkloadFinished():
                if self._wanted(e.key):
                    t = self.workloads.get(e.key)
                    ignored = t is None or t.phase == FINISHED
                    self._add(off, e, e.key, "Finished", t, reason=e.reason, message=e.message, ignored=ignored,
                              cluster_queue=self._cq_before(t))
                    if not ignored:
                        t.phase, t.reserved_in, t.queued_in = FINISHED, "", ""  # type: ignore[union-attr]
            case ev.JobStopped():
                if self._wanted(e.key):
                    self._add(off, e, e.key, "JobStopped", self.workloads.get(e.key))
            case ev.WorkloadOnHoldChanged():
                if self._wanted(e.key):
                    self._hold(off, e)
            case ev.PodsReadyChanged():
                if self._wanted(e.key):
                    self._add(off, e, e.key, "PodsReady", self.workloads.get(e.key),
                              reason=e.reason or ("Started" if e.ready else "WaitForRecovery"),
                              message="ready" if e.ready else "not ready")
            case ev.ReclaimablePodsChanged():
                if self._wanted(e.key):
                    self._add(off, e, e.key, "ReclaimablePods", self.workloads.get(e.key),
                              message=", ".join(f"{p.name}={p.count}" for p in e.reclaimable_pods) or "none")
            case ev.AdmissionCheckStateChanged():
                if self._wanted(e.key):
                    self._add(off, e, e.key, "AdmissionCheck", self.workloads.get(e.key),
                              reason=f"{e.check}={e.state}", message=e.message)
            case ev.ConfigRecorded():
                self.configs.append((off, e))
                flags = gates.of_document(e.document)
                self.multikueue = gates.enabled(flags, gates.MULTIKUEUE)
                gated_by = gates.enabled(flags, gates.ADMISSION_GATED_BY)
                concurrent = gates.enabled(flags, gates.CONCURRENT_ADMISSION)
                regated, reparented = gated_by != self.gated_by, concurrent != self.concurrent_admission
                self.gated_by, self.concurrent_admission = gated_by, concurrent
                if regated or reparented:  # who is held out of its queue changed: gated workloads, parents
                    for key in sorted(self.workloads):
                        t = self.workloads[key]
                        if (regated and t.gate) or (reparented and t.parent):
                            self._queue(off, e, key, t)
                dra_config = (dra.mode_of(e.document), dra.mapping_of(e.document), dra.extended_on(e.document),
                              dra.prioritized_on(e.document))
                if dra_config != self.dra_config:
                    self.dra_config = dra_config
                    self._requeue_claiming(off, e, None)
            case ev.DecisionRejected():
                key = self._decisions.get(e.decision)
                if key is not None:
                    evicted = self._eviction_step(key, e.decision)
                    refusal = (state.refused_evictions.get(key)
                               if evicted is not None and state is not None else None)
                    taken_back = refusal is not None and refusal.decision == e.decision
                    if taken_back:
                        evicted.taken_back = True  # type: ignore[union-attr]
                    self._add(off, e, key, "Rejected", self.workloads.get(key), reason=e.reason,
                              message=e.message, decision=e.decision, taken_back=taken_back)
            case _:
                pass

    # --- helpers --------------------------------------------------------------------------------------------

    def _wanted(self, key: str) -> bool:
        return self.keys is None or key in self.keys

    def _add(self, off: int, e: ev.Event, key: str, step: str, t: _Tracked | None, **fields: object) -> Step:
        fields.setdefault("cluster_queue", self._cq(t))
        if "cycle" in fields and self.configs:
            fields["config"] = self.configs[-1][0]
        if t is not None:
            fields.setdefault("uid", t.uid)
            fields.setdefault("local_queue", t.queue_name)
        s = Step(offset=off, time=e.time, workload=key, step=step, **fields)  # type: ignore[arg-type]
        self.timelines.setdefault(key, []).append(s)
        return s

    def _cq(self, t: _Tracked | None) -> str:
        if t is None:
            return ""
        if t.reserved_in:
            return t.reserved_in
        return t.queued_in

    def _cq_before(self, t: _Tracked | None) -> str:
        return "" if t is None else (self._cq(t) or self.local_queues.get(f"{t.namespace}/{t.queue_name}", ""))

    def _admissible(self, t: _Tracked) -> bool:
        """Active, not held back by an admission gate, its DRA claims charged: may be queued (Kueue's
        ``IsAdmissible``, and its workload controller's DRA check)."""
        return (t.active and not t.held and not (t.gate and self.gated_by)
                and not (t.parent and self.concurrent_admission) and not self._claims_refused(t))

    def _claims_refused(self, t: _Tracked) -> bool:
        """Kueue refuses ``t``'s DRA claims, or its extended resources that DeviceClasses serve, under the
        templates, classes and configuration in force."""
        mode, mapping, extended, prioritized = self.dra_config
        if not mode or not (t.claims or t.extended):
            return False
        templates = self.claim_templates.get(t.namespace, {})
        served = dra.serving_classes(self.device_classes.values()) if extended and t.extended else ()
        view = dra.DraView(reject=mode == "reject", mapping=mapping, templates=tuple(sorted(templates.items())),
                           extended=served, prioritized=prioritized)
        if any(dra.claim_charge(name, list(claims), view)[1] for name, claims in t.claims):
            return True
        if not served or not (t.claims or dra.needs_extended(t.extended, dict(served))):
            return False  # Kueue looks at extended resources only for a workload with claims or requesting one
        return any(dra.extended_charge(spec, view)[2] for spec in t.extended)

    def _requeue_claiming(self, off: int, e: ev.Event, namespace: str | None) -> None:
        """What decides DRA claims changed (in ``namespace``, or everywhere): the workloads with claims or extended
        resources are queued or taken out of their queue as that says."""
        for key in sorted(self.workloads):
            t = self.workloads[key]
            if (t.claims or t.extended) and (namespace is None or t.namespace == namespace):
                self._queue(off, e, key, t)

    def _target(self, t: _Tracked) -> str:
        return self.local_queues.get(f"{t.namespace}/{t.queue_name}", "")

    def _queue(self, off: int, e: ev.Event, key: str, t: _Tracked) -> None:
        """A pending workload (re)enters the queue of its LocalQueue's ClusterQueue: record it on change."""
        target = self._target(t) if (t.phase == PENDING and self._admissible(t)) else ""
        if target and target != t.queued_in:
            t.queued_in = target
            self._add(off, e, key, "Queued", t, cluster_queue=target)
        else:
            t.queued_in = target

    def _set_local_queue(self, off: int, time: int, key: str, cq: str | None) -> None:
        if cq is None:
            self.local_queues.pop(key, None)
        else:
            self.local_queues[key] = cq
        members = self.lq_members.get(key)
        if not members:
            return
        tick = ev.ClockTicked(time=time)
        for wk in sorted(members):
            self._queue(off, tick, wk, self.workloads[wk])

    def _upsert_workload(self, off: int, e: ev.ObjectUpserted, w: o.Workload) -> None:
        key = e.key or w.key
        t = self.workloads.get(key)
        if t is not None and not t.uid and t.parent_uid and w.metadata.uid and t.parent_uid == owner_uid_of(w.metadata):
            t.uid, t.parent_uid = w.metadata.uid, ""  # the variant the log made, read back: the same workload
        if t is not None and t.uid != w.metadata.uid:
            self.lq_members.get(f"{t.namespace}/{t.queue_name}", {}).pop(key, None)
            t = None
        if t is None:
            t = _Tracked(uid=w.metadata.uid, namespace=w.metadata.namespace, queue_name=w.spec.queue_name,
                         active=w.spec.active, gate=w.metadata.annotations.get(ADMISSION_GATED_BY_ANNOTATION, ""),
                         claims=_claims_of(w), extended=_extended_of(w), parent=_is_parent(w),
                         held=_held(w.status))
            self.workloads[key] = t
            self.lq_members.setdefault(f"{t.namespace}/{t.queue_name}", {})[key] = None
            ref = w.spec.priority_class_ref
            self._add(off, e, key, "Submitted", t, cluster_queue=self._target(t), priority=w.spec.priority,
                      reason=ref.name if ref is not None else "",
                      message=f"LocalQueue {t.queue_name}" if t.queue_name else "no queue-name")
            self._observed_status(off, e, key, t, w.status)
            self._queue(off, e, key, t)
            return
        if t.queue_name != w.spec.queue_name:
            self.lq_members.get(f"{t.namespace}/{t.queue_name}", {}).pop(key, None)
            t.queue_name = w.spec.queue_name
            self.lq_members.setdefault(f"{t.namespace}/{t.queue_name}", {})[key] = None
        t.active = w.spec.active
        t.gate = w.metadata.annotations.get(ADMISSION_GATED_BY_ANNOTATION, "")
        t.claims = _claims_of(w)
        t.extended = _extended_of(w)
        t.parent = _is_parent(w)
        self._queue(off, e, key, t)

    def _hold(self, off: int, e: ev.WorkloadOnHoldChanged) -> None:
        """A workload put on hold gives back its quota (an ``Unreserved`` step, reason ``OnHold``) and leaves its
        queue; released, it is queued again. The fold's rules (:meth:`ClusterState._on_hold_changed
        <projections.cluster.ClusterState._on_hold_changed>`): only an active, unfinished workload is put on hold."""
        t = self.workloads.get(e.key)
        if t is None or t.phase == FINISHED or (e.uid and e.uid != t.uid):
            return
        if e.on_hold and t.active and not t.held:
            released = t.phase in (RESERVED, ADMITTED)
            self._add(off, e, e.key, "Unreserved", t, reason=ON_HOLD, message=ON_HOLD_MESSAGE, released=released,
                      cluster_queue=self._cq_before(t))
            t.held, t.phase, t.reserved_in, t.queued_in = True, PENDING, "", ""
        elif not e.on_hold and t.held:
            t.held = False
            self._queue(off, e, e.key, t)

    def _reservation_forgotten(self, off: int, e: ev.ObjectUpserted) -> None:
        """The fold forgot the workload's reservation at this upsert: its Workload was rewritten with other pod sets
        before the reservation was written (:meth:`ClusterState._forget_reservation`); it is pending again."""
        t = self.workloads[e.key]
        self._add(off, e, e.key, "Requeued", t, reason="SpecChanged", observed=True, released=True,
                  message="spec.podSets changed before the reservation was written: the reservation is forgotten")
        t.phase, t.reserved_in = PENDING, ""
        t.queued_in = self._target(t) if self._admissible(t) else ""

    def _checks_taken(self, off: int, e: ev.Event, state: ClusterState) -> None:
        """The check states the fold took from this upsert (their controllers' word): one step each."""
        _, key, names = state.checks_taken
        checks = state.workloads[key].check_states
        for name in names:
            check = checks[name]
            self._add(off, e, key, "AdmissionCheck", self.workloads.get(key), reason=f"{name}={check.state}",
                      message=check.message, observed=True)

    def _observed_status(self, off: int, e: ev.Event, key: str, t: _Tracked, st: o.WorkloadStatus) -> None:
        cond = {c.type: c for c in st.conditions}
        fin = cond.get("Finished")
        if fin is not None and fin.status == "True":
            t.phase = FINISHED
            self._add(off, e, key, "Finished", t, reason=fin.reason, message=fin.message, observed=True,
                      cluster_queue=self._target(t))
            return
        qr = cond.get("QuotaReserved")
        if st.admission is not None and qr is not None and qr.status == "True":
            t.phase, t.reserved_in = RESERVED, st.admission.cluster_queue
            self._add(off, e, key, "QuotaReserved", t, observed=True, reason=qr.reason, message=qr.message,
                      **_assignment(st.admission))
            adm = cond.get("Admitted")
            if adm is not None and adm.status == "True":
                t.phase = ADMITTED
                self._add(off, e, key, "Admitted", t, observed=True, reason=adm.reason, message=adm.message)

    def _variant_created(self, off: int, e: ev.VariantCreated) -> None:
        """A ``ConcurrentAdmission`` variant the log made: the parent's copy (its queue, activity, gate, claims),
        submitted to the parent's LocalQueue, as the fold makes it (:func:`projections.variants.on_variant_created`);
        nothing while the parent is unknown (not tracked, or another UID) or the variant already seen."""
        namespace = e.key.split("/", 1)[0]
        parent = self.workloads.get(f"{namespace}/{e.parent}")
        if e.key in self.workloads or parent is None or (e.parent_uid and parent.uid and e.parent_uid != parent.uid):
            return
        t = _Tracked(uid=e.uid, namespace=namespace, queue_name=parent.queue_name, active=parent.active,
                     gate=parent.gate, claims=parent.claims, extended=parent.extended, parent_uid=parent.uid)
        self.workloads[e.key] = t
        self.lq_members.setdefault(f"{namespace}/{t.queue_name}", {})[e.key] = None
        self._add(off, e, e.key, "Submitted", t, cycle=e.cycle, cluster_queue=self._target(t), reason="VariantCreated",
                  message=f"variant of {e.parent} for flavor {e.flavor}, LocalQueue {t.queue_name}")
        self._queue(off, e, e.key, t)

    def _decision(self, off: int, e: ev.Decision) -> None:
        key = e.key
        t = self.workloads.get(key)
        phase = t.phase if t is not None else None
        reserving = phase in (RESERVED, ADMITTED)
        match e:
            case ev.QuotaReserved():
                ignored = t is None or reserving or phase == FINISHED
                if t is not None and not ignored:
                    t.phase, t.reserved_in, t.queued_in = RESERVED, e.admission.cluster_queue, ""
                self._add(off, e, key, "QuotaReserved", t, cycle=e.cycle, message=e.message, ignored=ignored,
                          **_assignment(e.admission))
            case ev.WorkloadAdmitted():
                ignored = phase != RESERVED
                if not ignored:
                    t.phase = ADMITTED  # type: ignore[union-attr]
                self._add(off, e, key, "Admitted", t, cycle=e.cycle, message=e.message, ignored=ignored)
            case ev.WorkloadPending():
                ignored = phase != PENDING
                lifted = t is not None and t.held and not ignored and e.reason != ON_HOLD
                if lifted:
                    t.held = False  # its QuotaReserved condition says why else it waits: no longer held
                cq = self._cq(t)
                line = self.timelines.get(key)
                last = line[-1] if line else None
                config = self.configs[-1][0] if self.configs else None
                if (last is not None and last.step == "Pending" and last.reason == e.reason
                        and last.message == e.message and last.cluster_queue == cq and last.ignored == ignored
                        and last.config == config):
                    last.repeat += 1
                    last.last_offset, last.last_time = off, e.time
                    last.cycle = e.cycle
                    return
                self._add(off, e, key, "Pending", t, cycle=e.cycle, reason=e.reason, message=e.message,
                          ignored=ignored)
                if lifted:  # and queued again, as the fold does (ClusterState._pending)
                    self._queue(off, e, key, t)  # type: ignore[arg-type]
            case ev.WorkloadPreempted():
                self._add(off, e, key, "Preempted", t, cycle=e.cycle, reason=e.reason, message=e.message,
                          preemptor=e.preemptor, underlying_cause=eviction_stats.reason_and_cause(e)[1],
                          ignored=not reserving)
            case ev.WorkloadEvicted():
                self._add(off, e, key, "Evicted", t, cycle=e.cycle, reason=e.reason, message=e.message,
                          ignored=not reserving)
            case ev.WorkloadRequeued():
                ignored = t is None or phase == FINISHED
                released = bool(e.release and reserving)
                self._add(off, e, key, "Requeued", t, cycle=e.cycle, reason=e.reason, message=e.message,
                          released=released, ignored=ignored)
                if released:
                    t.phase, t.reserved_in = PENDING, ""  # type: ignore[union-attr]
                    t.queued_in = self._target(t) if self._admissible(t) else ""  # type: ignore[union-attr,arg-type]
            case ev.QuotaReservationUnset():
                ignored = phase != RESERVED
                self._add(off, e, key, "Unreserved", t, cycle=e.cycle, reason=e.reason, message=e.message,
                          released=not ignored, ignored=ignored)
                if not ignored:
                    t.phase, t.reserved_in = PENDING, ""  # type: ignore[union-attr]
                    t.queued_in = self._target(t) if self._admissible(t) else ""  # type: ignore[union-attr,arg-type]
            case ev.WorkloadDeactivated():
                self._add(off, e, key, "Deactivated", t, cycle=e.cycle, reason=e.reason, message=e.message,
                          ignored=t is None)
                if t is not None:
                    t.active = False
                    if reserving:
                        t.phase, t.reserved_in = PENDING, ""
                    t.queued_in = ""
            case ev.RequeueStateCleared():
                # why a reactivated workload owes no backoff: its requeue count went
                self._add(off, e, key, "RequeueStateCleared", t, cycle=e.cycle, ignored=t is None,
                          message="requeueState cleared: inactive")
            case ev.RequeueAtRaised():
                # why the workload was not requeued at its eviction's backoff
                self._add(off, e, key, "RequeueAtRaised", t, cycle=e.cycle,
                          ignored=t is None or phase == FINISHED,
                          message=f"requeueAt {format_time(e.requeue_at)}: an admission check's retry delay")
            case ev.RequeueAtCleared():
                # why the workload's status no longer shows the time a late retry delay set
                self._add(off, e, key, "RequeueAtCleared", t, cycle=e.cycle,
                          ignored=t is None or phase == FINISHED, message="requeueAt passed: cleared")
            case ev.ParentLabelled():
                self._add(off, e, key, "ParentLabelled", t, cycle=e.cycle, ignored=t is None,
                          message="labelled a ConcurrentAdmission parent: pursued through its variants")
                if t is not None:
                    t.parent = True
                    self._queue(off, e, key, t)
            case ev.VariantCreated():
                self._variant_created(off, e)
            case ev.VariantActivation():
                self._add(off, e, key, "Activated" if e.active else "Deactivated", t, cycle=e.cycle,
                          reason="VariantActivation", message=e.message, ignored=t is None)
                if t is not None:
                    t.active = e.active
                    self._queue(off, e, key, t)
            case ev.VariantDeleted():
                if t is not None and (not e.uid or not t.uid or e.uid == t.uid):
                    del self.workloads[key]
                    self.lq_members.get(f"{t.namespace}/{t.queue_name}", {}).pop(key, None)
                    self._add(off, e, key, "Deleted", t, cycle=e.cycle, reason="VariantDeleted",
                              message=f"flavor {e.flavor} left its ClusterQueue")
            case ev.ParentAdmitted():
                ignored = phase != PENDING
                cq = e.admission.cluster_queue
                if not ignored:
                    t.phase, t.reserved_in, t.queued_in = ADMITTED, cq, ""  # type: ignore[union-attr]
                self._add(off, e, key, "QuotaReserved", t, cycle=e.cycle, message=f"Quota reserved in ClusterQueue {cq}",
                          ignored=ignored, **_assignment(e.admission))
                self._add(off, e, key, "Admitted", t, cycle=e.cycle, message=e.message, ignored=ignored)
            case ev.WorkloadSliceReplaced() | ev.RemoteWorkloadFinished() | ev.VariantFinished():
                ignored = t is None or phase == FINISHED
                self._add(off, e, key, "Finished", t, cycle=e.cycle, reason=e.reason, message=e.message,
                          ignored=ignored, cluster_queue=self._cq_before(t))
                if not ignored:
                    t.phase, t.reserved_in, t.queued_in = FINISHED, "", ""  # type: ignore[union-attr]
            case ev.AdmissionCheckUpdated():
                self._add(off, e, key, "AdmissionCheck", t, cycle=e.cycle, reason=f"{e.check}={e.state}",
                          message=e.message, ignored=t is None)
            case ev.ProvisioningRequestCreated():
                req = e.request
                self._add(off, e, key, "ProvisioningRequest", t, cycle=e.cycle, reason="Created",
                          message=f"{req.metadata.name} (check {e.check}, attempt {e.attempt}, class "
                                  f"{req.spec.provisioning_class_name})", ignored=t is None)
            case ev.ProvisioningRequestDeleted():
                self._add(off, e, key, "ProvisioningRequest", t, cycle=e.cycle, reason=f"Deleted: {e.reason}",
                          message=e.name, ignored=t is None)
            case _:
                pass  # TopologyAssigned and future decisions: not admission steps


def _assignment(admission: o.Admission) -> dict[str, object]:
    flavors = {psa.name: dict(sorted(psa.flavors.items())) for psa in admission.pod_set_assignments}
    counts = {psa.name: psa.count for psa in admission.pod_set_assignments if psa.count is not None}
    return {"cluster_queue": admission.cluster_queue, "flavors": flavors, "counts": counts}


def step_to_builtins(step: Step) -> dict[str, object]:
    return msgspec.to_builtins(step)


def _held(st: o.WorkloadStatus) -> bool:
    """A Workload first seen on hold: QuotaReserved=False reason ``OnHold``, as the fold reads it."""
    return any(c.type == "QuotaReserved" and c.status == "False" and c.reason == ON_HOLD for c in st.conditions)


def _is_parent(w: o.Workload) -> bool:
    return w.metadata.labels.get(CONCURRENT_ADMISSION_PARENT_LABEL) == "true"


def _claims_of(w: o.Workload) -> tuple[tuple[str, tuple[o.PodResourceClaim, ...]], ...]:
    """The DRA claims of ``w``'s pod sets (pod set name, claims), or nothing when none has any."""
    if not any(ps.template.spec.resource_claims for ps in w.spec.pod_sets):
        return ()
    return tuple((ps.name, tuple(ps.template.spec.resource_claims)) for ps in w.spec.pod_sets)


def _extended_of(w: o.Workload) -> tuple[o.PodSpec, ...]:
    """The pod specs of ``w``'s pod sets when some container asks for an extended resource, else nothing."""
    if not dra.requests_extended(w.spec.pod_sets, None):
        return ()
    return tuple(ps.template.spec for ps in w.spec.pod_sets)
