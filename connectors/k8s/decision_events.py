"""The Kubernetes Events Kueue records for each decision, and the fold that keeps them until they are carried out.

:func:`kueue_events` is pure: a decision and what it needs of the workload as it was just before the decision
was applied (:func:`before`) give the Events Kueue's controllers record when they make the same change — their
type (Normal/Warning), reason, action, message and reporting component, and the object they are about:

* ``QuotaReserved`` → Normal ``QuotaReserved`` "Quota reserved in ClusterQueue <cq>, wait time since queued was
  <n>s" (since the Requeued condition's lastTransitionTime, else creation), then "; Flavors considered:
  <summary>" when the decision carries one (:mod:`kueue_es.scheduler.considered`: the flavors tried that did
  not simply fit, or the one taken by borrowing), from ``kueue-admission``; nothing for a workload that held
  quota already;
* ``WorkloadAdmitted`` → Normal ``Admitted`` "Admitted by ClusterQueue <cq>, wait time since reservation was
  <n>s": "0s" from ``kueue-admission`` when the scheduler reserved (or placed) it in the same cycle, else from
  ``kueue-workload-controller`` (its checks turned Ready), timed from QuotaReserved's lastTransitionTime;
* ``WorkloadPending`` of a failed admission attempt → Warning ``<reason>`` with the inadmissible message, from
  ``kueue-admission``; the workload controller's own QuotaReserved=False updates (queue blockers,
  PendingEvaluation) record nothing, as in Kueue, and neither does the scheduler's status write while
  waitForPodsReady.blockAdmission holds an entry (Kueue's scheduler patches it and waits, recording nothing);
  but the admission gate does (``kueue-workload-controller``): Normal ``AdmissionGated`` "Workload admission is
  gated by: <value>" when a workload's condition turns AdmissionGated (not when only the value changes), and
  Normal ``AdmissionGateCleared`` "Admission gate cleared, workload is now admissible" with the PendingEvaluation
  that follows a cleared gate;
* ``WorkloadPreempted`` → on the victim Normal ``EvictedDueToPreempted`` (the eviction message) and Normal
  ``Preempted`` (the message and both effective priorities), on the preemptor Normal ``PreemptedWorkload``;
* ``WorkloadEvicted`` / ``WorkloadDeactivated`` → Normal ``EvictedDueTo<reason>`` (but for a ConcurrentAdmission
  parent's eviction by the variant controller, which sets the condition alone; a deactivation's reason already
  reads ``Deactivated[DueTo<cause>]``; a PodsReady timeout on the pods' scheduling reads
  ``EvictedDueToPodsReadyTimeoutDueToWaitForScheduling``); a rejected admission check first gets Warning ``AdmissionCheckRejected``,
  a maximum execution time run out first gets Warning ``MaximumExecutionTimeExceeded`` "The maximum execution
  time (<n>s) exceeded" (the workload's ``maximumExecutionTimeSeconds``), as Kueue records them when it sets the
  DeactivationTarget;
* ``SecondPassFailed`` → Warning ``SecondPassFailed``;
* ``WorkloadSliceReplaced`` → on the old slice Normal ``WorkloadSliceReplaced`` (its Finished message), from
  ``kueue-admission``, as Kueue's scheduler records it when it finishes the slice;
* ``AdmissionCheckUpdated`` whose state changed → Normal ``AdmissionCheckUpdated`` "Admission check <c> updated
  state from <a> to <b>[ with message: <m>]"; of a MultiKueue check (the ledger looks its controller up), Normal
  ``MultiKueue`` with the check's message alone (``kueue-workload-controller``, whose recorder Kueue's MultiKueue
  controller uses) on the admission on a worker and on a copy evicted there, nothing for its other updates
  (Rejected, a remote lost or gone); ``ProvisioningRequestCreated`` → Normal
  ``ProvisioningRequestCreated`` 'Created ProvisioningRequest: "<name>"'
  (``kueue-provisioning-request-controller``), and each ``ProvisioningRequestCreateFailed`` (a fact the
  applier appends, ready at once) Warning ``FailedCreate`` with its message ('Error creating
  ProvisioningRequest "<name>": <error>', or PodTemplate);
* ``RetentionExpired`` → Normal ``Deleted`` on the Workload, or on its Job for ``afterDeactivatedByKueue``;
* ConcurrentAdmission's variant controller (``concurrent-admission-controller``): ``VariantCreated`` → on the
  parent Normal ``CreatedVariant`` 'Variant Workload "<ns/name>" created', ``VariantDeleted`` → on the parent
  Normal ``DeletedVariant`` 'Variant Workload "<ns/name>" deleted; flavor "<flavor>" no longer in ClusterQueue',
  ``VariantActivation`` → on the variant Normal ``ActivatedVariant`` or ``DeactivatedVariant`` with the decision's
  message, ``VariantPreemptionGateOpened`` → on the variant Normal ``PreemptionUngatedVariant`` 'Opened preemption
  gate for variant workload "<ns/name>"'.

Decisions Kueue records nothing for (requeues, topology assignments, unhealthy-node lists, request deletions)
map to nothing. Every message is cut as Kueue's ``api.TruncateEventMessage`` cuts it: 1024 bytes at most, the
last four " ...".

:class:`EventLedger` is the fold the :class:`connectors.k8s.mirror.Mirror` runs it in: :func:`before` of each
decision that records anything is taken as the decision is folded (a few fields: the messages are only written
when the Events are recorded, so folding an old log formats none), kept while the decision waits for its
outcome, and becomes ``ready`` (stamped with the time of its ``DecisionApplied``) once the connector carried it
out; a rejected decision records nothing, nor does one about a reservation the fold forgot (a Workload
rewritten with other pod sets before the reservation was written: :meth:`EventLedger.forget_reservation`).
Ready decisions stay for ``window_ms`` of log time (the apiserver's default event TTL is one hour), so a restart,
which folds the log again, hands the recorder every decision of the last window once more: the recorder creates
each Event under a name derived from the decision (:func:`event_name`) and an existing one counts as done. What
the job integration did to a Job (its ``JobActed`` records, and ``WorkloadFinished``) is held the same way, ready
at once: its Events are :mod:`connectors.k8s.job_events`'s; so is each new ``UpdatedAdmissionCheck`` message the
mirror finds for a Job (:meth:`EventLedger.pending_checks`), under the offset of the record after which it was
found.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping
from typing import NamedTuple

import msgspec

from connectors.k8s.prebuilt import OUT_OF_SYNC
from connectors.k8s.resources import (
    APPWRAPPERS,
    BY_KIND,
    JOB_UID_LABEL,
    JOBSETS,
    KUBEFLOW_JOBS,
    LEADER_WORKER_SETS,
    MPIJOBS,
    RAYCLUSTERS,
    RAYJOBS,
    RAYSERVICES,
    SPARK_APPLICATIONS,
    STATEFUL_SETS,
    TRAINJOBS,
)
from events import objects as o
from events import schema as ev
from events.errors import InvalidInput
from events.message_limits import truncate_message
from events.timefmt import parse_time
from kueue_es.scheduler.multikueue import is_sync_failed
from projections.admissionchecks import MULTIKUEUE_CONTROLLER
from projections.cluster import MAX_EXECUTION_EXCEEDED, ClusterState
from projections.pods_ready_condition import WAIT_FOR_SCHEDULING
from projections.variants import condition_only_eviction
from projections.workloads import (
    ADMISSION_GATED,
    ADMISSION_GATED_PREFIX,
    FINISHED,
    WORKLOAD_SLICE_REPLACED,
    WorkloadInfo,
    failed_attempt,
    gate_cleared,
)

ADMISSION = "kueue-admission"
WORKLOAD_CONTROLLER = "kueue-workload-controller"
PROVISIONING_CONTROLLER = "kueue-provisioning-request-controller"
JOB_CONTROLLER = "batch/job-kueue-controller"
POD_CONTROLLER = "pod-kueue-controller"
TAS_CONTROLLER = "tas-resource-flavor-controller"
VARIANT_CONTROLLER = "concurrent-admission-controller"
"""Kueue's event recorders (``mgr.GetEventRecorder(...)`` names), the Events' reporting component; the job
reconciler's is named after its integration and manager (``<integration>-kueue-controller``)."""

NORMAL, WARNING = "Normal", "Warning"
WORKLOAD_API, JOB_API, POD_API = (BY_KIND[k].api_version for k in ("Workload", "Job", "Pod"))
ACTED_ON_API = {"Job": JOB_API, "Pod": POD_API, JOBSETS.kind: JOBSETS.api_version, MPIJOBS.kind: MPIJOBS.api_version,
                RAYJOBS.kind: RAYJOBS.api_version, RAYCLUSTERS.kind: RAYCLUSTERS.api_version,
                LEADER_WORKER_SETS.kind: LEADER_WORKER_SETS.api_version, APPWRAPPERS.kind: APPWRAPPERS.api_version,
                TRAINJOBS.kind: TRAINJOBS.api_version, RAYSERVICES.kind: RAYSERVICES.api_version,
                SPARK_APPLICATIONS.kind: SPARK_APPLICATIONS.api_version, STATEFUL_SETS.kind: STATEFUL_SETS.api_version,
                "Workload": WORKLOAD_API}
ACTED_ON_API.update((kind, r.api_version) for kind, r in KUBEFLOW_JOBS.items())
"""The apiVersion of what a ``JobActed`` names, by its ``kind``."""
MICROS_PER_DECISION = 4
"""A decision records at most three Events."""
DEFAULT_WINDOW_MS = 3_600_000
"""How long (log time) carried-out decisions stay ready: the apiserver's default ``--event-ttl``."""

_DEACTIVATED_DUE_TO = "The workload is deactivated due to "


class Involved(NamedTuple):
    """The object an Event is about (its ``involvedObject``)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str


class PendingChecks(NamedTuple):
    """An ``UpdatedAdmissionCheck`` on a Job (:mod:`connectors.k8s.job_events`): the Job, and the message."""

    job: Involved
    message: str


class KubeEvent(NamedTuple):
    involved: Involved
    type: str
    reason: str
    action: str
    message: str
    component: str


def _seconds(ms: int) -> str:
    """A duration as Go's ``%.0fs`` of float seconds writes it (rounded half to even, as Python's format)."""
    return f"{ms / 1000:.0f}s"


def _workload(wl: WorkloadInfo) -> Involved:
    return Involved(WORKLOAD_API, "Workload", wl.namespace, wl.name, wl.uid)


def make_event(involved: Involved, type_: str, reason: str, message: str, component: str, action: str = ""
               ) -> KubeEvent:
    return KubeEvent(involved, type_, reason, action or reason, truncate_message(message), component)


def _ltt(wl: WorkloadInfo, type_: str) -> int | None:
    c = wl.condition(type_)
    return parse_time(c.last_transition_time) if c is not None and c.last_transition_time else None


class Before(NamedTuple):
    """What a decision's Events need of the workload as it was just before the decision: taken as the decision
    is folded (the state moves on), turned into Events only when they are recorded."""

    workload: Involved
    priority: int
    cluster_queue: str
    """The ClusterQueue it holds quota in (or is queued in)."""
    since: int = 0
    """QuotaReserved: queued since (Requeued's lastTransitionTime, else creation); WorkloadAdmitted: quota
    reserved since (QuotaReserved's lastTransitionTime), ms."""
    check_state: str = ""
    """AdmissionCheckUpdated: the check's state before."""
    other: Involved | None = None
    """The preemptor of a WorkloadPreempted, the Job of a RetentionExpired of target Job."""
    other_priority: int = 0
    by_scheduler: bool = False
    """WorkloadAdmitted: decided in the scheduling cycle that reserved or placed the workload."""
    max_execution_seconds: int = 0
    """WorkloadDeactivated: the workload's ``maximumExecutionTimeSeconds`` (0: none)."""
    boost: int = 0
    other_boost: int = 0
    """The part of ``priority`` / ``other_priority`` (effective priorities) a ``kueue.x-k8s.io/priority-boost``
    annotation adds under the ``PriorityBoost`` gate."""
    check_controller: str = ""
    """AdmissionCheckUpdated: the controller of the check (its AdmissionCheck's ``spec.controllerName``)."""


def before(d: ev.Decision, wl: WorkloadInfo | None, *, preemptor: WorkloadInfo | None = None,
           job: Involved | None = None, by_scheduler: bool = False, check_controller: str = "") -> Before | None:
    """What :func:`kueue_events` needs to know about ``d``, or None when Kueue records nothing for it. ``wl``: the
    workload just before ``d`` was applied (None: unknown); ``preemptor``: the preempting workload of a
    ``WorkloadPreempted``; ``job``: the Job a ``RetentionExpired`` of target ``Job`` deletes; ``check_controller``:
    the controller of an ``AdmissionCheckUpdated``'s check."""
    if wl is None or type(d) not in _EVENTFUL:
        return None
    since, check, other, other_priority, other_boost = 0, "", None, 0, 0
    match d:
        case ev.QuotaReserved():
            if wl.reserving:
                return None  # a second pass: the quota was reserved already
            queued = _ltt(wl, "Requeued")
            since = queued if queued is not None else wl.created
        case ev.WorkloadAdmitted():
            since = _ltt(wl, "QuotaReserved") or d.time
        case ev.WorkloadPending():
            # the controller's status sync and blockAdmission's wait record nothing, but for the admission gate
            if not failed_attempt(d) and not _gate_changes(d, wl):
                return None
        case ev.WorkloadEvicted() | ev.WorkloadDeactivated():
            if not wl.reserving or condition_only_eviction(wl, d):
                return None  # a parent's eviction by the variant controller records nothing in Kueue
        case ev.AdmissionCheckUpdated():
            state = wl.check_states.get(d.check)
            if state is None or state.state == d.state:
                return None
            if check_controller == MULTIKUEUE_CONTROLLER and not multikueue_event(d):
                return None
            check = state.state
        case ev.WorkloadPreempted():
            if preemptor is not None:
                other, other_priority, other_boost = _workload(preemptor), preemptor.priority, preemptor.boost
        case ev.WorkloadSliceReplaced():
            if wl.phase == FINISHED:
                return None  # finished already: Kueue's scheduler leaves it and records nothing
        case ev.RetentionExpired():
            if d.target == "Job":
                if job is None:
                    return None
                other = job
        case ev.VariantCreated() | ev.VariantDeleted():
            if wl.name != d.parent:
                return None  # the Event is on the parent, which the ledger looks up (none: nothing recorded)
    cq = wl.admission.cluster_queue if wl.admission is not None else wl.cluster_queue
    return Before(_workload(wl), wl.priority, cq, since, check, other, other_priority, by_scheduler,
                  wl.max_execution_seconds or 0, wl.boost, other_boost, check_controller)


WORKER_EVICTION = "Workload evicted on worker cluster: "
"""How the MultiKueue check's Retry after an eviction of the copy on its worker begins."""


def multikueue_event(d: ev.AdmissionCheckUpdated) -> bool:
    """Whether Kueue's MultiKueue controller records an Event for this update of its check: the admission on a
    worker (Ready) and a copy evicted on its worker (Retry "Workload evicted on worker cluster: ..."), each
    Normal ``MultiKueue`` with the check's message, and a copy finished by a sync failure (Retry "Remote workload
    on worker cluster ... is out of sync ...", #13047/#14997), Warning; not its other updates (Rejected, a lost or
    gone remote, which its ``updateACS`` writes without one)."""
    return (d.state == "Ready" or (d.state == "Retry" and d.message.startswith(WORKER_EVICTION))
            or is_sync_failed(d.state, d.message))


def _gate_changes(d: ev.WorkloadPending, wl: WorkloadInfo) -> bool:
    """Whether ``d`` is the workload controller's first AdmissionGated for ``wl`` (its condition showed another
    reason, or none) or the PendingEvaluation it writes once the gate is cleared: what Kueue records an Event
    for."""
    if d.reason == ADMISSION_GATED:
        current = wl.condition("QuotaReserved")
        return current is None or current.reason != ADMISSION_GATED
    return gate_cleared(d.reason, d.message)


def _priorities(b: Before) -> str:
    """The preemptor's and the preemptee's effective priorities, each with its base and its boost (0 unless a
    ``kueue.x-k8s.io/priority-boost`` annotation gives one under the ``PriorityBoost`` gate)."""
    return (f"preemptor effective priority: {_priority(b.other_priority, b.other_boost)}; "
            f"preemptee effective priority: {_priority(b.priority, b.boost)}")


def _priority(effective: int, boost: int) -> str:
    return f"{effective} (base: {effective - boost}, boost: {boost})"


def _eviction_component(reason: str, message: str) -> str:
    if reason == "NodeFailures":
        # the scheduler evicts when a second pass finds no replacement node; otherwise the TAS node controller
        return ADMISSION if message.startswith("Workload was evicted as there was no replacement") else TAS_CONTROLLER
    return WORKLOAD_CONTROLLER


def kueue_events(d: ev.Decision | ev.ProvisioningRequestCreateFailed,
                 b: Before | None) -> tuple[KubeEvent, ...]:
    """The Events Kueue records for ``d`` (a decision, or a creation its check's controller failed), given
    :func:`before` of it."""
    if b is None:
        return ()
    me = b.workload
    match d:
        case ev.QuotaReserved():
            cq = d.admission.cluster_queue
            waited = _seconds(d.time - b.since)
            message = f"Quota reserved in ClusterQueue {cq}, wait time since queued was {waited}"
            if d.considered_flavors:
                message += f"; Flavors considered: {d.considered_flavors}"
            return (make_event(me, NORMAL, "QuotaReserved", message, ADMISSION),)
        case ev.WorkloadAdmitted():
            if b.by_scheduler:
                return (make_event(me, NORMAL, "Admitted", f"Admitted by ClusterQueue {b.cluster_queue}, wait time "
                                   "since reservation was 0s", ADMISSION),)
            return (make_event(me, NORMAL, "Admitted", f"Admitted by ClusterQueue {b.cluster_queue}, wait time since "
                               f"reservation was {_seconds(d.time - b.since)}", WORKLOAD_CONTROLLER),)
        case ev.WorkloadPending():
            if d.reason == ADMISSION_GATED:
                gate = d.message.removeprefix(ADMISSION_GATED_PREFIX)
                return (make_event(me, NORMAL, ADMISSION_GATED, f"Workload admission is gated by: {gate}",
                                   WORKLOAD_CONTROLLER),)
            if gate_cleared(d.reason, d.message):
                return (make_event(me, NORMAL, "AdmissionGateCleared",
                                   "Admission gate cleared, workload is now admissible", WORKLOAD_CONTROLLER),)
            return (make_event(me, WARNING, d.reason, d.message, ADMISSION),)
        case ev.WorkloadPreempted():
            evicted = make_event(me, NORMAL, "EvictedDueToPreempted", d.message, ADMISSION)
            if b.other is None:
                return (evicted,)
            prios = _priorities(b)
            return (evicted,
                    make_event(me, NORMAL, "Preempted", f"{d.message}; {prios}", ADMISSION),
                    make_event(b.other, NORMAL, "PreemptedWorkload", f"Preempted workload {me.namespace}/{me.name} "
                               f"(UID: {me.uid}) in ClusterQueue {b.cluster_queue}; {prios}", ADMISSION))
        case ev.WorkloadEvicted():
            cause = "DueToWaitForScheduling" if d.underlying_cause == WAIT_FOR_SCHEDULING else ""
            return (make_event(me, NORMAL, f"EvictedDueTo{d.reason}{cause}", d.message,
                               _eviction_component(d.reason, d.message)),)
        case ev.WorkloadDeactivated():
            evicted = make_event(me, NORMAL, f"EvictedDueTo{d.reason}", d.message, WORKLOAD_CONTROLLER)
            if d.reason == "DeactivatedDueToAdmissionCheck" and d.message.startswith(_DEACTIVATED_DUE_TO):
                checks = d.message[len(_DEACTIVATED_DUE_TO):]
                return (make_event(me, WARNING, "AdmissionCheckRejected", f"Deactivated due to {checks}",
                                   WORKLOAD_CONTROLLER), evicted)
            if d.reason == MAX_EXECUTION_EXCEEDED:
                return (make_event(me, WARNING, "MaximumExecutionTimeExceeded", "The maximum execution time "
                                   f"({b.max_execution_seconds}s) exceeded", WORKLOAD_CONTROLLER), evicted)
            return (evicted,)
        case ev.SecondPassFailed():
            return (make_event(me, WARNING, "SecondPassFailed", d.message, ADMISSION),)
        case ev.WorkloadSliceReplaced():
            return (make_event(me, NORMAL, WORKLOAD_SLICE_REPLACED, d.message, ADMISSION),)
        case ev.AdmissionCheckUpdated():
            if b.check_controller == MULTIKUEUE_CONTROLLER:
                kind = WARNING if is_sync_failed(d.state, d.message) else NORMAL
                return (make_event(me, kind, "MultiKueue", d.message, WORKLOAD_CONTROLLER),)
            message = f"Admission check {d.check} updated state from {b.check_state} to {d.state}"
            if d.message:
                message += f" with message: {d.message}"
            return (make_event(me, NORMAL, "AdmissionCheckUpdated", message, PROVISIONING_CONTROLLER),)
        case ev.ProvisioningRequestCreateFailed():
            return (make_event(me, WARNING, "FailedCreate", d.message, PROVISIONING_CONTROLLER),)
        case ev.ProvisioningRequestCreated():
            return (make_event(me, NORMAL, "ProvisioningRequestCreated",
                               f'Created ProvisioningRequest: "{d.request.metadata.name}"', PROVISIONING_CONTROLLER,
                               action="Created"),)
        case ev.VariantCreated():
            return (make_event(me, NORMAL, "CreatedVariant", f'Variant Workload "{d.key}" created',
                               VARIANT_CONTROLLER),)
        case ev.VariantDeleted():
            return (make_event(me, NORMAL, "DeletedVariant", f'Variant Workload "{d.key}" deleted; flavor '
                               f'"{d.flavor}" no longer in ClusterQueue', VARIANT_CONTROLLER),)
        case ev.VariantActivation():
            reason = "ActivatedVariant" if d.active else "DeactivatedVariant"
            return (make_event(me, NORMAL, reason, d.message, VARIANT_CONTROLLER),)
        case ev.VariantPreemptionGateOpened():
            return (make_event(me, NORMAL, "PreemptionUngatedVariant",
                               f'Opened preemption gate for variant workload "{d.key}"', VARIANT_CONTROLLER),)
        case ev.RetentionExpired():
            if b.other is not None:
                return (make_event(b.other, NORMAL, "Deleted", "Deleted job: deactivation retention period expired",
                                   JOB_CONTROLLER),)
            return (make_event(me, NORMAL, "Deleted", "Deleted finished workload due to elapsed retention",
                               WORKLOAD_CONTROLLER),)
        case _:
            return ()


_EVENTFUL = frozenset({ev.QuotaReserved, ev.WorkloadAdmitted, ev.WorkloadPending, ev.WorkloadPreempted,
                       ev.WorkloadEvicted, ev.WorkloadDeactivated, ev.SecondPassFailed, ev.AdmissionCheckUpdated,
                       ev.ProvisioningRequestCreated, ev.RetentionExpired, ev.WorkloadSliceReplaced,
                       ev.VariantCreated, ev.VariantDeleted, ev.VariantActivation, ev.VariantPreemptionGateOpened})
"""The decisions Kueue records Events for (when :func:`before` says so)."""


_OF_A_RESERVATION = frozenset({ev.QuotaReserved, ev.WorkloadAdmitted, ev.WorkloadPreempted, ev.WorkloadEvicted,
                               ev.SecondPassFailed})
"""The decisions with Events made only about a workload holding quota (the fold's rules): a reservation forgotten
takes them along (:meth:`EventLedger.forget_reservation`)."""


def _read_back(b: Before, applied: ev.DecisionApplied) -> Before:
    """``b`` with the uid its decision's outcome names for the workload, when the workload had none as the decision
    was folded: a variant decided on before the watch showed it (the log holds it from its ``VariantCreated``).
    Kueue records only on a variant it has read, so its Events always name the variant's uid."""
    w = b.workload
    if w.uid or not applied.uid or applied.key != f"{w.namespace}/{w.name}":
        return b
    return b._replace(workload=w._replace(uid=applied.uid))


def event_name(e: KubeEvent, decision: ev.AnyEvent, offset: int, index: int) -> str:
    """``<object name>.<16 hex digits>``, the shape of client-go's Event names, the digits hashed from what makes
    the Event unique (the decision's offset, kind and time, the object's uid, its place among the decision's
    Events): the same decision gets the same name on every replay, another decision (another log too) another."""
    seed = f"{e.involved.uid}/{offset}/{type(decision).__name__}/{decision.time}/{index}".encode()
    digest = hashlib.blake2b(seed, digest_size=8).hexdigest()
    prefix = e.involved.name[: 253 - 17].rstrip("-.")
    return f"{prefix}.{digest}"


class Ready(NamedTuple):
    applied: int
    """Time (ms, from the log) of the decision's ``DecisionApplied``, or of the job integration's record."""
    event: ev.AnyEvent
    """The decision, or the record of what the job integration did (:mod:`connectors.k8s.job_events`)."""
    before: Before | Involved | PendingChecks
    """:func:`before` of a decision; the Job an Event of the job integration is about; or the Job and message of
    an ``UpdatedAdmissionCheck`` (``event`` is then the record after which it was seen)."""
    micros: int
    """The Events' ``eventTime`` in µs: ``applied`` plus the outcome's rank among those of the same millisecond
    (``MICROS_PER_DECISION`` apart, the i-th Event of the decision i µs further), so that sorting by time — as
    ``kubectl describe`` does — keeps the log's order."""


class ReadySnapshot(msgspec.Struct, array_like=True):
    """A :class:`Ready` entry in a checkpoint; its ``before`` is one of three shapes, kept in the field of its
    type."""

    offset: int
    applied: int
    event: ev.AnyEvent
    micros: int
    before: Before | None = None
    job: Involved | None = None
    checks: PendingChecks | None = None

    @classmethod
    def of(cls, offset: int, r: Ready) -> ReadySnapshot:
        b = r.before
        if isinstance(b, Before):
            return cls(offset, r.applied, r.event, r.micros, before=b)
        if isinstance(b, PendingChecks):
            return cls(offset, r.applied, r.event, r.micros, checks=b)
        return cls(offset, r.applied, r.event, r.micros, job=b)

    def entry(self) -> Ready:
        b = self.before or self.checks or self.job
        if b is None:
            raise InvalidInput(f"the Events ledger entry at offset {self.offset} says nothing of what it is about")
        return Ready(self.applied, self.event, b, self.micros)


class LedgerSnapshot(msgspec.Struct, array_like=True):
    """:class:`EventLedger` in a checkpoint (:mod:`connectors.k8s.mirror_snapshot`)."""

    window_ms: int
    awaiting: list[tuple[int, ev.AnyEvent, Before]]
    ready: list[ReadySnapshot]
    """In the order the entries became ready (the ledger expires the oldest first)."""
    cycle: int
    last_ms: int
    rank: int
    placed: list[str]
    checks: list[tuple[str, str]]


class EventLedger:
    """Decisions with Events awaiting their outcome, and carried-out ones within the window (see above).

    The job integration's records (``JobActed``, and ``WorkloadFinished`` of a Workload whose Job is there) are
    facts, not decisions: they are ready as they are folded.

    ``fold`` is called for every record *before* the cluster state applies it. ``ready`` is the recorder's to
    empty (it removes what it created or gave up on); ``dirty`` holds the offsets that became ready since the
    recorder last looked."""

    def __init__(self, window_ms: int = DEFAULT_WINDOW_MS) -> None:
        self.window_ms = window_ms
        self.awaiting: dict[int, tuple[ev.Decision, Before]] = {}
        """Offset -> a decision Kueue records Events for, and what they need, until its outcome."""
        self.ready: OrderedDict[int, Ready] = OrderedDict()
        """Offset -> a carried-out decision or a job integration's record, in the order they became ready
        (oldest first)."""
        self.dirty: set[int] = set()
        self._cycle = -1
        self._last_ms = -1
        self._rank = 0
        """Outcomes folded so far with time ``_last_ms``."""
        self._placed: set[str] = set()
        """Workloads reserved or placed by the scheduler in cycle ``_cycle``."""
        self._checks: dict[str, str] = {}
        """Job key -> the ``UpdatedAdmissionCheck`` message last made ready for it, while Kueue would record it."""

    def snapshot(self) -> LedgerSnapshot:
        return LedgerSnapshot(
            window_ms=self.window_ms, awaiting=[(off, d, b) for off, (d, b) in sorted(self.awaiting.items())],
            ready=[ReadySnapshot.of(off, r) for off, r in self.ready.items()], cycle=self._cycle,
            last_ms=self._last_ms, rank=self._rank, placed=sorted(self._placed), checks=sorted(self._checks.items()))

    @classmethod
    def restored(cls, s: LedgerSnapshot) -> EventLedger:
        """The ledger ``s`` was taken of; every ready entry is the recorder's to look at once, as after a fold of
        the whole log (an Event it already created counts as done)."""
        led = cls(s.window_ms)
        for off, d, b in s.awaiting:
            if not isinstance(d, ev.Decision):
                raise InvalidInput(f"the Events ledger awaits a {type(d).__name__} at offset {off}, not a decision")
            led.awaiting[off] = (d, b)
        led.ready = OrderedDict((r.offset, r.entry()) for r in s.ready)
        led.dirty = set(led.ready)
        led._cycle, led._last_ms, led._rank = s.cycle, s.last_ms, s.rank
        led._placed, led._checks = set(s.placed), dict(s.checks)
        return led

    def fold(self, record: ev.Record, state: ClusterState, job_of: Mapping[str, str]) -> None:
        e = record.event
        kind = type(e)
        if kind is ev.DecisionApplied:
            found = self.awaiting.pop(e.decision, None)  # type: ignore[union-attr]
            if found is not None:
                self._ready(e.decision, e.time, found[0], _read_back(found[1], e))  # type: ignore[arg-type, union-attr]
            return
        if kind is ev.DecisionRejected:
            self.awaiting.pop(e.decision, None)  # type: ignore[union-attr]
            return
        if kind is ev.ProvisioningRequestCreateFailed:  # a fact: its Event is ready at once, one per attempt
            wl = state.workloads.get(e.key)
            if wl is not None and (not e.uid or e.uid == wl.uid):
                self._ready(record.offset, e.time, e, Before(_workload(wl), wl.priority, wl.cluster_queue))
            return
        if kind is ev.JobActed:
            namespace, _, name = e.key.partition("/")
            kind_api = ACTED_ON_API.get(e.kind, JOB_API)  # type: ignore[union-attr]
            self._ready(record.offset, e.time, e, Involved(kind_api, e.kind, namespace, name, e.uid))  # type: ignore[union-attr]
            return
        if kind is ev.WorkloadFinished:
            # a prebuilt Workload finished out of sync is no Workload of the Job's to Kueue: no FinishedWorkload
            job = _job_of_finishing(state, job_of, e.key) if e.reason != OUT_OF_SYNC else None  # type: ignore[union-attr]
            if job is not None:
                self._ready(record.offset, e.time, e, job)
            return
        if not isinstance(e, ev.Decision):
            return
        if e.cycle != self._cycle:
            self._cycle = e.cycle
            self._placed.clear()
        if kind is ev.QuotaReserved or kind is ev.TopologyAssigned:
            self._placed.add(e.key)
        if kind not in _EVENTFUL:
            return
        wls = state.workloads
        preemptor = job = None
        if kind is ev.WorkloadPreempted:
            preemptor = wls.get(e.preemptor)  # type: ignore[attr-defined]
        elif kind is ev.RetentionExpired and e.target == "Job":  # type: ignore[attr-defined]
            j = state.jobs.get(job_of.get(e.key, ""))
            if j is not None:
                job = involved_job(j)
        controller = ""
        if kind is ev.AdmissionCheckUpdated:
            ac = state.admission_checks.get(e.check)  # type: ignore[attr-defined]
            controller = ac.spec.controller_name if ac is not None else ""
        about = e.key
        if kind is ev.VariantCreated or kind is ev.VariantDeleted:  # recorded on the parent
            about = f"{e.key.partition('/')[0]}/{e.parent}"  # type: ignore[attr-defined]
        b = before(e, wls.get(about), preemptor=preemptor, job=job,
                   by_scheduler=kind is ev.WorkloadAdmitted and e.key in self._placed, check_controller=controller)
        if b is not None:
            self.awaiting[record.offset] = (e, b)

    def forget_reservation(self, key: str) -> None:
        """The fold forgot ``key``'s quota reservation (a Workload rewritten with other pod sets before the
        reservation was written): Kueue's scheduler, whose write failed, records no Event of that reservation, nor
        of what followed it on the workload, so the decisions awaiting an outcome that only a workload holding quota
        gets are dropped. The writer carries out no reservation for them."""
        for off in sorted(self.awaiting):
            d = self.awaiting[off][0]
            if d.key == key and type(d) in _OF_A_RESERVATION:
                del self.awaiting[off]

    def pending_checks(self, offset: int, e: ev.AnyEvent, job_key: str, job: Involved | None, message: str) -> None:
        """After the record ``e`` at ``offset``: Kueue's reconcile of Job ``job_key`` would record
        ``UpdatedAdmissionCheck`` ``message`` now (empty: none). Ready when it differs from the last one made
        ready: Kueue's recorder folds a repeat into the earlier Event's count."""
        if message == self._checks.get(job_key, ""):
            return
        if not message or job is None:
            self._checks.pop(job_key, None)
            return
        self._checks[job_key] = message
        if offset not in self.ready:  # a record the ledger holds (WorkloadFinished) leaves no check message
            self._ready(offset, e.time, e, PendingChecks(job, message))

    def _ready(self, offset: int, t: int, e: ev.AnyEvent, b: Before | Involved | PendingChecks) -> None:
        self._rank = self._rank + 1 if t == self._last_ms else 0
        self._last_ms = t
        sub = min(self._rank * MICROS_PER_DECISION, 1000 - MICROS_PER_DECISION)
        self.ready[offset] = Ready(t, e, b, t * 1000 + sub)
        self.dirty.add(offset)
        self._expire(t - self.window_ms)

    def _expire(self, cutoff: int) -> None:
        ready = self.ready  # ordered: finding the oldest is O(1) however many were removed before it
        while ready:
            first, entry = next(iter(ready.items()))
            if entry.applied >= cutoff:
                return
            del ready[first]
            self.dirty.discard(first)


def involved_job(job: o.Job) -> Involved:
    return Involved(JOB_API, "Job", job.metadata.namespace, job.metadata.name, job.metadata.uid)


def _job_of_finishing(state: ClusterState, job_of: Mapping[str, str], key: str) -> Involved | None:
    """The Job Kueue records ``FinishedWorkload`` on when Workload ``key`` finishes: its owner, while it is there
    (the same Job: a Job recreated under the same name is another one), for a Workload not finished yet."""
    wl = state.workloads.get(key)
    job = state.jobs.get(job_of.get(key, ""))
    if wl is None or job is None or wl.phase == FINISHED:
        return None
    uid = wl.labels.get(JOB_UID_LABEL)
    if uid is not None and uid != job.metadata.uid:
        return None
    return involved_job(job)
