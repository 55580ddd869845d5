"""Cluster state: a deterministic fold over the log.

``ClusterState.apply(record)`` is the only way state changes. It reads nothing but the record: no clock, no
randomness, no I/O, and nothing it decides depends on dict or set iteration order (whenever order matters it
sorts). So the same events give the same state — and the same digest — in any process, and a snapshot plus
the events after it gives the state that folding everything gives.

Decisions are applied the moment they are in the log, the way Kueue "assumes" an admission in its cache
before the API write: the log, not the API server, is the source of truth for what was decided.

The list of a workload's admission checks (Kueue's workload-controller sync, §5.2 rule 5) is part of this fold,
not a decision of its own: which checks a workload lists is a function of its ClusterQueue's check rules and of
its admission, so it changes exactly when a reservation is taken or released, when the queue's rules change, or
when the workload enters a queue. Kueue writes it in a separate pass only because its scheduler and its workload
controller are two writers with the API server between them; in one log the reservation and the checks it
brings are one fact, and folding them together leaves no moment where a workload holds quota without listing
its checks (which the ProvisioningRequest controller would take for "nothing to do").
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec

from events import objects as o
from events import schema as ev
from events.errors import InvalidRecord, UndecodableRecord
from events.lazy import LazyObjectUpserted, LazyWorkload, UndecodablePart
from events.priority_boost import ANNOTATION as PRIORITY_BOOST_ANNOTATION
from events.priority_boost import boost_of
from events.quantity import QuantityError
from events.timefmt import format_time, parse_time
from projections import (
    effective_quotas,
    eviction_stats,
    eviction_undo,
    gates,
    pods_scheduled,
    variants,
)
from projections.admissionchecks import (
    CLUSTER_DELETED,
    ClusterLink,
    MultiKueueWorld,
    already_shown,
    applicable_checks,
    reset_message,
    runs_controller,
    shows_word,
    unshown_with,
    unshown_written,
)
from projections.admitted_condition import sync_unadmitted
from projections.afs_ledger import (
    AFS_ADD,
    AFS_SEED_SCALE,  # noqa: F401  (re-exported for the scheduler and tests)
)
from projections.cluster_afs import AfsHistory, _admission_mode
from projections.cluster_checks import CheckStates
from projections.cluster_config import ConfigReadings
from projections.cluster_dra import DraCharges
from projections.clusterqueues import ClusterQueueInfo, selector_matches
from projections.cohorts import CohortForest, build_forest, spec_root
from projections.custom_labels import CLUSTER_QUEUE, COHORT, LOCAL_QUEUE, CustomLabels
from projections.deadlines import DueIndex
from projections.dra import INADMISSIBLE as DRA_INADMISSIBLE
from projections.dra import UNRESOLVED as DRA_UNRESOLVED
from projections.dra import (
    DraView,
    asks_for_served,
    has_claims,
    workload_problem,
)
from projections.eviction_undo import KeptEvictions, Refusal, UnconfirmedEviction
from projections.local_queue_metrics import DEFAULT as LQ_METRICS_DEFAULT
from projections.local_queue_metrics import LocalQueueMetricsSetting
from projections.metrics import METERED, NEEDS_BEFORE, MetricsFold, uncount_eviction, uncount_reservation
from projections.node_ready import not_ready_wait_ends, ready_condition
from projections.pod_adjustment import LimitSummary, scheduling_fields_changed, summarize
from projections.pods_ready_condition import NOT_READY, WAIT_FOR_START, pods_ready_condition
from projections.pods_ready_wait import own_deadline, pods_ready_wait
from projections.preemption_gates import (
    BLOCKED_ON_PREEMPTION_GATES,
    PREEMPTION_GATED,
    closed_all,
    has_closed_gate,
    newer_gates,
    on_gates_synced,
    opened_on,
)
from projections.queue_order import DEFAULT_ORDER, QueueOrder, order_of
from projections.queues import ClusterQueueQueue, SortKey
from projections.quota import QuotaTree, build_quota_tree
from projections.request_rules import RequestRules
from projections.resource_slices import ResourceSlices
from projections.secondpass import HOSTNAME as HOSTNAME_LABEL
from projections.secondpass import backoff_ms, needs_second_pass
from projections.topology import TASFold
from projections.topology_tree import node_matches_flavor
from projections.workload_pods_ready import WAIT_FOR_PODS_READY_ANNOTATION, own_timeouts
from projections.workloads import (
    ADMISSION_GATED,
    ADMISSION_GATED_BY_ANNOTATION,
    ADMITTED,
    ALLOWED_FLAVORS_ANNOTATION,
    DEACTIVATION_TARGET,
    ELASTIC_JOB_ANNOTATION,
    FINISHED,
    HOLD_CLEARED,
    HOLDING,
    MULTIKUEUE_ORIGIN_LABEL,
    ON_HOLD,
    ON_HOLD_MESSAGE,
    PENDING,
    RESERVED,
    SLICE_REPLACEMENT_FOR_ANNOTATION,
    UNHEALTHY_NODES_THRESHOLD_ANNOTATION,
    WAITING_FOR_REPLACEMENT_PODS,
    WORKLOAD_ANNOTATION,
    PodSetInfo,
    RemoteCopy,
    WorkloadInfo,
    admission_usage,
    after_reclaim,
    allowed_flavors,
    backoff_over,
    component_index,
    failed_attempt,
    grouped_owner,
    grouped_owner_uid,
    has_quota_reservation,
    held_by_conditions,
    held_for_pods_ready,
    intern_pod_set,
    intern_scan,
    is_parent,
    keeps_queued,
    on_hold,
    owned_by_single_pod,
    owner_of,
    placement_of,
    pod_set_info,
    pod_set_infos,
    pod_templates,
    provreq_parameters,
    readjusted,
    reclaimable_of,
    replacement_pods_condition,
    shared_spec_templates,
    unadmitted_reason,
    unhealthy_threshold_of,
    waits_on_requeue_at,
)

WPC_GROUP = "kueue.x-k8s.io"
MAX_EXECUTION_EXCEEDED = "DeactivatedDueToMaximumExecutionTimeExceeded"
"""The reason of the deactivation (Evicted, Requeued) of a workload whose maximum execution time ran out: Kueue
clears its accumulated execution time as it deactivates it."""

__all__ = ["MAX_EXECUTION_EXCEEDED", "ClusterState", "max_execution_deadline", "selector_matches"]


class MisfiledObject(ValueError):
    """An upsert whose envelope key is not its object's namespace/name: written by a producer that built the
    envelope by hand. The fold keys its tables by both, so taking it would file one workload under two keys."""

    def __init__(self, key: str, obj: o.KObject) -> None:
        kind = type(obj).__struct_config__.tag  # type: ignore[attr-defined]
        super().__init__(f"{kind} {obj.key!r} is upserted under key {key!r} (the key must be namespace/name)")


_STALE = object()
"""A memo read from no configuration (:attr:`ClusterState._afs_any_of`): it is read again at the next question."""

class ClusterState(AfsHistory, DraCharges, ConfigReadings, CheckStates):
    """Everything the scheduler needs, rebuilt from the log."""

    # Slots, not an instance dict: the fold reads these attributes on every event, and a slot is cheaper to reach
    # (2.6% of the fold's instructions). Every attribute :meth:`__init__` sets is listed here, in its order; one
    # missing there fails at the first ``ClusterState()``. Consumers keep their own memos in :attr:`derived`.
    __slots__ = (
        "offset", "time", "namespaces", "flavors", "cluster_queues", "cohorts", "local_queues",
        "workload_priority_classes", "priority_classes", "topologies", "admission_checks",
        "provisioning_configs", "preemption_configs", "multikueue_configs", "multikueue_clusters", "cluster_links", "worker_queues",
        "provisioning_requests", "deleted_requests", "requests_of", "pod_templates",
        "limit_ranges", "runtime_classes", "claim_templates", "_selecting", "device_classes", "resource_slices", "_served",
        "resource_claims", "device_taint_rules", "_dra_views", "_dra_of", "_dra", "_bytes_of", "_bytes",
        "_limit_summaries",
        "_limit_range_keys", "nodes", "nodes_seen", "pods", "pods_of", "jobs",
        "workloads", "queues", "parked_queues", "flushes", "usage", "reserving", "lq_members", "owner_groups",
        "variants_of",
        "awaiting_release",
        "backoff", "second_pass", "last_cycle", "config", "config_offset", "_rules_of", "_rules",
        "_pods_ready_of", "_pods_ready", "_scheduling_of", "_scheduling", "_gates_of", "_gates", "_dispatcher_of", "_external_dispatcher",
        "_custom_labels_of", "_custom_labels", "_lq_metrics_of", "_lq_metrics", "_lq_selected_of", "_lq_every", "_lq_selected", "_afs_any_of", "_afs_any",
        "queue_order", "_forest", "_quota", "spec_generation", "_cq_infos", "_cq_infos_generation",
        "_cq_infos_config", "spec_inputs_generation", "_from_spec", "afs_history", "afs_dirty", "flagged", "retained",
        "derived", "tas", "quota_epoch", "generations", "changes", "touched", "touched_all", "backoff_due",
        "second_pass_due", "pods_ready_clock", "not_ready", "held", "dispatched", "finished_clock", "deactivated_clock",
        "max_execution_clock", "recovery_clock", "own_pods_ready_clock", "unscheduled_clock", "keeping", "node_waits", "metrics",
        "create_retries", "checks_taken",
        "reservation_forgotten", "unconfirmed_evictions", "_eviction_opened", "refused_evictions",
    )

    def __init__(self) -> None:
        self.offset = -1
        """Offset of the last applied record."""
        self.time = 0
        """Latest time seen in the log (ms); never decreases."""
        self.namespaces: dict[str, dict[str, str]] = {}
        self.flavors: dict[str, o.ResourceFlavor] = {}
        self.cluster_queues: dict[str, o.ClusterQueue] = {}
        self.cohorts: dict[str, o.Cohort] = {}
        self.local_queues: dict[str, o.LocalQueue] = {}
        self.workload_priority_classes: dict[str, o.WorkloadPriorityClass] = {}
        self.priority_classes: dict[str, o.PriorityClass] = {}
        self.topologies: dict[str, o.Topology] = {}
        self.admission_checks: dict[str, o.AdmissionCheck] = {}
        self.provisioning_configs: dict[str, o.ProvisioningRequestConfig] = {}
        self.preemption_configs: dict[str, o.PreemptionConfig] = {}
        """ConfigurablePreemptions' PreemptionConfigs by name (read by the scheduler only under the gate)."""
        self.multikueue_configs: dict[str, o.MultiKueueConfig] = {}
        self.multikueue_clusters: dict[str, o.MultiKueueCluster] = {}
        self.cluster_links: dict[str, ClusterLink] = {}
        """MultiKueueCluster name -> what the MultiKueue connector last observed of that worker."""
        self.worker_queues: dict[str, ev.WorkerQueuesObserved] = {}
        """MultiKueueCluster name -> its LocalQueues and ClusterQueues as last listed there (for
        MultiKueueManagerQuotaAutomation: :mod:`projections.manager_quota`)."""
        self.provisioning_requests: dict[str, o.ProvisioningRequest] = {}
        """ProvisioningRequests by ``namespace/name``: the observed ones, and those kueue-es decided to create (uid
        empty until the watch brings them back), so that one is never created twice."""
        self.deleted_requests: dict[str, None] = {}
        """uids of ProvisioningRequests kueue-es decided to delete and whose deletion is not observed yet: a late
        watch event of one does not bring it back."""
        self.requests_of: dict[str, dict[str, None]] = {}
        """Workload key -> keys of the ProvisioningRequests it owns (derived; rebuilt on restore)."""
        self.pod_templates: dict[str, tuple[o.PodTemplateSpec, ...]] = {}
        """Workload key -> its pod sets' templates, in spec order (interned: workloads of one job template share
        them). What a ProvisioningRequest's PodTemplates are built from."""
        self.limit_ranges: dict[str, o.LimitRange] = {}
        """LimitRanges by ``namespace/name``: they adjust and bound the pod templates of their namespace."""
        self.runtime_classes: dict[str, o.RuntimeClass] = {}
        """RuntimeClasses by name. Replaced, never changed in place, when one changes: pod-set memos hold it by
        identity (``projections.workloads.pod_set_infos``)."""
        self.claim_templates: dict[str, o.ResourceClaimTemplate] = {}
        """ResourceClaimTemplates by ``namespace/name``: what the claims of their namespace's pods cost (DRA)."""
        self._selecting: bool | None = None
        """Whether some ResourceClaimTemplate has a request with CEL selectors (derived, dropped when a template
        changes): asked on every DeviceClass and ResourceSlice event, so not worth a scan of every template each time."""
        self.device_classes: dict[str, o.DeviceClass] = {}
        """DeviceClasses by name: the extended resources they serve are charged as DRA devices."""
        self.resource_slices = ResourceSlices()
        """ResourceSlices by name: the devices Kueue charges the counter sources of ``deviceClassMappings`` from."""
        self.resource_claims: dict[str, o.ResourceClaim] = {}
        """ResourceClaims holding devices, by ``namespace/name``: what KueueDRADeviceFeasibility's device check
        counts as taken."""
        self.device_taint_rules: dict[str, o.DeviceTaintRule] = {}
        """DeviceTaintRules by name: the taints KueueDRAIntegrationDeviceTaints' device check adds to devices."""
        self._served: tuple[tuple[str, str], ...] | None = None
        """Extended resource -> the DeviceClass serving it (:func:`projections.dra.serving_classes`; derived, dropped
        when a DeviceClass changes)."""
        self._dra_views: dict[str, DraView] = {}
        """Namespace -> its :class:`DraView` (derived, filled as asked for; dropped when a template of it or the
        DRA configuration changes)."""
        self._dra_of: ev.ConfigRecorded | None = None
        self._dra: tuple[str, tuple[tuple[str, str], ...], bool, tuple, tuple, bool] = ("charge", (), True, (), (), False)
        """What :attr:`config` says about DRA (mode, mapping, whether extended resources DeviceClasses serve are
        charged as devices, the counter sources of DeviceClasses: :mod:`projections.dra`), and the configuration it
        was read from (derived)."""
        self._bytes_of: ev.ConfigRecorded | None = None
        self._bytes: frozenset[str] = frozenset()
        """:meth:`byte_valued` and the configuration it was read from (derived)."""
        self._limit_summaries: dict[str, LimitSummary | None] = {}
        """Namespace -> the summary of its LimitRanges (derived, filled as asked for)."""
        self._limit_range_keys: dict[str, list[str]] | None = None
        """Namespace -> the keys of its LimitRanges, in order (derived; rebuilt after any LimitRange change)."""
        self.nodes: dict[str, o.Node] = {}
        self.nodes_seen = False
        """The log has shown a Node (it holds one, or held one since deleted): Nodes are watched, so the node
        failure rules apply, even once every Node is gone (:mod:`kueue_es.scheduler.reconcile`). A log without
        Node watching shows none, and evicts nothing for node failures."""
        self.pods: dict[str, o.Pod] = {}
        self.pods_of: dict[str, dict[str, None]] = {}
        """``namespace/workload`` -> the keys of the Pods whose ``kueue.x-k8s.io/workload`` annotation names it: what
        the UnscheduledPodsTracker counts (:meth:`_observe_scheduling`). Derived; rebuilt on restore."""
        self.jobs: dict[str, o.Job] = {}
        self.workloads: dict[str, WorkloadInfo] = {}
        self.queues: dict[str, ClusterQueueQueue] = {}
        self.parked_queues: set[str] = set()
        """Names of the queues that may hold parked workloads or shapes (derived; see
        :attr:`ClusterQueueQueue.parked_in`)."""
        self.flushes: dict[str, int] = {}
        """The offset at which parked workloads were last sent back to their heaps, whether any were parked
        then or not (Kueue's ``queueInadmissibleCycle``): ``"*"`` for every queue, a cohort tree's root key
        (:meth:`CohortForest.cq_root`) for its queues, ``"q:NAME"`` for one queue. A failed attempt decided on
        the log before such a flush of its queue does not park its workload (:meth:`_pending`)."""
        self.usage: dict[str, dict[str, int]] = {}
        """ClusterQueue -> ``flavor/resource`` -> quota held by reserving workloads."""
        self.reserving: dict[str, dict[str, None]] = {}
        """ClusterQueue -> keys of the workloads holding its quota (derived; rebuilt on restore)."""
        self.lq_members: dict[str, dict[str, None]] = {}
        """LocalQueue key -> keys of the workloads that name it."""
        self.owner_groups: dict[str, dict[str, None]] = {}
        """Owner UID -> keys of the Workloads owned by it, for owners of a kind whose Workloads go as a group
        (:data:`GROUPED_OWNERS`, :attr:`WorkloadInfo.owner_uid`; under "" those whose owner's UID is not known,
        restored from an older snapshot): Kueue's owner-UID index of Workloads (derived; rebuilt on restore)."""
        self.variants_of: dict[str, dict[str, None]] = {}
        """Parent key -> keys of the Workloads owned by a Workload of that key (``ConcurrentAdmission`` variants; its
        UID tells which are that parent's: :func:`projections.variants.variants_of`; derived, rebuilt on restore)."""
        self.awaiting_release: set[str] = set()
        """Evicted workloads whose job has stopped: the scheduler releases their quota next."""
        self.backoff: dict[str, int] = {}
        """Workloads whose ``requeueAt`` (ms) something waits on: a backoff's end or, pending, its clearing
        (``waits_on_requeue_at``; a pending one need not be parked; an entry stays while its workload holds
        quota, and the scheduler's reconcile and ``next_deadline`` skip it then)."""
        self.second_pass: dict[str, int] = {}
        """Workloads waiting for a second pass -> when it is due (ms). Derived from ``WorkloadInfo.second_pass``;
        rebuilt on restore."""
        self.last_cycle = 0
        """Highest scheduler cycle number in the log; the next cycle is numbered one more."""
        self.config: ev.ConfigRecorded | None = None
        """The Kueue Configuration in force: the latest one recorded in the log (None: none yet, Kueue's
        defaults). Kept as recorded; the scheduler's side loads it (``kueue_es.scheduler.recorded``)."""
        self.config_offset = -1
        """Offset of :attr:`config` in the log (-1: none recorded)."""
        self._rules_of: ev.ConfigRecorded | None = None
        self._rules: tuple[RequestRules | None, bool] = (None, True)
        """What :attr:`config` says about requests, and the configuration it was read from (derived)."""
        self._pods_ready_of: ev.ConfigRecorded | None = None
        self._pods_ready = True
        """Whether :attr:`config` has waitForPodsReady in force, and the configuration it was read from (derived)."""
        self._scheduling_of: ev.ConfigRecorded | None = None
        self._scheduling = False
        """Whether :attr:`config` tracks pods' scheduling (WaitForPodsReadyUnscheduledTimeout), and the
        configuration it was read from (derived)."""
        self._gates_of: ev.ConfigRecorded | None = None
        self._gates: dict[str, bool] = {}
        """Feature gates asked of :attr:`config` (:meth:`gate`), and the configuration they were read from (derived)."""
        self._dispatcher_of: ev.ConfigRecorded | None = None
        self._external_dispatcher = False
        """Whether :attr:`config` names an external MultiKueue dispatcher, and the configuration read (derived)."""
        self._custom_labels_of: ev.ConfigRecorded | None = None
        self._custom_labels: CustomLabels | None = None
        """:attr:`custom_labels` and the configuration it was read from (derived)."""
        self._lq_metrics_of: ev.ConfigRecorded | None = None
        self._lq_metrics: LocalQueueMetricsSetting = LQ_METRICS_DEFAULT
        """``metrics.localQueueMetrics`` of :attr:`config`, and the configuration it was read from (derived)."""
        self._lq_selected_of: ev.ConfigRecorded | None = None
        self._lq_every: bool | None = True
        self._afs_any_of: object = _STALE
        self._afs_any = False
        """Whether any LocalQueue may keep Admission Fair Sharing history (:attr:`afs_configured`), and the
        configuration it was read from: :meth:`_afs_counted`'s early answer on a cluster without it (derived)."""
        self._lq_selected: dict[str, tuple[o.LocalQueue | None, bool]] = {}
        """:meth:`local_queue_metrics_for` under the configuration ``_lq_selected_of``: its answer for every LocalQueue
        (None: it depends on the selector), and each LocalQueue's answer with the object it was read from (derived)."""
        self.queue_order: QueueOrder = DEFAULT_ORDER
        """What :attr:`config` says about queue order (derived; the heaps' sort keys follow it)."""
        self._forest: CohortForest | None = None
        self._quota: QuotaTree | None = None
        self.spec_generation = 0
        """Bumped whenever a spec a compiled :class:`ClusterQueueInfo` depends on changes (ClusterQueues,
        Cohorts, ResourceFlavors, Namespaces' labels, AdmissionChecks, Topologies) — and LocalQueues, for
        consumers that memoise what blocks which queue."""
        self._cq_infos: dict[str, ClusterQueueInfo] = {}
        self._cq_infos_generation = 0
        self._cq_infos_config: ev.ConfigRecorded | None = None
        """The configuration the compiled ClusterQueues were compiled under (its TAS and MultiKueue gates)."""
        self.spec_inputs_generation = 0
        """Bumped whenever something a Workload's values derived from its spec depend on may have changed:
        PriorityClasses and WorkloadPriorityClasses (:meth:`_reprioritise`, and their deletion), and what adjusts
        pod templates (:meth:`_readjust`: LimitRanges, RuntimeClasses, the configuration's request rules,
        ResourceClaimTemplates and the DRA configuration)."""
        self._from_spec: dict[int, tuple[o.WorkloadSpec, int, LimitSummary | None, int, str, tuple[PodSetInfo, ...],
                                         DraView | None]] = {}
        """``id(spec)`` of a lazily decoded Workload spec (one object for the upserts carrying the same bytes) ->
        (spec, :attr:`spec_inputs_generation`, its namespace's LimitRange summary, priority, priority class, pod
        sets, the DRA view its claims were charged under or None) as computed then: status-only upserts reuse them,
        as do workloads of an equal spec under equal limits and DRA view (derived; a cache, never part of a
        snapshot). The entry holds the spec, so its ``id`` cannot be reused while remembered."""
        self.afs_history: dict[str, list[tuple[int, int, tuple[tuple[str, int], ...]]]] = {}
        """Admission Fair Sharing facts per LocalQueue key, in log order: (time, sign, usage per resource name) — one
        list per LocalQueue, as the fold of one never reads another's, so that forgetting one costs its own entries
        only. The signs :data:`~projections.afs_ledger.AFS_SETTLE` (a workload reached its accounting anchor in a
        ClusterQueue ordering by Admission Fair Sharing), :data:`~projections.afs_ledger.AFS_ADD` (its usage entered
        without a settlement), :data:`~projections.afs_ledger.AFS_RELEASE` (it left) and
        :data:`~projections.afs_ledger.AFS_SEED`. Kept only while the recorded Configuration turns Admission Fair
        Sharing on (:meth:`afs_tracks`), for every LocalQueue (Kueue samples them all, only the ordering is the
        ``admissionScope.admissionMode``'s); a deleted LocalQueue's is dropped. The anchor is admission, or quota
        reservation in an ordering ClusterQueue under ``AdmissionFairSharingAnchorAtQuotaReservation``
        (:meth:`_afs_counted`); the scheduler folds the facts with the configured half-life and sampling interval into
        each LocalQueue's consumed usage. A LocalQueue's first appearance (or the start of its tracking) is a seed: the
        ``status.fairSharing.admissionFairSharingStatus.consumedResources`` it carried then, in thousandths of a unit
        per resource name (:data:`~projections.afs_ledger.AFS_SEED_SCALE`; none for a new LocalQueue): Kueue's warm
        start from the persisted status (:meth:`seed_afs`). Compacted (:mod:`projections.afs_ledger`): past
        :data:`~projections.afs_ledger.COMPACT_AT` entries a LocalQueue's list becomes one
        :data:`~projections.afs_ledger.AFS_CHECKPOINT` entry holding its fold under the recorded configuration, as it
        does for every LocalQueue when that configuration's half-life or sampling interval changes."""
        self.afs_dirty: dict[str, None] = {}
        """LocalQueues whose :attr:`afs_history` changed (appended to, compacted, dropped) since the ledger
        (:meth:`afs_ledger`) last took them in (derived: the ledger drains it; kept only while there is one, as one
        started afresh reads every LocalQueue's history anyway)."""
        self.flagged: dict[str, None] = {}
        """Workloads a controller rule may act on without any new event: inactive and not finished, with an
        admission gate, pending with DRA claims Kueue does not charge, or showing Requeued=False, or
        QuotaReserved=False for a queue blocker (Suspended, Misconfigured, Deactivated, Inadmissible) or the
        admission gate (AdmissionGated). Derived; rebuilt on restore."""
        self.retained: dict[str, None] = {}
        """Workloads whose retention clock runs (Kueue's objectRetentionPolicies): finished, or inactive and
        evicted by a Kueue deactivation (``DeactivatedDueTo...``), until a RetentionExpired decision. Derived;
        rebuilt on restore."""
        self.derived: dict[str, Any] = {}
        """Consumers' memos of values derived from this state (never part of a snapshot)."""
        self.tas = TASFold()
        """Topology-aware scheduling usage (workloads' topology assignments, non-TAS pods) and the generations
        the TAS snapshots are memoised on (see projections.topology). Derived; rebuilt on restore."""
        self.quota_epoch = 0
        """Bumped on every change of a ClusterQueue's or Cohort's spec (and their deletion): part of every
        ClusterQueue's allocatable generation (see :meth:`allocatable_generation`)."""
        self.generations: dict[str, int] = {}
        """ClusterQueue -> how many times a workload holding its quota changed (reserved, updated, released)."""
        self.changes = 0
        """How many records have changed anything but a pending workload's QuotaReserved=False status."""
        self.touched: dict[str, None] = {}
        """Workloads the controller rules (``kueue_es.scheduler.reconcile``) must look at again: something about
        them, or something those rules read about them (their LocalQueue, their ProvisioningRequests, their
        pods), changed since a pass of the rules last found nothing to do for them (:meth:`looked_at`).
        Derived; never part of a snapshot."""
        self.touched_all = True
        """Every workload counts as touched: a fresh or restored state, or a change many workloads' rules read
        (a ClusterQueue, Cohort, ResourceFlavor, Namespace, AdmissionCheck, ProvisioningRequestConfig, Topology or
        Node)."""
        self.backoff_due = DueIndex()
        """:attr:`backoff` ordered by ``requeueAt``."""
        self.second_pass_due = DueIndex()
        """:attr:`second_pass` ordered by when it is due."""
        self.pods_ready_clock = DueIndex()
        """Admitted workloads whose pods are not ready (and not evicted), by admission time: waitForPodsReady's
        timeout runs from there. Not those waiting for a recovery (:attr:`recovery_clock`)."""
        self.recovery_clock = DueIndex()
        """Admitted workloads waiting for their pods to recover (their PodsReady condition ``WaitForRecovery``), by
        when they lost readiness (the condition's lastTransitionTime): waitForPodsReady's recoveryTimeout runs
        from there."""
        self.own_pods_ready_clock = DueIndex()
        """The workloads of :attr:`pods_ready_clock` and :attr:`recovery_clock` that set their own timeouts
        (``WorkloadInfo.own_pods_ready``), by when their own timeout runs out (one whose own timeouts do not cover
        its wait is not listed): what the scheduler reads under WorkloadLevelWaitForPodsReady."""
        self.unscheduled_clock = DueIndex()
        """The workloads of :attr:`pods_ready_clock` waiting for their pods' scheduling (PodsReady
        ``WaitForScheduling`` on a current PodsScheduled=False observation, :mod:`projections.pods_scheduled`), by
        admission time: waitForPodsReady's ``unscheduledTimeout`` runs from there (only while it is tracked)."""
        self.not_ready: dict[str, None] = {}
        """Active workloads holding quota (reserved or admitted, evicted ones until their quota is released)
        whose pods are not all ready: Kueue's cache ``WorkloadsNotReady``, over every ClusterQueue. While one is
        listed, waitForPodsReady.blockAdmission admits nothing new. Derived; rebuilt on restore."""
        self.held: dict[str, None] = {}
        """Pending workloads the scheduler holds under blockAdmission (:func:`held_for_pods_ready`): the entry
        Kueue's scheduler waits with, inside its cycle, until nothing in :attr:`not_ready` is left. Derived;
        rebuilt on restore."""
        self.dispatched: dict[str, None] = {}
        """Workloads MultiKueue nominated workers for or placed on one (``nominated`` or ``cluster_name`` set), and
        maybe some that no longer are (whoever reads it checks): the only ones with a MultiKueue deadline
        (``kueue_es.scheduler.multikueue.lost_deadlines``, ``round_deadlines``). Derived; rebuilt on restore."""
        self.finished_clock = DueIndex()
        """Workloads in :attr:`retained` because they finished, by the Finished condition's transition time."""
        self.deactivated_clock = DueIndex()
        """Workloads in :attr:`retained` because Kueue deactivated them, by the Evicted condition's transition
        time."""
        self.max_execution_clock = DueIndex()
        """Admitted workloads (not evicted) with a ``maximumExecutionTimeSeconds``, by when it runs out:
        :func:`max_execution_deadline`."""
        self.keeping: dict[str, None] = {}
        """Workloads with :attr:`WorkloadInfo.kept_nodes` (derived; rebuilt on restore): what a node the node
        controller looks at anew is taken out of."""
        self.node_waits = DueIndex()
        """Nodes not Ready whose wait (:mod:`projections.node_ready`) has not ended by the log's time, by when it
        ends: once the log's time reaches it, the node is taken out and every workload counts as touched, as when
        a node changes. Derived; rebuilt on restore."""
        self.create_retries = DueIndex()
        """Workloads whose check's ProvisioningRequest creation failed, by when it may be decided again
        (:attr:`WorkloadInfo.failed_creates`) while that is still to come: once the log's time reaches it, the
        workload counts as touched. Derived; rebuilt on restore."""
        self.metrics = MetricsFold()
        """Kueue's counters and histograms, folded from the log (:mod:`projections.metrics`)."""
        self.checks_taken: tuple[int, str, tuple[str, ...]] = (-1, "", ())
        """(offset, workload, checks) of the last Workload upsert whose shown check states were taken (their
        controllers' word, :meth:`_take_external_checks`): how a reader beside the fold (the audit) sees that
        upsert as a check's state change. Not state: set only on a take, never snapshotted."""
        self.reservation_forgotten: tuple[int, str] = (-1, "")
        """(offset, workload) of the last Workload upsert that made the fold forget a reservation never written
        (:meth:`_forget_reservation`): how the audit beside the fold sees it. Not state, as :attr:`checks_taken`."""
        self.unconfirmed_evictions = KeptEvictions()
        """Decision offset -> the workload before and after a preemption or eviction still awaiting its
        outcome (:mod:`projections.eviction_undo`; at most :data:`~projections.eviction_undo.UNDO_LIMIT`): a
        rejected one is taken back."""
        self._eviction_opened: UnconfirmedEviction | None = None
        """The record of the eviction being folded, until its fold is through (:meth:`apply`)."""
        self.refused_evictions: dict[str, Refusal] = {}
        """Workload key -> its eviction the connector rejected and the fold took back: no eviction of it is
        decided again before the refusal's ``retry_at`` (the scheduler and the controller rules), so a writer
        that keeps refusing does not make them decide it on every turn, while a refusal that lifts is retried
        as Kueue retries it. An event of the workload lowers ``retry_at`` to its time (a retry at once) and
        keeps the count; an entry whose ``retry_at`` is past holds nothing back
        (:func:`eviction_undo.lifted`)."""

    # --- derived structure ----------------------------------------------------------------------------------

    @property
    def forest(self) -> CohortForest:
        if self._forest is None:
            self._forest = build_forest(self.cluster_queues, self.cohorts)
        return self._forest

    @property
    def quota(self) -> QuotaTree:
        """The quota tree over the cohort forest, with current usage; kept up to date as quota is charged and
        released, rebuilt after a ClusterQueue or Cohort spec changes. A cycle writes only inside an overlay."""
        if self._quota is None:
            dynamic = self.dynamic_quotas
            self._quota = build_quota_tree(effective_quotas.views(self.cluster_queues, dynamic),
                                           effective_quotas.views(self.cohorts, dynamic), self.forest, self.usage)
        return self._quota

    def cq_info(self, cq: str) -> ClusterQueueInfo | None:
        """The compiled spec of ClusterQueue ``cq`` (None when it does not exist)."""
        if self._cq_infos_generation != self.spec_generation or self._cq_infos_config is not self.config:
            self._cq_infos.clear()  # the gates read below are the configuration's: a new one compiles anew
            self._cq_infos_generation, self._cq_infos_config = self.spec_generation, self.config
        info = self._cq_infos.get(cq)
        if info is None:
            obj = self.cluster_queues.get(cq)
            if obj is None:
                return None
            obj = effective_quotas.in_force(obj, self.dynamic_quotas)
            info = self._cq_infos[cq] = ClusterQueueInfo(cq, obj, self.flavors, self.admission_checks,
                                                         self.topologies, self.forest, self.provisioning_configs,
                                                         self.tas_enabled, self.multikueue,
                                                         self.concurrent_admission)
        return info

    @property
    def multikueue(self) -> MultiKueueWorld | None:
        """What MultiKueue checks' activity is read from; None while Kueue's ``MultiKueue`` gate is off."""
        if not self.gate(gates.MULTIKUEUE):
            return None
        return MultiKueueWorld(self.multikueue_configs, self.multikueue_clusters, self.cluster_links)

    def allocatable_generation(self, cq: str) -> int:
        """Kueue's AllocatableResourceGeneration of ClusterQueue ``cq``: grows whenever the quota it may use could
        have grown, so flavor scan progress recorded before is stale (see ``WorkloadInfo.scan``).

        Kueue bumps it on a change of the queue's quotas or resource groups, on any change in its cohort tree, and
        whenever a workload entry leaves the queue's cache — which every update of a workload holding its quota
        does. Here: every ClusterQueue or Cohort spec change counts for all queues (a superset of the trees
        concerned, so progress is only ever dropped early, never kept too long), plus every change of a workload
        holding ``cq``'s quota (reserved, updated, evicted, released)."""
        return self.quota_epoch + self.generations.get(cq, 0)

    def limit_summary(self, namespace: str) -> LimitSummary | None:
        """What the LimitRanges of ``namespace`` say about pods (None: nothing)."""
        summaries = self._limit_summaries
        if namespace in summaries:
            return summaries[namespace]
        index = self._limit_range_keys
        if index is None:
            index = self._limit_range_keys = {}
            for k in sorted(self.limit_ranges):
                index.setdefault(k.partition("/")[0], []).append(k)
        found = summaries[namespace] = summarize(self.limit_ranges[k] for k in index.get(namespace, ()))
        return found

    def shape_of(self, wl: WorkloadInfo) -> tuple[int, bytes]:
        """``wl``'s scheduling-equivalence shape under the configuration in force."""
        return wl.shape(self.shapes_name_pod_sets, wl.allowed_flavors is not None and self.concurrent_admission)

    def _reshape(self) -> None:
        """Whether shapes name pod sets changed: every queued workload takes its shape anew, and the parked shapes,
        judged the old way, are forgotten (the workloads parked with them stay parked until the next flush)."""
        workloads = self.workloads
        for cq in sorted(self.queues):
            q = self.queues[cq]
            q.shapes = {key: self.shape_of(workloads[key]) for key in q.shapes}
            q.parked_shapes.clear()

    def local_queue_active(self, key: str) -> tuple[str, str, str]:
        """Status, reason and message of the Active condition of LocalQueue ``key`` (which exists): the
        LocalQueue status the connector writes, and the ``local_queue_status`` metric."""
        lq = self.local_queues[key]
        cq_name = lq.spec.cluster_queue
        if lq.spec.stopped:
            return ("False", "Stopped", "LocalQueue is stopped")
        if cq_name not in self.cluster_queues:
            return ("False", "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue")
        if self.inactive_reason(cq_name) is not None:
            return ("False", "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue")
        return ("True", "Ready", "Can submit new workloads to localQueue")

    def inactive_reason(self, cq: str) -> str | None:
        """Why a ClusterQueue cannot admit (Kueue's Active=False reasons), or None when it is active."""
        info = self.cq_info(cq)
        return "NotFound" if info is None else info.inactive

    def _specs_changed(self, quota: bool = False) -> None:
        self.spec_generation += 1
        self.touched_all = True
        if quota:
            self._forest = None
            self._quota = None
            self.quota_epoch += 1
            if self.metrics.counts_cohorts:
                self.metrics.keep_cohorts(self.forest.cohort_names)

    def queue(self, cq: str) -> ClusterQueueQueue:
        q = self.queues.get(cq)
        if q is None:
            q = self.queues[cq] = ClusterQueueQueue(cq, self.parked_queues)
        return q

    # --- the fold -------------------------------------------------------------------------------------------

    def apply(self, record: ev.Record) -> None:
        e, offset = record.event, record.offset  # (each read once: Python 3.11 reads a NamedTuple's field generically)
        self.offset = offset
        if e.time > self.time:
            self.time = e.time
            if self.node_waits.at:
                self._node_waits_ended()
            if self.create_retries.at:
                self._create_retries_due()
        t = type(e)
        if t in _UPSERTS and e.obj.__class__ in _WORKLOAD_VIEWS:  # type: ignore[union-attr]
            self._fold_workload_upsert(e, offset)  # type: ignore[arg-type]  # half of a busy log
            return
        plan = _PLANS.get(t)
        if plan is None:
            plan = _PLANS[t] = tuple(_plan_of(t))
        handler, about_workload, metered, needs_before, second_pass, reindexed, decision = plan
        if decision and e.cycle > self.last_cycle:  # type: ignore[union-attr]
            self.last_cycle = e.cycle  # type: ignore[union-attr]
        if handler is None:  # ticks and connector outcomes carry only time, but a job's action may be metered
            if metered is not None:
                metered(self.metrics, self, e, None)
            elif t is ev.DecisionApplied or t is ev.DecisionRejected:
                self._on_outcome(e)  # type: ignore[arg-type]
            return
        if about_workload is None:  # a deletion, about a workload when it is of one, or the upsert of another kind
            about_workload = t is ev.ObjectDeleted and e.kind == "Workload"  # type: ignore[union-attr]
            second_pass = second_pass and about_workload
            reindexed = about_workload
        seen = wl = lifted = None
        try:
            if about_workload:
                # Any change of a workload holding a ClusterQueue's quota (reserved, updated, released) grows that
                # queue's allocatable generation, as in Kueue's cache (an update there removes and re-adds the
                # entry).
                workloads, key = self.workloads, e.key
                lifted = self.refused_evictions.pop(key, None) if self.refused_evictions else None
                # (its next event: an eviction may be decided again; put back below unless one is)
                wl = workloads.get(key)
                before = wl.cluster_queue if wl is not None and wl.phase in HOLDING else ""
                if wl is not None and needs_before:  # what the metrics see change (projections.metrics)
                    seen = _seen(wl)
                handler(self, e)
                wl = workloads.get(key)
                after = wl.cluster_queue if wl is not None and wl.phase in HOLDING else ""
                generations = self.generations
                if before:
                    generations[before] = generations.get(before, 0) + 1
                if after and after != before:
                    generations[after] = generations.get(after, 0) + 1
            else:
                if needs_before:  # an event of _ALSO_ABOUT_WORKLOADS whose metrics hook reads the workload before
                    wl = self.workloads.get(e.key)  # type: ignore[union-attr]
                    seen = _seen(wl) if wl is not None else None
                handler(self, e)
        except UndecodablePart as exc:  # a part of a lazily decoded event, read only now
            raise UndecodableRecord(offset, str(exc)) from exc
        except (QuantityError, MisfiledObject) as exc:
            raise InvalidRecord(offset, str(exc)) from exc
        if metered is not None:
            metered(self.metrics, self, e, seen)
        # Every trigger is about a workload, ``wl`` as the handler left it (the metrics hooks only read). Kueue's
        # NeedsSecondPass (:func:`needs_second_pass`) can hold only for a reserved workload (a delayed topology
        # request) or an admitted one listing an unhealthy node, so any other workload not waiting for a second
        # pass needs no check: the common case (pending, finished, or admitted on healthy nodes).
        if second_pass and (wl is None or wl.second_pass is not None or wl.phase == RESERVED
                            or (wl.unhealthy_nodes and wl.phase == ADMITTED)):
            self._sync_second_pass(e.key, wl, e.time)
        if reindexed:
            self.reindex(e.key)  # type: ignore[union-attr]
        if self._eviction_opened is not None:  # the eviction's fold is through: what it left is known now
            if lifted is not None:  # decided again after a refusal: a next one backs off longer
                opened = self._eviction_opened
                self._eviction_opened = msgspec.structs.replace(opened, refusals=lifted.refusals)
            self._remember_eviction(wl)
        elif lifted is not None:
            self._lift_refusal(e.key, lifted, wl)  # type: ignore[union-attr]
        if t is not ev.WorkloadPending:
            self.changes += 1

    def _fold_workload_upsert(self, e: ev.ObjectUpserted | LazyObjectUpserted, offset: int) -> None:
        """:meth:`apply` for a Workload upsert, decoded in full or lazily: the steps it takes for any event about a
        workload, less those that never concern an upsert (no metrics hook, no decision), on a lane of its own
        because these are half of a busy log. An upsert that changed nothing the clocks read (the watcher's
        echo of a status write, :meth:`_on_workload_upserted`) only marks the workload touched."""
        key, workloads = e.key, self.workloads
        wl = workloads.get(key)
        before = wl.cluster_queue if wl is not None and wl.phase in HOLDING else ""
        lifted = self.refused_evictions.pop(key, None) if self.refused_evictions else None
        try:
            quiet = self._on_workload_upserted(e)
        except UndecodablePart as exc:  # a part of a lazily decoded event, read only now
            raise UndecodableRecord(offset, str(exc)) from exc
        except (QuantityError, MisfiledObject) as exc:
            raise InvalidRecord(offset, str(exc)) from exc
        generations = self.generations  # as in apply: an update of a workload holding quota grows the generation
        if before:
            generations[before] = generations.get(before, 0) + 1
        if lifted is not None:  # the watch shows it anew: an eviction may be decided again
            self._lift_refusal(key, lifted, workloads.get(key))
        if not quiet:  # (a quiet upsert leaves the same workload in the same phase and ClusterQueue: nothing to add)
            wl = workloads.get(key)
            after = wl.cluster_queue if wl is not None and wl.phase in HOLDING else ""
            if after and after != before:
                generations[after] = generations.get(after, 0) + 1
        if (wl is None or wl.second_pass is not None or wl.phase == RESERVED
                or (wl.unhealthy_nodes and wl.phase == ADMITTED)) and self._sync_second_pass(key, wl, e.time):
            quiet = False  # the second-pass table changed: it is indexed
        if quiet:
            self.touched[key] = None
        else:
            self.reindex(key)
        self.changes += 1

    # --- what the controller rules look at ------------------------------------------------------------------

    def reindex(self, key: str) -> None:
        """Workload ``key`` changed (or was restored): the controller rules look at it again, and its entries in
        the clocks they run on follow what it now shows. (On the fold's hot path: unrolled, and a clock is only
        called when it holds the key or is to.)"""
        self.touched[key] = None
        wl = self.workloads.get(key)
        waiting = finished = deactivated = None
        limit = recovering = own_due = unscheduled = None
        if wl is not None:
            if wl.phase == ADMITTED and not wl.evicted:
                if not wl.pods_ready:
                    waiting, recovering = pods_ready_wait(wl)
                    if wl.own_pods_ready is not None:
                        own_due = own_deadline(wl.own_pods_ready, waiting, recovering)
                    if waiting is not None and self.tracks_pods_scheduled and pods_scheduled.unscheduled_wait(wl):
                        unscheduled = waiting
                if wl.max_execution_seconds is not None:
                    limit = max_execution_deadline(wl)
            if wl.phase in HOLDING and not wl.pods_ready and wl.active:
                self.not_ready[key] = None
            elif key in self.not_ready:
                del self.not_ready[key]
            if wl.phase == PENDING and held_for_pods_ready(wl):
                self.held[key] = None
            elif key in self.held:
                del self.held[key]
            if wl.cluster_name or wl.nominated:
                self.dispatched[key] = None
            elif key in self.dispatched:
                del self.dispatched[key]
            if key in self.retained:
                if wl.phase == FINISHED:
                    finished = _ms(wl.condition("Finished"))
                else:
                    deactivated = _ms(wl.condition("Evicted"))
        else:
            self.not_ready.pop(key, None)
            self.held.pop(key, None)
            self.dispatched.pop(key, None)
        at = self.backoff.get(key)
        clock = self.backoff_due
        if at is not None or key in clock.at:
            clock.set(key, at)
        at = self.second_pass.get(key)
        clock = self.second_pass_due
        if at is not None or key in clock.at:
            clock.set(key, at)
        clock = self.pods_ready_clock  # each clock spelled out: reindex runs for most events
        if waiting is not None or key in clock.at:
            clock.set(key, waiting)
        clock = self.recovery_clock
        if recovering is not None or key in clock.at:
            clock.set(key, recovering)
        clock = self.own_pods_ready_clock
        if own_due is not None or key in clock.at:
            clock.set(key, own_due)
        clock = self.unscheduled_clock
        if unscheduled is not None or key in clock.at:
            clock.set(key, unscheduled)
        clock = self.finished_clock
        if finished is not None or key in clock.at:
            clock.set(key, finished)
        clock = self.deactivated_clock
        if deactivated is not None or key in clock.at:
            clock.set(key, deactivated)
        clock = self.max_execution_clock
        if limit is not None or key in clock.at:
            clock.set(key, limit)

    def index_node_wait(self, name: str) -> None:
        """Node ``name`` changed, went or was restored: index the end of its wait if that is still to come."""
        node = self.nodes.get(name)
        ends = not_ready_wait_ends(node) if node is not None else None
        self.node_waits.set(name, ends if ends is not None and ends > self.time else None)

    def _node_waits_ended(self) -> None:
        """The log's time reached the end of some nodes' wait: what the node-failure rules say of them changed."""
        for name in self.node_waits.due(self.time):
            self.node_waits.set(name, None)
            self.touched_all = True

    def _create_retries_due(self) -> None:
        """The log's time reached the end of some failed creations' backoff: their workloads are looked at
        again."""
        for key in self.create_retries.due(self.time):
            self.create_retries.set(key, None)
            self.touched[key] = None

    def touch(self, key: str) -> None:
        """Something the controller rules read about workload ``key`` changed (not the workload itself)."""
        self.touched[key] = None

    def looked_at(self, acted: set[str], everything: bool) -> None:
        """A pass of the controller rules looked at every touched workload (at every workload when
        ``everything``) and decided something only for ``acted``: the others stay quiet until touched again, or
        until one of their clocks runs out. Forgetting them changes no decision, only what the next pass looks
        at."""
        if everything:
            self.touched = dict.fromkeys(sorted(acted))
        else:
            self.touched = {k: None for k in self.touched if k in acted}
        self.touched_all = False

    def _touch_pod(self, pod: o.Pod | None) -> None:
        name = pod.metadata.annotations.get(WORKLOAD_ANNOTATION) if pod is not None else None
        if name:
            self.touched[f"{pod.metadata.namespace}/{name}"] = None  # type: ignore[union-attr]

    def _on_upserted(self, e: ev.ObjectUpserted | LazyObjectUpserted) -> None:
        """An object upserted, of any kind but a Workload (:meth:`apply` folds those with
        :meth:`_fold_workload_upsert`)."""
        if e.obj.key != e.key:
            raise MisfiledObject(e.key, e.obj)
        self._upsert_object(e.obj)

    def _on_deleted(self, e: ev.ObjectDeleted) -> None:
        if e.kind == "ProvisioningRequest":
            self._delete_request(e.key, e.uid)
        else:
            self._delete_object(e.kind, e.key)

    def _on_config_recorded(self, e: ev.ConfigRecorded) -> None:
        """A configuration is in force from this offset on. When it replaces a different one, every parked workload
        goes back to its queue's heap: Kueue takes a new configuration by restarting, and a restarted Kueue holds
        nothing as inadmissible (enabling fairSharing, say, may let a parked workload preempt). The first one
        recorded replaces none: the log does not say what came before it."""
        old = self.config
        before = self._rules_in_force()
        tas_before = self.tas_enabled
        gated_before = self.admission_gated_by
        parents_before = self.concurrent_admission
        boost_before = self.priority_boost
        names_before = self.shapes_name_pod_sets
        dra_before = self.dra_config()
        dynamic_before = self.dynamic_quotas
        afs_queues = self._afs_queues()
        afs_before = self._afs_view(afs_queues)  # what Admission Fair Sharing counts may change with it
        self._afs_checkpoint_all(e)
        self.config, self.config_offset = e, self.offset
        self._afs_resync(*afs_before, cqs=afs_queues)
        if self.tas_enabled != tas_before:
            self._specs_changed()  # the compiled ClusterQueues say what TAS asks of them
        if self.dynamic_quotas != dynamic_before:
            self._specs_changed(quota=True)  # the quotas in force are the specs' or the effective ones
            for name in sorted(self.cluster_queues):  # and so are the flavors a workload's checks are listed by
                if _check_inputs(self.cluster_queues[name].spec) != _check_inputs(
                        effective_quotas.in_force(self.cluster_queues[name], True).spec):
                    self._resync_checks(name)
            self._flush_all()
        if self.admission_gated_by != gated_before:
            self._regate_all()
        if self.concurrent_admission != parents_before:
            self._requeue_parents()
            self._reshape()  # the allowed flavors are in the shapes while the gate is on
        if self.priority_boost != boost_before:
            self._reboost_all()
        if self.shapes_name_pod_sets != names_before:
            self._reshape()
        after = self._rules_in_force()
        if after[1] != before[1]:
            self._reclaim_everywhere()
        if self.dra_config() != dra_before:
            self._dra_views.clear()
            if after[0] == before[0]:
                self._readjust(claims=True)  # pending workloads with claims are charged under the new mapping
            self.touched_all = True  # the controller rules look again at what DRA made inadmissible
        if after[0] != before[0]:
            self._readjust()  # pending workloads count their requests under the new rules
        elif after[0] is not before[0]:
            self._rules = (before[0], after[1])  # equal rules: keep the object pod-set memos know
        order = order_of(e.document)
        if order != self.queue_order:
            self.queue_order = order
            self._rekey_all()
        if old is not None and old.document != e.document:
            self._flush_all()

    def _on_job_stopped(self, e: ev.JobStopped) -> None:
        wl = self.workloads.get(e.key)
        if wl is not None:
            wl.job_stopped = True
            if wl.evicted and wl.reserving:
                self.awaiting_release.add(wl.key)
                self._keep_pods_ready(wl, False, e.time)  # the stopped Job's pods are gone

    def _on_reclaimable(self, e: ev.ReclaimablePodsChanged) -> None:
        wl = self.workloads.get(e.key)
        if wl is None or wl.phase == FINISHED or (e.uid and e.uid != wl.uid):
            return  # finished, or counted for a Workload of the same name that was deleted since
        reclaimable = reclaimable_of(e.reclaimable_pods)
        if reclaimable != wl.reclaimable:
            wl.reclaimable = reclaimable
            self._reclaim(wl)

    def _on_replacement_pods(self, e: ev.ReplacementPodsChanged) -> None:
        """A pod group's Pods are missing (or no longer): its ``WaitingForReplacementPods`` condition, and a
        pending Workload leaves its queue while it waits (and comes back once it does not)."""
        wl = self.workloads.get(e.key)
        if wl is None or wl.phase == FINISHED or (e.uid and e.uid != wl.uid):
            return
        condition = replacement_pods_condition(wl, e.waiting)
        if condition is None:
            return
        wl.set_condition(WAITING_FOR_REPLACEMENT_PODS, *condition, e.time)
        if wl.phase == PENDING:
            self._dequeue(wl)
            self._enqueue(wl)

    def _on_hold_changed(self, e: ev.WorkloadOnHoldChanged) -> None:
        """A StatefulSet's Workload put on hold, or its hold cleared (Kueue's StatefulSet reconciler, #12233). Put on
        hold (active, not finished, not on hold already), it gives back any quota it holds as
        ``UnsetQuotaReservationWithCondition`` does (QuotaReserved=False ``OnHold``, admission cleared, Admitted
        synced; no eviction, no Requeued condition) and leaves its queue. Cleared, it shows PendingEvaluation (its
        legacy fallback with UnadmittedWorkloadsObservability off) and is queued again."""
        wl = self.workloads.get(e.key)
        if wl is None or wl.phase == FINISHED or (e.uid and e.uid != wl.uid):
            return
        if e.on_hold and wl.active and not on_hold(wl):
            if wl.reserving:
                wl.cluster_name, wl.nominated, wl.remotes = "", (), None
                self._give_back(wl, ON_HOLD, ON_HOLD_MESSAGE, e.time)
            else:
                wl.set_condition("QuotaReserved", "False", ON_HOLD, ON_HOLD_MESSAGE, e.time)
                self._sync_admitted(wl, e.time)
            wl.scan = None
        elif not e.on_hold and on_hold(wl):
            wl.set_condition("QuotaReserved", "False", self._unadmitted("PendingEvaluation"), HOLD_CLEARED, e.time)
            self._sync_admitted(wl, e.time)
        else:
            return
        self._dequeue(wl)
        self._enqueue(wl)
        self.reflag(wl)

    def _reclaim(self, wl: WorkloadInfo) -> None:
        """``wl``'s reclaimable pods (or whether they count) changed: a pending workload counts its pod sets
        without them (and goes back to its queue's heap, as Kueue requeues on such a change); one holding quota
        gives back what they held (usage ÷ admitted count × count left), and an admitted one's release moves the
        parked workloads of its cohort tree back to their heaps (Kueue's flush on a reclaimablePods change)."""
        spec_sets = wl.spec_sets
        effective = after_reclaim(spec_sets, wl.reclaimable if self.reclaim_enabled else ())
        wl.spec_pod_sets = None if effective is spec_sets else spec_sets
        changed = effective != wl.pod_sets
        wl.pod_sets = effective
        if wl.phase == PENDING:
            if changed:
                wl.scan = None
                self._dequeue(wl, forget=False)
                self._enqueue(wl)
            return
        if not wl.reserving or wl.admission is None:
            return
        if not self._rescale_usage(wl):
            self.tas.charge(wl)  # a pod set that completed frees its topology domains (charged anew on a rescale)
        if wl.phase == ADMITTED and wl.cluster_queue:
            self._flush_tree(wl.cluster_queue)

    def _rescale_usage(self, wl: WorkloadInfo) -> bool:
        """A reserving ``wl`` holds its admission scaled by the pods left (:func:`admission_usage`): re-charge it when
        that changed; returns whether it did."""
        usage = admission_usage(wl.admission, wl)  # type: ignore[arg-type]
        if usage == wl.usage:
            return False
        counted = self._afs_counted(wl)
        if counted:
            self._afs_record(wl, -1)
        self._charge(wl, -1)
        wl.usage = usage
        self._charge(wl)
        if counted:  # back without a settlement: only the scheduler's admission charges an entry penalty (Kueue)
            self._afs_append(wl, AFS_ADD)
        return True

    def _regate_all(self) -> None:
        """The AdmissionGatedBy gate changed: every pending workload with an admission gate leaves its queue or
        joins it, and the controller rules look at every workload again (the gated ones' conditions follow)."""
        for key in sorted(self.workloads):
            wl = self.workloads[key]
            if wl.admission_gate and wl.phase == PENDING:
                wl.scan = None
                self._dequeue(wl)
                self._enqueue(wl)
        self.touched_all = True

    def _requeue_parents(self) -> None:
        """The ConcurrentAdmission gate changed: every pending parent workload leaves its queue or joins it."""
        for key in sorted(self.workloads):
            wl = self.workloads[key]
            if wl.phase == PENDING and is_parent(wl):
                wl.scan = None
                self._dequeue(wl)
                self._enqueue(wl)

    def _reclaim_everywhere(self) -> None:
        """The ReclaimablePods gate changed: every workload with reclaimable pods counts them anew."""
        for key in sorted(self.workloads):
            wl = self.workloads[key]
            if wl.reclaimable and wl.phase != FINISHED:
                self._reclaim(wl)
                self.touched[key] = None

    def _on_pods_ready(self, e: ev.PodsReadyChanged) -> None:
        """The flag the scheduler reads follows the event; the condition follows Kueue's rule (its reason is the
        rule's, not the event's), and only under waitForPodsReady."""
        wl = self.workloads.get(e.key)
        if wl is not None:
            wl.pods_ready = e.ready
            if self.waits_for_pods_ready:
                self._set_pods_ready(wl, e.ready, e.time)

    def _keep_pods_ready(self, wl: WorkloadInfo, ready: bool, time: int) -> None:
        """Admission changed: the pods' scheduling is looked at again (when tracked), and a PodsReady condition a job
        integration keeps (one is shown) is written anew."""
        if self.tracks_pods_scheduled:
            self._observe_scheduling(wl, time)
        if wl.condition("PodsReady") is not None and self.waits_for_pods_ready:
            self._set_pods_ready(wl, ready, time)

    def _set_pods_ready(self, wl: WorkloadInfo, ready: bool, time: int) -> None:
        current = wl.condition("PodsReady")
        admitted = wl.phase == ADMITTED and _true(wl.condition("Admitted"))
        scheduling = self.tracks_pods_scheduled and pods_scheduled.waiting_for_scheduling(wl)
        wl.set_condition("PodsReady", *pods_ready_condition(current, admitted, ready, scheduling), time)

    def link_pod(self, old: o.Pod | None, new: o.Pod | None) -> None:
        """Keep :attr:`pods_of` in step with a Pod upserted or deleted (``old``: as it was, ``new``: as it is)."""
        was, now = _workload_of_pod(old), _workload_of_pod(new)
        if was == now:
            return
        if was:
            linked = self.pods_of.get(was)
            if linked is not None:
                linked.pop(old.key, None)  # type: ignore[union-attr]
                if not linked:
                    del self.pods_of[was]
        if now:
            self.pods_of.setdefault(now, {})[new.key] = None  # type: ignore[union-attr]

    def _observe_scheduling(self, wl: WorkloadInfo, time: int) -> bool:
        """Kueue's UnscheduledPodsTracker looks at ``wl``: its PodsScheduled condition follows its Pods (admitted),
        or is reset (admission lost): :mod:`projections.pods_scheduled`. Whether it changed."""
        if wl.phase == ADMITTED and _true(wl.condition("Admitted")):
            if wl.evicted or (self.concurrent_admission and variants.parent_name(wl)):
                return False
            pods = [self.pods[k] for k in self.pods_of.get(wl.key, ())]
            found = pods_scheduled.observe(wl, pods, self.reclaim_enabled)
            if found is None:
                return False
            wl.conditions = tuple(c for c in wl.conditions if c.type != pods_scheduled.PODS_SCHEDULED)
            wl.set_condition(pods_scheduled.PODS_SCHEDULED, *found, time)
            return True
        shown = wl.condition(pods_scheduled.PODS_SCHEDULED)
        if wl.phase == FINISHED or shown is None or shown.status != "True":
            return False
        wl.set_condition(pods_scheduled.PODS_SCHEDULED, "False", WAIT_FOR_START, NOT_READY, time)
        return True

    def _pod_scheduling(self, pod: o.Pod | None) -> None:
        """A Pod linked to a workload changed or went: the tracker looks at the workload (the PodsReady condition
        a job integration keeps follows a new observation)."""
        name = pod.metadata.annotations.get(WORKLOAD_ANNOTATION) if pod is not None else None
        wl = self.workloads.get(f"{pod.metadata.namespace}/{name}") if name else None  # type: ignore[union-attr]
        if wl is not None and self._observe_scheduling(wl, self.time):
            if wl.condition("PodsReady") is not None:
                self._set_pods_ready(wl, wl.pods_ready, self.time)
            self.reindex(wl.key)

    def _on_unhealthy_nodes(self, e: ev.UnhealthyNodesChanged) -> None:
        wl = self.workloads.get(e.key)
        if wl is not None and wl.reserving:
            wl.unhealthy_nodes = tuple(e.nodes)
            if e.kept:
                wl.kept_nodes = tuple(sorted({*wl.kept_nodes, *e.kept}))
                self.keeping[wl.key] = None

    def _of_tas_flavor(self, node: o.Node | None) -> bool:
        """Whether ``node`` belongs to a TAS flavor whose Topology exists: it carries the flavor's node labels and
        every level of the Topology (Kueue's ``nodeBelongsToFlavor``). Kueue's TAS ResourceFlavor controller
        requeues the inadmissible workloads of every active ClusterQueue when such a node is created, updated or
        deleted (``pkg/controller/tas/resource_flavor.go``, after a 1 s batch period; kueue-es retries them at
        once): a node that appears, loses a taint or gains a label may let a workload TAS could not place in."""
        if node is None or not self.tas_enabled:
            return False
        for name in sorted(self.flavors):
            spec = self.flavors[name].spec
            topology = self.topologies.get(spec.topology_name) if spec.topology_name else None
            if topology is not None and node_matches_flavor(
                    node, spec.node_labels, tuple(lv.node_label for lv in topology.spec.levels)):
                return True
        return False

    def _look_at_node_anew(self, node: o.Node) -> None:
        """Kueue's node controller looks at ``node`` again (its Ready status or taints changed, it came or
        went): a workload whose placement was kept on it (by its hostname label, else its name) has it listed
        again if it still fails."""
        names = {node.metadata.name, node.metadata.labels.get(HOSTNAME_LABEL, node.metadata.name)}
        for key in sorted(self.keeping):
            wl = self.workloads.get(key)
            if wl is not None and names.intersection(wl.kept_nodes):
                wl.kept_nodes = tuple(n for n in wl.kept_nodes if n not in names)
                if not wl.kept_nodes:
                    del self.keeping[key]

    def _node_looked_at_anew(self, old: o.Node | None, new: o.Node) -> bool:
        """The node changes Kueue's node controller is woken by: a node that appears, a Ready status that flips,
        taints that change (under TASReplaceNodeOnNodeTaints)."""
        if old is None:
            return True
        was, now = ready_condition(old), ready_condition(new)
        if (was is not None and was.status == "True") != (now is not None and now.status == "True"):
            return True
        return old.spec.taints != new.spec.taints and self.gate(gates.TAS_REPLACE_NODE_ON_NODE_TAINTS)

    def _on_second_pass_failed(self, e: ev.SecondPassFailed) -> None:
        wl = self.workloads.get(e.key)
        if wl is not None and wl.second_pass is not None:
            iteration = wl.second_pass[0] + 1
            wl.second_pass = (iteration, e.time + backoff_ms(iteration))
            self.second_pass[wl.key] = wl.second_pass[1]

    def required_checks_of(self, wl: WorkloadInfo) -> list[str]:
        """The admission checks that apply to ``wl``'s current admission."""
        info = self.cq_info(wl.cluster_queue) if wl.cluster_queue else None
        if info is None or wl.admission is None or not info.check_rules:
            return []
        return info.required_checks({f for p in wl.admission.pod_set_assignments for f in p.flavors.values()})

    def _sync_second_pass(self, key: str, wl: WorkloadInfo | None, time: int) -> bool:
        """Kueue's QueueSecondPassIfNeeded for workload ``key`` (``wl``, None when gone): a workload that starts
        needing a second pass is due one second later; one that no longer needs it leaves the queue (and a later
        need starts counting again). True when :attr:`second_pass` changed."""
        if wl is None or not needs_second_pass(wl, self.required_checks_of):
            if wl is not None:
                wl.second_pass = None
            return self.second_pass.pop(key, None) is not None
        if wl.second_pass is None:
            wl.second_pass = (1, time + backoff_ms(1))
            self.second_pass[key] = wl.second_pass[1]
            return True
        return False

    # --- objects --------------------------------------------------------------------------------------------

    def _upsert_object(self, obj: o.KObject) -> None:
        name = obj.metadata.name
        match obj:
            case o.Namespace():
                labels = dict(obj.metadata.labels)
                old = self.namespaces.get(name)
                if old != labels:
                    self._specs_changed()
                self.namespaces[name] = labels
                self._flush_newly_selecting(old, labels)
            case o.ResourceFlavor():
                old = self.flavors.get(name)
                self.flavors[name] = obj
                if old is None or old.spec != obj.spec:
                    self._specs_changed()
                    self.tas.nodes_changed()
                self._flush_all()
            case o.ClusterQueue():
                old = self.cluster_queues.get(name)
                afs_before = (self._afs_view((name,)) if old is None or _admission_mode(old) != _admission_mode(obj)
                              else None)
                self.cluster_queues[name] = obj
                if afs_before is not None:
                    self._afs_resync(*afs_before, cqs=(name,))
                if self._relabelled(CLUSTER_QUEUE, old, obj):
                    self.metrics.forget(name)
                new_spec = self._requotaed(old, obj)
                if new_spec or old.metadata.deletion_timestamp != obj.metadata.deletion_timestamp:
                    self._specs_changed(quota=new_spec)
                if new_spec:  # a status or metadata update admits nothing new (Kueue requeues on spec changes)
                    dynamic = self.dynamic_quotas
                    if old is not None and (_check_inputs(effective_quotas.in_force(old, dynamic).spec)
                                            != _check_inputs(effective_quotas.in_force(obj, dynamic).spec)):
                        self._resync_checks(name)
                    self._flush_tree(name)
            case o.Cohort():
                old = self.cohorts.get(name)
                self.cohorts[name] = obj
                if self._relabelled(COHORT, old, obj):
                    self.metrics.forget_cohort(name)
                if self._requotaed(old, obj):
                    self._specs_changed(quota=True)
                self._flush_all()
            case o.LocalQueue():
                key = obj.key
                old = self.local_queues.get(key)
                moved_afs = old is not None and old.spec.cluster_queue != obj.spec.cluster_queue
                if moved_afs:
                    self._afs_drop_local_queue(key)
                self.local_queues[key] = obj
                if old is None or moved_afs:
                    self._afs_local_queue_appeared(obj)
                if self._relabelled(LOCAL_QUEUE, old, obj) or self._unselected(old, obj):
                    self.metrics.forget_local_queue(key)
                if old is None or old.spec != obj.spec:
                    self.spec_generation += 1
                    moved = old is not None and old.spec.cluster_queue != obj.spec.cluster_queue
                    for wk in sorted(self.lq_members.get(key, ())):
                        self._enqueue(self.workloads[wk], moved=moved)
                        self.touched[wk] = None
            case o.WorkloadPriorityClass():
                self.workload_priority_classes[name] = obj
                self._reprioritise(WPC_GROUP, name)
            case o.PriorityClass():
                self.priority_classes[name] = obj
                self._reprioritise("scheduling.k8s.io", name)
            case o.Topology():
                old_topology = self.topologies.get(name)
                self.topologies[name] = obj
                if old_topology is None or old_topology.spec != obj.spec:
                    self.tas.nodes_changed()
                self._specs_changed()
                self._flush_all()
            case o.AdmissionCheck():
                self.admission_checks[name] = obj
                self._specs_changed()
                self._flush_all()
            case o.ProvisioningRequestConfig():
                old = self.provisioning_configs.get(name)
                self.provisioning_configs[name] = obj
                if old is None or old.spec != obj.spec:
                    self._specs_changed()  # a provisioning check's activity follows its config
                    self._flush_all()
            case o.PreemptionConfig():
                old_pc = self.preemption_configs.get(name)
                self.preemption_configs[name] = obj
                if old_pc is None or old_pc.spec != obj.spec:
                    self._specs_changed()  # a rule more or less may let a pending workload preempt
                    self._flush_all()
            case o.MultiKueueConfig():
                old_mkc = self.multikueue_configs.get(name)
                self.multikueue_configs[name] = obj
                if old_mkc is None or old_mkc.spec != obj.spec:
                    self._specs_changed()  # a MultiKueue check's activity follows its config's clusters
                    self._flush_all()
            case o.MultiKueueCluster():
                known = name in self.multikueue_clusters
                self.multikueue_clusters[name] = obj
                if not known:
                    self._specs_changed()
                    self._flush_all()
            case o.ProvisioningRequest():
                self._upsert_request(obj)
            case o.LimitRange():
                old_lr = self.limit_ranges.get(obj.key)
                before = self.limit_summary(obj.metadata.namespace)
                self.limit_ranges[obj.key] = obj
                if old_lr is None or old_lr.spec != obj.spec:
                    self._limits_changed(obj.metadata.namespace, before)
                    if scheduling_fields_changed(old_lr, obj):
                        self._retry_namespace(obj.metadata.namespace)
            case o.ResourceClaimTemplate():
                old_t = self.claim_templates.get(obj.key)
                self.claim_templates[obj.key] = obj
                if old_t is None or old_t.spec != obj.spec:
                    self._claim_templates_changed(obj.metadata.namespace)
            case o.DeviceClass():
                old_dc = self.device_classes.get(name)
                served = self.served_extended()
                self.device_classes[name] = obj
                if (old_dc is None or old_dc.spec != obj.spec
                        or old_dc.metadata.creation_timestamp != obj.metadata.creation_timestamp):
                    self._device_classes_changed(served, name)
                    self._devices_changed()
            case o.DeviceTaintRule():
                old_rule = self.device_taint_rules.get(name)
                self.device_taint_rules[name] = obj
                if old_rule is None or old_rule.spec != obj.spec:
                    self._taint_rules_changed()
            case o.ResourceClaim():
                old_claim = self.resource_claims.get(obj.key)
                self.resource_claims[obj.key] = obj
                if old_claim is not None and not set(old_claim.held()) <= set(obj.held()):
                    self._devices_changed()  # it released devices
            case o.ResourceSlice():
                old_rs = self.resource_slices.by_name.get(name)
                self.resource_slices.by_name[name] = obj
                if old_rs is None or old_rs.spec != obj.spec:
                    self._slices_changed(obj.spec.driver)
                    if old_rs is not None and old_rs.spec.driver != obj.spec.driver:
                        self._slices_changed(old_rs.spec.driver)
                    self._devices_changed()
            case o.RuntimeClass():
                old_rc = self.runtime_classes.get(name)
                if old_rc is not None and old_rc.overhead == obj.overhead:
                    self.runtime_classes[name] = obj  # what pod sets read of it is unchanged
                else:
                    self.runtime_classes = {**self.runtime_classes, name: obj}
                    self._readjust(runtime_class=name)
            case o.Node():
                old_node = self.nodes.get(name)
                if old_node != obj:
                    self.tas.nodes_changed()
                    self.touched_all = True  # node failure rules: which workloads are on it is not indexed
                    if self.keeping and self._node_looked_at_anew(old_node, obj):
                        self._look_at_node_anew(obj)
                self.nodes[name] = obj
                self.nodes_seen = True
                self.index_node_wait(name)
                if old_node != obj and (self._of_tas_flavor(old_node) or self._of_tas_flavor(obj)):
                    self._flush_all()
            case o.Pod():
                old_pod = self.pods.get(obj.key)
                self._touch_pod(old_pod)
                self._touch_pod(obj)
                self.pods[obj.key] = obj
                self.link_pod(old_pod, obj)
                self.tas.pod_changed(obj.key, obj)
                if self.tracks_pods_scheduled:
                    self._pod_scheduling(obj)
                    if old_pod is not None and old_pod.metadata.annotations.get(
                            WORKLOAD_ANNOTATION) != obj.metadata.annotations.get(WORKLOAD_ANNOTATION):
                        self._pod_scheduling(old_pod)
            case o.Job():
                self.jobs[obj.key] = obj

    def _delete_object(self, kind: str, key: str) -> None:
        if kind == "Workload":
            wl = self.workloads.pop(key, None)
            if wl is not None:
                self._release(wl)
                self._dequeue(wl)
                members = self.lq_members.get(f"{wl.namespace}/{wl.queue_name}")
                if members is not None:
                    members.pop(key, None)
                if grouped_owner(wl.owner):
                    self._unindex_owner(key, wl.owner_uid)
                if wl.owner and wl.owner[1] == "Workload":
                    variants.unindex(self, wl)
                self.awaiting_release.discard(key)
                self.backoff.pop(key, None)
                self.second_pass.pop(key, None)
                self.flagged.pop(key, None)
                self.pod_templates.pop(key, None)
                self.retained.pop(key, None)
                if wl.cluster_queue:
                    self._flush_tree(wl.cluster_queue)
            return
        if kind == "LocalQueue" and key in self.local_queues:
            self._afs_drop_local_queue(key)  # Kueue drops its ledger entry; a recreated one starts from its status
        afs_before = self._afs_view((key,)) if kind == "ClusterQueue" and key in self.cluster_queues else None
        table: dict[str, Any] | None = {
            "Namespace": self.namespaces,
            "ResourceFlavor": self.flavors,
            "ClusterQueue": self.cluster_queues,
            "Cohort": self.cohorts,
            "LocalQueue": self.local_queues,
            "WorkloadPriorityClass": self.workload_priority_classes,
            "PriorityClass": self.priority_classes,
            "Topology": self.topologies,
            "AdmissionCheck": self.admission_checks,
            "ProvisioningRequestConfig": self.provisioning_configs,
            "PreemptionConfig": self.preemption_configs,
            "MultiKueueConfig": self.multikueue_configs,
            "MultiKueueCluster": self.multikueue_clusters,
            "Node": self.nodes,
            "Pod": self.pods,
            "Job": self.jobs,
            "LimitRange": self.limit_ranges,
        }.get(kind)
        if kind == "ResourceClaimTemplate":
            if self.claim_templates.pop(key, None) is not None:
                self._claim_templates_changed(key.partition("/")[0])
            return
        if kind == "DeviceClass":
            served = self.served_extended()
            if self.device_classes.pop(key, None) is not None:
                self._device_classes_changed(served, key)
                self._devices_changed()
            return
        if kind == "DeviceTaintRule":
            if self.device_taint_rules.pop(key, None) is not None:
                self._taint_rules_changed()
            return
        if kind == "ResourceClaim":
            gone_claim = self.resource_claims.pop(key, None)
            if gone_claim is not None and gone_claim.held():
                self._devices_changed()  # its devices are free
            return
        if kind == "ResourceSlice":
            gone_slice = self.resource_slices.by_name.pop(key, None)
            if gone_slice is not None:
                self._slices_changed(gone_slice.spec.driver)
                self._devices_changed()
            return
        if kind == "RuntimeClass":
            if key in self.runtime_classes:
                self.runtime_classes = {k: v for k, v in self.runtime_classes.items() if k != key}
                self._readjust(runtime_class=key)
            return
        if kind == "LimitRange":
            before = self.limit_summary(key.partition("/")[0])
        gone = table.pop(key, None) if table is not None else None
        if gone is None:
            return
        if kind == "MultiKueueCluster":
            self._cluster_deleted(key)
        if kind in ("PriorityClass", "WorkloadPriorityClass"):
            self.spec_inputs_generation += 1  # upserts fall back to the spec's own priority from now on
        if kind == "LimitRange":
            self._limits_changed(gone.metadata.namespace, before)
            if scheduling_fields_changed(gone, None):  # type: ignore[arg-type]
                self._retry_namespace(gone.metadata.namespace)
            return
        if kind in ("Node", "Topology", "ResourceFlavor"):
            self.tas.nodes_changed()
            self.touched_all = True
            if kind == "Node":
                self.index_node_wait(key)
                if self.keeping and isinstance(gone, o.Node):
                    self._look_at_node_anew(gone)
                if isinstance(gone, o.Node) and self._of_tas_flavor(gone):
                    self._flush_all()
        elif kind == "Pod":
            self._touch_pod(gone)
            self.link_pod(gone, None)
            self.tas.pod_changed(key, None)
            if self.tracks_pods_scheduled:
                self._pod_scheduling(gone)
        if afs_before is not None:
            self._afs_resync(*afs_before, cqs=(key,))
        if kind in ("ClusterQueue", "Cohort"):
            if kind == "Cohort":
                self.metrics.forget_cohort(key)  # even while something still names it, as Kueue clears it
            self._specs_changed(quota=True)
            if kind == "ClusterQueue":
                self.metrics.forget(key)
        elif kind in ("Namespace", "ResourceFlavor", "AdmissionCheck", "Topology", "ProvisioningRequestConfig",
                      "PreemptionConfig", "MultiKueueConfig", "MultiKueueCluster"):
            self._specs_changed()
        if kind == "LocalQueue":
            self.spec_generation += 1
            self.metrics.forget_local_queue(key)
            for wk in sorted(self.lq_members.get(key, ())):
                self._enqueue(self.workloads[wk])
                self.touched[wk] = None
        elif kind not in ("Node", "Pod", "Job", "WorkloadPriorityClass", "PriorityClass", "Namespace"):
            self._flush_all()  # a Namespace going selects no ClusterQueue anew: Kueue retries nothing for it

    def _limits_changed(self, namespace: str, before: LimitSummary | None) -> None:
        """The LimitRanges of ``namespace`` changed; ``before`` is what they said before."""
        self._limit_summaries.pop(namespace, None)
        self._limit_range_keys = None
        if self.limit_summary(namespace) != before:
            self._readjust(namespace=namespace)

    def _retry_namespace(self, namespace: str) -> None:
        """A LimitRange of ``namespace`` changed what scheduling reads of it: as Kueue's workload controller
        (``retryInadmissibleForNamespace``), every ClusterQueue a workload of the namespace without quota
        reserved (QuotaReserved False or absent) queues in through its LocalQueue — stopped or not — sends
        back the parked workloads of its cohort tree, whoever's they are."""
        prefix, workloads, cqs = namespace + "/", self.workloads, set()
        for key, lq in self.local_queues.items():
            cq = lq.spec.cluster_queue
            if not key.startswith(prefix) or cq in cqs or cq not in self.cluster_queues:
                continue
            for wk in self.lq_members.get(key, ()):
                reserved = workloads[wk].condition("QuotaReserved")
                if reserved is None or reserved.status == "False":
                    cqs.add(cq)
                    break
        for cq in sorted(cqs):
            self._flush_tree(cq)

    def recount_pending(self) -> None:
        """The pending workloads' pod sets taken anew under the configuration's rules (a snapshot restored from
        a version that counted them otherwise): :meth:`_readjust`."""
        self._readjust()

    def _readjust(self, namespace: str | None = None, runtime_class: str | None = None, claims: bool = False) -> None:
        """What adjusts pod templates changed — the LimitRanges of ``namespace``, the RuntimeClass
        ``runtime_class``, the ResourceClaimTemplates of ``namespace``, the DeviceClasses or the DRA configuration
        (``claims``: only workloads whose templates have claims or ask for extended resources), or (none given) the configuration's rules: the pending workloads it
        concerns take
        their pod sets anew (Kueue adjusts them again and
        re-adds them to their queues), and those whose pod sets change go back to their queue's heap, as on any
        change of their spec. Workloads holding quota keep theirs until they are upserted again: their admission
        says what they use."""
        self.spec_inputs_generation += 1
        workloads, templates = self.workloads, self.pod_templates
        keys = sorted(k for k, wl in workloads.items()
                      if wl.phase == PENDING and (namespace is None or wl.namespace == namespace))
        for key in keys:
            wl = workloads[key]
            tpl = templates.get(key)
            if runtime_class is not None and (tpl is None or all(t.spec.runtime_class_name != runtime_class
                                                                 for t in tpl)):
                continue
            if claims and (tpl is None or not (has_claims(tpl) or asks_for_served(
                    tpl, self.limit_summary(wl.namespace) if self.limit_ranges else None, None))):
                continue
            if self._refresh_pod_sets(wl):
                self._dequeue(wl, forget=False)
                self._enqueue(wl)
                self.reflag(wl)  # its DRA claims may have become chargeable, or not

    def _refresh_pod_sets(self, wl: WorkloadInfo) -> bool:
        """Adjust ``wl``'s pod sets to the LimitRanges, RuntimeClasses and rules now in force; whether they
        changed."""
        fresh = self._adjusted_now(wl, self.pod_templates.get(wl.key))
        if fresh is None or fresh == wl.spec_sets:
            return False
        self._take_pod_sets(wl, fresh)
        wl.scan = None  # its scheduling shape changed: the progress is meaningless
        self.touched[wl.key] = None
        return True

    def retake_placement(self, wl: WorkloadInfo) -> None:
        """Give ``wl``'s pod sets what topology placement counts of their pods as their templates give it now
        (:attr:`PodSetInfo.placement`), all else kept: for a workload restored from a snapshot that did not hold it
        (before version 45). Its templates unknown, it keeps what its requests give."""
        fresh = self._adjusted_now(wl, self.pod_templates.get(wl.key))
        if fresh is None:
            return
        placed = {ps.name: ps.placement_requests for ps in fresh}

        def retaken(sets: tuple[PodSetInfo, ...]) -> tuple[PodSetInfo, ...]:
            return tuple(ps if ps.name not in placed else intern_pod_set(msgspec.structs.replace(
                ps, placement=placement_of(dict(placed[ps.name]), ps.requests, ps.dra_requests))) for ps in sets)

        wl.pod_sets = retaken(wl.pod_sets)
        if wl.spec_pod_sets is not None:
            wl.spec_pod_sets = retaken(wl.spec_pod_sets)

    def _adjusted_now(self, wl: WorkloadInfo, templates: tuple[o.PodTemplateSpec, ...] | None
                      ) -> tuple[PodSetInfo, ...] | None:
        """``wl``'s pod sets (the spec's counts) from the spec whose ``templates`` they were taken from, adjusted by
        what is in force now; None when the templates are not those of its pod sets."""
        spec_sets = wl.spec_sets
        if templates is None or len(templates) != len(spec_sets):
            return None
        return readjusted(spec_sets, templates, self.limit_summary(wl.namespace), self.runtime_classes,
                          self.request_rules, self._dra_for(wl.namespace, templates))

    def _take_pod_sets(self, wl: WorkloadInfo, spec_sets: tuple) -> None:
        """``wl``'s pod sets are now ``spec_sets`` (with the spec's counts), less its reclaimable pods."""
        effective = after_reclaim(spec_sets, wl.reclaimable) if wl.reclaimable and self.reclaim_enabled else spec_sets
        wl.pod_sets = effective
        wl.spec_pod_sets = None if effective is spec_sets else spec_sets

    # --- workloads ------------------------------------------------------------------------------------------

    def resolve_priority(self, w: o.Workload | LazyWorkload) -> tuple[int, str]:
        return self._spec_priority(w.spec)

    def _spec_priority(self, spec: o.WorkloadSpec) -> tuple[int, str]:
        ref = spec.priority_class_ref
        if ref is not None and ref.name:
            if ref.group == WPC_GROUP or ref.kind == "WorkloadPriorityClass":
                wpc = self.workload_priority_classes.get(ref.name)
                if wpc is not None:
                    return wpc.value, ref.name
            else:
                pc = self.priority_classes.get(ref.name)
                if pc is not None:
                    return pc.value, ref.name
            return (spec.priority or 0), ref.name
        return (spec.priority or 0), ""

    def _from_spec_anew(self, spec: o.WorkloadSpec, limits: LimitSummary | None, namespace: str
                        ) -> tuple[int, str, tuple[PodSetInfo, ...]]:
        """Priority, priority class and pod sets of a shared (lazily decoded) spec under its namespace's
        LimitRanges ``limits`` (and, when its templates have claims, its DRA view), computed and remembered until
        the spec, the limits or anything else they depend on (:attr:`spec_inputs_generation`) changes."""
        priority, pclass = self._spec_priority(spec)
        dra = self._dra_for(namespace, spec.pod_sets)
        pod_sets = pod_set_infos(spec, limits, self.runtime_classes, self.request_rules, dra)
        memos = self._from_spec
        if len(memos) >= 8192:
            memos.clear()
        memos[id(spec)] = (spec, self.spec_inputs_generation, limits, priority, pclass, pod_sets, dra)
        return priority, pclass, pod_sets

    def pod_sets_now(self, w: o.Workload) -> tuple[PodSetInfo, ...]:
        """The pod sets (with the spec's counts) the fold would take from Workload ``w`` now: what a decision about
        it is made for (the status writer compares them with a Workload rewritten meanwhile)."""
        namespace = w.metadata.namespace
        return self._pod_sets_under(self.limit_summary(namespace) if self.limit_ranges else None, namespace, w.spec)

    def _pod_sets_under(self, limits: LimitSummary | None, namespace: str, spec: o.WorkloadSpec
                        ) -> tuple[PodSetInfo, ...]:
        rcs, rules, dra = self.runtime_classes, self.request_rules, self._dra_for(namespace, spec.pod_sets)
        return tuple([pod_set_info(ps, limits, rcs, rules, dra) for ps in spec.pod_sets])

    def _on_workload_upserted(self, e: ev.ObjectUpserted | LazyObjectUpserted) -> bool:
        """A Workload upserted (decoded in full or lazily): a new one is taken with its status, a known one takes
        what its metadata and spec now say. True when it was known (and stays, in the phase and ClusterQueue it was
        in) and nothing :meth:`reindex` reads changed — most upserts, the watcher's echo of a status write:
        :meth:`_fold_workload_upsert` then only marks it touched."""
        w: o.Workload | LazyWorkload = e.obj  # type: ignore[assignment]
        meta, key = w.metadata, e.key
        if key != (f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name):  # w.key, no property call
            raise MisfiledObject(key, w)
        spec = w.spec  # a LazyWorkload decodes its spec at each read of .spec: read it once
        old = self.workloads.get(key)
        if old is not None and old.uid != meta.uid:
            if variants.adopts(old, meta):  # the variant the fold made, read back: it keeps what the log decided
                old.uid = meta.uid
            else:
                self._delete_object("Workload", key)
                old = None
        limits = self.limit_summary(meta.namespace) if self.limit_ranges else None
        if type(w) is LazyWorkload:
            memo = self._from_spec.get(id(spec))
            if memo is not None:  # unpacked at once: cheaper than reading its items one by one
                known, inputs, known_limits, priority, pclass, pod_sets, known_dra = memo
            if not (memo is not None and known is spec and inputs == self.spec_inputs_generation
                    and known_limits == limits and (known_dra is None or known_dra is self.dra_view(meta.namespace))):
                priority, pclass, pod_sets = self._from_spec_anew(spec, limits, meta.namespace)
        else:  # decoded in full: its spec is its own object, so there is nothing to recognise
            priority, pclass = self._spec_priority(spec)
            pod_sets = self._pod_sets_under(limits, meta.namespace, spec)
        if meta.labels and MULTIKUEUE_ORIGIN_LABEL in meta.labels:
            priority = copy_priority(spec)
        annotations = meta.annotations
        if annotations:
            boost_annotation = annotations.get(PRIORITY_BOOST_ANNOTATION, "")
            gate = annotations.get(ADMISSION_GATED_BY_ANNOTATION, "")
            parameters = provreq_parameters(annotations)
            metric_annotations = self._metric_annotations(annotations)
            replaces = annotations.get(SLICE_REPLACEMENT_FOR_ANNOTATION, "")
            component = component_index(annotations)
            elastic = annotations.get(ELASTIC_JOB_ANNOTATION) == "true"
            allowed = allowed_flavors(annotations.get(ALLOWED_FLAVORS_ANNOTATION))
            threshold = unhealthy_threshold_of(annotations.get(UNHEALTHY_NODES_THRESHOLD_ANNOTATION))
            own = own_timeouts(annotations.get(WAIT_FOR_PODS_READY_ANNOTATION))
        else:  # most Workloads carry none: no lookups
            boost_annotation = gate = replaces = ""
            parameters = metric_annotations = ()
            component = allowed = threshold = own = None
            elastic = False
        boost = 0
        if boost_annotation and self.priority_boost:
            boost = boost_of(boost_annotation)
            priority += boost
        if old is None:
            created = parse_time(meta.creation_timestamp) if meta.creation_timestamp else self.time
            wl = WorkloadInfo(
                key=key, uid=meta.uid, namespace=meta.namespace, name=meta.name,
                queue_name=spec.queue_name, created=created, priority=priority, priority_class=pclass,
                pod_sets=pod_sets, active=spec.active, labels=dict(meta.labels),
                resource_version=meta.resource_version, generation=meta.generation,
                owner=(owner := owner_of(meta)),
                owner_uid=(uid := grouped_owner_uid(meta, owner)) or variants.kept_uid(meta, owner),
            )  # (at most 15 keywords: with more, Python passes them in a dict built for the call)
            wl.max_execution_seconds = spec.maximum_execution_time_seconds
            wl.pod_owned = bool(meta.owner_references) and owned_by_single_pod(meta)
            if annotations:  # what they say; without any, the defaults. (Not passed above: msgspec matches every
                # keyword of a constructor against each field left to its default, ~5,000 instructions for these.)
                wl.provreq_parameters, wl.admission_gate, wl.metric_annotations = parameters, gate, metric_annotations
                wl.boost, wl.boost_annotation, wl.replaces, wl.elastic = boost, boost_annotation, replaces, elastic
                wl.component_index, wl.allowed_flavors, wl.unhealthy_threshold = component, allowed, threshold
                wl.own_pods_ready = own
            if spec.preemption_gates:
                self._take_gates(wl, spec.preemption_gates, w.status.preemption_gates)
            self.pod_templates[key] = shared_spec_templates(spec) if type(w) is LazyWorkload else pod_templates(spec)
            self._take_observed_status(wl, w)
            self.workloads[key] = wl
            self.reflag(wl)
            self.lq_members.setdefault(f"{wl.namespace}/{wl.queue_name}", {})[key] = None
            if uid is not None:
                self.owner_groups.setdefault(uid, {})[key] = None
            elif owner and owner[1] == "Workload":  # a variant (the kind first: most owners are no Workload)
                variants.index(self, wl)
            self._enqueue(wl)
            return False
        wl = old
        wl.resource_version = meta.resource_version
        external = (self._external_dispatcher if self._dispatcher_of is self.config  # every upsert asks: no
                    else self.external_dispatcher)                                  # property call when known
        if external and wl.reserving and not wl.cluster_name:
            self._take_external_nominations(wl, w)
        rechecked = bool(wl.check_states or wl.shown_checks) and self._take_external_checks(wl, w)
        targeted = wl.active and self._take_deactivation_target(wl, w)
        reparented = False
        if wl.labels != meta.labels:
            was_parent = is_parent(wl)
            wl.labels = dict(meta.labels)
            reparented = was_parent != is_parent(wl) and self.concurrent_admission
        wl.provreq_parameters = parameters
        if metric_annotations or wl.metric_annotations:
            wl.metric_annotations = metric_annotations
        wl.replaces = replaces
        wl.elastic = elastic
        wl.unhealthy_threshold = threshold
        wl.component_index = component
        refs, owner = meta.owner_references, wl.owner
        if (len(refs) == 1 and owner and (ref := refs[0]).name == owner[2] and ref.kind == owner[1]
                and ref.api_version == owner[0]):
            # the one owner it had (every echo of a Job's workload): owner_of's answer again, and only a Pod
            # owner's group annotation can change what owned_by_single_pod says
            if wl.pod_owned or ref.kind == "Pod":
                wl.pod_owned = owned_by_single_pod(meta)
        elif refs or owner or wl.pod_owned:
            wl.pod_owned = owned_by_single_pod(meta)
            wl.owner = owner_of(meta, owner)
        if grouped_owner(wl.owner) or (owner is not wl.owner and grouped_owner(owner)):
            self._reindex_owner(wl, meta, owner)
        if (wl.owner and wl.owner[1] == "Workload") or (owner is not wl.owner and owner and owner[1] == "Workload"):
            variants.reindex(self, wl, meta, owner)  # a variant, or one no more
        regated = gate != wl.admission_gate
        if regated:
            wl.admission_gate = gate
        was_gated = wl.preemption_gated
        if spec.preemption_gates or wl.gate_states or wl.spec_gates or was_gated:  # (status read only then: a
            # LazyWorkload decodes it whole) a spec that drops its gates leaves their entries, read for the sync
            self._take_gates(wl, spec.preemption_gates, w.status.preemption_gates)
        regated_preemption = wl.preemption_gated != was_gated  # a gate opened or closed: back to the heap (Kueue)
        reflavored = allowed != wl.allowed_flavors
        if reflavored:
            wl.allowed_flavors = allowed
        reboosted = False
        if boost_annotation != wl.boost_annotation:
            wl.boost_annotation = boost_annotation
            reboosted = self.priority_boost  # Kueue requeues on a changed annotation only under the gate
        generation = meta.generation
        active = spec.active
        templates_before = None  # of the spec before, when this one may differ
        regenerated = bool(generation) and wl.generation != generation  # not a log without generations' echo
        if not generation or wl.generation != generation:  # status-only upserts keep the generation
            templates_before = self.pod_templates.get(key)
            self.pod_templates[key] = pod_templates(spec, templates_before)
            wl.generation = generation
        elif active and not wl.active:
            # Deactivated by a decision (Kueue's own deactivations) whose spec.active=false the apiserver does not
            # show yet: this is the spec of the generation it was deactivated at, not a reactivation (which, as
            # any spec change, makes a new generation).
            active = False
        if templates_before is None and spec.pod_sets and spec.pod_sets[0].template.digest is not None:
            self._take_template_digests(key, spec)
        retimed = wl.max_execution_seconds != spec.maximum_execution_time_seconds or wl.own_pods_ready != own
        wl.max_execution_seconds = spec.maximum_execution_time_seconds
        wl.own_pods_ready = own
        new_sets = (wl.pod_sets if wl.spec_pod_sets is None else wl.spec_pod_sets) != pod_sets  # wl.spec_sets
        changed = (new_sets or wl.priority != priority or wl.active != active
                   or wl.queue_name != spec.queue_name or regated or reboosted or reflavored or reparented
                   or regated_preemption)
        respecced = regenerated or (changed and templates_before is not None)
        if respecced and wl.phase == PENDING and wl.cluster_queue:
            # Kueue's IsPreemptor compares the generation it was evaluated at: a new one, even one that
            # changes nothing it is queued on (maximumExecutionTimeSeconds), or in a log without generations
            # a changed spec, is not the preemptor (oracle-queue's reading)
            q = self.queues.get(wl.cluster_queue)
            if q is not None and q.preemptor == key:
                q.preemptor = None
        if not changed:
            # phase, conditions, pods ready and activity are as they were: only the limit and the checks count
            return not retimed and not rechecked and not targeted
        renamed = wl.queue_name != spec.queue_name
        if renamed:
            self.lq_members.get(f"{wl.namespace}/{wl.queue_name}", {}).pop(key, None)
            self.lq_members.setdefault(f"{wl.namespace}/{spec.queue_name}", {})[key] = None
        deactivated = wl.active and not active
        gated = regated and bool(gate) and self.admission_gated_by
        reprioritised = wl.priority != priority
        if new_sets or reprioritised or deactivated or gated or reflavored or reparented:
            wl.scan = None  # its scheduling shape changed, or it leaves the queue: the progress is meaningless
        if new_sets:
            if wl.reserving and templates_before is not None:
                # the spec's pod sets changed, not only what adjusts them, and the Workload shows no reservation
                shown = w.status  # decoded anew at each read of a LazyWorkload: read once
                if not has_quota_reservation(shown) and self._adjusted_now(wl, templates_before) != pod_sets:
                    self._forget_reservation(wl, shown)
            self._take_pod_sets(wl, pod_sets)
            if wl.reserving:
                self.tas.charge(wl)  # Kueue takes TAS usage from the pod template, so it follows a changed template
                if (wl.admission is not None and self._rescale_usage(wl) and wl.phase == ADMITTED
                        and wl.cluster_queue):
                    self._flush_tree(wl.cluster_queue)  # it holds less: parked workloads may fit now
        wl.priority, wl.priority_class, wl.boost = priority, pclass, boost
        wl.active, wl.queue_name = active, spec.queue_name
        if wl.phase == PENDING:
            # another LocalQueue: Kueue deletes it from its queues, as sticky head and preemptor too; else
            # updated in place, it stays the sticky head (its preemptor mark went above with a new generation)
            self._dequeue(wl, forget=renamed)
            self._enqueue(wl)
        if (deactivated or (reprioritised and wl.reserving)) and wl.cluster_queue:
            self._flush_tree(wl.cluster_queue)  # reference §3.7: parked workloads may preempt it (or fit) now
        self.reflag(wl)
        return False

    def _reindex_owner(self, wl: WorkloadInfo, meta: o.ObjectMeta, before: tuple[str, ...]) -> None:
        """``wl``'s owner was, or is, of a :data:`GROUPED_OWNERS` kind (``before``: its owner before this upsert):
        its owner UID and place in :attr:`owner_groups` follow its owner references."""
        uid = grouped_owner_uid(meta, wl.owner)
        was = wl.owner_uid if grouped_owner(before) else None
        if uid == was:
            return
        if was is not None:
            self._unindex_owner(wl.key, was)
        wl.owner_uid = uid or ""
        if uid is not None:
            self.owner_groups.setdefault(uid, {})[wl.key] = None

    def _unindex_owner(self, key: str, uid: str) -> None:
        members = self.owner_groups.get(uid)
        if members is not None:
            members.pop(key, None)
            if not members:
                del self.owner_groups[uid]

    def _take_deactivation_target(self, wl: WorkloadInfo, w: o.Workload | LazyWorkload) -> bool:
        """An active workload whose Workload now shows DeactivationTarget=True (another controller asks Kueue to
        deactivate it: a MultiKueue manager on its worker's copy) holds that condition, which the controller rules
        turn into its deactivation, as Kueue's workload controller does. True when the fold did not hold it so.
        (A lazily decoded status is only decoded when its bytes name the condition: most upserts do not.)"""
        if type(w) is LazyWorkload:
            raw = w.status_raw
            # find, not ``in``: ``bytes in bytes`` first tries the needle as an int, and the TypeError it builds
            # and drops costs ~3x the search, at nearly every upsert
            if not raw or bytes(raw).find(_TARGET_BYTES) < 0:
                return False
        shown = next((c for c in w.status.conditions if c.type == DEACTIVATION_TARGET and c.status == "True"), None)
        if shown is None or wl.condition(DEACTIVATION_TARGET) == shown:
            return False
        wl.conditions = (*(c for c in wl.conditions if c.type != DEACTIVATION_TARGET), shown)
        self.reflag(wl)
        return True

    def _forget_reservation(self, wl: WorkloadInfo, shown: o.WorkloadStatus) -> None:
        """``wl`` holds a reservation the Workload, rewritten with other pod sets, does not show (``shown``): one the
        apiserver never accepted, since Kueue's webhook keeps the pod sets of a Workload holding quota as they are.
        Its status write conflicts, and Kueue's scheduler forgets such an assumed workload and requeues it, writing
        nothing: its usage is released, it is pending again (queued with the new pod sets by the caller), and what
        the reservation set (its conditions, the emptied ``resourceRequests``) is as the Workload shows it."""
        cq = wl.cluster_queue
        self.reservation_forgotten = (self.offset, wl.key)
        wl.reservation_forgotten = True
        uncount_reservation(self.metrics, self, wl)  # Kueue counts a reservation only once written
        self._release(wl)
        self.awaiting_release.discard(wl.key)
        wl.admission, wl.usage, wl.phase = None, {}, PENDING
        wl.reserved_at = wl.admitted_at = None
        wl.cluster_name, wl.nominated, wl.remotes = "", (), None  # nothing was dispatched for it: none speaks for it
        wl.pods_ready = False
        wl.shows_requests = bool(shown.resource_requests) and shown.admission is None
        theirs = {c.type: c for c in shown.conditions if c.type in _RESERVATION_CONDITIONS}
        conditions = [theirs.pop(c.type, None) if c.type in _RESERVATION_CONDITIONS else c for c in wl.conditions]
        wl.conditions = (*[c for c in conditions if c is not None], *theirs.values())
        if wl.check_states:  # a check kueue-es's own controller set on the reservation (provisioning not needed:
            # Ready) goes back to what the Workload shows, as nothing of that reservation was written; listed still
            shown_checks = {c.name: c for c in shown.admission_checks}
            now = format_time(self.time)
            wl.check_states = {n: shown_checks.get(n) or o.AdmissionCheckState(name=n, state="Pending",
                                                                                last_transition_time=now)
                               for n in wl.check_states}
        evicted = wl.condition("Evicted")
        wl.evicted = (evicted.reason or "Evicted") if _true(evicted) else ""
        wl.cluster_queue = ""
        if cq:
            self._flush_tree(cq)  # it holds nothing now: parked workloads may fit

    def _take_observed_status(self, wl: WorkloadInfo, w: o.Workload | LazyWorkload) -> None:
        """A workload first seen with status (admitted before kueue-es started) keeps what it shows."""
        st = w.status
        if st == _NO_STATUS:
            return  # shown as created, with no status (most new workloads): its defaults are what it shows
        if st.preemption_gates and not wl.spec_gates:  # of gates its spec no longer names: listed for the sync
            self._take_gates(wl, [], st.preemption_gates)
        wl.conditions = tuple(st.conditions)
        wl.check_states = {c.name: c for c in sorted(st.admission_checks, key=lambda c: c.name)}
        wl.shown_checks = self._external_states(st.admission_checks)
        if st.requeue_state is not None:
            wl.requeue_count = st.requeue_state.count or 0
            if st.requeue_state.requeue_at:
                wl.requeue_at = parse_time(st.requeue_state.requeue_at)
        wl.accumulated_seconds = st.accumulated_past_execution_time_seconds or 0
        wl.unhealthy_nodes = tuple(n.name for n in st.unhealthy_nodes)
        if st.scheduling_stats is not None:
            wl.evictions = eviction_stats.shown(st)
        wl.shows_requests = bool(st.resource_requests) and st.admission is None
        wl.reclaimable = reclaimable_of(st.reclaimable_pods)
        if wl.reclaimable:
            self._take_pod_sets(wl, wl.pod_sets)
        cond = {c.type: c for c in st.conditions}
        ev_ = cond.get("Evicted")
        if ev_ is not None and ev_.status == "True":
            wl.evicted = ev_.reason or "Evicted"
        pr = cond.get("PodsReady")
        wl.pods_ready = pr is not None and pr.status == "True"
        if _true(cond.get("Finished")):
            wl.phase = FINISHED
            return
        qr = cond.get("QuotaReserved")
        if st.admission is not None and _true(qr):
            wl.admission = st.admission
            wl.cluster_queue = st.admission.cluster_queue
            wl.usage = admission_usage(st.admission, wl)
            wl.reserved_at = _ms(qr)
            wl.phase = RESERVED
            self._sync_checks(wl)
            adm = cond.get("Admitted")
            if _true(adm):
                wl.phase = ADMITTED
                wl.admitted_at = _ms(adm)
            if not wl.evicted:
                self._take_shown_dispatch(wl, st)
            self._charge(wl)
            if self._afs_counted(wl):  # found holding quota, not admitted by a decision: no entry penalty (Kueue
                self._afs_append(wl, AFS_ADD)  # pushes one only as its scheduler admits), whatever was seen first
        # on the backoff clock only if something waits on that time, read once its reservation and eviction
        # are: a requeueAt raised on a workload never evicted (RequeueAtRaised's) ends in no BackoffFinished,
        # but is cleared while the workload waits pending (RequeueAtCleared)
        if wl.requeue_at is not None and waits_on_requeue_at(wl):
            self.backoff[wl.key] = wl.requeue_at

    def _take_shown_dispatch(self, wl: WorkloadInfo, st: o.WorkloadStatus) -> None:
        """MultiKueue: a workload first seen holding quota, not evicted, runs on the worker its
        ``status.clusterName`` names, else is nominated for its ``status.nominatedClusterNames``, as Kueue's
        MultiKueue controller reads both from the Workload (its copies kept there, its lost worker given the
        ``workerLostTimeout`` grace). Nominations shown take the log's time as their round's start."""
        if st.cluster_name:
            wl.cluster_name = st.cluster_name
        elif st.nominated_cluster_names:
            wl.nominated, wl.nominated_at = tuple(st.nominated_cluster_names), self.time

    def _sync_checks(self, wl: WorkloadInfo, queue: str | None = None) -> None:
        """List the checks that apply to ``wl`` in its ClusterQueue (``queue``, else the one it is in): missing
        ones are added as Pending (stamped now), extra ones dropped, sorted by name. Nothing happens while the
        ClusterQueue is unknown."""
        name = wl.cluster_queue if queue is None else queue
        cq = self.cluster_queues.get(name) if name else None
        if cq is None:
            return
        strategy = cq.spec.admission_checks_strategy
        if not wl.check_states and (strategy is None or not strategy.admission_checks):
            return  # the common case: no checks, none listed
        adm = wl.admission
        # the queue's flavors are those in force: its effectiveQuotas' under DynamicQuotaOrchestration, as Kueue's
        # workload controller reads the ClusterQueue's resource groups through its effective-groups helper
        names = applicable_checks(effective_quotas.in_force(cq, self.dynamic_quotas).spec, None if adm is None else
                                  [f for psa in adm.pod_set_assignments for f in psa.flavors.values()])
        current = wl.check_states
        if len(current) == len(names) and list(current) == names:
            return
        now = format_time(self.time)
        wl.check_states = {n: current.get(n) or o.AdmissionCheckState(name=n, state="Pending", last_transition_time=now)
                           for n in names}
        added = [n for n in names if n not in current]
        wl.unshown_checks = unshown_with(wl.unshown_checks, added, self.offset, names,
                                         already_shown(wl.shown_checks, wl.check_states, added))

    def _resync_checks(self, cq: str) -> None:
        """A ClusterQueue's check rules or flavors changed: re-list the checks of the workloads in it."""
        keys = set(self.reserving.get(cq, ()))
        q = self.queues.get(cq)
        if q is not None:
            keys.update(q.shapes)
        for key in sorted(keys):
            self._sync_checks(self.workloads[key])

    def reflag(self, wl: WorkloadInfo) -> None:
        """Keep ``wl``'s membership of :attr:`flagged` and :attr:`retained` current (called after its status or
        activity changed)."""
        if is_flagged(wl):
            self.flagged[wl.key] = None
        else:
            self.flagged.pop(wl.key, None)
        if is_retained(wl):
            self.retained[wl.key] = None
        else:
            self.retained.pop(wl.key, None)

    def _reprioritise(self, group: str, name: str) -> None:
        self.spec_inputs_generation += 1
        for key in sorted(self.workloads):
            wl = self.workloads[key]
            if wl.priority_class != name or MULTIKUEUE_ORIGIN_LABEL in wl.labels:  # a copy keeps the manager's
                continue
            value = (self.workload_priority_classes.get(name) if group == WPC_GROUP else self.priority_classes.get(name))
            if value is None or value.value == wl.base_priority:
                continue
            wl.priority = value.value + wl.boost
            self._priority_changed(wl)
            if wl.reserving and wl.cluster_queue:
                self._flush_tree(wl.cluster_queue)

    def _reboost_all(self) -> None:
        """The configuration turned ``PriorityBoost`` on or off: every workload whose annotation gives a boost
        takes it, or drops it (a restarted Kueue reads every workload's effective priority anew)."""
        on = self.priority_boost
        for key in sorted(self.workloads):
            wl = self.workloads[key]
            boost = boost_of(wl.boost_annotation) if on and wl.boost_annotation else 0
            if boost != wl.boost:
                wl.priority += boost - wl.boost
                wl.boost = boost
                self._priority_changed(wl)

    def _priority_changed(self, wl: WorkloadInfo) -> None:
        """``wl``'s effective priority changed: a pending workload takes its new place (and shape) in its queue."""
        wl.scan = None  # the scheduling shape includes the priority
        self.touched[wl.key] = None
        if wl.phase == PENDING:
            self._dequeue(wl, forget=False)
            self._enqueue(wl)

    # --- queueing -------------------------------------------------------------------------------------------

    def sort_key(self, wl: WorkloadInfo) -> SortKey:
        return (-wl.priority, self.queue_order.time(wl), wl.uid, wl.key)

    def _rekey_all(self) -> None:
        """The queue order changed: every queued workload takes its new sort key, where it waits (heap or
        parked)."""
        workloads = self.workloads
        for cq in sorted(self.queues):
            self.queues[cq].rekey(lambda key: self.sort_key(workloads[key]))

    def target_cluster_queue(self, wl: WorkloadInfo) -> str | None:
        """The ClusterQueue a pending workload queues in, or None when its LocalQueue is missing or stopped."""
        lq = self.local_queues.get(f"{wl.namespace}/{wl.queue_name}")
        if lq is None or lq.spec.stopped:
            return None
        return lq.spec.cluster_queue or None

    def add_workload(self, wl: WorkloadInfo, templates_of: str) -> None:
        """Take in a workload a decision made (a ``ConcurrentAdmission`` variant), its pod templates those of
        workload ``templates_of``, and queue it as a new one (:mod:`projections.variants`)."""
        key = wl.key
        templates = self.pod_templates.get(templates_of)
        if templates is not None:
            self.pod_templates[key] = templates
        self.workloads[key] = wl
        self.reflag(wl)
        self.lq_members.setdefault(f"{wl.namespace}/{wl.queue_name}", {})[key] = None
        variants.index(self, wl)
        self._enqueue(wl)

    def take_admission(self, wl: WorkloadInfo, admission: o.Admission, time: int) -> None:
        """A pending workload is admitted with ``admission`` without holding any quota (a ``ConcurrentAdmission``
        parent shows its variant's admission, :mod:`projections.variants`): it leaves its queue and joins no
        ClusterQueue's holders."""
        self._dequeue(wl)
        wl.admission, wl.cluster_queue, wl.usage = admission, admission.cluster_queue, {}
        wl.phase, wl.scan, wl.waited, wl.evicted = ADMITTED, None, (), ""
        wl.reserved_at = wl.admitted_at = time
        wl.job_stopped = wl.pods_ready = False
        wl.shows_requests = False
        self._keep_pods_ready(wl, False, time)
        self.reflag(wl)

    def delete_workload(self, key: str) -> None:
        """A workload a decision deletes (a ``ConcurrentAdmission`` variant whose flavor left its ClusterQueue) is
        gone, as when the watch shows it deleted."""
        self._delete_object("Workload", key)

    def requeue(self, wl: WorkloadInfo) -> None:
        """A pending workload's queueing inputs changed (its activity, its labels): it leaves its queue and joins
        it again where it now belongs, if anywhere."""
        self._dequeue(wl)
        self._enqueue(wl)
        self.reflag(wl)

    def flush_queue(self, cq: str) -> None:
        """What a workload holding ``cq``'s quota does changed: its parked workloads go back to its heap."""
        self._flush_tree(cq)

    def _enqueue(self, wl: WorkloadInfo, *, moved: bool = False) -> None:
        """Queue a pending workload in its ClusterQueue (or out of every queue while held). ``moved``: its
        LocalQueue now names another ClusterQueue; as in Kueue v0.20, whatever parked it in the old queue (a failed
        attempt, a parked shape, its requeue backoff) does not follow it: it arrives active in the new one."""
        if (wl.phase != PENDING or not wl.active or (wl.admission_gate and self.admission_gated_by)
                or held_by_conditions(wl) or workload_problem(wl.pod_sets)
                or (wl.labels and is_parent(wl) and self.concurrent_admission)):
            self._dequeue(wl)
            if wl.phase == PENDING:
                if wl.active:  # held out of its queue (gated, refused): queued nowhere, as one held from the start
                    wl.cluster_queue = ""
                self._sync_checks(wl, self.target_cluster_queue(wl))
            return
        cq = self.target_cluster_queue(wl)
        if cq is None:
            self._dequeue(wl)
            wl.cluster_queue = ""
            wl.scan = None
            return
        if wl.cluster_queue and wl.cluster_queue != cq:
            self._dequeue(wl)
            wl.scan = None
        wl.cluster_queue = cq
        self._sync_checks(wl)
        requeued = wl.condition("Requeued")
        parked = not moved and ((wl.requeue_at is not None and wl.requeue_at > self.time) or (
            requeued is not None and requeued.status == "False"
        ))
        self.queue(cq).push(wl.key, self.sort_key(wl), self.shape_of(wl), parked=parked,
                            local_queue=(wl.namespace, wl.queue_name), moved_in=moved)

    def _dequeue(self, wl: WorkloadInfo, *, forget: bool = True) -> None:
        """Take ``wl`` out of its ClusterQueue's queue. Without ``forget`` it is about to be queued again
        (Kueue's ``PushOrUpdate`` of an updated pending workload): it stays its queue's sticky head and
        preemptor if it was, unless :meth:`_enqueue` finds it belongs elsewhere now
        (:meth:`ClusterQueueQueue.remove`)."""
        if wl.cluster_queue:
            q = self.queues.get(wl.cluster_queue)
            if q is not None:
                q.remove(wl.key, forget=forget)

    def _flush_all(self) -> None:
        self.flushes = {"*": self.offset}  # supersedes every narrower mark
        for cq in sorted(self.queues):
            self._flush_queue(cq)

    def _flushed_since(self, cq: str, offset: int) -> bool:
        """Whether ``cq``'s parked workloads were sent back after ``offset``. In Kueue a requeue of a
        ClusterQueue's inadmissible workloads while its head is being scheduled sends that head back to the
        heap however it failed (``requeueIfNotPresent``: ``queueInadmissibleCycle >= popCycle``,
        cluster_queue_test.go TestQueueInadmissibleWorkloadsDuringScheduling): the flush it missed may have
        made it admissible."""
        flushes = self.flushes
        if not flushes:
            return False
        latest = max(flushes.get("*", -1), flushes.get("q:" + cq, -1),
                     flushes.get(self.forest.cq_root(cq), -1))
        return latest > offset

    def _flush_newly_selecting(self, old: dict[str, str] | None, new: dict[str, str]) -> None:
        """A Namespace came or changed from labels ``old`` (None: not seen before) to ``new``: only the ClusterQueues
        whose namespaceSelector selects it now and did not before send their parked workloads back, as Kueue's
        ClusterQueue controller does on a Namespace update (v0.20's namespace handler); other queues' parked
        workloads wait for what concerns them. A namespace first seen counts as selected by none before."""
        if old == new:
            return
        for cq in sorted(self.queues):
            spec = self.cluster_queues.get(cq)
            selector = spec.spec.namespace_selector if spec is not None else None
            if selector_matches(selector, new) and not selector_matches(selector, old):
                self.flushes["q:" + cq] = self.offset
                self._flush_queue(cq)

    def _flush_tree(self, cq: str) -> None:
        """Mark a flush of ``cq``'s cohort tree and send that tree's parked workloads back. The mark is
        written even with nothing parked (a head decided on before it must not park), but its root comes from
        the spec links while the forest is not built: every ClusterQueue creation drops the forest and flushes
        its tree, and building it there made N creations cost N growing forests."""
        forest = self._forest
        if forest is not None:  # CohortForest.cq_root inlined: this runs at every flush, parked or not
            node = "cq:" + cq
            root = forest.root.get(node, node)
        else:
            root = spec_root(self.cluster_queues, self.cohorts, cq)
        self.flushes[root] = self.offset
        parked = self.parked_queues
        if not parked:
            return  # nothing parked anywhere: no need to (re)build the cohort forest
        forest = self.forest
        for name in sorted(parked):
            if forest.cq_root(name) != root:
                continue
            q = self.queues.get(name)
            if q is not None and q.inadmissible:
                self._flush_queue(name)
            elif q is not None:
                q.parked_shapes.clear()
            if q is None or not (q.inadmissible or q.parked_shapes):
                parked.discard(name)

    def _flush_queue(self, cq: str) -> None:
        q = self.queues.get(cq)
        if q is None or not q.inadmissible:
            if q is not None:
                q.parked_shapes.clear()
            return
        spec = self.cluster_queues.get(cq)
        selector = spec.spec.namespace_selector if spec is not None else None

        def eligible(key: str) -> bool:
            wl = self.workloads[key]
            if wl.requeue_at is not None and wl.requeue_at > self.time:
                return False
            rq = wl.condition("Requeued")
            if rq is not None and rq.status == "False":
                return False
            return spec is None or selector_matches(selector, self.namespaces.get(wl.namespace))

        q.flush(eligible)

    # --- decisions ------------------------------------------------------------------------------------------

    def _charge(self, wl: WorkloadInfo, sign: int = 1) -> None:
        if not wl.cluster_queue:
            return
        cq = wl.cluster_queue
        members = self.reserving.get(cq)  # not setdefault(cq, {}): that builds a dict per call, to drop it
        if members is None:
            members = self.reserving[cq] = {}
        if sign > 0:
            members[wl.key] = None
        else:
            members.pop(wl.key, None)
        usage = self.usage.get(cq)
        if usage is None:
            usage = self.usage[cq] = {}
        for fr, v in wl.usage.items():
            usage[fr] = usage.get(fr, 0) + sign * v
        if self._quota is not None:
            self._quota.charge(cq, wl.usage, sign)
        if sign > 0:
            self.tas.charge(wl)
        else:
            self.tas.release(wl.key)

    def _release(self, wl: WorkloadInfo) -> None:
        if wl.kept_nodes:  # its placement goes: nothing is kept on a failed node any more
            wl.kept_nodes = ()
            self.keeping.pop(wl.key, None)
        if wl.phase in HOLDING:
            if self._afs_counted(wl):
                self._afs_record(wl, -1)
            self._charge(wl, -1)

    def _reserve(self, e: ev.QuotaReserved) -> None:
        wl = self.workloads.get(e.key)
        if wl is None or wl.phase in HOLDING or wl.phase == FINISHED:
            return
        self._dequeue(wl)
        wl.admission = e.admission
        wl.cluster_queue = e.admission.cluster_queue
        wl.usage = admission_usage(e.admission, wl)
        wl.phase = RESERVED
        wl.reservation_forgotten = False
        wl.scan = None
        wl.waited = ()
        wl.shows_requests = False  # the admission's resourceUsage supersedes them: Kueue empties them in that write
        wl.reserved_at = e.time
        wl.job_stopped = False
        wl.pods_ready = False
        self.forget_create_failures(wl)
        self._sync_checks(wl)
        self._charge(wl)
        if self._afs_counted(wl):
            self._afs_record(wl, 1)
        wl.set_condition("QuotaReserved", "True", "QuotaReserved",
                         e.message or f"Quota reserved in ClusterQueue {wl.cluster_queue}", e.time)
        for c in wl.conditions:  # in one pass, each the first of its type; each keeps its place: the order is moot
            if c.status == "True" and c.type in _CLEARED_BY_RESERVATION and wl.condition(c.type) is c:
                wl.set_condition(c.type, "False", "QuotaReserved", f"Previously: {c.message}", e.time)
        wl.evicted = ""
        self._sync_admitted(wl, e.time)  # no Admitted=True yet: that is WorkloadAdmitted's
        self._keep_pods_ready(wl, False, e.time)
        self.reflag(wl)

    def _unadmitted(self, granular: str) -> str:
        """The QuotaReserved=False reason for ``granular`` under the configuration's UnadmittedWorkloadsObservability
        (:func:`projections.workloads.unadmitted_reason`)."""
        return unadmitted_reason(granular, self.gate(gates.UNADMITTED_WORKLOADS_OBSERVABILITY))

    def _sync_admitted(self, wl: WorkloadInfo, time: int) -> None:
        """Kueue's ``SyncAdmittedCondition`` for a workload short of admission (:mod:`projections.admitted_condition`);
        the admitted time is accumulated by the caller."""
        sync_unadmitted(wl, time, self.gate(gates.UNADMITTED_WORKLOADS_OBSERVABILITY))

    def _admitted(self, e: ev.WorkloadAdmitted) -> None:
        wl = self.workloads.get(e.key)
        if wl is None or wl.phase != RESERVED or (
                wl.check_states and any(s.state == "Rejected" for s in wl.check_states.values())):
            return  # never Admitted=True while a check is Rejected (Kueue v0.20, #14309)
        settled = self._afs_counted(wl)  # under the reservation anchor, settled when it reserved
        wl.phase = ADMITTED
        wl.admitted_at = e.time
        wl.set_condition("Admitted", "True", "Admitted", e.message or "The workload is admitted", e.time)
        self._keep_pods_ready(wl, wl.pods_ready, e.time)
        if not settled and self._afs_counted(wl):
            self._afs_record(wl, 1)

    def _pending(self, e: ev.WorkloadPending) -> None:
        wl = self.workloads.get(e.key)
        if wl is None or wl.phase != PENDING:
            return
        held = on_hold(wl)
        wl.set_condition("QuotaReserved", "False", e.reason, e.message, e.time)
        self._sync_admitted(wl, e.time)  # in the same write, as Kueue's scheduler and workload controller do
        if e.preemption_gated:
            wl.set_condition(BLOCKED_ON_PREEMPTION_GATES, "True", PREEMPTION_GATED, e.message, e.time)
        wl.scan = intern_scan(e.scan, e.cycle)
        wl.waited = e.waited
        if not wl.shows_requests and failed_attempt(e):
            wl.shows_requests = True
        self.reflag(wl)
        if held and not on_hold(wl):
            # a decision taken before the hold rewrote its condition: Kueue's update handler then queues it,
            # being on hold no more (until its controller holds it again)
            self._enqueue(wl)
            return
        q = self.queues.get(wl.cluster_queue)
        if q is None or wl.key not in q.shapes:
            return
        if not keeps_queued(wl, e.parked, wl.scan, e.time) and not (
                self._flushed_since(wl.cluster_queue, e.input) and backoff_over(wl, e.time)):
            bulk = e.requeue_reason in ("NoFit", "PreemptionNoCandidates") and self.gate(
                gates.SCHEDULING_EQUIVALENCE_HASHING)  # a failing workload parks its equivalent ones too
            for key in q.park(wl.key, bulk=bulk, reason=e.reason or "PendingEvaluation"):
                self.touched[key] = None  # the workload controller shows why they are parked
        elif e.requeue_reason in ("PendingPreemption", "PendingMigration"):
            q.preemptor = wl.key
            spec = self.cluster_queues.get(wl.cluster_queue)
            if spec is not None and spec.spec.queueing_strategy != "StrictFIFO":
                q.sticky = wl.key
        elif e.requeue_reason and wl.key in (q.preemptor, q.sticky):
            # requeued for another reason (its preemption failed, or another cycle found it something else to do):
            # Kueue v0.20 (#14863) forgets it as the preemptor and, under BestEffortFIFO, as the sticky head
            q.preemptor = q.sticky = None

    def _evicted(self, e: ev.WorkloadPreempted | ev.WorkloadEvicted) -> None:
        wl = self.workloads.get(e.key)
        if wl is None or not wl.reserving:
            return
        # kept until the outcome: a rejected eviction is taken back (:meth:`_on_outcome`)
        self._eviction_opened = eviction_undo.opened(self.offset, wl, self.backoff.get(wl.key),
                                                     wl.key in self.awaiting_release,
                                                     isinstance(e, ev.WorkloadPreempted))
        if variants.condition_only_eviction(wl, e):  # a parent: Kueue's variant controller writes the condition alone
            wl.set_condition("Evicted", "True", e.reason, e.message, e.time)
            wl.evicted = e.reason
        else:
            if not wl.evicted:  # one more in its record, in the eviction's own write (Kueue)
                wl.evictions = eviction_stats.counted(wl.evictions, *eviction_stats.reason_and_cause(e))
            if isinstance(e, ev.WorkloadPreempted):
                wl.set_condition("Preempted", "True", e.reason, e.message, e.time, generation=0)  # as Kueue's
                reason = "Preempted"
            else:
                reason = e.reason
            self._mark_evicted(wl, reason, e.message, e.time)
        if isinstance(e, ev.WorkloadEvicted) and e.requeue_at is not None:
            wl.requeue_at = max(e.requeue_at, wl.requeue_at or 0)
            wl.requeue_count = e.requeue_count if e.requeue_count is not None else wl.requeue_count + 1
            self.backoff[wl.key] = wl.requeue_at
        if wl.job_stopped:
            self.awaiting_release.add(wl.key)

    def _mark_evicted(self, wl: WorkloadInfo, reason: str, message: str, time: int) -> None:
        """What an eviction writes on the Workload besides its quota (Kueue's ``prepareForEviction``): Evicted=True,
        BlockedOnPreemptionGates False, every preemption gate closed, the unhealthy nodes, the MultiKueue cluster
        and nominations cleared, and the checks reset to Pending."""
        wl.set_condition("Evicted", "True", reason, message, time)
        blocked = wl.condition(BLOCKED_ON_PREEMPTION_GATES)
        if blocked is not None and blocked.status == "True":
            wl.set_condition(BLOCKED_ON_PREEMPTION_GATES, "False", reason, message, time)
        if wl.gate_states:  # every gate closed again: the preemption waits for its spec's to open anew
            wl.gate_states = closed_all(wl.gate_states, format_time(time))
            wl.preemption_gated = wl.preemption_gated or bool(wl.spec_gates)
        wl.evicted = reason
        wl.unhealthy_nodes = ()
        wl.cluster_name, wl.nominated, wl.remotes = "", (), None  # its copies go (connector): none speaks for it now
        _reset_checks(wl, time, self.offset)

    def _requeued(self, e: ev.WorkloadRequeued) -> None:
        wl = self.workloads.get(e.key)
        if wl is None or wl.phase == FINISHED:
            return
        if e.requeue_count is not None:
            wl.requeue_count = e.requeue_count
        if e.requeue_at is not None:
            wl.requeue_at = max(e.requeue_at, wl.requeue_at or 0)
            self.backoff[wl.key] = wl.requeue_at
        elif e.reason == "BackoffFinished":
            wl.requeue_at = None
            self.backoff.pop(wl.key, None)
        wl.set_condition("Requeued", "True" if e.status else "False", e.reason, e.message, e.time)
        if e.release and wl.reserving:
            if wl.admitted_at is not None:
                wl.accumulated_seconds += max(0, (e.time - wl.admitted_at) // 1000)
            self._give_back(wl, self._unadmitted("PendingEvaluation"), e.message, e.time)
        if wl.phase == PENDING:
            self._dequeue(wl, forget=False)
            self._enqueue(wl)
        self.reflag(wl)

    def _deactivated(self, e: ev.WorkloadDeactivated) -> None:
        wl = self.workloads.get(e.key)
        if wl is None:
            return
        wl.active = False
        wl.scan = None
        wl.requeue_at, wl.requeue_count = None, 0
        if wl.condition(DEACTIVATION_TARGET) is not None:  # Kueue removes it with the deactivation's eviction
            wl.conditions = tuple(c for c in wl.conditions if c.type != DEACTIVATION_TARGET)
        self.backoff.pop(wl.key, None)
        if wl.reserving:
            evicted = wl.condition("Evicted") if wl.evicted else None
            if evicted is None:
                wl.evictions = eviction_stats.counted(wl.evictions, *eviction_stats.reason_and_cause(e))
                self._mark_evicted(wl, e.reason, e.message, e.time)
            # else: already being evicted (a check Rejected during the eviction, Kueue #14309): Kueue's controller
            # deactivates without a second eviction, so the first one's condition stays
            self._release(wl)
            self.awaiting_release.discard(wl.key)
            if e.reason == MAX_EXECUTION_EXCEEDED:
                wl.accumulated_seconds = 0  # Kueue clears it with the deactivation; the last run is added back below
            if wl.admitted_at is not None:
                wl.accumulated_seconds += max(0, (e.time - wl.admitted_at) // 1000)
            wl.admission, wl.usage, wl.phase = None, {}, PENDING
            wl.reserved_at = wl.admitted_at = None
            self._refresh_pod_sets(wl)
            # Kueue's job reconciler gives the quota back with PendingEvaluation (Pending, the gate off) and the
            # eviction's message; the workload controller then shows Deactivated, under the gate only
            wl.set_condition("QuotaReserved", "False", self._unadmitted("Deactivated"), "The workload is deactivated",
                             e.time)
            self._sync_admitted(wl, e.time)
            self._keep_pods_ready(wl, False, e.time)
            if evicted is None:
                wl.set_condition("Requeued", "False", e.reason, e.message, e.time)
            else:  # what Kueue's job reconciler writes once that eviction's job stopped: its reason and message
                requeued = "True" if evicted.reason in ("Preempted", "NodeFailures") else "False"
                wl.set_condition("Requeued", requeued, evicted.reason, evicted.message, e.time)
            self._sync_checks(wl)
        elif wl.phase == PENDING and not _true(wl.condition("Evicted")):
            self._evict_unreserved(wl, e)
        self._dequeue(wl)
        self.reflag(wl)
        if wl.cluster_queue:
            self._flush_tree(wl.cluster_queue)

    def _requeue_state_cleared(self, e: ev.RequeueStateCleared) -> None:
        """An inactive workload already evicted loses its requeue count and backoff, and nothing else."""
        wl = self.workloads.get(e.key)
        if wl is None or wl.phase == FINISHED:
            return
        wl.requeue_at, wl.requeue_count = None, 0
        self.backoff.pop(wl.key, None)

    def _requeue_at_raised(self, e: ev.RequeueAtRaised) -> None:
        """A Retry check reported late pushes ``requeueAt`` out (never earlier; the count kept). A workload
        waiting out a backoff (:func:`waits_on_backoff`) is requeued only then, one waiting pending has that
        time cleared then (:func:`waits_on_requeue_at`); where any workload waits in its queue is left alone,
        as Kueue's queue manager leaves it on a change of its requeue state alone, but one parked is not
        flushed back before that time."""
        wl = self.workloads.get(e.key)
        if wl is None or wl.phase == FINISHED:
            return
        wl.requeue_at = max(e.requeue_at, wl.requeue_at or 0)
        if wl.key in self.backoff or waits_on_requeue_at(wl):
            self.backoff[wl.key] = wl.requeue_at

    def _requeue_at_cleared(self, e: ev.RequeueAtCleared) -> None:
        """A passed ``requeueAt`` of a pending workload goes, and nothing else: its count, its conditions and
        where it waits in its queue stay."""
        wl = self.workloads.get(e.key)
        if wl is None or wl.phase == FINISHED:
            return
        wl.requeue_at = None
        self.backoff.pop(wl.key, None)

    def _unset_reservation(self, e: ev.QuotaReservationUnset) -> None:
        """A workload holding quota, not admitted, whose queue is stopped, missing or terminating gives its quota
        back with the controller's QuotaReserved=False reason and message (Kueue's
        ``UnsetQuotaReservationWithCondition``): pending again, its checks left as they are, no eviction and no
        Requeued condition. Its MultiKueue copies go, as Kueue's MultiKueue controller deletes the remote objects
        of a workload without a reservation."""
        wl = self.workloads.get(e.key)
        if wl is None or wl.phase != RESERVED:
            return
        wl.cluster_name, wl.nominated, wl.remotes = "", (), None
        self._give_back(wl, e.reason, e.message, e.time)
        self._dequeue(wl)
        self._enqueue(wl)
        self.reflag(wl)

    def _give_back(self, wl: WorkloadInfo, reason: str, message: str, time: int) -> None:
        """``wl`` gives its quota back and is pending again with QuotaReserved=False (``reason``, ``message``), its
        pod sets counted as Kueue adjusts them now, not as when it was admitted."""
        self._release(wl)
        self.awaiting_release.discard(wl.key)
        wl.admission, wl.usage, wl.phase = None, {}, PENDING
        wl.reserved_at = wl.admitted_at = None
        self._refresh_pod_sets(wl)
        wl.set_condition("QuotaReserved", "False", reason, message, time)
        self._sync_admitted(wl, time)
        self._keep_pods_ready(wl, False, time)
        cq = wl.cluster_queue
        wl.cluster_queue = ""
        if cq:
            self._flush_tree(cq)

    def _evict_unreserved(self, wl: WorkloadInfo, e: ev.WorkloadDeactivated) -> None:
        """Kueue's workload controller evicts a deactivated Workload that does not show Evicted=True whether or not
        it holds quota: one that holds none gets what an eviction writes and the eviction's entry in its scheduling
        stats, and nothing else (no quota to give back; Kueue records no Event and no metric without an
        admission)."""
        wl.evictions = eviction_stats.counted(wl.evictions, *eviction_stats.reason_and_cause(e))
        self._mark_evicted(wl, e.reason, e.message, e.time)

    def _topology_assigned(self, e: ev.TopologyAssigned) -> None:
        """Second pass or node replacement: the pod set's topology assignment is replaced in place (a Pending
        delayed topology request becomes Ready) and its TAS usage moves with it; quota is untouched."""
        wl = self.workloads.get(e.key)
        if wl is None or not wl.reserving or wl.admission is None:
            return
        psas = list(wl.admission.pod_set_assignments)
        for i, psa in enumerate(psas):
            if psa.name != e.pod_set:
                continue
            changes: dict[str, Any] = {"topology_assignment": e.assignment}
            if psa.delayed_topology_request == "Pending":
                changes["delayed_topology_request"] = "Ready"
            psas[i] = msgspec.structs.replace(psa, **changes)
            wl.admission = msgspec.structs.replace(wl.admission, pod_set_assignments=psas)
            self.tas.charge(wl)
            return

    def _finished(self, e: ev.WorkloadFinished | ev.WorkloadSliceReplaced) -> None:
        wl = self.workloads.get(e.key)
        if wl is None or wl.phase == FINISHED:
            return
        self._release(wl)
        self._dequeue(wl)
        self.awaiting_release.discard(wl.key)
        self.backoff.pop(wl.key, None)
        was_reserving = wl.phase in HOLDING
        wl.phase = FINISHED
        self.flagged.pop(wl.key, None)
        wl.set_condition("Finished", "True", e.reason, e.message, e.time)
        self.reflag(wl)
        if was_reserving and wl.cluster_queue:
            self._flush_tree(wl.cluster_queue)


    # --- MultiKueue -------------------------------------------------------------------------------------------

    def _on_cluster_observed(self, e: ev.MultiKueueClusterObserved) -> None:
        """A worker cluster reached or lost: MultiKueue checks' activity and the worker-lost rule follow it."""
        old = self.cluster_links.get(e.key)
        since = old.since if old is not None and old.connected == e.connected else e.time
        self.cluster_links[e.key] = ClusterLink(e.connected, e.reason, e.message, since)
        if old is None or old.connected != e.connected:
            self._specs_changed()
            self._flush_all()

    def _cluster_deleted(self, name: str) -> None:
        """A MultiKueueCluster deleted: its worker, if it was connected, is lost from now on (:data:`CLUSTER_DELETED`),
        so a workload running there is retried once ``workerLostTimeout`` has passed, as Kueue's once it removed the
        worker's client; and a MultiKueueCluster of that name created again counts as connected only once the
        connector observes it so, no Active condition read of what was observed before the deletion. A worker
        already lost stays lost since when it was."""
        old = self.cluster_links.get(name)
        if old is not None:
            since = self.time if old.connected else old.since
            self.cluster_links[name] = ClusterLink(False, CLUSTER_DELETED, "", since)

    def _on_worker_queues(self, e: ev.WorkerQueuesObserved) -> None:
        self.worker_queues[e.key] = e

    def _on_remote_workload(self, e: ev.RemoteWorkloadObserved) -> None:
        wl = self.workloads.get(e.key)
        if wl is None or (e.uid and e.uid != wl.uid):
            return
        remotes = {k: v for k, v in (wl.remotes or {}).items() if k != e.cluster}
        if e.exists:
            remotes[e.cluster] = RemoteCopy(tuple(e.conditions), tuple(e.topology_pod_sets),
                                            tuple(e.preemption_gates))
        wl.remotes = remotes

    def _take_template_digests(self, key: str, spec: o.WorkloadSpec) -> None:
        """A status upsert (same generation, so its templates are not read again) whose templates carry digests
        (:mod:`events.template_digest`) where the ones kept have none: a log written before digests, the Workload
        now upserted by a producer that stamps them. Its templates are taken then, once, and
        ``IdenticalPodTemplates`` compares them whole from there on."""
        before = self.pod_templates.get(key)
        if before and before[0].digest is None:
            self.pod_templates[key] = pod_templates(spec, before)

    @staticmethod
    def _take_gates(wl: WorkloadInfo, spec_gates: list[o.PreemptionGate], shown: list[o.PreemptionGateState]
                    ) -> None:
        """The preemption gates a Workload's spec lists and its status shows, but for those the log closed later
        (an eviction) than the status shows them changed: a Workload read before that write shows them as before."""
        names = tuple(g.name for g in spec_gates)
        taken = tuple(newer_gates(wl.gate_states, shown, names))
        wl.gate_states = taken
        wl.spec_gates = names
        wl.preemption_gated = has_closed_gate(spec_gates, taken)

    def _on_remote_gate_opened(self, e: ev.RemotePreemptionGateOpened) -> None:
        wl = self.workloads.get(e.key)
        copy = wl.remotes.get(e.cluster) if wl is not None and wl.remotes else None
        if wl is None or copy is None or (e.uid and e.uid != wl.uid):
            return
        wl.remotes = {**wl.remotes, e.cluster: opened_on(copy, e.gate, format_time(e.time))}  # type: ignore[dict-item]

    def _on_owner_observed(self, e: ev.OwnerObserved) -> None:
        wl = self.workloads.get(e.key)
        if wl is not None and (not e.uid or e.uid == wl.uid):
            wl.owner_managed_by = e.managed_by
            if e.replicas is not None:
                wl.owner_replicas = e.replicas

    def _take_external_nominations(self, wl: WorkloadInfo, w: o.Workload | LazyWorkload) -> None:
        """An external dispatcher's ``status.nominatedClusterNames`` on a workload holding quota and not yet
        on a worker: the connector dispatches to them as to a built-in dispatcher's (kueue-es nominates
        nothing). Taken whatever the other admission checks say (they are the Workload's status, which Kueue
        stores); the copies wait for those checks (:func:`kueue_es.scheduler.multikueue.copies_on`)."""
        nominated = tuple(w.status.nominated_cluster_names or ())
        if nominated != wl.nominated:
            wl.nominated, wl.nominated_at = nominated, self.time
            if nominated:  # (the upsert may be quiet: no reindex)
                self.dispatched[wl.key] = None

    def _take_external_checks(self, wl: WorkloadInfo, w: o.Workload | LazyWorkload) -> bool:
        """The states the Workload shows for its checks whose controller kueue-es does not run (their controllers
        set them there): taken where they differ from the log's, the retry count kept (Kueue's). Not while the
        log's own state of the check is unshown (:attr:`WorkloadInfo.unshown_checks`) and this Workload is not known
        to be read after it was written: what it shows may be older, in the same second too; showing the log's
        state, or a resourceVersion after the one it was written at, ends that. The states shown are kept
        (:attr:`WorkloadInfo.shown_checks`). True when one was taken."""
        unshown = wl.unshown_checks
        multikueue = self.multikueue
        theirs = [n for n in wl.check_states if not runs_controller(self.admission_checks.get(n), multikueue)]
        if not theirs and not unshown and not wl.shown_checks:
            return False
        shown_checks = w.status.admission_checks  # read once: a LazyWorkload decodes its status at every read
        wl.shown_checks = self._external_states(shown_checks)
        written_at = {n: rv for n, _, rv in unshown}
        read_at = o.resource_version_order(wl.resource_version) if unshown else -1
        taken: dict[str, o.AdmissionCheckState] = {}
        seen: list[str] = []
        for shown in shown_checks:
            name = shown.name
            known = wl.check_states.get(name)
            if known is None:
                continue
            if name in written_at:
                if 0 <= written_at[name] < read_at:
                    seen.append(name)  # read after the log's state was written: what it shows is later
                elif shows_word(shown, known):
                    seen.append(name)
                    continue
                else:
                    continue  # read before the log's state was written
            if shown != known and name in theirs:
                state = msgspec.structs.replace(shown, retry_count=known.retry_count)
                if state != known:
                    taken[name] = state
        if seen:
            wl.unshown_checks = tuple(u for u in unshown if u[0] not in seen)
        if not taken:
            return False
        wl.check_states = dict(sorted({**wl.check_states, **taken}.items()))
        self.checks_taken = (self.offset, wl.key, tuple(sorted(taken)))
        return True

    def _external_states(self, shown: list[o.AdmissionCheckState]) -> tuple[o.AdmissionCheckState, ...]:
        """Of the check states a Workload shows, those of checks whose controller kueue-es does not run."""
        multikueue = self.multikueue
        return tuple(c for c in shown if not runs_controller(self.admission_checks.get(c.name), multikueue))

    def _on_outcome(self, e: ev.DecisionApplied | ev.DecisionRejected) -> None:
        """A decision's outcome. An eviction counted when decided
        (:class:`projections.metrics.CountedEviction`) stays counted once applied; rejected, it never reached
        the cluster, and Kueue counts an eviction only once its status write succeeds (#6360): its counts and
        its entry in the workload's eviction record (that same Workload's, not a recreated one's) are taken
        back. A rejected preemption or eviction of a workload nothing was folded on since is taken back whole
        (:meth:`_take_back_eviction`): Kueue changes nothing when that write fails."""
        unconfirmed = self.metrics.unconfirmed
        counted = unconfirmed.pop(e.decision, None) if unconfirmed else None
        undos = self.unconfirmed_evictions
        undo = undos.pop(e.decision) if undos else None
        if type(e) is ev.DecisionApplied:
            if e.resource_version:  # a status write's (the writer's)
                self._on_status_written(e)
            return
        restored = undo is not None and self._take_back_eviction(undo)
        if counted is None:
            return
        uncount_eviction(self.metrics, counted)
        wl = self.workloads.get(counted.key)
        if not restored and wl is not None and wl.uid == counted.uid:  # (restored: its record is as before)
            wl.evictions = eviction_stats.uncounted(wl.evictions, *counted.labels[1:3])

    def _remember_eviction(self, wl: WorkloadInfo | None) -> None:
        """The fold of an eviction decision is through: keep it, with the workload as it left it, until the
        outcome (:mod:`projections.eviction_undo`)."""
        opened, self._eviction_opened = self._eviction_opened, None
        assert opened is not None
        if wl is not None and wl.uid == opened.before.uid:
            self.unconfirmed_evictions.remember(eviction_undo.closed(opened, wl))

    def _lift_refusal(self, key: str, refusal: Refusal, wl: WorkloadInfo | None) -> None:
        """An event of workload ``key`` that decided no eviction of it: its refusal is lifted, its count kept
        while its retry is still to come (:func:`projections.eviction_undo.lifted`)."""
        kept = eviction_undo.lifted(refusal, wl, self.time)
        if kept is not None:
            self.refused_evictions[key] = kept

    def _take_back_eviction(self, undo: UnconfirmedEviction) -> bool:
        """The connector rejected eviction ``undo``: if nothing was folded on its workload since, the workload
        is put back as it was before (admitted, its conditions, checks, gates, requeue state and backoff as
        they were), and no eviction of it is decided again until its next event or its backoff ends
        (:attr:`refused_evictions`). Its ClusterQueue is not woken: the preemptor's next cycle shows the
        failure, and it tries again once that backoff ends. Whether it was put back."""
        key = undo.before.key
        wl = self.workloads.get(key)
        if not eviction_undo.untouched(undo, wl):
            return False
        assert wl is not None
        eviction_undo.put_back(undo, wl)
        if undo.backoff is None:
            self.backoff.pop(key, None)
        else:
            self.backoff[key] = undo.backoff
        if undo.awaiting:
            self.awaiting_release.add(key)
        else:
            self.awaiting_release.discard(key)
        if wl.second_pass is not None:  # waiting for its second pass again, due as it was
            self.second_pass[key] = wl.second_pass[1]
        else:
            self.second_pass.pop(key, None)
        self.reflag(wl)
        self.reindex(key)
        self.refused_evictions[key] = eviction_undo.refused(undo, self.time)
        return True

    def _on_status_written(self, e: ev.DecisionApplied) -> None:
        """The writer wrote a workload's status with every decision up to ``e.decision``, at resourceVersion
        ``e.resource_version``: the check states the log set by then are written there (a Workload read at a later
        resourceVersion shows what came after them, though the watch may never show that write itself)."""
        wl = self.workloads.get(e.key)
        if wl is not None and wl.unshown_checks and (not e.uid or e.uid == wl.uid):
            rv = o.resource_version_order(e.resource_version)
            if rv >= 0:
                wl.unshown_checks = unshown_written(wl.unshown_checks, e.decision, rv)

    def _on_nominated(self, e: ev.ClustersNominated) -> None:
        wl = self.workloads.get(e.key)
        if wl is not None and wl.reserving and not wl.cluster_name:
            wl.nominated, wl.nominated_at = tuple(e.clusters), self.time

    def _on_cluster_assigned(self, e: ev.WorkerClusterAssigned) -> None:
        """The worker runs it: its pod sets placed there no longer wait for a topology here (Kueue's
        ``updateDelayedTopologyRequest``: Ready, the manager never placing them)."""
        wl = self.workloads.get(e.key)
        if wl is None or not wl.reserving or wl.cluster_name:
            return
        wl.cluster_name, wl.nominated = e.cluster, ()
        if e.topology_ready and wl.admission is not None:
            ready = set(e.topology_ready)
            wl.admission = msgspec.structs.replace(wl.admission, pod_set_assignments=[
                msgspec.structs.replace(psa, delayed_topology_request="Ready")
                if psa.name in ready and psa.delayed_topology_request == "Pending" else psa
                for psa in wl.admission.pod_set_assignments])

    def _retention_expired(self, e: ev.RetentionExpired) -> None:
        wl = self.workloads.get(e.key)
        if wl is not None:
            wl.retention_target = e.target
            self.retained.pop(wl.key, None)


_HANDLERS: dict[type, Any] = {
    ev.ObjectUpserted: ClusterState._on_upserted,
    LazyObjectUpserted: ClusterState._on_upserted,
    ev.ObjectDeleted: ClusterState._on_deleted,
    ev.QuotaReserved: ClusterState._reserve,
    ev.WorkloadAdmitted: ClusterState._admitted,
    ev.WorkloadPending: ClusterState._pending,
    ev.WorkloadPreempted: ClusterState._evicted,
    ev.WorkloadEvicted: ClusterState._evicted,
    ev.WorkloadRequeued: ClusterState._requeued,
    ev.WorkloadDeactivated: ClusterState._deactivated,
    ev.QuotaReservationUnset: ClusterState._unset_reservation,
    ev.RequeueStateCleared: ClusterState._requeue_state_cleared,
    ev.RequeueAtRaised: ClusterState._requeue_at_raised,
    ev.RequeueAtCleared: ClusterState._requeue_at_cleared,
    ev.WorkloadFinished: ClusterState._finished,
    ev.WorkloadSliceReplaced: ClusterState._finished,
    ev.TopologyAssigned: ClusterState._topology_assigned,
    ev.JobStopped: ClusterState._on_job_stopped,
    ev.PodsReadyChanged: ClusterState._on_pods_ready,
    ev.ReclaimablePodsChanged: ClusterState._on_reclaimable,
    ev.ReplacementPodsChanged: ClusterState._on_replacement_pods,
    ev.WorkloadOnHoldChanged: ClusterState._on_hold_changed,
    ev.AdmissionCheckStateChanged: ClusterState._on_check_state,
    ev.AdmissionCheckUpdated: ClusterState._on_check_state,
    ev.ProvisioningRequestCreated: ClusterState._on_request_created,
    ev.ProvisioningRequestDeleted: ClusterState._on_request_deleted,
    ev.ProvisioningRequestCreateFailed: ClusterState._on_create_failed,
    ev.UnhealthyNodesChanged: ClusterState._on_unhealthy_nodes,
    ev.SecondPassFailed: ClusterState._on_second_pass_failed,
    ev.RetentionExpired: ClusterState._retention_expired,
    ev.ConfigRecorded: ClusterState._on_config_recorded,
    ev.MultiKueueClusterObserved: ClusterState._on_cluster_observed,
    ev.RemoteWorkloadObserved: ClusterState._on_remote_workload,
    ev.WorkerQueuesObserved: ClusterState._on_worker_queues,
    ev.OwnerObserved: ClusterState._on_owner_observed,
    ev.ClustersNominated: ClusterState._on_nominated,
    ev.WorkerClusterAssigned: ClusterState._on_cluster_assigned,
    ev.RemotePreemptionGateOpened: ClusterState._on_remote_gate_opened,
    ev.RemoteWorkloadFinished: ClusterState._finished,
    ev.VariantFinished: ClusterState._finished,
    **variants.HANDLERS,
    ev.PreemptionGatesSynced: on_gates_synced,
}
"""Event type -> what applying it does (a dict lookup instead of a chain of isinstance checks)."""


_SECOND_PASS_TRIGGERS = frozenset({
    ev.ObjectUpserted, LazyObjectUpserted, ev.AdmissionCheckStateChanged, ev.AdmissionCheckUpdated, ev.QuotaReserved,
    ev.WorkloadAdmitted,
    ev.WorkloadPreempted, ev.WorkloadEvicted, ev.WorkloadRequeued, ev.WorkloadDeactivated, ev.WorkloadFinished,
    ev.WorkloadSliceReplaced, ev.TopologyAssigned, ev.UnhealthyNodesChanged, ev.RemoteWorkloadFinished,
    ev.QuotaReservationUnset, ev.WorkloadOnHoldChanged,
})
"""Events after which a workload's need for a second pass is re-checked (Kueue re-checks on every update)."""

_NO_STATUS = o.WorkloadStatus()
"""A Workload's status as created: nothing observed."""

_RESERVATION_CONDITIONS = frozenset({"QuotaReserved", "Admitted", "Evicted", "Preempted", "PodsReady"})
"""The conditions a quota reservation (and the admission it may bring at once) sets."""


_HOLDING = (RESERVED, ADMITTED)
"""Phases of a workload holding quota (``WorkloadInfo.reserving``, without a call on the fold's hot path)."""

_UPSERTS = frozenset({ev.ObjectUpserted, LazyObjectUpserted})
_WORKLOAD_VIEWS = frozenset({o.Workload, LazyWorkload})
"""A Workload upsert, decoded in full or lazily (:mod:`events.lazy`): both fold the same way."""


class _Plan(NamedTuple):
    """What folding an event of one type involves, worked out once per type (not per event) by :func:`_plan_of`."""

    handler: Any
    """:data:`_HANDLERS`' entry for the type or its nearest handled base; None: the event carries only time."""
    about_workload: bool | None
    """The event is about one workload (``key``); None for upserts and deletions, which tell by their object."""
    metered: Any
    """Its metrics hook (:data:`projections.metrics.METERED`), or None."""
    needs_before: bool
    """The hook needs the workload as it was before (:data:`projections.metrics.NEEDS_BEFORE`)."""
    second_pass: bool
    """The workload's need for a second pass is re-checked after it (:data:`_SECOND_PASS_TRIGGERS`)."""
    reindexed: bool
    """The workload is reindexed after it (for upserts and deletions: when about a workload)."""
    decision: bool
    """It is a scheduler's :class:`events.schema.Decision` (its ``cycle`` counts)."""


def _seen(wl: WorkloadInfo) -> tuple:
    """The workload as the metrics hooks see it before an event (:data:`projections.metrics._Seen`)."""
    return (wl, wl.phase, wl.evicted, wl.admission, wl.pods_ready, wl.conditions, wl.remotes)


def _plan_of(t: type) -> _Plan:
    about = True if t in _ABOUT_WORKLOADS else None if t in _UPSERTS or t is ev.ObjectDeleted else False
    return _Plan(
        handler=_HANDLERS.get(t) or _handler_of(t), about_workload=about, metered=METERED.get(t),
        needs_before=t in NEEDS_BEFORE, second_pass=t in _SECOND_PASS_TRIGGERS,
        reindexed=about is True or t in _ALSO_ABOUT_WORKLOADS, decision=issubclass(t, ev.Decision))


_PLANS: dict[type, tuple[Any, ...]] = {}
"""Event type -> its :class:`_Plan` (filled as types are met: one dict lookup per event), kept as a plain tuple:
Python 3.11 unpacks only an exact tuple on its fast path (a NamedTuple's seven fields go through an iterator)."""


def _handler_of(t: type) -> Any:
    """The handler of a subclass of a handled event type, if any (ticks and connector outcomes have none)."""
    for base in t.__mro__[1:]:
        if base in _HANDLERS:
            return _HANDLERS[base]
    return None


_CLEARED_BY_RESERVATION = frozenset({"Evicted", "Preempted", BLOCKED_ON_PREEMPTION_GATES})
"""The conditions a reservation sets to False when True (Kueue's scheduler, on the QuotaReserved write)."""

_ALSO_ABOUT_WORKLOADS = frozenset({
    ev.WorkloadPending, ev.SecondPassFailed, ev.RetentionExpired, ev.ProvisioningRequestCreated,
    ev.ProvisioningRequestDeleted, ev.RemoteWorkloadObserved, ev.ClustersNominated, ev.WorkerClusterAssigned,
    ev.OwnerObserved, ev.ParentLabelled, ev.VariantCreated, ev.VariantActivation, ev.ParentAdmitted,
    ev.RemotePreemptionGateOpened, ev.VariantPreemptionGateOpened, ev.ParentPreemptionSignal,
    ev.PreemptionGatesSynced, ev.ProvisioningRequestCreateFailed,
})
"""The other event types about one workload (by ``key``): after any of these, the workload is reindexed."""

_ABOUT_WORKLOADS = frozenset({
    ev.QuotaReserved, ev.WorkloadAdmitted, ev.WorkloadPreempted, ev.WorkloadEvicted, ev.WorkloadRequeued,
    ev.WorkloadDeactivated, ev.QuotaReservationUnset, ev.TopologyAssigned, ev.WorkloadFinished, ev.WorkloadSliceReplaced,
    ev.JobStopped, ev.PodsReadyChanged, ev.RequeueStateCleared, ev.RequeueAtRaised, ev.RequeueAtCleared,
    ev.AdmissionCheckStateChanged, ev.AdmissionCheckUpdated, ev.UnhealthyNodesChanged, ev.ReclaimablePodsChanged,
    ev.ReplacementPodsChanged, ev.RemoteWorkloadFinished, ev.VariantFinished, ev.VariantDeleted,
    ev.VariantPodsReadySynced, ev.WorkloadOnHoldChanged,
})
"""Event types about one workload (by ``key``) that may change a workload holding quota (WorkloadPending never
concerns one); Workload upserts and deletions are told apart by their object or kind."""

_TARGET_BYTES = msgspec.msgpack.encode(DEACTIVATION_TARGET)
"""The condition type as a lazily decoded status holds it: a msgpack string (its length byte, then the name)."""

BLOCKER_REASONS = frozenset({"Suspended", "Misconfigured", "Deactivated", ADMISSION_GATED, DRA_INADMISSIBLE,
                             DRA_UNRESOLVED})


def copy_priority(spec: o.WorkloadSpec | Any) -> int:
    """The base priority of a MultiKueue worker's copy (:data:`MULTIKUEUE_ORIGIN_LABEL`): its ``spec.priority``, the
    value the manager resolved and keeps in line (Kueue #8464), not the value of a class of that name on the worker
    (Kueue's scheduler reads ``spec.priority``, and its class controller leaves a copy's alone, #14963)."""
    return spec.priority or 0


def is_flagged(wl: WorkloadInfo) -> bool:
    """See :attr:`ClusterState.flagged`."""
    if wl.phase == FINISHED:
        return False
    if not wl.active or wl.admission_gate:
        return True
    if wl.phase == PENDING and workload_problem(wl.pod_sets):
        return True  # DRA makes it inadmissible: the controller rules write why
    for c in wl.conditions:
        if c.status == "False" and (c.type == "Requeued" or (c.type == "QuotaReserved" and c.reason in BLOCKER_REASONS)):
            return True
        if c.type == DEACTIVATION_TARGET and c.status == "True":
            return True  # the controller rules deactivate it
    return False


def max_execution_deadline(wl: WorkloadInfo) -> int | None:
    """When an admitted workload's ``maximumExecutionTimeSeconds`` runs out (ms), counting the time it was
    admitted before (``accumulatedPastExecutionTimeSeconds``); None without a limit or an admission."""
    if wl.max_execution_seconds is None or wl.admitted_at is None:
        return None
    return wl.admitted_at + (wl.max_execution_seconds - wl.accumulated_seconds) * 1000


def is_retained(wl: WorkloadInfo) -> bool:
    """See :attr:`ClusterState.retained`."""
    if wl.retention_target:
        return False
    if wl.phase == FINISHED:
        return True
    if wl.active:
        return False  # (the common case, told before looking through the conditions)
    evicted = wl.condition("Evicted")
    return evicted is not None and evicted.status == "True" and evicted.reason.startswith("DeactivatedDueTo")


def _true(c: o.Condition | None) -> bool:
    return c is not None and c.status == "True"


def _ms(c: o.Condition | None) -> int | None:
    return parse_time(c.last_transition_time) if c is not None and c.last_transition_time else None


def _check_inputs(spec: o.ClusterQueueSpec) -> tuple:
    """What the check list of a ClusterQueue's workloads depends on: its check rules and its flavors (give the spec
    in force: its effective resource groups under DynamicQuotaOrchestration)."""
    return (spec.admission_checks_strategy, [[fq.name for fq in rg.flavors] for rg in spec.resource_groups])


def _reset_checks(wl: WorkloadInfo, time: int, offset: int) -> None:
    """Eviction sets every check that is not Pending back to Pending: requeueAfterSeconds stays, a Retry adds one
    to retryCount, and any other state drops it (Kueue's ``resetChecksOnEviction``). Those states are the log's own,
    set at ``offset`` and unshown until the Workload shows them."""
    if not wl.check_states or all(s.state == "Pending" for s in wl.check_states.values()):
        return
    now = format_time(time)
    reset = [k for k, s in wl.check_states.items() if s.state != "Pending"]
    wl.check_states = {
        k: s if s.state == "Pending" else o.AdmissionCheckState(
            name=k, state="Pending", last_transition_time=now,
            message=reset_message(s.state),
            requeue_after_seconds=s.requeue_after_seconds,
            retry_count=(s.retry_count or 0) + 1 if s.state == "Retry" else None)
        for k, s in wl.check_states.items()
    }
    wl.unshown_checks = unshown_with(wl.unshown_checks, reset, offset,
                                     shown=already_shown(wl.shown_checks, wl.check_states, reset))


def _workload_of_pod(pod: o.Pod | None) -> str:
    """``namespace/workload`` of the Workload a Pod's ``kueue.x-k8s.io/workload`` annotation names ("": none)."""
    if pod is None:
        return ""
    name = pod.metadata.annotations.get(WORKLOAD_ANNOTATION)
    return f"{pod.metadata.namespace}/{name}" if name else ""
