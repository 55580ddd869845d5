"""The compact, projected form of a Workload: what admission needs, and the status Kueue would show.

Pod-set shapes are interned: thousands of workloads of one job template share one :class:`PodSetInfo`, which
keeps a pending workload well under its memory budget and makes equal shapes cheap to compare (Kueue's
scheduling-equivalence hash is just ``WorkloadInfo.shape()``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from sys import intern
from typing import Any

import msgspec
from msgspec.structs import replace as _replace

from events import objects as o
from events.quantity import MAX_INT64, canonical_quantity, to_int
from events.schema import FlavorScan, WaitedPodSet, WorkloadPending
from events.timefmt import format_time
from events.topology_spreading import SPREADING_ANNOTATION
from events.unhealthy_threshold import (  # noqa: F401 (re-exported: the fold and connectors read them here)
    UNHEALTHY_NODES_THRESHOLD_ANNOTATION,
    unhealthy_threshold_of,
)
from projections import eviction_stats
from projections.create_failures import FailedCreate
from projections.dra import (
    DraView,
    asks_for_served,
    capacity_charge_of,
    claim_charge,
    counter_charge_of,
    extended_charge,
)
from projections.host_ports import HostPort, host_ports
from projections.pod_adjustment import (
    INVALID_RESOURCES,
    OUTSIDE_LIMIT_RANGES,
    LimitSummary,
    adjust,
    aggregate_requests,
    chargeable_overhead,
    limit_findings,
    overhead_for,
    pod_level_resource,
    resource_findings,
)
from projections.request_rules import RequestRules

PENDING, RESERVED, ADMITTED, FINISHED = "Pending", "QuotaReserved", "Admitted", "Finished"
HOLDING = (RESERVED, ADMITTED)
"""The phases of a workload holding quota: ``wl.phase in HOLDING`` is :attr:`WorkloadInfo.reserving` without a
property call, for the fold's hot path (Python 3.11 does not specialise a property read: ~300 instructions)."""
_BLANK_CONDITION = o.Condition(type="", status="")
"""What :meth:`WorkloadInfo.set_condition` builds its conditions from, by ``structs.replace``: cheaper than
calling the view's class on Python 3.11 (:class:`events.objects._ViewMeta` says why)."""
PENDING_EVALUATION = "Workload is pending evaluation in the scheduling queue"
"""The workload controller's QuotaReserved=False message once nothing blocks a pending workload's queue."""
BYPASSED = "Bypassed scheduling evaluation because an equivalent workload recently failed"
"""The workload controller's QuotaReserved=False message for a workload parked because an equivalent one failed
(SchedulingEquivalenceHashing); the reason is the one that workload's failure got."""
QUEUE_BLOCKERS = frozenset({"Suspended", "Misconfigured", "Deactivated", "Inadmissible", "DRAResourcesUnresolved"})
"""QuotaReserved=False reasons the workload controller writes for what blocks a pending workload's queue
(``Inadmissible``: its DRA claims, :mod:`projections.dra`, and any block with UnadmittedWorkloadsObservability
off)."""
BACKOFF_REASONS = frozenset({"PodsReadyTimeout", "AdmissionCheck"})
"""Eviction reasons whose Requeued=False the workload controller turns True (BackoffFinished) only once
``requeueState.requeueAt`` has passed: the evictions that wait out a backoff."""


LEGACY_PENDING = "Pending"
"""The QuotaReserved=False reason with UnadmittedWorkloadsObservability off wherever Kueue v0.20 would write a
granular one of the scheduler's (``requeueAndUpdate``) or a PendingEvaluation (a requeue giving the quota back, a
cleared admission gate): ``UnadmittedWorkloadReasonWithFallback``'s fallback."""
LEGACY_INADMISSIBLE = "Inadmissible"
"""The workload controller's QuotaReserved=False reason for what blocks a queue with UnadmittedWorkloadsObservability
off (``resolveLegacyUnadmittedQuotaReservedCondition``: the granular message, this reason)."""
PODS_READY_WAIT_REASON, PODS_READY_WAIT_LEGACY_REASON = "WaitingForPodsReady", "Waiting"
PODS_READY_WAIT_MESSAGE = "waiting for all admitted workloads to be in PodsReady condition"
"""QuotaReserved=False of an entry waitForPodsReady's blockAdmission holds back (the legacy reason while
UnadmittedWorkloadsObservability is off): the scheduler waits with it, its attempt did not fail."""
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
"""On a pod Kueue placed: the name of its Workload (in the pod's namespace)."""
MANAGED_LABEL = "kueue.x-k8s.io/managed"
"""On what Kueue made or holds (a Pod, a PodTemplate of a ProvisioningRequest): ``"true"``."""
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
"""The scheduling gate of a pod placed by topology: the ungater lifts it onto its domain."""


def topology_gated(scheduling_gates: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a pod's (or a pod template's) ``schedulingGates`` hold :data:`TOPOLOGY_GATE`."""
    return any(g.get("name") == TOPOLOGY_GATE for g in scheduling_gates)

ADMISSION_GATED_BY_ANNOTATION = "kueue.x-k8s.io/admission-gated-by"
"""On a Workload (copied from its Job): the controllers that must clear it before the workload may be admitted.
Under Kueue's ``AdmissionGatedBy`` gate a non-empty value keeps the workload out of its queue."""
ADMISSION_GATED = "AdmissionGated"
ADMISSION_GATED_PREFIX = "Admission is gated by: "
ADMISSION_GATE_CLEARED = "AdmissionGatedBy cleared, waiting for quota reservation"
"""The workload controller's QuotaReserved=False reason and message prefix while a workload is gated, and its
PendingEvaluation message once the gate is cleared."""


def unadmitted_reason(granular: str, observability: bool) -> str:
    """The QuotaReserved=False reason Kueue writes for ``granular`` under UnadmittedWorkloadsObservability (on),
    else its legacy fallback :data:`LEGACY_PENDING`."""
    return granular if observability else LEGACY_PENDING


def gate_cleared(reason: str, message: str) -> bool:
    """Whether a QuotaReserved=False reason and message are the workload controller's once an admission gate is
    cleared (PendingEvaluation, or its legacy fallback, with :data:`ADMISSION_GATE_CLEARED`)."""
    return reason in ("PendingEvaluation", LEGACY_PENDING) and message == ADMISSION_GATE_CLEARED


IS_GROUP_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/is-group-workload"
"""On the Workload of a pod group (``"true"``): pods of the group may be created into it, so it is not owned by
one Pod for good even when it names only one."""
JOB_OWNER_GVK_ANNOTATION = "kueue.x-k8s.io/job-owner-gvk"
"""On a Workload one of several its owner makes (a LeaderWorkerSet's group): the owner's kind."""
COMPONENT_INDEX_ANNOTATION = "kueue.x-k8s.io/component-workload-index"
"""On such a Workload: its index among them."""


def component_index(annotations: Mapping[str, str]) -> int | None:
    """A component Workload's index (:attr:`WorkloadInfo.component_index`): None without
    ``kueue.x-k8s.io/job-owner-gvk``, -1 when its index annotation is missing or not a decimal integer."""
    if JOB_OWNER_GVK_ANNOTATION not in annotations:
        return None
    raw = annotations.get(COMPONENT_INDEX_ANNOTATION, "")
    digits = raw[1:] if raw[:1] in ("+", "-") else raw
    if not digits or not digits.isascii() or not digits.isdigit():
        return -1
    return max(int(raw), -1)


SLICE_REPLACEMENT_FOR_ANNOTATION = "kueue.x-k8s.io/workload-slice-replacement-for"
"""Set on a new slice of an elastic Job's Workload: the ``namespace/name`` of the slice it replaces."""
MULTIKUEUE_ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
"""The label a MultiKueue manager puts on the copies it makes on a worker: there, a Workload carrying it is such a
copy, whose priority the manager resolved (:func:`projections.cluster.copy_priority`)."""
ELASTIC_JOB_ANNOTATION = "kueue.x-k8s.io/elastic-job"
"""``"true"`` on every slice of an elastic Job's Workload (Kueue's ``IsElasticWorkload``)."""
WORKLOAD_SLICE_REPLACED = "WorkloadSliceReplaced"
"""The Finished reason of a slice whose replacement was admitted."""
ALLOWED_FLAVORS_ANNOTATION = "kueue.x-k8s.io/workload-allowed-resource-flavors"
"""``ConcurrentAdmission``: the flavors a Workload may be assigned, comma-separated (Kueue's variant controller
writes one flavor on each variant Workload it makes of a parent)."""
CONCURRENT_ADMISSION_PARENT_LABEL = "kueue.x-k8s.io/concurrent-admission-parent"
"""``ConcurrentAdmission``: ``"true"`` on a parent Workload (Kueue's workload controller labels each workload of a
ClusterQueue with a ``concurrentAdmissionPolicy``), which is not queued itself but through its variants."""


def is_parent(wl: WorkloadInfo) -> bool:
    """It carries :data:`CONCURRENT_ADMISSION_PARENT_LABEL` ``"true"`` (Kueue's ``IsParent``)."""
    return wl.labels.get(CONCURRENT_ADMISSION_PARENT_LABEL) == "true"


def allowed_flavors(value: str | None) -> tuple[str, ...] | None:
    """The flavors an :data:`ALLOWED_FLAVORS_ANNOTATION` value allows, spaces around each dropped (None: no
    annotation; an empty or blank one allows none, as Kueue reads it)."""
    if value is None:
        return None
    if not value.strip():
        return ()
    return tuple(part.strip() for part in value.split(","))


class PodSetInfo(msgspec.Struct, frozen=True, gc=False, array_like=True):
    name: str
    count: int
    min_count: int | None
    requests: tuple[tuple[str, int], ...]
    """Per-pod requests in Kueue units, sorted by resource name, of the template as Kueue adjusts it (RuntimeClass
    overhead, LimitRange defaults, limits as missing requests: :mod:`projections.pod_adjustment`), then as the
    Configuration's ``resources`` rules leave them (transformations, then excluded prefixes:
    :mod:`projections.request_rules`)."""
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[o.Toleration, ...] = ()
    affinity_terms: tuple[o.NodeSelectorTerm, ...] | None = None
    topology: o.PodSetTopologyRequest | None = None
    invalid_resources: tuple[str, ...] = ()
    """Where the adjusted template's requests exceed its limits (field errors relative to the pod set)."""
    outside_limit_ranges: tuple[str, ...] = ()
    """Where the adjusted template is outside its namespace's LimitRanges (field errors relative to the pod set)."""
    preferred_terms: tuple[o.PreferredSchedulingTerm, ...] = ()
    """The template's preferred node affinity, which TAS placement weighs under TASRespectNodeAffinityPreferred."""
    dra_requests: tuple[tuple[str, int], ...] = ()
    """The part of :attr:`requests` its DRA claims add, and its extended resources that DeviceClasses serve
    (:mod:`projections.dra`): quota only, never placed."""
    dra_error: str = ""
    """Why Kueue does not charge its DRA claims (relative to the pod set, or workload-wide); the workload is then
    inadmissible (:func:`projections.dra.workload_problem`)."""
    host_ports: tuple[HostPort, ...] = ()
    """The host ports each pod takes on its node (:func:`projections.host_ports.host_ports`), which TAS placement
    checks under SchedulerLibraryIntegration. Computed with the rest of the pod set, only for a template not seen
    before."""
    spreading: str | None = None
    """Its template's ``kueue.x-k8s.io/podset-topology-spreading`` annotation as written (None: none, as for one
    restored from a snapshot before version 36 until its next upsert), kept whatever the gate; TAS placement reads
    it only under ``TASTopologySpreading`` (:mod:`kueue_es.scheduler.tas.spreading`)."""
    claim_templates: tuple[str, ...] = ()
    """The ResourceClaimTemplates its template's ``resourceClaims`` name, in order: what each pod claims, which TAS
    placement checks against the nodes' devices under ``KueueDRADeviceFeasibility``
    (:mod:`kueue_es.scheduler.tas.devices`)."""
    placement: tuple[tuple[str, int], ...] | None = None
    """Per-pod requests topology placement counts, sorted, where they differ from :attr:`requests` less
    :attr:`dra_requests` (None: they do not, as whenever the Configuration has no ``resources`` rules; also for one
    restored from a snapshot before version 45 and not retaken since): the adjusted template's own requests, before
    the rules (:func:`placement_of`)."""

    @property
    def placement_requests(self) -> tuple[tuple[str, int], ...]:
        """Per-pod requests as topology placement counts them, for node fit and for the node usage of admitted
        workloads alike: the adjusted template's (Kueue v0.19+ #12006: the pod spec's requests, not the ones
        ``excludeResourcePrefixes`` and ``transformations`` leave for quota), without the DRA devices, which Kueue
        charges to quota only."""
        if self.placement is not None:
            return self.placement
        return _less_devices(self.requests, self.dra_requests)


def _less_devices(requests: tuple[tuple[str, int], ...], dra_requests: tuple[tuple[str, int], ...]
                  ) -> tuple[tuple[str, int], ...]:
    """``requests`` without the DRA charge ``dra_requests`` added to them (a name left at nothing that only the
    charge brought is dropped)."""
    if not dra_requests:
        return requests
    dra = dict(dra_requests)
    out = [(r, v - dra.get(r, 0)) for r, v in requests]
    return tuple((r, v) for r, v in out if v > 0 or r not in dra)


class RemoteCopy(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """What a MultiKueue manager last observed of a workload's copy on a worker."""

    conditions: tuple[o.Condition, ...] = ()
    """Its QuotaReserved, Admitted, Evicted and Finished conditions."""
    topology_pod_sets: tuple[str, ...] = ()
    """Its pod sets placed by the worker's TAS (a topology assignment in its admission)."""
    preemption_gates: tuple[o.PreemptionGateState, ...] = ()
    """Its ``status.preemptionGates`` (MultiKueueOrchestratedPreemption), as observed or as the manager opened
    them since."""


class WorkloadInfo(msgspec.Struct, gc=False, array_like=True):
    """Mutable projected state of one Workload. Field order is the snapshot's wire order.

    Neither it nor anything it holds is tracked by the cyclic collector (``gc=False`` structs, immutable views,
    tuples and dicts of those): it refers to nothing that refers back to it, so it can never be part of a
    reference cycle, and a full collection in a scheduler holding tens of thousands of workloads walks none of
    them (with one list and two tracked objects per workload, those collections held the event loop for
    100-300 ms)."""

    key: str
    uid: str
    namespace: str
    name: str
    queue_name: str
    created: int
    """creationTimestamp, ms."""
    priority: int
    priority_class: str
    pod_sets: tuple[PodSetInfo, ...]
    active: bool = True
    labels: dict[str, str] = {}
    phase: str = PENDING
    admission: o.Admission | None = None
    usage: dict[str, int] = {}
    """Reserved usage keyed ``flavor/resource``."""
    cluster_queue: str = ""
    """The ClusterQueue whose quota it holds (while reserved) or whose queue it sits in."""
    conditions: tuple[o.Condition, ...] = ()
    evicted: str = ""
    """Reason of a True Evicted condition, else empty."""
    job_stopped: bool = False
    pods_ready: bool = False
    requeue_count: int = 0
    requeue_at: int | None = None
    reserved_at: int | None = None
    admitted_at: int | None = None
    resource_version: str = ""
    max_execution_seconds: int | None = None
    accumulated_seconds: int = 0
    """``status.accumulatedPastExecutionTimeSeconds``: whole seconds it was admitted before its current admission
    (Kueue adds each run as the admission goes; a run under a second adds 0, and 0 is not shown)."""
    check_states: dict[str, o.AdmissionCheckState] = {}
    provreq_parameters: tuple[tuple[str, str], ...] = ()
    """ProvisioningRequest parameters the workload asks for (its ``provreq.kueue.x-k8s.io/<param>`` annotations,
    prefix stripped), sorted; the empty tuple, shared, for the many workloads that have none."""
    unhealthy_nodes: tuple[str, ...] = ()
    """``status.unhealthyNodes``: failed nodes under a TAS admission, the first one being replaced."""
    second_pass: tuple[int, int] | None = None
    """(iteration, due ms) while the workload waits for a second pass (delayed topology or node replacement)."""
    generation: int = 0
    """``metadata.generation`` when the pod templates were last taken (status-only upserts keep it)."""
    scan: FlavorScan | None = None
    """Flavor scan progress of the last admission attempt while pending (interned ``tried``); None when the next
    attempt starts at the first flavors."""
    retention_target: str = ""
    """What a RetentionExpired decision deletes (``Workload`` or ``Job``); empty while its retention runs."""
    shows_requests: bool = False
    """``status.resourceRequests`` is shown: a failed admission attempt wrote it, and no quota reservation has
    emptied it since (the values are the pod sets' totals, :func:`resource_requests`)."""
    reclaimable: tuple[tuple[str, int], ...] = ()
    """``status.reclaimablePods`` as (pod set, count), by pod set name: pods that finished and need no quota any
    more (Kueue's ReclaimablePods gate). :attr:`pod_sets` count without them."""
    spec_pod_sets: tuple[PodSetInfo, ...] | None = None
    """The pod sets with the spec's counts, kept only while reclaimable pods lower one of them (None:
    :attr:`pod_sets` are the spec's)."""
    admission_gate: str = ""
    """Its ``kueue.x-k8s.io/admission-gated-by`` annotation (empty: none, or empty). Non-empty, and under the
    ``AdmissionGatedBy`` gate, the workload is not queued (Kueue's ``IsAdmissible``)."""
    pod_owned: bool = False
    """Owned by a single Pod and no pod group (:func:`owned_by_single_pod`): under
    SkipReassignmentForPodOwnedWorkloads it is never placed anew while its pod may still run, nor requeued."""
    kept_nodes: tuple[str, ...] = ()
    """Failed nodes its placement was kept on (SkipReassignmentForPodOwnedWorkloads) and that the node controller
    has not looked at since, sorted: it does not list them in ``unhealthyNodes`` again until it does."""
    boost: int = 0
    """The part of :attr:`priority` its ``kueue.x-k8s.io/priority-boost`` annotation adds under Kueue's
    ``PriorityBoost`` gate (0: gate off, no annotation, or one Kueue cannot read): :attr:`priority` is the
    effective priority every rule compares, ``priority - boost`` the base one (``spec.priority`` or its class's)."""
    boost_annotation: str = ""
    """That annotation as written (empty: none), kept whatever the gate: a change of it takes a parked workload
    back to its queue's heap under the gate, and a configuration turning the gate on reads it."""
    metric_annotations: tuple[tuple[str, str], ...] = ()
    """Its annotations that ``sourceKind: Workload`` custom metric labels read (CustomMetricLabels on), sorted;
    the empty tuple, shared, whenever none is configured or it has none of them."""
    replaces: str = ""
    """Its ``kueue.x-k8s.io/workload-slice-replacement-for`` annotation (empty: none, as for most workloads): the key
    of the elastic Job's slice it replaces. Kept whatever the gate; the scheduler reads it only under
    ``ElasticJobsViaWorkloadSlices``."""
    owner: tuple[str, ...] = ()
    """(apiVersion, kind, name) of its controller owner (else its first owner; empty: none): which MultiKueue
    adapter, if any, can run it on a worker."""
    cluster_name: str = ""
    """MultiKueue's ``status.clusterName``: the worker that admitted it (empty: none yet, or evicted since)."""
    nominated: tuple[str, ...] = ()
    """MultiKueue's ``status.nominatedClusterNames``."""
    remotes: dict[str, RemoteCopy] | None = None
    """MultiKueue: worker -> the workload's copy there, as last observed (no entry: none; None: no copy was ever
    observed, as for every workload outside MultiKueue — an empty dict per workload would cost every one of them)."""
    nominated_at: int = 0
    """MultiKueue: the log time its nominations last changed (the incremental dispatcher's round started then)."""
    owner_managed_by: str | None = None
    """MultiKueue: its owner's ``spec.managedBy`` as last observed (``OwnerObserved``), for owners the log does not
    hold (a JobSet); None: never observed."""
    unshown_checks: tuple[tuple[str, int, int], ...] = ()
    """(check, offset, resourceVersion) of its checks whose state the log set itself (listed anew, reset on
    eviction) at that offset and no upsert has shown since, by name; the resourceVersion is the one the writer
    reported that state written at (``DecisionApplied`` of a later decision), -1 until then. A Workload read before
    it was written may show an older state, whatever its ``lastTransitionTime`` (whole seconds) says, so for a
    check kueue-es does not run, what an upsert shows is taken only once the upsert shows the log's state, or comes
    from a resourceVersion after the one it was written at (:meth:`ClusterState._take_external_checks
    <projections.cluster.ClusterState._take_external_checks>`)."""
    shown_checks: tuple[o.AdmissionCheckState, ...] = ()
    """The states of checks kueue-es does not run as the Workload last read (at :attr:`resource_version`) shows them,
    kept while it lists such checks or shows some (else empty): a check listed anew (or reset) exactly as shown there
    needs no write, so it is not :attr:`unshown_checks` (no write would ever report it written)."""
    waited: tuple[WaitedPodSet, ...] = ()
    """The assignment it waits with while waitForPodsReady.blockAdmission holds it (the ``WorkloadPending`` that
    held it), which the scheduler admits it on once it wakes; empty otherwise."""
    component_index: int | None = None
    """Its ``kueue.x-k8s.io/component-workload-index`` when it is one of the Workloads its owner makes together (it
    carries ``kueue.x-k8s.io/job-owner-gvk``: a LeaderWorkerSet's group), -1 when that index cannot be read; None:
    its owner makes it alone. MultiKueue dispatches such a group as one (:mod:`kueue_es.scheduler.multikueue`)."""
    owner_replicas: int | None = None
    """MultiKueue: how many Workloads its owner makes (a LeaderWorkerSet's ``spec.replicas``), as last observed
    (``OwnerObserved``) for a :attr:`component_index` one; None: never observed."""
    owner_uid: str = ""
    """For one whose :attr:`owner` is of a kind in :data:`GROUPED_OWNERS`, that owner's UID (empty: any other
    workload, or unknown, as for one restored from a snapshot before version 24 until its next upsert, or, without
    a :attr:`component_index`, from one before version 26): a group's Workloads are its owner's by UID, as Kueue lists
    them (its owner-UID index; :attr:`ClusterState.owner_groups`)."""
    elastic: bool = False
    """Its ``kueue.x-k8s.io/elastic-job`` annotation is ``"true"`` (an elastic Job's slice; False, as for one restored
    from a snapshot before version 27 until its next upsert). Kept whatever the gate; the scheduler reads it only
    under ``ElasticJobsViaWorkloadSlicesWithTAS`` (:mod:`kueue_es.scheduler.tas.elastic`)."""
    allowed_flavors: tuple[str, ...] | None = None
    """Its :data:`ALLOWED_FLAVORS_ANNOTATION` flavors (None: no annotation, as for most workloads). Kept whatever
    the gate; under ``ConcurrentAdmission`` the flavor assigner skips every other flavor."""
    preemption_gated: bool = False
    """One of its ``spec.preemptionGates`` is closed as the Workload last read shows it, or as its last eviction
    left it (:func:`projections.preemption_gates.has_closed_gate`): under ``MultiKueueOrchestratedPreemption`` the
    scheduler does not preempt for it."""
    gate_states: tuple[o.PreemptionGateState, ...] = ()
    """Its ``status.preemptionGates`` as the Workload last read shows them (entries of gates its spec no longer
    lists too, until the controller drops them), all closed by its eviction since: what the status writer
    writes."""
    spec_gates: tuple[str, ...] = ()
    """The names of its ``spec.preemptionGates`` (empty, as for one restored from a snapshot before version 33
    until its next upsert): under ``MultiKueueOrchestratedPreemption`` its status lists each of them
    (:mod:`kueue_es.scheduler.gate_states`)."""
    unhealthy_threshold: int | None = None
    """Its :data:`UNHEALTHY_NODES_THRESHOLD_ANNOTATION` read as a whole number from 1 to 8 (None: no annotation, one
    Kueue's webhook would refuse, or one restored from a snapshot before version 37 until its next upsert). Kept
    whatever the gate; read only under ``TASReplaceMultipleFailedNodes``
    (:func:`kueue_es.scheduler.multinode.threshold`)."""
    own_pods_ready: tuple[int | None, int | None] | None = None
    """The waitForPodsReady timeout and recovery timeout (ms) its ``kueue.x-k8s.io/wait-for-pods-ready`` annotation
    sets (None: none, as for most workloads, or for one restored from a snapshot before version 39 until its next
    upsert; :mod:`projections.workload_pods_ready`). Kept whatever the gate; the scheduler reads it only under
    ``WorkloadLevelWaitForPodsReady``."""
    evictions: tuple[tuple[str, str, int], ...] = ()
    """``status.schedulingStats.evictions`` as ``(reason, underlying cause, count)``, in the order first counted: as
    the Workload showed it when first seen, plus one per eviction folded since (:mod:`projections.eviction_stats`;
    restored from a snapshot before version 44, each pair the metrics had counted, once)."""
    reservation_forgotten: bool = False
    """The reservation it last lost was one the apiserver never took (the fold forgot it:
    :meth:`ClusterState._forget_reservation <projections.cluster.ClusterState._forget_reservation>`), not one written
    and then given back; until its next reservation, a ProvisioningRequest decided for it that the watch never showed
    is withdrawn (:func:`kueue_es.scheduler.provisioning.cleanup`). False, as for one restored from a snapshot before
    version 54."""
    failed_creates: tuple[FailedCreate, ...] = ()
    """Per check, the ProvisioningRequest whose creation the apiserver refused last, and when it may be
    decided again (:mod:`projections.create_failures`); none, as for one restored from a snapshot before
    version 63."""

    @property
    def base_priority(self) -> int:
        """The priority without the boost: what Kueue's visibility API and Events show as the base."""
        return self.priority - self.boost

    @property
    def spec_sets(self) -> tuple[PodSetInfo, ...]:
        """The pod sets with the counts the spec gives (before reclaimable pods are taken off)."""
        return self.pod_sets if self.spec_pod_sets is None else self.spec_pod_sets

    def shape(self, names: bool = False, flavors: bool = False) -> tuple[int, bytes]:
        """Scheduling-equivalence key (Kueue's scheduling hash): effective priority and the encoded pod-set shapes,
        in spec order, their names left out unless ``names`` (``SchedulingEquivalenceHashingIgnorePodSetName``
        off), and with ``flavors`` (``ConcurrentAdmission``) the :attr:`allowed_flavors` when it has some: a
        workload that may use other flavors is not equivalent. Interned: queues keep one per pending workload, and
        most workloads share a handful of shapes."""
        pod_sets = _ENC.encode(tuple(map(_shaped, self.pod_sets))) if names else _nameless(self.pod_sets)
        if flavors and self.allowed_flavors is not None:
            pod_sets += b"\xc0" + _ENC.encode(self.allowed_flavors)  # after a nil, which starts no pod set
        shape = (self.priority, pod_sets)
        found = _SHAPES.get(shape)
        if found is None:
            if len(_SHAPES) > 100_000:
                _SHAPES.clear()
            found = _SHAPES[shape] = shape
        return found

    @property
    def reserving(self) -> bool:
        return self.phase in HOLDING

    def condition(self, type_: str) -> o.Condition | None:
        for c in self.conditions:
            if c.type == type_:
                return c
        return None

    def set_condition(self, type_: str, status: str, reason: str, message: str, time: int,
                      generation: int | None = None) -> None:
        """Set a condition as the API machinery does: lastTransitionTime changes only when status changes. Its
        observedGeneration is ``generation`` if given, else the Workload's generation as last seen, as Kueue
        writes ``w.Generation`` on the conditions it sets. (The condition is built from a blank one, not by
        ``o.Condition(...)``: see :data:`_BLANK_CONDITION`.)"""
        if generation is None:
            generation = self.generation
        conditions = self.conditions
        for i, c in enumerate(conditions):
            if c.type == type_:
                ltt = c.last_transition_time if c.status == status else format_time(time)
                self.conditions = (*conditions[:i], _replace(
                    _BLANK_CONDITION, type=type_, status=status, reason=reason, message=message,
                    last_transition_time=ltt, observed_generation=generation,
                ), *conditions[i + 1:])
                return
        self.conditions = (*conditions, _replace(
            _BLANK_CONDITION, type=type_, status=status, reason=reason, message=message,
            last_transition_time=format_time(time), observed_generation=generation))

    def total_requests(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for ps in self.pod_sets:
            for r, v in ps.requests:
                total[r] = total.get(r, 0) + v * ps.count
        return total


def owner_of(meta: o.ObjectMeta, known: tuple[str, ...] = ()) -> tuple[str, ...]:
    """(apiVersion, kind, name) of the controller owner, else of the first owner; empty without owners. ``known``:
    the workload's owner as last seen, returned as it is when unchanged (every upsert of an owned workload asks)."""
    refs = meta.owner_references
    if not refs:
        return ()
    for ref in refs:  # no generator
        if ref.controller:
            break
    else:
        ref = refs[0]
    if known and known[2] == ref.name and known[1] == ref.kind and known[0] == ref.api_version:
        return known
    return (intern(ref.api_version), intern(ref.kind), ref.name)  # one copy of "batch/v1" for every workload


GROUPED_OWNERS = frozenset({("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")})
"""(apiVersion, kind) of the owners that make several Workloads dispatched as one group (a LeaderWorkerSet's, one
per group; :data:`kueue_es.scheduler.multikueue.MULTI_WORKLOAD`): their Workloads keep the owner's UID
(:attr:`WorkloadInfo.owner_uid`) and are indexed by it."""
_GROUPED_KINDS = frozenset(kind for _, kind in GROUPED_OWNERS)


def grouped_owner(owner: tuple[str, ...]) -> bool:
    """Whether ``owner`` (:func:`owner_of`'s answer) is of a :data:`GROUPED_OWNERS` kind."""
    return bool(owner) and owner[1] in _GROUPED_KINDS and (owner[0], owner[1]) in GROUPED_OWNERS  # most: no tuple


def grouped_owner_uid(meta: o.ObjectMeta, owner: tuple[str, ...]) -> str | None:
    """The UID a Workload whose owner is ``owner`` keeps (:attr:`WorkloadInfo.owner_uid`): its owner's for an
    owner of a :data:`GROUPED_OWNERS` kind, else None (not indexed)."""
    return owner_uid_of(meta) if grouped_owner(owner) else None


def owner_uid_of(meta: o.ObjectMeta) -> str:
    """The UID of the owner :func:`owner_of` names (empty without owners)."""
    refs = meta.owner_references
    for ref in refs:  # no generator
        if ref.controller:
            return ref.uid
    return refs[0].uid if refs else ""


def owned_by_single_pod(meta: o.ObjectMeta) -> bool:
    """The Workload's only owner is a ``v1`` Pod and it is not a pod group's: the Workload goes with that pod, so
    no later pod can take a new placement of it (Kueue's ``OwnedBySinglePod``)."""
    refs = meta.owner_references
    if len(refs) != 1 or refs[0].kind != "Pod" or refs[0].api_version != "v1":
        return False
    return meta.annotations.get(IS_GROUP_WORKLOAD_ANNOTATION) != "true"


PROVREQ_ANNOTATION_PREFIX = "provreq.kueue.x-k8s.io/"


def provreq_parameters(annotations: dict[str, str]) -> tuple[tuple[str, str], ...]:
    if not annotations:
        return ()
    n = len(PROVREQ_ANNOTATION_PREFIX)
    found = [(k[n:], v) for k, v in annotations.items() if k.startswith(PROVREQ_ANNOTATION_PREFIX)]
    return tuple(sorted(found)) if found else ()


_TEMPLATES: dict[bytes, tuple[o.PodTemplateSpec, ...]] = {}


def pod_templates(spec: o.WorkloadSpec, current: tuple[o.PodTemplateSpec, ...] | None = None
                  ) -> tuple[o.PodTemplateSpec, ...]:
    """The pod sets' templates of a Workload's spec, interned: equal templates (one job template, many
    workloads) are one tuple. ``current`` (what the workload had) is kept when equal, which spares an encoding on
    status upserts. (It takes the spec, not the Workload: a lazily decoded one would look its spec up again.)"""
    templates = tuple([ps.template for ps in spec.pod_sets])
    if current is not None and current == templates:
        return current
    key = _ENC.encode(templates)
    found = _TEMPLATES.get(key)
    if found is None:
        if len(_TEMPLATES) > 100_000:
            _TEMPLATES.clear()
        found = _TEMPLATES[key] = templates
    return found


_SHARED_SPEC_TEMPLATES: dict[int, tuple[o.WorkloadSpec, tuple[o.PodTemplateSpec, ...]]] = {}


def shared_spec_templates(spec: o.WorkloadSpec) -> tuple[o.PodTemplateSpec, ...]:
    """:func:`pod_templates` of a spec many upserts share (a lazily decoded one: one object per distinct encoding,
    :mod:`events.lazy`), remembered with the spec, so that the Workloads of one job template and queue (most of a
    busy log's new workloads) encode it once. The spec is kept with its entry (its id is not reused meanwhile);
    cleared when full: a cache, never state."""
    memo = _SHARED_SPEC_TEMPLATES.get(id(spec))
    if memo is not None and memo[0] is spec:
        return memo[1]
    if len(_SHARED_SPEC_TEMPLATES) >= 8192:
        _SHARED_SPEC_TEMPLATES.clear()
    templates = pod_templates(spec)
    _SHARED_SPEC_TEMPLATES[id(spec)] = (spec, templates)
    return templates


def intern_templates(templates: tuple[o.PodTemplateSpec, ...]) -> tuple[o.PodTemplateSpec, ...]:
    key = _ENC.encode(templates)
    found = _TEMPLATES.get(key)
    if found is None:
        found = _TEMPLATES[key] = templates
    return found


def waits_on_backoff(wl: WorkloadInfo) -> bool:
    """``wl`` will be requeued by its backoff's end: evicted for a :data:`BACKOFF_REASONS` and still holding
    its quota, or given it back with Requeued=False for one."""
    if wl.reserving and wl.evicted in BACKOFF_REASONS:
        return True
    requeued = wl.condition("Requeued")
    return requeued is not None and requeued.status == "False" and requeued.reason in BACKOFF_REASONS


def waits_on_requeue_at(wl: WorkloadInfo) -> bool:
    """Something happens to ``wl`` when its ``requeueAt`` passes: its backoff ends (:func:`waits_on_backoff`),
    or, active and holding no quota, the workload controller clears that time (``RequeueAtCleared``)."""
    return waits_on_backoff(wl) or (wl.active and not wl.reserving and wl.phase != FINISHED)


def keeps_queued(wl: WorkloadInfo, park: bool, scan: FlavorScan | None, now: int) -> bool:
    """Kueue's requeue rule: whether a failed head goes back to the heap rather than to the inadmissible set.

    ``park`` is what its queueing strategy and requeue reason ask; a workload asked to park still goes back to
    the heap while its backoff has expired and its flavor scan has untried flavors."""
    if not park:
        return True
    if scan is None or not scan.pending:
        return False
    return backoff_over(wl, now)


def backoff_over(wl: WorkloadInfo, now: int) -> bool:
    """Kueue's ``backoffWaitingTimeExpired``: no requeueAt ahead of ``now`` and no Requeued=False
    condition."""
    if wl.requeue_at is not None and wl.requeue_at > now:
        return False
    requeued = wl.condition("Requeued")
    return requeued is None or requeued.status != "False"


_SCANS: dict[tuple, tuple] = {}


def intern_scan(scan: FlavorScan | None, cycle: int) -> FlavorScan | None:
    """``scan`` as a workload keeps it: stamped with the cycle that recorded it, its ``tried`` shared with every
    other workload that got as far (most pending workloads of a queue do)."""
    if scan is None:
        return None
    tried = _SCANS.get(scan.tried)
    if tried is None:
        if len(_SCANS) > 10_000:
            _SCANS.clear()
        tried = _SCANS[scan.tried] = scan.tried
    return FlavorScan(tried=tried, generation=scan.generation, changes=scan.changes, attempts=scan.attempts,
                      cycle=cycle)


_INTERNED: dict[bytes, PodSetInfo] = {}
_SHAPES: dict[tuple[int, bytes], tuple[int, bytes]] = {}
_ENC = msgspec.msgpack.Encoder()
_NAMELESS: dict[int, tuple[PodSetInfo, bytes]] = {}


def _nameless(pod_sets: tuple[PodSetInfo, ...]) -> bytes:
    """The pod sets encoded with their names blanked, one after the other (each encoding delimits itself)."""
    if len(pod_sets) == 1:
        return _nameless_one(pod_sets[0])
    return b"".join(map(_nameless_one, pod_sets))


def _nameless_one(ps: PodSetInfo) -> bytes:
    """``ps`` encoded with its name blanked, memoised on the object (pod sets are interned, so a workload's shape
    costs a look-up per pod set on the fold's hot path). The entry holds ``ps``: its ``id`` is not reused while
    remembered."""
    found = _NAMELESS.get(id(ps))
    if found is not None and found[0] is ps:
        return found[1]
    encoded = _ENC.encode(_shaped(msgspec.structs.replace(ps, name="")))
    if len(_NAMELESS) > 100_000:
        _NAMELESS.clear()
    _NAMELESS[id(ps)] = (ps, encoded)
    return encoded


def _shaped(ps: PodSetInfo) -> PodSetInfo | tuple[Any, ...]:
    """What a shape encodes of ``ps``: ``ps`` itself, or, with no :attr:`PodSetInfo.placement` of its own, its
    other fields, which encode as a pod set did before that field was added (an array of them), so that the shapes
    parked in a snapshot before version 45 still match equal workloads."""
    return ps if ps.placement is not None else msgspec.structs.astuple(ps)[:-1]


def intern_pod_set(ps: PodSetInfo) -> PodSetInfo:
    key = _ENC.encode(ps)
    found = _INTERNED.get(key)
    if found is None:
        if len(_INTERNED) > 100_000:
            _INTERNED.clear()
        found = _INTERNED[key] = ps
    return found


def pod_requests(spec: o.PodSpec) -> dict[str, int]:
    """Effective per-pod requests, the standard Kubernetes way, in Kueue units: the containers' aggregate (regular
    and sidecar containers summed, or each regular init container with the sidecars declared before it where that
    is more: :func:`projections.pod_adjustment.aggregate_requests`), raised to the
    pod-level ``requests`` where those say more (cpu, memory and hugepages only:
    :func:`projections.pod_adjustment.pod_level_resource`), plus the overhead Kueue charges
    (:func:`projections.pod_adjustment.chargeable_overhead`); a total past int64 saturates at MaxInt64.
    ``spec`` is a template as Kueue adjusts it or a Pod as the API server stores it: its pod-level requests
    are defaulted (:func:`projections.pod_adjustment.default_pod_level`), so its pod-level limits are not
    read, as Kubernetes' ``PodRequests`` reads none."""

    def reqs(c: o.Container) -> dict[str, int]:
        out = {r: to_int(r, q) for r, q in c.resources.limits.items()}
        out.update({r: to_int(r, q) for r, q in c.resources.requests.items()})
        return out

    total: dict[str, int] = aggregate_requests(
        map(reqs, spec.containers), ((c.restart_policy == "Always", reqs(c)) for c in spec.init_containers))
    if spec.resources is not None:
        # pod-level requests count, but never for less than the containers' aggregate (Kueue v0.20, #16047),
        # and only for the names Kubernetes manages at the pod level; the pod-level limits are not read (the
        # requests they default are already there: projections.pod_adjustment.adjust, default_pod_level)
        for r, q in spec.resources.requests.items():
            if pod_level_resource(r):
                total[r] = max(total.get(r, 0), to_int(r, q))
    for r, q in chargeable_overhead(spec.overhead).items():
        total[r] = total.get(r, 0) + to_int(r, q)
    # every term is non-negative, so capping the exact sums is Kueue's int64 saturating Add (v0.20, #14100)
    return {r: min(v, MAX_INT64) for r, v in total.items()}


_TOPOLOGY_ANNOTATIONS = (
    "kueue.x-k8s.io/podset-required-topology",
    "kueue.x-k8s.io/podset-preferred-topology",
    "kueue.x-k8s.io/podset-unconstrained-topology",
    "kueue.x-k8s.io/podset-slice-required-topology",
    "kueue.x-k8s.io/podset-slice-size",
    "kueue.x-k8s.io/podset-slice-required-topology-constraints",
    SPREADING_ANNOTATION,
)
"""The template annotations a pod set's info is read from (so :func:`pod_set_info`'s memo keys on them)."""
_BY_SPEC: dict[bytes, PodSetInfo] = {}


def pod_set_info(ps: o.PodSet, limits: LimitSummary | None = None,
                 runtime_classes: Mapping[str, o.RuntimeClass] | None = None,
                 rules: RequestRules | None = None, dra: DraView | None = None) -> PodSetInfo:
    """The interned :class:`PodSetInfo` of a pod set, its template adjusted by its namespace's LimitRange summary
    ``limits`` and the cluster's ``runtime_classes``, its requests then ruled by the Configuration's ``rules``.

    Memoised on what it is computed from (name, counts, pod spec, topology request and annotations, the summary,
    the overhead the RuntimeClass adds, the rules and, for a template with claims or asking for an extended resource a
    DeviceClass serves, the namespace's ``dra`` view
    — not the template's labels, which often differ per job), since a workload is upserted again at every status
    change.
    """
    annotations = ps.template.metadata.annotations
    topo = tuple(annotations.get(k) for k in _TOPOLOGY_ANNOTATIONS) if annotations else None
    spec = ps.template.spec
    overhead = overhead_for(spec, runtime_classes) if spec.runtime_class_name else None
    if dra is not None and not spec.resource_claims and not (
            dra.extended and asks_for_served((ps,), limits, dict(dra.extended))):
        dra = None  # nothing of the view bears on this pod set: it must not split the memo
    key = _ENC.encode((ps.name, ps.count, ps.min_count, ps.topology_request, topo, spec, limits, overhead, rules,
                       dra_memo_key(dra)))
    found = _BY_SPEC.get(key)
    if found is None:
        if len(_BY_SPEC) > 100_000:
            _BY_SPEC.clear()
        found = _BY_SPEC[key] = _pod_set_info(ps, limits, overhead, rules, dra)
    return found


_DRA_KEYS: dict[int, tuple[DraView, bytes]] = {}
"""DraView (by identity; the entry holds it, so its ``id`` is not reused while remembered) -> its memo key."""


def dra_memo_key(dra: DraView | None) -> bytes | None:
    """What :func:`pod_set_info`'s memo keys on for ``dra``: the view without the devices it holds
    (:attr:`DraView.devices`, :attr:`DraView.slice_devices`: every device of the cluster's ResourceSlices, which
    would make each key, kept for every pod set with claims, as large as all of them, and encoding it a cost of every
    upsert) but with a digest of them. Computed once per view: the fold keeps a namespace's view until a template,
    DeviceClass, ResourceSlice or the configuration changes."""
    if dra is None:
        return None
    found = _DRA_KEYS.get(id(dra))
    if found is not None and found[0] is dra:
        return found[1]
    bulk = _ENC.encode((dra.devices, dra.slice_devices))
    key = _ENC.encode((msgspec.structs.replace(dra, devices=(), slice_devices=None),
                       hashlib.blake2b(bulk, digest_size=16).digest()))
    if len(_DRA_KEYS) >= 1024:
        _DRA_KEYS.clear()
    _DRA_KEYS[id(dra)] = (dra, key)
    return key


_BY_SPEC_OBJECT: dict[int, tuple[o.WorkloadSpec, LimitSummary | None, Mapping | None, RequestRules | None,
                                  DraView | None, tuple[PodSetInfo, ...]]] = {}


def pod_set_infos(spec: o.WorkloadSpec, limits: LimitSummary | None = None,
                  runtime_classes: Mapping[str, o.RuntimeClass] | None = None,
                  rules: RequestRules | None = None, dra: DraView | None = None) -> tuple[PodSetInfo, ...]:
    """The pod sets of a spec that is shared between upserts (a lazily decoded one: equal bytes, same object),
    memoised on the object itself and what adjusts it (``runtime_classes`` and ``rules`` by identity: the
    projection replaces the mapping whenever a RuntimeClass changes, and the rules whenever they change). The
    entry holds the spec, so its ``id`` cannot be reused while remembered."""
    found = _BY_SPEC_OBJECT.get(id(spec))
    if (found is not None and found[0] is spec and found[2] is runtime_classes and found[3] is rules
            and found[4] is dra and found[1] == limits):
        return found[5]
    infos = tuple([pod_set_info(ps, limits, runtime_classes, rules, dra) for ps in spec.pod_sets])
    if len(_BY_SPEC_OBJECT) >= 8192:
        _BY_SPEC_OBJECT.clear()
    _BY_SPEC_OBJECT[id(spec)] = (spec, limits, runtime_classes, rules, dra, infos)
    return infos


def readjusted(infos: tuple[PodSetInfo, ...], templates: tuple[o.PodTemplateSpec, ...], limits: LimitSummary | None,
               runtime_classes: Mapping[str, o.RuntimeClass] | None,
               rules: RequestRules | None = None, dra: DraView | None = None) -> tuple[PodSetInfo, ...]:
    """A workload's pod sets once what adjusts them changed (a LimitRange of its namespace, a RuntimeClass, the
    Configuration's rules, a ResourceClaimTemplate or the DRA configuration): the same pod sets (``infos``, with
    the spec's counts, from its spec's ``templates``, in order) with their resources adjusted anew — what
    :func:`pod_set_info` gives for the spec under the new ``limits``, ``runtime_classes``, ``rules`` and ``dra``."""
    return tuple([
        pod_set_info(o.PodSet(name=ps.name, count=ps.count, min_count=ps.min_count, template=t,
                              topology_request=ps.topology), limits, runtime_classes, rules, dra)
        for ps, t in zip(infos, templates, strict=True)
    ])


def after_reclaim(spec_sets: tuple[PodSetInfo, ...], reclaimable: tuple[tuple[str, int], ...]
                  ) -> tuple[PodSetInfo, ...]:
    """The pod sets as Kueue counts them while pods are reclaimable: each count less its reclaimable pods,
    floored at 0 (a ``minCount`` the count falls to or below goes: nothing is left to leave out). ``spec_sets``
    itself when no count changes."""
    if not reclaimable:
        return spec_sets
    by_name = dict(reclaimable)
    out = list(spec_sets)
    for i, ps in enumerate(spec_sets):
        n = by_name.get(ps.name, 0)
        if n > 0 and ps.count > 0:
            count = max(0, ps.count - n)
            min_count = ps.min_count if ps.min_count is not None and ps.min_count < count else None
            out[i] = intern_pod_set(msgspec.structs.replace(ps, count=count, min_count=min_count))
    return spec_sets if all(a is b for a, b in zip(out, spec_sets, strict=True)) else tuple(out)


WAITING_FOR_REPLACEMENT_PODS = "WaitingForReplacementPods"
DEACTIVATION_TARGET = "DeactivationTarget"
"""Kueue's request to deactivate a Workload (True), which another controller may set (a MultiKueue manager on its
worker's copy of a workload evicted on the manager): Kueue's workload controller deactivates an active Workload
showing it, evicts it with ``DeactivatedDueTo<its reason>``, and removes it once the Workload is inactive."""
KUEUE_CONDITIONS = frozenset({"QuotaReserved", "Admitted", "Evicted", "PodsReady", "Finished", "Requeued", "Preempted",
                              DEACTIVATION_TARGET, WAITING_FOR_REPLACEMENT_PODS,
                              "BlockedOnPreemptionGates", "PodsScheduled"})
"""The Workload condition types Kueue owns, which kueue-es writes (every type the fold sets is one of them). A
condition of any other type is another controller's or a user's: the status writer keeps it as the apiserver shows
it (Kueue applies its own types only, the conditions being a list keyed by type)."""


def replacement_pods_condition(wl: WorkloadInfo, waiting: bool) -> tuple[str, str, str] | None:
    """Kueue's ``WaitingForReplacementPods`` on a pod group's Workload as (status, reason, message), given
    whether Pods are missing; None: the condition is not shown and need not be. Waiting: True, with the
    eviction's reason and message while the Workload is evicted, else (when it turns True) ``PodsFailed``
    "Some Failed pods need replacement", else as it was. Not waiting: False ``PodsReady`` "No pods need
    replacement"."""
    current = wl.condition(WAITING_FOR_REPLACEMENT_PODS)
    if current is None and not waiting:
        return None
    if not waiting:
        if current is not None and current.status == "False":
            return current.status, current.reason, current.message
        return "False", "PodsReady", "No pods need replacement"
    evicted = wl.condition("Evicted")
    if evicted is not None and evicted.status == "True":
        return "True", evicted.reason, evicted.message
    if current is not None and current.status == "True":
        return current.status, current.reason, current.message
    return "True", "PodsFailed", "Some Failed pods need replacement"


ON_HOLD = "OnHold"
ON_HOLD_MESSAGE = "StatefulSet scaled to zero; workload on hold"
HOLD_CLEARED = "Workload no longer on hold; waiting for quota reservation"
"""Kueue v0.20's QuotaReserved=False reason and message for a StatefulSet's Workload while the set is scaled to zero
(#12233), and the PendingEvaluation message (its legacy fallback reason with UnadmittedWorkloadsObservability off)
once the set is scaled up again."""


def on_hold(wl: WorkloadInfo) -> bool:
    """QuotaReserved is False with reason ``OnHold`` (Kueue's ``IsOnHold``): the Workload holds no quota and is not
    queued until the hold is cleared. Read from the condition, so a Workload first seen on hold stays so."""
    c = wl.condition("QuotaReserved")
    return c is not None and c.status == "False" and c.reason == ON_HOLD


def held_by_conditions(wl: WorkloadInfo) -> bool:
    """``WaitingForReplacementPods`` True (Kueue's ``IsAdmissible`` says no) or :func:`on_hold`, in one pass over the
    conditions: every enqueue of a pending workload asks both, on the fold's hot path. Each type is read at its
    first occurrence, as :meth:`WorkloadInfo.condition` reads it."""
    quota_seen = waiting_seen = False
    for c in wl.conditions:
        t = c.type
        if t == "QuotaReserved":
            if not quota_seen:
                if c.status == "False" and c.reason == ON_HOLD:
                    return True
                quota_seen = True
        elif t == WAITING_FOR_REPLACEMENT_PODS and not waiting_seen:
            if c.status == "True":
                return True
            waiting_seen = True
    return False


def reclaimable_of(pods: list[o.ReclaimablePod] | tuple[o.ReclaimablePod, ...]) -> tuple[tuple[str, int], ...]:
    """``status.reclaimablePods`` as a workload keeps it: (pod set, count) by name, the shared empty tuple
    when there are none (Kueue compares the lists as maps: their order means nothing)."""
    if not pods:
        return ()
    return tuple(sorted({p.name: p.count for p in pods}.items()))


def _pod_set_info(ps: o.PodSet, limits: LimitSummary | None, overhead: tuple | None,
                  rules: RequestRules | None, dra: DraView | None) -> PodSetInfo:
    spec = ps.template.spec
    affinity = None
    na = spec.affinity.node_affinity if spec.affinity else None
    if na and na.required_during_scheduling_ignored_during_execution:
        affinity = tuple(na.required_during_scheduling_ignored_during_execution.node_selector_terms)
    preferred = tuple(na.preferred_during_scheduling_ignored_during_execution) if na else ()
    topology = ps.topology_request
    annotations = ps.template.metadata.annotations
    if topology is None and annotations:
        topology = topology_request_from_annotations(annotations)
    adjusted = adjust(spec, limits, overhead)
    whole = pod_requests(adjusted)
    requests = rules.apply(whole) if rules is not None else dict(whole)
    placement = dict(whole)  # what topology placement counts: the pod spec's requests, before the rules
    dra_requests: tuple[tuple[str, int], ...] = ()
    dra_error = ""
    if dra is not None:
        dra_requests, dra_error = claim_charge(ps.name, spec.resource_claims, dra)
        if dra.extended:
            replaced, charge, extended_error = extended_charge(adjusted, dra)
            dra_error = dra_error or extended_error
            if charge:
                kept = _beside_containers(whole, replaced, adjusted.overhead, rules)
                for r in replaced:  # the containers' share is charged as devices instead
                    if r in kept:
                        requests[r] = kept[r]
                    else:
                        requests.pop(r, None)
                placement = _beside_containers(whole, replaced, adjusted.overhead, None) | {
                    r: v for r, v in placement.items() if r not in replaced}  # nor placed: DRA serves it
                merged = dict(dra_requests)
                for r, v in charge:
                    merged[r] = min(MAX_INT64, merged.get(r, 0) + v)
                dra_requests = tuple(sorted(merged.items()))
        for sourced, charge_of in ((dra.counters, counter_charge_of), (dra.capacities, capacity_charge_of)):
            if not sourced or dra_error:
                continue
            counted, dra_error = charge_of(spec.resource_claims, dra)
            if counted:
                merged = dict(dra_requests)
                for r, v in counted:
                    merged[r] = min(MAX_INT64, merged.get(r, 0) + v)
                dra_requests = tuple(sorted(merged.items()))
        for r, v in dra_requests:  # added after the rules, which Kueue does not apply to them
            requests[r] = min(MAX_INT64, requests.get(r, 0) + v)
    ruled = tuple(sorted(requests.items()))
    return intern_pod_set(
        PodSetInfo(
            name=ps.name,
            count=ps.count,
            min_count=ps.min_count,
            requests=ruled,
            node_selector=tuple(sorted(spec.node_selector.items())),
            tolerations=tuple(spec.tolerations),
            affinity_terms=affinity,
            topology=topology,
            invalid_resources=resource_findings(adjusted),
            outside_limit_ranges=limit_findings(adjusted, limits),
            preferred_terms=preferred,
            dra_requests=dra_requests,
            dra_error=dra_error,
            host_ports=host_ports(spec),
            claim_templates=tuple(c.resource_claim_template_name for c in spec.resource_claims
                                  if c.resource_claim_template_name is not None),
            spreading=annotations.get(SPREADING_ANNOTATION),
            placement=placement_of(placement, ruled, dra_requests),
        )
    )


def placement_of(placement: dict[str, int], requests: tuple[tuple[str, int], ...],
                 dra_requests: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...] | None:
    """:attr:`PodSetInfo.placement` for a pod set whose pods topology placement counts as requesting
    ``placement``: None when that is what its ruled ``requests`` less its ``dra_requests`` already give (no rules
    in force, or none that touch its resources), so that such pod sets, the most, carry nothing more."""
    own = tuple(sorted(placement.items()))
    return None if own == _less_devices(requests, dra_requests) else own


def _beside_containers(whole: dict[str, int], replaced: tuple[str, ...], overhead: dict[str, o.Quantity],
                       rules: RequestRules | None) -> dict[str, int]:
    """What a pod is charged under each ``replaced`` name (an extended resource its containers ask for, charged as
    devices) besides its containers' requests: the pod overhead's share and what the rules output under that name
    from other resources (Kueue v0.20, #14154: both are charged, the charge under a mapped name added to them when
    the two names are one)."""
    rest = {r: v for r, v in whole.items() if r not in replaced}
    for r in replaced:
        if r in overhead:
            rest[r] = to_int(r, overhead[r])
    out = rules.apply(rest) if rules is not None else rest
    return {r: out[r] for r in replaced if out.get(r)}


def topology_request_from_annotations(annotations: dict[str, str]) -> o.PodSetTopologyRequest | None:
    req = annotations.get("kueue.x-k8s.io/podset-required-topology")
    pref = annotations.get("kueue.x-k8s.io/podset-preferred-topology")
    unc = annotations.get("kueue.x-k8s.io/podset-unconstrained-topology")
    slice_level = annotations.get("kueue.x-k8s.io/podset-slice-required-topology")
    slice_size = annotations.get("kueue.x-k8s.io/podset-slice-size")
    layers = _slice_layers(annotations.get("kueue.x-k8s.io/podset-slice-required-topology-constraints"))
    if not any((req, pref, unc, slice_level, layers)):
        return None
    return o.PodSetTopologyRequest(
        required=req,
        preferred=None if req else pref,
        unconstrained=(unc == "true") if unc and not (req or pref) else None,
        pod_set_slice_required_topology=slice_level,
        pod_set_slice_size=int(slice_size) if slice_size else None,
        podset_slice_required_topology_constraints=() if slice_level else layers,
    )


_LAYERS = msgspec.json.Decoder(tuple[o.PodSetSliceRequiredTopologyConstraint, ...])


def _slice_layers(text: str | None) -> tuple[o.PodSetSliceRequiredTopologyConstraint, ...]:
    """The slice layers of the ``podset-slice-required-topology-constraints`` annotation (a JSON list of
    ``{topology, size}``). Kueue's job webhook rejects a malformed one; here it only reaches a pod set through
    a stored template, which must still fold, so a malformed list is no request (the Workload's own
    ``topologyRequest``, when given, is validated where it is read)."""
    if not text:
        return ()
    try:
        layers = _LAYERS.decode(text)
    except msgspec.DecodeError:
        return ()
    if not 1 <= len(layers) <= 3 or any(not lay.topology or lay.size < 1 for lay in layers):
        return ()
    return layers


def admission_usage(admission: o.Admission, wl: WorkloadInfo | None = None) -> dict[str, int]:
    """Quota an admission holds, keyed ``flavor/resource``, from its ``resourceUsage``.

    With the workload ``wl`` it is for, a pod set is scaled down once fewer pods are left than it was admitted
    with (pods became reclaimable, or the spec lost some), as Kueue does: usage ÷ admitted count × the count left
    (its ``pod_sets`` entry; integer division; the admitted count is the assignment's, else the spec's). Kueue
    takes the counts from the spec as it is now, so a spec with fewer pods than were admitted (changed while
    reserving, as no webhook stops in a log) holds less too. A count left above the admitted one (a partial
    admission) changes nothing. (It reads the pod sets in place: a reservation is on the fold's hot path.)"""
    usage: dict[str, int] = {}
    for psa in admission.pod_set_assignments:
        admitted = left = 0
        if wl is not None:
            name = psa.name
            for spec_set, now in zip(wl.spec_sets, wl.pod_sets, strict=True):
                if spec_set.name == name:  # no break: of two pod sets of one name, the last counts, as it did
                    left = now.count
                    admitted = psa.count if psa.count is not None else spec_set.count
                    if left >= admitted:
                        admitted = 0
        for resource, flavor in psa.flavors.items():
            q = psa.resource_usage.get(resource)
            if q is None:
                continue
            v = to_int(resource, q)
            if admitted:
                v = v // admitted * left
            k = f"{flavor}/{resource}"
            usage[k] = usage.get(k, 0) + v
    return usage


def pod_set_usage(wl: WorkloadInfo) -> dict[str, tuple[dict[str, str], dict[str, int]]]:
    """Per pod set of a reserving ``wl``'s admission (by name): its flavors (resource -> flavor) and the quota it
    holds (resource -> amount, scaled as :func:`admission_usage` scales it). What a replacement slice is
    measured against (Kueue's ``TotalRequests`` of the replaced slice)."""
    out: dict[str, tuple[dict[str, str], dict[str, int]]] = {}
    if wl.admission is None:
        return out
    for psa in wl.admission.pod_set_assignments:
        one = admission_usage(o.Admission(cluster_queue=wl.admission.cluster_queue, pod_set_assignments=[psa]), wl)
        held = {r: one[f"{f}/{r}"] for r, f in psa.flavors.items() if f"{f}/{r}" in one}
        out[psa.name] = (dict(psa.flavors), held)
    return out


_NOT_ADMISSIBLE = (INVALID_RESOURCES + ": ", OUTSIDE_LIMIT_RANGES + ": ")


def held_for_pods_ready(wl: WorkloadInfo) -> bool:
    """Whether the scheduler wrote blockAdmission's wait on ``wl`` (QuotaReserved=False, ``WaitingForPodsReady``
    or ``Waiting``, Kueue's message) and nothing has changed that condition since."""
    c = wl.condition("QuotaReserved")
    return (c is not None and c.status == "False" and c.message == PODS_READY_WAIT_MESSAGE
            and c.reason in (PODS_READY_WAIT_REASON, PODS_READY_WAIT_LEGACY_REASON))


def failed_attempt(d: WorkloadPending) -> bool:
    """Whether a QuotaReserved=False decision is a failed admission attempt of the scheduler (Kueue's
    ``requeueAndUpdate``, which also writes ``status.resourceRequests`` and records a Warning Event) rather than
    the workload controller's status sync or blockAdmission's wait: neither sets a requeue reason or a flavor
    scan; the controller writes only its queue blockers, PendingEvaluation with its own message and, for a workload
    parked with an equivalent one that failed, that one's reason with its own message (:data:`BYPASSED`). Pod templates
    found not admissible are a failed attempt too (Misconfigured, no requeue reason, Kueue's "resources ..."
    message), even in the rare case where the controller, which checks the same (kueue_es.scheduler.admissibility),
    says so before the scheduler does."""
    if d.requeue_reason or d.scan is not None:
        return True
    if d.reason == "Misconfigured" and d.message.startswith(_NOT_ADMISSIBLE):
        return True
    if d.reason in QUEUE_BLOCKERS or d.reason == ADMISSION_GATED or d.message == BYPASSED:
        return False
    if d.message == PODS_READY_WAIT_MESSAGE and d.reason in (PODS_READY_WAIT_REASON, PODS_READY_WAIT_LEGACY_REASON):
        return False  # Kueue writes only the condition (no resourceRequests, no Event) and waits with the entry
    return not ((d.reason == "PendingEvaluation" and d.message == PENDING_EVALUATION) or gate_cleared(d.reason, d.message))


def resource_requests(wl: WorkloadInfo, byte_valued: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """``status.resourceRequests`` as Kueue writes it: per pod set, in spec order, its name and what all its pods
    request (per-pod requests times the count, capped at MaxInt64), formatted as Kueue formats quantities (the
    ``byte_valued`` resources, :meth:`ClusterState.byte_valued`, in binary units); a pod set that requests nothing
    has no ``resources``."""
    out: list[dict[str, Any]] = []
    for ps in wl.pod_sets:
        entry: dict[str, Any] = {"name": ps.name}
        if ps.requests:
            entry["resources"] = {r: canonical_quantity(r, min(v * ps.count, MAX_INT64), r in byte_valued)
                                  for r, v in ps.requests}
        out.append(entry)
    return out


def has_quota_reservation(status: o.WorkloadStatus) -> bool:
    """The status shows a quota reservation (Kueue's ``HasQuotaReservation``: QuotaReserved=True)."""
    return any(c.type == "QuotaReserved" and c.status == "True" for c in status.conditions)


def status_of(wl: WorkloadInfo, byte_valued: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The Workload status Kueue would show, as plain data (``byte_valued``: the counter-based DRA resources,
    :meth:`ClusterState.byte_valued`, whose requests it shows in binary units)."""
    status: dict[str, Any] = {}
    if wl.admission is not None:
        status["admission"] = msgspec.to_builtins(wl.admission)
    if wl.conditions:
        status["conditions"] = [msgspec.to_builtins(c) for c in wl.conditions]
    if wl.requeue_count or wl.requeue_at is not None:
        rs: dict[str, Any] = {"count": wl.requeue_count}
        if wl.requeue_at is not None:
            rs["requeueAt"] = format_time(wl.requeue_at)
        status["requeueState"] = rs
    if wl.unhealthy_nodes:
        status["unhealthyNodes"] = [{"name": n} for n in wl.unhealthy_nodes]
    if wl.check_states:
        status["admissionChecks"] = [msgspec.to_builtins(wl.check_states[k]) for k in sorted(wl.check_states)]
    if wl.shows_requests and wl.admission is None:
        status["resourceRequests"] = resource_requests(wl, byte_valued)
    if wl.reclaimable:
        status["reclaimablePods"] = [{"name": n, "count": c} for n, c in wl.reclaimable]
    if wl.accumulated_seconds:
        status["accumulatedPastExecutionTimeSeconds"] = wl.accumulated_seconds
    if wl.cluster_name:
        status["clusterName"] = wl.cluster_name
    if wl.nominated:
        status["nominatedClusterNames"] = list(wl.nominated)
    if wl.gate_states:
        status["preemptionGates"] = [msgspec.to_builtins(g) for g in wl.gate_states]
    if wl.evictions:
        status["schedulingStats"] = eviction_stats.as_status(wl.evictions)
    return status
