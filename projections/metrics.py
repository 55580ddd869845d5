"""Kueue's Prometheus metrics (``kueue_*``), as a fold over the log.

Kueue counts in memory: its counters and histograms start from zero whenever a replica starts. Here they are
part of the projection. Every counter and histogram is folded from the decisions and observations in the log,
with durations taken from the times in the events, so a restart (which is a replay) brings them back where they
were, and the metrics at any point of the log can be looked at again (``kueue-es metrics --log DIR --to N``).
The fold is in :class:`ClusterState` (``state.metrics``) and in its snapshots, so restoring a snapshot and
folding the tail gives what folding everything gives — and in the state digest, which is how that is checked
(the property tests compare digests; a Kafka failover restores a snapshot). The counters depend on the events
alone, not on their offsets or on which replica wrote them, so the same events give the same digest; the
decisions never read them, so ``replay --verify`` is unaffected.

Gauges (pending workloads, quota, usage, queue status) describe the state as it is: they are computed from the
projection when asked (:func:`families`), like the ClusterQueue status the connector writes. Some only under the
recorded configuration, as Kueue reports them: the ClusterQueue resource gauges with
``metrics.enableClusterQueueResources``, the info gauges under ``MetricsForCohorts``, the weighted shares with
``fairSharing``.

The LocalQueue metrics (:data:`LOCAL_QUEUE_SPECS`) follow Kueue's ``LocalQueueMetrics`` gate and the
``metrics.localQueueMetrics`` stanza of the configuration in force (:mod:`projections.local_queue_metrics`): the
hooks fold a workload's LocalQueue series, and :func:`families` exposes a LocalQueue's, only while the gate and the
stanza are on and the stanza's ``localQueueSelector`` selects that LocalQueue; the update that makes a LocalQueue
stop matching clears its series, as Kueue does. The hooks ask only once a transition is counted, so with the
metrics off they cost the fold one cached lookup per counted transition.

Under the ``CustomMetricLabels`` gate, the configuration's ``metrics.customLabels``
(:mod:`projections.custom_labels`) are appended to the labels of every metric keyed by a ClusterQueue, LocalQueue
or Cohort when the metrics are exposed, with the object's values as the state holds them; the fold clears an
object's series when an update changes them, as Kueue does, so no series carries stale values and nothing about
them needs keeping.

Nothing here reads a clock or knows which replica it runs in: the ``replica_role`` label, and exposition in
Prometheus' formats, are added by the service (``kueue_es.metrics``).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Container, Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec

from events import objects as o
from events import schema as ev
from events.quantity import MAX_INT64, MILLI_RESOURCES, to_int
from events.timefmt import parse_time
from projections import effective_quotas, eviction_stats, fair_share, gates, multikueue_metrics
from projections.custom_labels import CLUSTER_QUEUE, COHORT, LOCAL_QUEUE, WORKLOAD, CustomLabels
from projections.pods_ready_condition import RECOVERED, WAIT_FOR_RECOVERY
from projections.variants import condition_only_eviction, parent_name
from projections.workloads import ADMITTED, FINISHED, LEGACY_PENDING, PENDING, RESERVED, WorkloadInfo

if TYPE_CHECKING:
    from projections.cluster import ClusterState
    from projections.queues import ClusterQueueQueue
    from projections.quota import QuotaNode

# --- what is exposed -----------------------------------------------------------------------------------------


def _exponential(count: int) -> tuple[float, ...]:
    """Kueue's wait-time buckets: 1 s, then 2.5 s doubling (2.5, 5, 10, ...), ``count`` in all."""
    return (1.0, *(2.5 * 2**i for i in range(count - 1)))


WAIT_BUCKETS = _exponential(14)
"""1 s to 10,240 s (about 2.8 h)."""
ADMISSION_WAIT_BUCKETS = _exponential(16)
"""1 s to 40,960 s (about 11.4 h): Kueue gives admission wait times two more buckets."""


class Spec(NamedTuple):
    name: str
    kind: str
    """``counter``, ``gauge`` or ``histogram``."""
    help: str
    labels: tuple[str, ...]
    buckets: tuple[float, ...] = ()


_CQ_PC = ("cluster_queue", "priority_class")

DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""The Prometheus client's default buckets, for a histogram Kueue gives none."""
_RESOURCE = ("cohort", "cluster_queue", "flavor", "resource")

ADMISSION_ATTEMPTS = Spec(
    "kueue_admission_attempts_total", "counter",
    "Scheduling cycles that tried to admit workloads, by result: 'success' when at least one workload got "
    "quota (or a workload waiting for a second pass was placed or evicted), 'inadmissible' otherwise.",
    ("result",))
PENDING_WORKLOADS = Spec(
    "kueue_pending_workloads", "gauge",
    "Workloads waiting in a ClusterQueue, by status: 'active' ones are in the queue the scheduler takes its "
    "heads from; 'inadmissible' ones failed an attempt and wait for a change in the cluster before another "
    "(all of them while the ClusterQueue is inactive).", ("cluster_queue", "status"))
PENDING_SCHEDULING_HASHES = Spec(
    "kueue_pending_scheduling_hashes", "gauge",
    "Distinct scheduling-equivalence classes (effective priority and pod-set shapes: what makes workloads park "
    "together) among a ClusterQueue's pending workloads, by the status pending_workloads counts them under; all "
    "'inadmissible' while the ClusterQueue is inactive. Reported only while SchedulingEquivalenceHashing is on.",
    ("cluster_queue", "status"))
UNADMITTED = Spec(
    "kueue_unadmitted_workloads", "gauge",
    "Workloads not admitted (neither finished nor admitted) of a ClusterQueue, by the reason of their Admitted "
    "condition (NoReservation while they show none) and the underlying cause: the reason of their QuotaReserved "
    "condition while False (PendingEvaluation while they show none), empty while they hold quota. Reported only "
    "while UnadmittedWorkloadsObservability is on; a workload whose LocalQueue is missing has no ClusterQueue to "
    "be counted in.", ("cluster_queue", "reason", "underlying_cause"))
QUOTA_RESERVED = Spec(
    "kueue_quota_reserved_workloads_total", "counter",
    "Workloads that got a quota reservation, per ClusterQueue and priority class.", _CQ_PC)
QUOTA_RESERVED_WAIT = Spec(
    "kueue_quota_reserved_wait_time_seconds", "histogram",
    "Time from a workload's creation, or from its last requeue, until it got a quota reservation.",
    _CQ_PC, WAIT_BUCKETS)
ADMITTED_WORKLOADS = Spec(
    "kueue_admitted_workloads_total", "counter",
    "Workloads admitted (quota reserved and every admission check ready), per ClusterQueue and priority class.",
    _CQ_PC)
ADMISSION_WAIT = Spec(
    "kueue_admission_wait_time_seconds", "histogram",
    "Time from a workload's creation, or from its last requeue, until it was admitted.",
    _CQ_PC, ADMISSION_WAIT_BUCKETS)
ADMISSION_CHECKS_WAIT = Spec(
    "kueue_admission_checks_wait_time_seconds", "histogram",
    "Time from a workload's quota reservation until its admission, for workloads with admission checks.",
    _CQ_PC, WAIT_BUCKETS)
FINISHED_TOTAL = Spec(
    "kueue_finished_workloads_total", "counter",
    "Workloads that finished, per ClusterQueue they held quota in (empty when they held none) and priority "
    "class.", _CQ_PC)
EXECUTION_TIME = Spec(
    "kueue_execution_time_seconds", "histogram",
    "How long a finished workload ran admitted, over all its admissions (runs before an eviction included).",
    _CQ_PC, WAIT_BUCKETS)
EVICTED = Spec(
    "kueue_evicted_workloads_total", "counter",
    "Evictions of workloads holding quota, by reason (Preempted, PodsReadyTimeout, AdmissionCheck, "
    "ClusterQueueStopped, LocalQueueStopped, NodeFailures, Deactivated) and underlying cause: why Kueue "
    "deactivated it (AdmissionCheck, MaximumExecutionTimeExceeded, RequeuingLimitExceeded), what a "
    "PodsReadyTimeout waited for (WaitForStart, WaitForRecovery, WaitForScheduling), the PreemptionConfig "
    "that chose a preempted workload; empty otherwise.",
    ("cluster_queue", "reason", "underlying_cause", "priority_class"))
EVICTED_ONCE = Spec(
    "kueue_evicted_workloads_once_total", "counter",
    "Workloads evicted, each counted only the first time it is evicted for a reason and underlying cause (as "
    "evicted_workloads_total counts them): a later eviction of the same workload for the same ones, after a "
    "requeue say, or one the Workload's status.schedulingStats.evictions already counted when kueue-es first "
    "saw it, is not counted again; it starts again only for a new Workload object.", EVICTED.labels)
READY_WAIT = Spec(
    "kueue_ready_wait_time_seconds", "histogram",
    "Time from a workload's creation, or from its last requeue, until its pods were ready (PodsReady turned "
    "True while admitted; observed only while waitForPodsReady is on).", _CQ_PC, WAIT_BUCKETS)
ADMITTED_UNTIL_READY = Spec(
    "kueue_admitted_until_ready_wait_time_seconds", "histogram",
    "Time from a workload's admission until its pods were ready (PodsReady turned True while admitted; observed "
    "only while waitForPodsReady is on).", _CQ_PC, WAIT_BUCKETS)
RECOVERY_WAIT = Spec(
    "kueue_workload_recovery_wait_time_seconds", "histogram",
    "Time an admitted workload waited for its pods to be ready again after losing readiness: from PodsReady "
    "turning False (WaitForRecovery) until it turned True again (Recovered); observed only while waitForPodsReady "
    "is on.", _CQ_PC, WAIT_BUCKETS)
PODS_READY_TO_EVICTED = Spec(
    "kueue_pods_ready_to_evicted_time_seconds", "histogram",
    "Time from a workload's pods becoming ready until its eviction, for workloads evicted with their pods ready, "
    "by the reason and underlying cause of evicted_workloads_total.",
    ("cluster_queue", "reason", "underlying_cause"), WAIT_BUCKETS)
EVICTION_LATENCY = Spec(
    "kueue_workload_eviction_latency_seconds", "histogram",
    "Time from a workload's eviction (Evicted=True) until its quota was released and it was pending again, by the "
    "ClusterQueue it held quota in and the Evicted condition's reason (not observed for a workload that finished "
    "or was deleted instead).", ("cluster_queue", "reason"), WAIT_BUCKETS)
REPLACED_SLICES = Spec(
    "kueue_replaced_workload_slices_total", "counter",
    "Elastic Job slices finished because their replacement was admitted (ElasticJobsViaWorkloadSlices), per "
    "ClusterQueue the replaced slice held quota in.", ("cluster_queue",))
PREEMPTED = Spec(
    "kueue_preempted_workloads_total", "counter",
    "Workloads preempted, per ClusterQueue of the preempting workload, by reason: InClusterQueue, "
    "InCohortReclamation, InCohortFairSharing, InCohortReclaimWhileBorrowing.",
    ("preempting_cluster_queue", "reason"))
RESERVING_ACTIVE = Spec(
    "kueue_reserving_active_workloads", "gauge",
    "Workloads holding a quota reservation in the ClusterQueue.", ("cluster_queue",))
ADMITTED_ACTIVE = Spec(
    "kueue_admitted_active_workloads", "gauge",
    "Admitted workloads of the ClusterQueue that still hold their quota (not finished, not released).",
    ("cluster_queue",))
FINISHED_WORKLOADS = Spec(
    "kueue_finished_workloads", "gauge",
    "Finished workloads that still exist, per ClusterQueue of their LocalQueue.", ("cluster_queue",))
CQ_STATUS = Spec(
    "kueue_cluster_queue_status", "gauge",
    "1 on the ClusterQueue's current status (pending, active or terminating), 0 on the other two.",
    ("cluster_queue", "status"))
CQ_RESERVATION = Spec(
    "kueue_cluster_queue_resource_reservation", "gauge",
    "Quota reserved by the ClusterQueue's workloads, per flavor and resource (cpu in cores).", _RESOURCE)
CQ_USAGE = Spec(
    "kueue_cluster_queue_resource_usage", "gauge",
    "Quota used by the ClusterQueue's admitted workloads, per flavor and resource (cpu in cores).", _RESOURCE)
CQ_NOMINAL = Spec(
    "kueue_cluster_queue_nominal_quota", "gauge",
    "The ClusterQueue's nominal quota, per flavor and resource (cpu in cores).", _RESOURCE)
CQ_BORROWING = Spec(
    "kueue_cluster_queue_borrowing_limit", "gauge",
    "The ClusterQueue's borrowing limit, per flavor and resource (cpu in cores; +Inf when unset).", _RESOURCE)
CQ_LENDING = Spec(
    "kueue_cluster_queue_lending_limit", "gauge",
    "The ClusterQueue's lending limit, per flavor and resource (cpu in cores; +Inf when unset).", _RESOURCE)
PREEMPTION_SKIPS = Spec(
    "kueue_admission_cycle_preemption_skips", "gauge",
    "Workloads of the ClusterQueue that got preemption targets but were skipped because other workloads of the "
    "same scheduling cycle needed the same resources (their targets overlap victims already chosen, or, "
    "preempting, they no longer fit), as of the last cycle that skipped one of them.", ("cluster_queue",))
CQ_RESOURCE_PENDING = Spec(
    "kueue_cluster_queue_resource_pending", "gauge",
    "What the ClusterQueue's pending workloads (active and inadmissible) request, per resource (cpu in cores), "
    "before any flavor is assigned: every resource its spec names (0 when none is asked for), and any other one "
    "asked for.", ("cluster_queue", "resource"))
CQ_INFO = Spec(
    "kueue_cluster_queue_info", "gauge",
    "1 per ClusterQueue, with its parent cohort and the root of its cohort tree (empty without a cohort), and the "
    "orchestrator whose effective quotas are in force for it (empty when none are).",
    ("cluster_queue", "parent_cohort", "root_cohort", "dynamic_quota_orchestrator"))
COHORT_INFO = Spec(
    "kueue_cohort_info", "gauge",
    "1 per cohort (a Cohort object, or a name a ClusterQueue or Cohort refers to), with its parent cohort, the "
    "root of its tree, and the orchestrator whose effective quotas are in force for it (empty when none are).",
    ("cohort", "parent_cohort", "root_cohort", "dynamic_quota_orchestrator"))

CQ_WEIGHTED_SHARE = Spec(
    "kueue_cluster_queue_weighted_share", "gauge",
    "Fair Sharing's weighted share of the ClusterQueue: the largest, over the resources it uses beyond its "
    "nominal quota, of that excess as a share (x1000) of what its cohort could lend of the resource, divided by "
    "its fairSharing.weight. 0 when it uses no more than its nominal quota (or has no cohort); NaN when its "
    "weight is 0 and it borrows. Only while fairSharing and metrics.enableClusterQueueResources are configured.",
    ("cluster_queue", "cohort"))
COHORT_WEIGHTED_SHARE = Spec(
    "kueue_cohort_weighted_share", "gauge",
    "Fair Sharing's weighted share of the cohort, as for a ClusterQueue (its subtree's usage beyond its subtree "
    "quota against what its parent could lend); 0 for a root cohort; NaN when its weight is 0 and it borrows "
    "(as Kueue reports it). Only while fairSharing is configured.", ("cohort",))

_COHORT_RESOURCE = ("cohort", "flavor", "resource")

COHORT_SUBTREE_QUOTA = Spec(
    "kueue_cohort_subtree_quota", "gauge",
    "The quota of the cohort's subtree, per flavor and resource (cpu in cores): its own nominal quota plus what "
    "each child subtree can lend (its subtree quota less what its lendingLimit keeps back). Only values above 0.",
    _COHORT_RESOURCE)
COHORT_SUBTREE_ADMITTED = Spec(
    "kueue_cohort_subtree_admitted_workloads_total", "counter",
    "Workloads admitted in a ClusterQueue of the cohort's subtree, per cohort (every cohort from the ClusterQueue's "
    "up to the root counts the admission) and priority class.", ("cohort", "priority_class"))
COHORT_SUBTREE_RESERVATIONS = Spec(
    "kueue_cohort_subtree_resource_reservations", "gauge",
    "Quota reserved by the workloads of the ClusterQueues of the cohort's subtree, per flavor and resource (cpu in "
    "cores). Only values above 0.", _COHORT_RESOURCE)
COHORT_SUBTREE_ADMITTED_ACTIVE = Spec(
    "kueue_cohort_subtree_admitted_active_workloads", "gauge",
    "Admitted workloads still holding their quota in the ClusterQueues of the cohort's subtree.", ("cohort",))

MULTIKUEUE_CLUSTER_STATUS = Spec(
    "multikueue_cluster_status", "gauge",
    "MultiKueue: 1 on the status of a worker cluster's Active condition (True, False, or Unknown while not yet "
    "observed), 0 on the other two, per manager ClusterQueue whose MultiKueue check lists the cluster. Only under "
    "the MultiKueue gate; a listed cluster with no MultiKueueCluster object is not reported.",
    ("cluster_queue", "cluster", "active"))
MULTIKUEUE_EVICTED = Spec(
    "multikueue_workloads_evicted_total", "counter",
    "MultiKueue: workloads evicted on the worker cluster running them (the manager resets its MultiKueue check for "
    "re-admission), per manager ClusterQueue, worker cluster and the reason of the worker's Evicted condition.",
    ("cluster_queue", "cluster", "reason"))
MULTIKUEUE_DISPATCHED = Spec(
    "multikueue_workloads_dispatched_total", "counter",
    "MultiKueue: copies of workloads made on worker clusters (a copy observed on a worker where the manager's "
    "workload, holding quota, had none), per manager ClusterQueue and worker cluster.",
    ("cluster_queue", "cluster"))
MULTIKUEUE_ADMITTED = Spec(
    "multikueue_workloads_admitted_total", "counter",
    "MultiKueue: copies of workloads admitted by a worker cluster (the manager's MultiKueue check turns Ready on "
    "it), per manager ClusterQueue and worker cluster.", ("cluster_queue", "cluster"))

# The LocalQueue twins (Kueue's ``LocalQueueMetrics`` gate): a workload's series are those of the LocalQueue it
# names (``spec.queueName`` in its namespace); without a ``localQueueSelector``, whether that LocalQueue exists or
# not (with one, a LocalQueue that does not exist is not selected: :mod:`projections.local_queue_metrics`).

_LQ = ("name", "namespace")
_LQ_PC = (*_LQ, "priority_class")
_LQ_RESOURCE = (*_LQ, "flavor", "resource")

LQ_PENDING = Spec(
    "kueue_local_queue_pending_workloads", "gauge",
    "Workloads of the LocalQueue waiting in its ClusterQueue, by status ('active', 'inadmissible'), as "
    "pending_workloads counts them.", (*_LQ, "status"))
LQ_UNADMITTED = Spec(
    "kueue_local_queue_unadmitted_workloads", "gauge",
    "Workloads of the LocalQueue not admitted, by ClusterQueue, reason and underlying cause, as "
    "unadmitted_workloads counts them (only for a LocalQueue that exists).",
    (*_LQ, "cluster_queue", "reason", "underlying_cause"))
LQ_QUOTA_RESERVED = Spec(
    "kueue_local_queue_quota_reserved_workloads_total", "counter",
    "Workloads that got a quota reservation, per LocalQueue and priority class.", _LQ_PC)
LQ_QUOTA_RESERVED_WAIT = Spec(
    "kueue_local_queue_quota_reserved_wait_time_seconds", "histogram",
    "Time from a workload's creation, or from its last requeue, until it got a quota reservation, per LocalQueue.",
    _LQ_PC, WAIT_BUCKETS)
LQ_ADMITTED = Spec(
    "kueue_local_queue_admitted_workloads_total", "counter",
    "Workloads admitted (quota reserved and every admission check ready), per LocalQueue and priority class.",
    _LQ_PC)
LQ_ADMISSION_WAIT = Spec(
    "kueue_local_queue_admission_wait_time_seconds", "histogram",
    "Time from a workload's creation, or from its last requeue, until it was admitted, per LocalQueue (Kueue "
    "gives the LocalQueue's histogram the 14 buckets of the other wait times).", _LQ_PC, WAIT_BUCKETS)
LQ_ADMISSION_CHECKS_WAIT = Spec(
    "kueue_local_queue_admission_checks_wait_time_seconds", "histogram",
    "Time from a workload's quota reservation until its admission, for workloads with admission checks, per "
    "LocalQueue.", _LQ_PC, WAIT_BUCKETS)
LQ_READY_WAIT = Spec(
    "kueue_local_queue_ready_wait_time_seconds", "histogram",
    "Time from a workload's creation, or from its last requeue, until its pods were ready, per LocalQueue "
    "(observed as ready_wait_time_seconds is).", _LQ_PC, WAIT_BUCKETS)
LQ_ADMITTED_UNTIL_READY = Spec(
    "kueue_local_queue_admitted_until_ready_wait_time_seconds", "histogram",
    "Time from a workload's admission until its pods were ready, per LocalQueue (observed as "
    "admitted_until_ready_wait_time_seconds is).", _LQ_PC, WAIT_BUCKETS)
LQ_RECOVERY_WAIT = Spec(
    "kueue_local_queue_workload_recovery_wait_time_seconds", "histogram",
    "Time an admitted workload waited for its pods to be ready again after losing readiness, per LocalQueue "
    "(observed as workload_recovery_wait_time_seconds is).", _LQ_PC, WAIT_BUCKETS)
LQ_FINISHED_TOTAL = Spec(
    "kueue_local_queue_finished_workloads_total", "counter",
    "Workloads that finished, per LocalQueue and priority class.", _LQ_PC)
LQ_EXECUTION_TIME = Spec(
    "kueue_local_queue_execution_time_seconds", "histogram",
    "How long a finished workload ran admitted, over all its admissions (runs before an eviction included), per "
    "LocalQueue.", _LQ_PC, WAIT_BUCKETS)
LQ_EVICTED = Spec(
    "kueue_local_queue_evicted_workloads_total", "counter",
    "Evictions of workloads holding quota, per LocalQueue, by the reason and underlying cause of "
    "evicted_workloads_total.", (*_LQ, "reason", "underlying_cause", "priority_class"))
LQ_RESERVING_ACTIVE = Spec(
    "kueue_local_queue_reserving_active_workloads", "gauge",
    "Workloads of the LocalQueue holding a quota reservation in its ClusterQueue.", _LQ)
LQ_ADMITTED_ACTIVE = Spec(
    "kueue_local_queue_admitted_active_workloads", "gauge",
    "Admitted workloads of the LocalQueue that still hold their quota (not finished, not released).", _LQ)
LQ_FINISHED = Spec(
    "kueue_local_queue_finished_workloads", "gauge",
    "Finished workloads of the LocalQueue that still exist.", _LQ)
LQ_STATUS = Spec(
    "kueue_local_queue_status", "gauge",
    "1 on the status of the LocalQueue's Active condition (True, False or Unknown), 0 on the other two.",
    (*_LQ, "active"))
LQ_RESERVATION = Spec(
    "kueue_local_queue_resource_reservation", "gauge",
    "Quota reserved by the LocalQueue's workloads, per flavor and resource of its ClusterQueue (cpu in cores).",
    _LQ_RESOURCE)
LQ_USAGE = Spec(
    "kueue_local_queue_resource_usage", "gauge",
    "Quota used by the LocalQueue's admitted workloads, per flavor and resource of its ClusterQueue (cpu in "
    "cores).", _LQ_RESOURCE)

LQ_AFS_USAGE = Spec(
    "kueue_local_queue_admission_fair_sharing_usage", "gauge",
    "Admission Fair Sharing usage of the LocalQueue: its decayed consumed resources plus pending admission "
    "penalties, weighted per resource, divided by its fairSharing weight (+Inf for a weight of 0), as of the last "
    "record of the log. Only while admissionFairSharing is configured, for a LocalQueue whose ClusterQueue admits "
    "on usage and is active.", (*_LQ, "cluster_queue"))

LOCAL_QUEUE_SPECS: tuple[Spec, ...] = (
    LQ_PENDING, LQ_UNADMITTED, LQ_QUOTA_RESERVED, LQ_QUOTA_RESERVED_WAIT, LQ_ADMITTED, LQ_ADMISSION_WAIT, LQ_ADMISSION_CHECKS_WAIT,
    LQ_READY_WAIT, LQ_ADMITTED_UNTIL_READY, LQ_RECOVERY_WAIT, LQ_FINISHED_TOTAL, LQ_EXECUTION_TIME, LQ_EVICTED, LQ_RESERVING_ACTIVE,
    LQ_ADMITTED_ACTIVE, LQ_FINISHED, LQ_STATUS, LQ_RESERVATION, LQ_USAGE, LQ_AFS_USAGE,
)
"""Exposed only while the ``LocalQueueMetrics`` gate and ``metrics.localQueueMetrics`` are on in the configuration in
force, for the LocalQueues its selector selects, and folded only then."""

WORKLOAD_CREATION_LATENCY = Spec(
    "kueue_workload_creation_latency_seconds", "histogram",
    "Time from a job's creation until the creation of the Workload a job integration made for it, per job kind; "
    "observed only for jobs at generation 1 (or 0) when their Workload was created, and only while "
    "MetricForWorkloadCreationLatency is on.", ("job_kind",), DEFAULT_BUCKETS)
GATE_REMOVAL = Spec(
    "kueue_pod_scheduling_gate_removal_seconds", "histogram",
    "The time between workload admission and scheduling gate removal: from the Admitted transition of a "
    "Pod's Workload until a patch removed one of Kueue's scheduling gates from the Pod (name: the gate), per "
    "ClusterQueue that admitted it and whether the Pod is a pod group's; 0 when the removal came first.",
    ("name", "cluster_queue", "is_group"), DEFAULT_BUCKETS)
"""Not cleared with its ClusterQueue (its first label is not ``cluster_queue``:
:meth:`MetricsFold.forget`)."""

SPECS: tuple[Spec, ...] = (
    ADMISSION_ATTEMPTS, PREEMPTION_SKIPS, PENDING_WORKLOADS, PENDING_SCHEDULING_HASHES, UNADMITTED, QUOTA_RESERVED, QUOTA_RESERVED_WAIT, ADMITTED_WORKLOADS,
    ADMISSION_WAIT, ADMISSION_CHECKS_WAIT, READY_WAIT, ADMITTED_UNTIL_READY, RECOVERY_WAIT, FINISHED_TOTAL,
    EXECUTION_TIME,
    EVICTED, EVICTED_ONCE, PODS_READY_TO_EVICTED, EVICTION_LATENCY, PREEMPTED, REPLACED_SLICES,
    RESERVING_ACTIVE, ADMITTED_ACTIVE, FINISHED_WORKLOADS, CQ_STATUS, CQ_RESERVATION, CQ_USAGE, CQ_RESOURCE_PENDING,
    CQ_NOMINAL,
    CQ_BORROWING, CQ_LENDING, CQ_INFO, COHORT_INFO, CQ_WEIGHTED_SHARE, COHORT_WEIGHTED_SHARE, COHORT_SUBTREE_QUOTA,
    COHORT_SUBTREE_ADMITTED, COHORT_SUBTREE_RESERVATIONS, COHORT_SUBTREE_ADMITTED_ACTIVE, WORKLOAD_CREATION_LATENCY,
    GATE_REMOVAL, MULTIKUEUE_CLUSTER_STATUS, MULTIKUEUE_EVICTED, MULTIKUEUE_DISPATCHED, MULTIKUEUE_ADMITTED,
    *LOCAL_QUEUE_SPECS,
)
"""Every metric, in exposition order."""
_LOCAL = frozenset(s.name for s in LOCAL_QUEUE_SPECS)

COUNT_OF = {QUOTA_RESERVED.name: QUOTA_RESERVED_WAIT.name, ADMITTED_WORKLOADS.name: ADMISSION_WAIT.name,
            LQ_QUOTA_RESERVED.name: LQ_QUOTA_RESERVED_WAIT.name, LQ_ADMITTED.name: LQ_ADMISSION_WAIT.name}
"""Counters that count exactly what a histogram observes (Kueue moves both together): read off its counts."""
FOLDED: tuple[Spec, ...] = tuple(s for s in SPECS if s.kind != "gauge" and s.name not in COUNT_OF)
"""The counters and histograms folded from the log (kept in snapshots)."""
_BY_NAME = {s.name: s for s in SPECS}


def _keyed_by(spec: Spec) -> tuple[str, tuple[int, ...]] | None:
    """The kind of object a metric's series are keyed by, and where its name is among the labels (a LocalQueue's:
    name, then namespace): the object whose custom labels the series carry. None for a metric keyed by none."""
    labels = spec.labels
    if spec in LOCAL_QUEUE_SPECS:
        return LOCAL_QUEUE, (labels.index("name"), labels.index("namespace"))
    for label in ("cluster_queue", "preempting_cluster_queue"):
        if label in labels:
            return CLUSTER_QUEUE, (labels.index(label),)
    if "cohort" in labels:
        return COHORT, (labels.index("cohort"),)
    return None


KEYED_BY = {s.name: found for s in SPECS if (found := _keyed_by(s)) is not None}
"""Metric -> the kind of object its series are keyed by, and the positions of the object's name among its labels
(Kueue's rule for custom labels: every metric keyed by a ClusterQueue, the preempting one included, a LocalQueue or
a Cohort)."""

FOLDED_SPLIT_BY_WORKLOAD = frozenset({LQ_ADMITTED.name, LQ_ADMISSION_WAIT.name})
"""The folded metrics Kueue labels with the admitted workload's values under ``sourceKind: Workload`` custom labels
(v0.20, #13635): the fold keys each observation with the values the workload had when it was admitted."""
SPLIT_BY_WORKLOAD = frozenset({PENDING_WORKLOADS.name, LQ_PENDING.name, ADMITTED_ACTIVE.name,
                               LQ_ADMITTED_ACTIVE.name}) | FOLDED_SPLIT_BY_WORKLOAD
"""The metrics Kueue splits by the values of the workloads they count when ``sourceKind: Workload`` custom labels
are configured: the gauges a series per value set with workloads (none for a queue with none), the workload labels
after the queue's own custom labels. The LocalQueue's admitted ones are Kueue v0.20's (#13635)."""

# --- how the log is read --------------------------------------------------------------------------------------

FAILED_CHECKS_MESSAGE = "The workload has failed admission checks"
"""The scheduler's QuotaReserved=False message for a head with a check in Retry or Rejected (an attempt with no
requeue reason)."""
REMOTE_EVICTED_PREFIX = "Workload evicted on worker cluster: "
REMOTE_ADMITTED_PREFIX = "The workload was admitted on "
"""The message of the MultiKueue check turning Ready on the worker that admitted the copy."""
"""The MultiKueue check's Retry message when the workload's copy was evicted on its worker."""
NO_REPLACEMENT_PREFIX = "Workload was evicted as there was no replacement"
"""A second pass that found no node to replace a failed one evicts the workload in the scheduling cycle."""

_NONE, _INADMISSIBLE, _SUCCESS = 0, 1, 2
_RESULTS = ("", "inadmissible", "success")
_RESULT_OF_TYPE = {ev.QuotaReserved: _SUCCESS, ev.TopologyAssigned: _SUCCESS, ev.WorkloadPreempted: _INADMISSIBLE,
                   ev.SecondPassFailed: _INADMISSIBLE}


def attempt_result(e: ev.Decision) -> int:
    """What a decision says about the scheduling cycle it belongs to: 2 (a workload was assumed or evicted by the
    cycle: the attempt succeeded), 1 (the cycle tried a workload and did not admit it), 0 (nothing: a controller
    rule's decision, or one that does not tell). ``decide`` returns either the controller rules' decisions or
    one cycle's, never both, so one such decision makes its whole batch an admission attempt."""
    t = type(e)
    if t is ev.WorkloadPending:
        if e.requeue_reason or (e.reason in ("PendingEvaluation", LEGACY_PENDING)  # type: ignore[union-attr]
                                and e.message == FAILED_CHECKS_MESSAGE):  # type: ignore[union-attr]
            return _INADMISSIBLE
        return _NONE  # the workload controller's status sync, or blockAdmission's wait (not a failed attempt)
    if t is ev.WorkloadEvicted:
        return _SUCCESS if e.message.startswith(NO_REPLACEMENT_PREFIX) else _NONE  # type: ignore[union-attr]
    return _RESULT_OF_TYPE.get(t, _NONE)


def batch_result(batch: list[Any]) -> str:
    """``success``, ``inadmissible`` or "" (not a scheduling cycle) for one batch of decisions."""
    best = max((attempt_result(e) for e in batch if isinstance(e, ev.Decision)), default=_NONE)
    return _RESULTS[best]


# --- the fold ----------------------------------------------------------------------------------------------------


Observed = list[int]
"""One histogram series: observations per bucket (one per bound, then one past the largest), then their sum in
ms (an integer: sums are exact, whatever order snapshots cut the log in)."""


class CountedEviction(msgspec.Struct, array_like=True, frozen=True):
    """What the fold counted for an eviction decision (a preemption, an eviction, a deactivation) whose
    outcome the connector has not reported yet: Kueue counts an eviction only once its status write succeeds
    (#6360), so a ``DecisionRejected`` of it takes all of this back (:func:`uncount_eviction`), a
    ``DecisionApplied`` keeps it."""

    decision: int
    """The decision's offset."""
    key: str
    uid: str
    """The workload's, whose eviction record (``WorkloadInfo.evictions``) counted it under ``labels[1:3]``."""
    labels: tuple[str, ...]
    """``evicted_workloads_total``'s: ClusterQueue, reason, underlying cause, priority class."""
    local: tuple[str, ...] = ()
    """``local_queue_evicted_workloads_total``'s, () when not counted."""
    preempted: tuple[str, ...] = ()
    """``preempted_workloads_total``'s (preemptor's ClusterQueue, reason), () for no preemption."""
    once: bool = False
    """Counted in ``evicted_workloads_once_total`` (its record's entry went from 0 to 1)."""
    ready_ms: int | None = None
    """Observed into ``pods_ready_to_evicted_time_seconds`` (ms), None when not."""


UNCONFIRMED_LIMIT = 1024
"""How many evictions awaiting their outcome the fold remembers (the oldest go first). A connector reports
each outcome within moments; a log no connector carries out (a simulation) gets none, and must not make the
fold grow."""


class MetricsSnapshot(msgspec.Struct, array_like=True):
    counters: list[tuple[str, list[tuple[list[str], int]]]]
    histograms: list[tuple[str, list[tuple[list[str], Observed]]]]
    cycle: int
    attempt: int
    evicted_once: list[tuple[str, list[tuple[str, str]]]] = []
    """Workload key -> the (reason, underlying cause) pairs ``evicted_workloads_once_total`` had counted it under,
    in snapshots of versions 4 to 43 (restored as those workloads' eviction records); written empty since, the
    records being the workloads' own (``WorkloadInfo.evictions``)."""
    preemption_skips: list[tuple[str, int, int]] = []
    """(ClusterQueue, cycle, skips) of ``MetricsFold.skips``, from version 48 on."""
    unconfirmed: list[CountedEviction] = []
    """``MetricsFold.unconfirmed`` by decision offset, from version 59 on."""


_Seen = tuple[WorkloadInfo, str, str, o.Admission | None, bool, tuple[o.Condition, ...], Any]
"""A workload just before an event is folded: the workload (the same object after), its phase, its Evicted
reason, its admission, whether its pods were ready, its conditions (the event may rewrite PodsReady, which
an eviction is timed from) and its MultiKueue copies (``remotes``). ``ClusterState.apply`` takes it for the
events of :data:`NEEDS_BEFORE`."""

_QR_WAIT, _ADM_WAIT, _CHECKS_WAIT = QUOTA_RESERVED_WAIT.name, ADMISSION_WAIT.name, ADMISSION_CHECKS_WAIT.name
_FIN, _EXEC, _REPLACED = FINISHED_TOTAL.name, EXECUTION_TIME.name, REPLACED_SLICES.name
_READY_WAIT, _UNTIL_READY, _READY_TO_EVICTED = READY_WAIT.name, ADMITTED_UNTIL_READY.name, PODS_READY_TO_EVICTED.name
_EVICTED, _EVICTED_ONCE, _EVICTION_LATENCY = EVICTED.name, EVICTED_ONCE.name, EVICTION_LATENCY.name
_LQ_QR_WAIT, _LQ_ADM_WAIT, _LQ_CHECKS_WAIT = (
    LQ_QUOTA_RESERVED_WAIT.name, LQ_ADMISSION_WAIT.name, LQ_ADMISSION_CHECKS_WAIT.name)
_LQ_READY_WAIT, _LQ_UNTIL_READY = LQ_READY_WAIT.name, LQ_ADMITTED_UNTIL_READY.name
_RECOVERY_WAIT, _LQ_RECOVERY_WAIT = RECOVERY_WAIT.name, LQ_RECOVERY_WAIT.name
_LQ_FIN, _LQ_EXEC, _LQ_EVICTED = LQ_FINISHED_TOTAL.name, LQ_EXECUTION_TIME.name, LQ_EVICTED.name
_SUBTREE_ADMITTED = COHORT_SUBTREE_ADMITTED.name
_CREATION_LATENCY, _GATE_REMOVAL = WORKLOAD_CREATION_LATENCY.name, GATE_REMOVAL.name
_MK_EVICTED, _MK_DISPATCHED, _MK_ADMITTED = MULTIKUEUE_EVICTED.name, MULTIKUEUE_DISPATCHED.name, MULTIKUEUE_ADMITTED.name
_BOUNDS_MS = {s.name: [round(b * 1000) for b in s.buckets] for s in FOLDED if s.kind == "histogram"}


class MetricsFold:
    """The counters and histograms, folded. ``ClusterState.apply`` calls the hook of every event of
    :data:`METERED` once the event is folded, with the workload as it was before (:data:`_Seen`) when the hook
    needs it. A metric moves only when the projection shows the transition it counts, so the metrics
    agree with the state whatever the log holds (a decision the fold ignores counts nothing).

    The hooks are on the fold's hot path: one per event type, the work inline, the series tables made once."""

    __slots__ = ("attempt", "counters", "cycle", "histograms", "skips", "unconfirmed")

    def __init__(self) -> None:
        self.counters: dict[str, dict[tuple[str, ...], int]] = {s.name: {} for s in FOLDED if s.kind == "counter"}
        self.histograms: dict[str, dict[tuple[str, ...], Observed]] = {
            s.name: {} for s in FOLDED if s.kind == "histogram"}
        self.cycle = 0
        """Cycle number of the last decision folded."""
        self.attempt = _NONE
        """How that cycle counts in ``admission_attempts_total`` so far."""
        self.skips: dict[str, tuple[int, int]] = {}
        """ClusterQueue -> (cycle, preemption skips) of the last cycle that skipped one of its workloads after it got
        preemption targets: ``admission_cycle_preemption_skips``, which Kueue sets at the end of each cycle for the
        ClusterQueues that cycle skipped workloads of, and leaves as it was for the others."""
        self.unconfirmed: dict[int, CountedEviction] = {}
        """Decision offset -> what its eviction counted, until its outcome (at most :data:`UNCONFIRMED_LIMIT`;
        inserted in offset order, as the log is folded and as a snapshot restores them)."""

    def count_attempt(self, result: int) -> None:
        """The cycle of the decision just folded tried to admit (``result`` > what it counted as so far)."""
        attempts = self.counters[ADMISSION_ATTEMPTS.name]
        if self.attempt == _INADMISSIBLE:  # the cycle turned out to admit something after all
            attempts[("inadmissible",)] -= 1
        key = (_RESULTS[result],)
        attempts[key] = attempts.get(key, 0) + 1
        self.attempt = result

    def forget(self, cq: str) -> None:
        """ClusterQueue ``cq`` was deleted: its series go, as Kueue clears them (a ClusterQueue of that name
        created later counts from zero)."""
        self.skips.pop(cq, None)
        for table in (self.counters, self.histograms):
            for name in sorted(table):
                if _BY_NAME[name].labels[0] in ("cluster_queue", "preempting_cluster_queue"):
                    series = table[name]
                    for labels in [k for k in series if k[0] == cq]:
                        del series[labels]

    def forget_local_queue(self, key: str) -> None:
        """LocalQueue ``key`` (``namespace/name``) was deleted, relabelled, or stopped matching the
        ``localQueueSelector``: its series go, as Kueue clears them."""
        namespace, _, name = key.partition("/")
        for table in (self.counters, self.histograms):
            for metric in sorted(table):
                if metric in _LOCAL:
                    series = table[metric]
                    for labels in [k for k in series if k[0] == name and k[1] == namespace]:
                        del series[labels]

    @property
    def counts_cohorts(self) -> bool:
        """Some cohort has admissions counted (``cohort_subtree_admitted_workloads_total``)."""
        return bool(self.counters[_SUBTREE_ADMITTED])

    def forget_cohort(self, name: str) -> None:
        """Cohort ``name`` was deleted, or no longer exists (no object, nothing names it): its admissions go, as
        Kueue clears them (counted from zero if it comes back)."""
        series = self.counters[_SUBTREE_ADMITTED]
        for labels in [k for k in series if k[0] == name]:
            del series[labels]

    def keep_cohorts(self, existing: Container[str]) -> None:
        """The cohort tree changed: the admissions of cohorts not in ``existing`` go (:meth:`forget_cohort`)."""
        series = self.counters[_SUBTREE_ADMITTED]
        for labels in [k for k in series if k[0] not in existing]:
            del series[labels]

    # --- snapshots ----------------------------------------------------------------------------------------

    def snapshot(self) -> MetricsSnapshot:
        return MetricsSnapshot(
            counters=[(name, [(list(k), v) for k, v in sorted(self.counters[name].items())])
                      for name in sorted(self.counters) if self.counters[name]],
            histograms=[(name, [(list(k), v) for k, v in sorted(self.histograms[name].items())])
                        for name in sorted(self.histograms) if self.histograms[name]],
            cycle=self.cycle, attempt=self.attempt,
            preemption_skips=[(cq, cycle, n) for cq, (cycle, n) in sorted(self.skips.items())],
            unconfirmed=[self.unconfirmed[d] for d in sorted(self.unconfirmed)])

    @classmethod
    def restore(cls, snap: MetricsSnapshot) -> MetricsFold:
        m = cls()
        for name, series in snap.counters:
            if name in m.counters:
                m.counters[name] = {tuple(k): v for k, v in series}
        for name, series in snap.histograms:
            if name in m.histograms:
                m.histograms[name] = {tuple(k): list(v) for k, v in series}
        m.cycle, m.attempt = snap.cycle, snap.attempt
        m.skips = {cq: (cycle, n) for cq, cycle, n in snap.preemption_skips}
        m.unconfirmed = {c.decision: c for c in snap.unconfirmed}
        return m


# --- the hooks: ``hook(metrics, state, event, seen)`` after the event is folded -------------------------------


# Each hook runs once per event of its type: keep them to a few calls (``_observe``, ``_queued_since``).

_QR_BOUNDS, _ADM_BOUNDS, _EXEC_BOUNDS = _BOUNDS_MS[_QR_WAIT], _BOUNDS_MS[_ADM_WAIT], _BOUNDS_MS[_EXEC]


def _decided(m: MetricsFold, state: ClusterState, e: Any, seen: _Seen | None) -> None:
    """Any decision: the admission attempt of its cycle."""
    if e.cycle != m.cycle:
        m.cycle, m.attempt = e.cycle, _NONE
    if m.attempt != _SUCCESS:
        result = attempt_result(e)
        if result > m.attempt:
            m.count_attempt(result)


def _pending_decided(m: MetricsFold, state: ClusterState, e: Any, seen: _Seen | None) -> None:
    """A failed attempt: its cycle's admission attempt, and the preemption skip it may be, counted in its
    ClusterQueue (its LocalQueue's, as the scheduler took it) for that cycle."""
    _decided(m, state, e, seen)
    if not e.preemption_skipped:
        return
    wl = state.workloads.get(e.key)
    lq = state.local_queues.get(f"{wl.namespace}/{wl.queue_name}") if wl is not None else None
    if lq is None:
        return
    cq = lq.spec.cluster_queue
    last = m.skips.get(cq)
    m.skips[cq] = (e.cycle, last[1] + 1 if last is not None and last[0] == e.cycle else 1)


def _queued_since(wl: WorkloadInfo) -> int:
    """Kueue's queued time: the Requeued condition's last transition, else the creation."""
    for c in wl.conditions:
        if c.type == "Requeued":
            return parse_time(c.last_transition_time) if c.last_transition_time else wl.created
    return wl.created


def _reserved(m: MetricsFold, state: ClusterState, e: Any, seen: _Seen | None) -> None:
    if e.cycle != m.cycle:
        m.cycle, m.attempt = e.cycle, _NONE
    if m.attempt != _SUCCESS:
        m.count_attempt(_SUCCESS)
    if seen is None or seen[1] != PENDING:
        return
    wl = seen[0]
    if wl.phase != RESERVED:
        return
    ms = e.time - _queued_since(wl)
    _observe(m.histograms[_QR_WAIT], _QR_BOUNDS, (wl.cluster_queue, wl.priority_class), ms)
    if state.local_queue_metrics_for(wl.namespace, wl.queue_name):
        _observe(m.histograms[_LQ_QR_WAIT], _QR_BOUNDS, (wl.queue_name, wl.namespace, wl.priority_class), ms)


def _admitted(m: MetricsFold, state: ClusterState, e: Any, seen: _Seen | None) -> None:
    if e.cycle != m.cycle:
        m.cycle, m.attempt = e.cycle, _NONE
    if seen is None or seen[1] != RESERVED:
        return
    wl = seen[0]
    if wl.phase != ADMITTED:
        return
    labels = (wl.cluster_queue, wl.priority_class)
    ms = e.time - _queued_since(wl)
    _observe(m.histograms[_ADM_WAIT], _ADM_BOUNDS, labels, ms)
    cohorts = state.forest.cohort_path(wl.cluster_queue)
    if cohorts:
        series = m.counters[_SUBTREE_ADMITTED]
        for cohort in cohorts:
            key = (cohort, wl.priority_class)
            series[key] = series.get(key, 0) + 1
    checks_ms = _checks_wait(wl, e.time)
    if checks_ms is not None:
        _observe(m.histograms[_CHECKS_WAIT], _BOUNDS_MS[_CHECKS_WAIT], labels, checks_ms)
    if state.local_queue_metrics_for(wl.namespace, wl.queue_name):
        lq_labels = (wl.queue_name, wl.namespace, wl.priority_class)
        _observe(m.histograms[_LQ_ADM_WAIT], _QR_BOUNDS, _with_workload_values(state, lq_labels, wl), ms)
        if checks_ms is not None:
            _observe(m.histograms[_LQ_CHECKS_WAIT], _QR_BOUNDS, lq_labels, checks_ms)


def _checks_wait(wl: WorkloadInfo, admitted_at: int) -> int | None:
    """What ``admission_checks_wait_time_seconds`` observes of ``wl``'s admission at ``admitted_at`` (ms),
    None for nothing. Kueue observes it on two paths. The scheduler's admission — in the cycle that reserves
    the quota, or in the second pass that places a delayed topology request once the checks are Ready (its pod
    sets then show ``delayedTopologyRequest: Ready``) — observes 0, and only for a workload with checks
    (``recordWorkloadAdmissionEvents``). The workload controller's admission of a workload that held its quota
    before (``SyncAdmittedCondition`` in ``Reconcile``) observes the time since the reservation, with or
    without checks (a workload whose ClusterQueue stopped listing the check it waited for has none left)."""
    reserved_at = wl.reserved_at
    if reserved_at is None:
        return None
    adm = wl.admission
    if adm is not None and any(p.delayed_topology_request == "Ready" for p in adm.pod_set_assignments):
        return 0 if wl.check_states else None
    if wl.check_states or reserved_at < admitted_at:
        return admitted_at - reserved_at
    return None


def _with_workload_values(state: ClusterState, labels: tuple[str, ...], wl: WorkloadInfo) -> tuple[str, ...]:
    """``labels`` followed by ``wl``'s values under the ``sourceKind: Workload`` custom labels in force (as they
    are now: Kueue labels the admission with the workload's values then), for :data:`FOLDED_SPLIT_BY_WORKLOAD`."""
    values_of = _workload_values(state)
    return labels if values_of is None else labels + values_of(wl)


def uncount_reservation(m: MetricsFold, state: ClusterState, wl: WorkloadInfo) -> None:
    """The fold forgets ``wl``'s reservation (still held as it was decided), which was never written. Kueue
    counts a reservation, and an admission written with it or after it, only once its status write succeeds;
    one whose write lost the race to a rewritten Workload it never counted: what :func:`_reserved` and
    :func:`_admitted` observed for it is taken back (``admission_attempts_total`` stays, as Kueue counts the
    attempt when the scheduler assumes the workload)."""
    reserved_at = wl.reserved_at
    if reserved_at is None:
        return
    labels = (wl.cluster_queue, wl.priority_class)
    lq_labels = (wl.queue_name, wl.namespace, wl.priority_class)
    local = state.local_queue_metrics_for(wl.namespace, wl.queue_name)
    queued = _queued_since(wl)
    _unobserve(m.histograms[_QR_WAIT], _QR_BOUNDS, labels, reserved_at - queued)
    if local:
        _unobserve(m.histograms[_LQ_QR_WAIT], _QR_BOUNDS, lq_labels, reserved_at - queued)
    admitted_at = wl.admitted_at
    if wl.phase != ADMITTED or admitted_at is None:
        return
    _unobserve(m.histograms[_ADM_WAIT], _ADM_BOUNDS, labels, admitted_at - queued)
    series = m.counters[_SUBTREE_ADMITTED]
    for cohort in state.forest.cohort_path(wl.cluster_queue):
        _take_one(series, (cohort, wl.priority_class))
    checks_ms = _checks_wait(wl, admitted_at)
    if checks_ms is not None:
        _unobserve(m.histograms[_CHECKS_WAIT], _BOUNDS_MS[_CHECKS_WAIT], labels, checks_ms)
    if local:
        _unobserve(m.histograms[_LQ_ADM_WAIT], _QR_BOUNDS, _with_workload_values(state, lq_labels, wl),
                   admitted_at - queued)
        if checks_ms is not None:
            _unobserve(m.histograms[_LQ_CHECKS_WAIT], _QR_BOUNDS, lq_labels, checks_ms)


def _evicted(m: MetricsFold, state: ClusterState, e: Any, seen: _Seen | None) -> None:
    """An eviction of a workload holding quota: counted at once, and remembered (:class:`CountedEviction`)
    until the connector reports whether it was carried out."""
    _decided(m, state, e, seen)
    if seen is None:
        return
    wl, phase, evicted, adm, ready, conditions, _ = seen
    if evicted or adm is None or phase not in (RESERVED, ADMITTED) or not wl.evicted:
        return
    if condition_only_eviction(wl, e):
        return  # a parent's condition set by Kueue's variant controller, which reports no eviction
    key: tuple[str, ...] = ()
    if type(e) is ev.WorkloadPreempted:
        preemptor = state.workloads.get(e.preemptor)
        key = (preemptor.cluster_queue if preemptor is not None else "", e.reason)
        preempted = m.counters[PREEMPTED.name]
        preempted[key] = preempted.get(key, 0) + 1
    reason, cause = eviction_stats.reason_and_cause(e)  # Kueue's labels are its record's pair
    labels = (adm.cluster_queue, reason, cause, wl.priority_class)
    series = m.counters[_EVICTED]
    series[labels] = series.get(labels, 0) + 1
    lq_labels: tuple[str, ...] = ()
    if state.local_queue_metrics_for(wl.namespace, wl.queue_name):
        lq_labels = (wl.queue_name, wl.namespace, reason, cause, wl.priority_class)
        series = m.counters[_LQ_EVICTED]
        series[lq_labels] = series.get(lq_labels, 0) + 1
    count = eviction_stats.count_of(wl.evictions, reason, cause)
    if count == 1:  # its entry was 0 before
        series = m.counters[_EVICTED_ONCE]
        series[labels] = series.get(labels, 0) + 1
    ready_ms = None
    if ready:  # Kueue times the eviction from PodsReady=True, which it writes only under waitForPodsReady
        since = _true_since(next((c for c in conditions if c.type == "PodsReady"), None))
        if since is not None and state.waits_for_pods_ready:
            ready_ms = e.time - since
            _observe(m.histograms[_READY_TO_EVICTED], _BOUNDS_MS[_READY_TO_EVICTED], labels[:3], ready_ms)
    unconfirmed = m.unconfirmed
    if len(unconfirmed) >= UNCONFIRMED_LIMIT:
        del unconfirmed[next(iter(unconfirmed))]  # the oldest decision (offset order)
    unconfirmed[state.offset] = CountedEviction(
        decision=state.offset, key=wl.key, uid=wl.uid, labels=labels, local=lq_labels, preempted=key,
        once=count == 1, ready_ms=ready_ms)


def uncount_eviction(m: MetricsFold, counted: CountedEviction) -> None:
    """The eviction ``counted`` was rejected, never carried out: what :func:`_evicted` counted for it is taken
    back (a series left at 0 goes, as Kueue has none it never counted into)."""
    labels = counted.labels
    _take_one(m.counters[_EVICTED], labels)
    if counted.local:
        _take_one(m.counters[_LQ_EVICTED], counted.local)
    if counted.preempted:
        _take_one(m.counters[PREEMPTED.name], counted.preempted)
    if counted.once:
        _take_one(m.counters[_EVICTED_ONCE], labels)
    if counted.ready_ms is not None:
        _unobserve(m.histograms[_READY_TO_EVICTED], _BOUNDS_MS[_READY_TO_EVICTED], labels[:3],
                   counted.ready_ms)


def _take_one(series: dict[tuple[str, ...], int], key: tuple[str, ...]) -> None:
    """One less in a counter's series (none when it has none, as after its ClusterQueue's deletion)."""
    n = series.get(key, 0)
    if n > 1:
        series[key] = n - 1
    elif n:
        del series[key]


def _deactivated(m: MetricsFold, state: ClusterState, e: Any, seen: _Seen | None) -> None:
    """A deactivation evicts a workload holding quota (unless it was evicted already) and, in the projection,
    releases its quota at once."""
    _evicted(m, state, e, seen)
    if seen is not None and seen[1] in (RESERVED, ADMITTED) and seen[0].phase == PENDING and seen[3] is not None:
        _released(m, seen[0], seen[3].cluster_queue, e.time)


def _requeued(m: MetricsFold, state: ClusterState, e: Any, seen: _Seen | None) -> None:
    """With ``release``, the reservation of a workload whose job has stopped is cleared: it is pending again."""
    _decided(m, state, e, seen)
    if e.release and seen is not None and seen[1] in (RESERVED, ADMITTED) and seen[0].phase == PENDING \
            and seen[3] is not None:
        _released(m, seen[0], seen[3].cluster_queue, e.time)


def _released(m: MetricsFold, wl: WorkloadInfo, cq: str, time: int) -> None:
    """Workload ``wl`` went from holding quota in ``cq`` to pending: when it shows Evicted=True, Kueue's workload
    controller observes the eviction latency, from the condition's last transition (whole seconds, as
    Kubernetes stores it) under its reason."""
    c = wl.condition("Evicted")
    if c is None or c.status != "True" or not c.last_transition_time:
        return
    _observe(m.histograms[_EVICTION_LATENCY], _BOUNDS_MS[_EVICTION_LATENCY], (cq, c.reason),
             time - parse_time(c.last_transition_time))


def _pods_ready(m: MetricsFold, state: ClusterState, e: Any, seen: _Seen | None) -> None:
    """PodsReady turned True on an admitted workload: Kueue's job reconciler writes that transition, only under
    waitForPodsReady (a repeat of True is no transition). The first one of an admission (Started) observes both
    ready wait times; a recovery (Recovered, after WaitForRecovery) observes only the recovery wait, from the
    WaitForRecovery transition, as Kueue v0.20 does."""
    if not e.ready or seen is None or seen[4]:
        return
    wl = seen[0]
    if wl.phase != ADMITTED or wl.admission is None or not state.waits_for_pods_ready:
        return
    labels = (wl.admission.cluster_queue, wl.priority_class)
    since = _recovering_since(seen[5])
    if since is not None:
        now = wl.condition("PodsReady")
        if now is not None and now.reason == RECOVERED:
            _observe(m.histograms[_RECOVERY_WAIT], _QR_BOUNDS, labels, e.time - since)
            if state.local_queue_metrics_for(wl.namespace, wl.queue_name):
                _observe(m.histograms[_LQ_RECOVERY_WAIT], _QR_BOUNDS, (wl.queue_name, wl.namespace,
                                                                       wl.priority_class), e.time - since)
        return
    queued = e.time - _queued_since(wl)
    _observe(m.histograms[_READY_WAIT], _BOUNDS_MS[_READY_WAIT], labels, queued)
    admitted = _condition_time(wl, "Admitted")
    if admitted is not None:
        _observe(m.histograms[_UNTIL_READY], _BOUNDS_MS[_UNTIL_READY], labels, e.time - admitted)
    if state.local_queue_metrics_for(wl.namespace, wl.queue_name):
        lq_labels = (wl.queue_name, wl.namespace, wl.priority_class)
        _observe(m.histograms[_LQ_READY_WAIT], _QR_BOUNDS, lq_labels, queued)
        if admitted is not None:
            _observe(m.histograms[_LQ_UNTIL_READY], _QR_BOUNDS, lq_labels, e.time - admitted)


def _recovering_since(conditions: tuple[o.Condition, ...]) -> int | None:
    """When the PodsReady condition among ``conditions`` turned False waiting for a recovery, else None."""
    for c in conditions:
        if c.type == "PodsReady":
            if c.status == "False" and c.reason == WAIT_FOR_RECOVERY and c.last_transition_time:
                return parse_time(c.last_transition_time)
            return None
    return None


def _condition_time(wl: WorkloadInfo, type_: str) -> int | None:
    """The last transition of the workload's condition ``type_`` when it is True (whole seconds, as Kubernetes
    stores it), else None."""
    return _true_since(wl.condition(type_))


def _true_since(c: o.Condition | None) -> int | None:
    if c is None or c.status != "True" or not c.last_transition_time:
        return None
    return parse_time(c.last_transition_time)


def _finished(m: MetricsFold, state: ClusterState, e: Any, seen: _Seen | None) -> None:
    if seen is None or seen[1] == FINISHED:
        return
    wl = seen[0]
    if wl.phase != FINISHED:
        return
    adm = seen[3]
    labels = (adm.cluster_queue if adm is not None else "", wl.priority_class)
    series = m.counters[_FIN]
    series[labels] = series.get(labels, 0) + 1
    local = state.local_queue_metrics_for(wl.namespace, wl.queue_name)
    lq_labels = (wl.queue_name, wl.namespace, wl.priority_class) if local else None
    if lq_labels is not None:
        series = m.counters[_LQ_FIN]
        series[lq_labels] = series.get(lq_labels, 0) + 1
    admitted_at = wl.admitted_at
    if admitted_at is None and not wl.accumulated_seconds:
        return  # it never ran
    ms = wl.accumulated_seconds * 1000 + (e.time - admitted_at if admitted_at is not None else 0)
    _observe(m.histograms[_EXEC], _EXEC_BOUNDS, labels, ms)
    if lq_labels is not None:
        _observe(m.histograms[_LQ_EXEC], _EXEC_BOUNDS, lq_labels, ms)


def _slice_replaced(m: MetricsFold, state: ClusterState, e: Any, seen: _Seen | None) -> None:
    """An elastic Job's slice finished for its replacement: counted as replaced, in the ClusterQueue it held quota
    in, and as finished."""
    if seen is not None and seen[1] != FINISHED and seen[3] is not None and seen[0].phase == FINISHED:
        series = m.counters[_REPLACED]
        labels = (seen[3].cluster_queue,)
        series[labels] = series.get(labels, 0) + 1
    _finished(m, state, e, seen)


def _check_updated(m: MetricsFold, state: ClusterState, e: Any, seen: _Seen | None) -> None:
    """MultiKueue: the manager resets the check of a workload whose copy was evicted on its worker (Kueue counts
    the eviction there), under the reason the worker's copy shows; or turns it Ready on the worker that admitted
    the copy (Kueue counts an admission there)."""
    _decided(m, state, e, seen)
    if e.state == "Ready" and e.message.startswith(REMOTE_ADMITTED_PREFIX):
        _remote_admitted(m, state, e.key)
        return
    if e.state != "Retry" or not e.message.startswith(REMOTE_EVICTED_PREFIX):
        return
    wl = state.workloads.get(e.key)
    if wl is None or wl.admission is None or not wl.cluster_name:
        return
    copy = wl.remotes.get(wl.cluster_name) if wl.remotes else None
    reason = ""
    for c in copy.conditions if copy is not None else ():
        if c.type == "Evicted" and c.status == "True":
            reason = c.reason
    labels = (wl.admission.cluster_queue, wl.cluster_name, reason)
    series = m.counters[_MK_EVICTED]
    series[labels] = series.get(labels, 0) + 1


def _remote_admitted(m: MetricsFold, state: ClusterState, key: str) -> None:
    wl = state.workloads.get(key)
    if wl is None or wl.admission is None or not wl.cluster_name:
        return
    labels = (wl.admission.cluster_queue, wl.cluster_name)
    series = m.counters[_MK_ADMITTED]
    series[labels] = series.get(labels, 0) + 1


def _remote_observed(m: MetricsFold, state: ClusterState, e: Any, seen: _Seen | None) -> None:
    """MultiKueue: a copy of a workload holding quota appeared on a worker that had none — the copy the manager
    made there (Kueue counts each copy it creates; the log learns of it from the worker's watch)."""
    if not e.exists or seen is None or seen[1] not in (RESERVED, ADMITTED) or seen[3] is None \
            or (seen[6] and e.cluster in seen[6]):
        return
    if state.workloads.get(e.key) is not seen[0] or (seen[0].remotes or {}).get(e.cluster) is None:
        return  # not this workload's copy (another uid): the fold ignored it
    labels = (seen[3].cluster_queue, e.cluster)
    series = m.counters[_MK_DISPATCHED]
    series[labels] = series.get(labels, 0) + 1


def _job_acted(m: MetricsFold, state: ClusterState, e: Any, seen: _Seen | None) -> None:
    """A job integration created a Workload: how long after its job, under ``MetricForWorkloadCreationLatency``
    (Kueue's reconciler observes it right after the creation, so the gate is read as the log stood then)."""
    latency = e.creation_latency_ms
    if latency is not None and e.action == "CreatedWorkload" and state.gate(gates.METRIC_FOR_WORKLOAD_CREATION_LATENCY):
        _observe(m.histograms[_CREATION_LATENCY], _BOUNDS_MS[_CREATION_LATENCY], (e.kind,), latency)


def _gate_removed(m: MetricsFold, state: ClusterState, e: Any, seen: _Seen | None) -> None:
    """A connector lifted a scheduling gate from a Pod of the Workload ``e.workload``: how long after its
    Admitted transition (whole seconds, as Kubernetes stores it), observed only while it shows Admitted=True,
    as Kueue's controllers observe it right after their patch."""
    wl = state.workloads.get(e.workload)
    if wl is None or (e.workload_uid and wl.uid != e.workload_uid):
        return
    admitted = _condition_time(wl, "Admitted")
    if admitted is None or wl.admission is None:
        return
    labels = (e.gate, wl.admission.cluster_queue, "true" if e.is_group else "false")
    _observe(m.histograms[_GATE_REMOVAL], _BOUNDS_MS[_GATE_REMOVAL], labels, e.time - admitted)


def _observe(series: dict[tuple[str, ...], Observed], bounds: list[int], labels: tuple[str, ...], ms: int) -> None:
    h = series.get(labels)
    if h is None:
        h = series[labels] = [0] * (len(bounds) + 2)
    if ms < 0:
        ms = 0
    h[bisect_left(bounds, ms)] += 1
    h[-1] += ms


def _unobserve(series: dict[tuple[str, ...], Observed], bounds: list[int], labels: tuple[str, ...], ms: int) -> None:
    """Take back one observation :func:`_observe` made with the same arguments (none when its bucket is empty);
    a series left with no observation goes, as Kueue has none it never observed into."""
    h = series.get(labels)
    ms = max(ms, 0)
    i = bisect_left(bounds, ms)
    if h is None or h[i] <= 0:
        return
    h[i] -= 1
    h[-1] -= ms
    if not any(h[:-1]):
        del series[labels]


METERED: dict[type, Any] = {
    **dict.fromkeys(ev.DECISION_TYPES, _decided),
    ev.QuotaReserved: _reserved,
    ev.WorkloadAdmitted: _admitted,
    ev.WorkloadPending: _pending_decided,
    ev.WorkloadPreempted: _evicted,
    ev.WorkloadEvicted: _evicted,
    ev.WorkloadDeactivated: _deactivated,
    ev.WorkloadRequeued: _requeued,
    ev.WorkloadFinished: _finished,
    ev.RemoteWorkloadFinished: _finished,  # MultiKueue: finished on its worker, so finished here
    ev.WorkloadSliceReplaced: _slice_replaced,
    ev.PodsReadyChanged: _pods_ready,
    ev.JobActed: _job_acted,
    ev.SchedulingGateRemoved: _gate_removed,
    ev.AdmissionCheckUpdated: _check_updated,
    ev.RemoteWorkloadObserved: _remote_observed,
}
"""Event type -> its hook (every decision has one, for the admission attempts)."""
NEEDS_BEFORE = frozenset({ev.QuotaReserved, ev.WorkloadAdmitted, ev.WorkloadPreempted, ev.WorkloadEvicted,
                          ev.WorkloadDeactivated, ev.WorkloadRequeued, ev.WorkloadFinished, ev.WorkloadSliceReplaced,
                          ev.PodsReadyChanged, ev.RemoteWorkloadFinished, ev.RemoteWorkloadObserved})
"""The event types whose hook needs the workload as it was before (:data:`_Seen`): events about one workload,
which ``ClusterState.apply`` looks the workload up for anyway (for a copy observed on a MultiKueue worker, only
to hand it to the hook)."""


# --- exposition ---------------------------------------------------------------------------------------------


class Family(NamedTuple):
    """One metric's samples: ``(label values, value)`` for counters and gauges; for histograms
    ``(label values, cumulative counts per bucket bound then +Inf, sum in seconds)``."""

    spec: Spec
    samples: list[tuple[tuple[str, ...], Any]]


AfsUsage = Callable[["ClusterState"], list[tuple[tuple[str, ...], float]]]
"""The samples of :data:`LQ_AFS_USAGE` in a state: Admission Fair Sharing's arithmetic is the scheduler's
(``kueue_es.scheduler.afs.usage_samples``), which this layer cannot import, so its caller passes it in."""


def families(state: ClusterState, afs_usage: AfsUsage | None = None) -> list[Family]:
    """Every metric at the state's point of the log, in :data:`SPECS` order; series sorted by labels. The
    LocalQueue families only while the ``LocalQueueMetrics`` gate is on (``local_queue_admission_fair_sharing_usage``
    from ``afs_usage``, none without it); the custom labels of the configuration in force after each metric's own
    (:func:`with_custom_labels`)."""
    out = _families(state, afs_usage)
    custom = state.custom_labels
    return out if custom is None else [with_custom_labels(f, state, custom) for f in out]


def with_custom_labels(family: Family, state: ClusterState, custom: CustomLabels) -> Family:
    """``family`` with the custom labels of the kind of object it is keyed by appended to its labels, each series
    with the values of its object as the state holds it. Kueue clears an object's series when its values change,
    so every series it keeps carries the object's current values: the ones appended here."""
    keyed = KEYED_BY.get(family.spec.name)
    names = custom.names(keyed[0]) if keyed is not None else ()
    split = custom.names(WORKLOAD) if family.spec.name in SPLIT_BY_WORKLOAD else ()
    if keyed is None or not (names or split):
        return family
    spec = family.spec._replace(labels=family.spec.labels + names + split)
    if not names:  # the workload values are in the samples already (:func:`_gauges`)
        return Family(spec, family.samples)
    kind, at = keyed
    own = len(family.spec.labels)
    objects = {CLUSTER_QUEUE: state.cluster_queues, COHORT: state.cohorts, LOCAL_QUEUE: state.local_queues}[kind]
    memo: dict[str, tuple[str, ...]] = {}
    samples = []
    for sample in family.samples:
        labels = sample[0]
        key = labels[at[0]] if len(at) == 1 else f"{labels[at[1]]}/{labels[at[0]]}"
        values = memo.get(key)
        if values is None:
            obj = objects.get(key)
            values = memo[key] = custom.values(kind, obj.metadata if obj is not None else None)
        samples.append((labels[:own] + values + labels[own:], *sample[1:]))
    return Family(spec, samples)


def _families(state: ClusterState, afs_usage: AfsUsage | None) -> list[Family]:
    local = state.local_queue_metrics
    gauges = _gauges(state, local)
    if local and afs_usage is not None:
        gauges[LQ_AFS_USAGE.name] = sorted(afs_usage(state))
    out = []
    for spec in SPECS:
        if spec.name in _LOCAL:
            if local:
                out.append(_selected(state, _family(state, spec, gauges)))
            continue
        out.append(_family(state, spec, gauges))
    return out


def _selected(state: ClusterState, family: Family) -> Family:
    """A LocalQueue family with the series of the LocalQueues ``metrics.localQueueMetrics.localQueueSelector``
    selects now (its labels start with the LocalQueue's name and namespace). The fold counted only those selected
    at the time; one whose labels stopped matching shows nothing, as Kueue clears its series then."""
    memo: dict[tuple[str, str], bool] = {}
    samples = []
    for sample in family.samples:
        key = (sample[0][1], sample[0][0])
        keep = memo.get(key)
        if keep is None:
            keep = memo[key] = state.local_queue_metrics_for(*key)
        if keep:
            samples.append(sample)
    return family if len(samples) == len(family.samples) else Family(family.spec, samples)


def _family(state: ClusterState, spec: Spec, gauges: Gauges) -> Family:
    """The family of ``spec``: a gauge from ``gauges``, a counter or histogram from the fold."""
    if spec.kind == "gauge":
        return Family(spec, gauges[spec.name])
    if spec.name in COUNT_OF:
        hist = state.metrics.histograms[COUNT_OF[spec.name]]
        return Family(spec, [(k, float(sum(hist[k][:-1]))) for k in _in_force(state, spec, hist)])
    if spec.kind == "counter":
        series = state.metrics.counters[spec.name]
        return Family(spec, [(k, float(series[k])) for k in sorted(series)])
    hist = state.metrics.histograms[spec.name]
    return Family(spec, [(k, _cumulative(hist[k]), hist[k][-1] / 1000) for k in _in_force(state, spec, hist)])


def _in_force(state: ClusterState, spec: Spec, series: Mapping[tuple[str, ...], Any]) -> list[tuple[str, ...]]:
    """The sorted series keys of a folded metric; for one of :data:`FOLDED_SPLIT_BY_WORKLOAD`, only those folded
    with as many workload values as the Workload custom labels in force have: the others were counted under
    another Configuration's entries (Kueue, restarted by a new Configuration, counts from zero)."""
    if spec.name not in FOLDED_SPLIT_BY_WORKLOAD:
        return sorted(series)
    custom = state.custom_labels
    width = len(spec.labels) + (len(custom.names(WORKLOAD)) if custom is not None else 0)
    return sorted(k for k in series if len(k) == width)


def merged(parts: list[list[Family]]) -> list[Family]:
    """The families of several states (the shards a replica is active for) as one: series with the same labels
    are added (shards hold disjoint cohort trees, so they seldom share one); a family any of them has is there."""
    if len(parts) == 1:
        return parts[0]
    by_name = [{f.spec.name: f for f in part} for part in parts]
    out = []
    for name in (s.name for s in SPECS):
        present = [part[name].spec for part in by_name if name in part]
        if not present:
            continue
        spec = present[0]  # with the custom labels of its configuration, which the shards share
        acc: dict[tuple[str, ...], Any] = {}
        for part in by_name:
            family = part.get(name)
            for sample in family.samples if family is not None else ():
                labels = sample[0]
                if spec.kind != "histogram":
                    acc[labels] = acc.get(labels, 0.0) + sample[1]
                elif labels in acc:
                    counts, total = acc[labels]
                    acc[labels] = ([a + b for a, b in zip(counts, sample[1], strict=True)], total + sample[2])
                else:
                    acc[labels] = (list(sample[1]), sample[2])
        if spec.kind == "histogram":
            out.append(Family(spec, [(k, *acc[k]) for k in sorted(acc)]))
        else:
            out.append(Family(spec, [(k, acc[k]) for k in sorted(acc)]))
    return out


def _cumulative(h: Observed) -> list[int]:
    out, total = [], 0
    for n in h[:-1]:
        total += n
        out.append(total)
    return out


def _amount(resource: str, value: int) -> float:
    """Kueue's integer amount as the metric reports it: cpu in cores, everything else in units; +Inf at or past
    MaxInt64 (milli for cpu), where Kueue's saturating integers stop counting (Kueue v0.20)."""
    if value >= MAX_INT64:
        return math.inf
    return value / 1000 if resource in MILLI_RESOURCES else float(value)


def _limit(resource: str, quantity: Any) -> float:
    return math.inf if quantity is None else _amount(resource, to_int(resource, quantity))


def cluster_queue_resources(document: dict[str, Any] | None) -> bool:
    """Kueue's ``metrics.enableClusterQueueResources`` under a recorded Configuration document (None: none
    recorded, Kueue's default: off): the ClusterQueue resource gauges and weighted share are reported only then."""
    stanza = document.get("metrics") if document else None
    return isinstance(stanza, dict) and stanza.get("enableClusterQueueResources") is True


Gauges = dict[str, list[tuple[tuple[str, ...], float]]]


ValuesOf = Callable[[WorkloadInfo], tuple[str, ...]]
"""A workload's values under the ``sourceKind: Workload`` custom labels."""


def _workload_values(state: ClusterState) -> ValuesOf | None:
    """The values of a workload under the ``sourceKind: Workload`` custom labels in force, None when none are."""
    custom = state.custom_labels
    if custom is None or not custom.by_kind[WORKLOAD]:
        return None
    return lambda wl: custom.workload_values(wl.labels, wl.metric_annotations)


def _split(labels: tuple[str, ...], workloads: Iterable[WorkloadInfo], values_of: ValuesOf) -> list[tuple[tuple[str, ...], float]]:
    """One series per value set among ``workloads``, counting them, its labels ``labels`` and the values."""
    counts: dict[tuple[str, ...], int] = {}
    for wl in workloads:
        values = values_of(wl)
        counts[values] = counts.get(values, 0) + 1
    return [(labels + values, float(n)) for values, n in sorted(counts.items())]


def _gauges(state: ClusterState, local: bool) -> Gauges:
    out: Gauges = {s.name: [] for s in SPECS if s.kind == "gauge"}
    values_of = _workload_values(state)
    if local:
        _local_queue_gauges(state, out, values_of)
    document = state.config.document if state.config is not None else None
    resources = cluster_queue_resources(document)
    hashing = state.gate(gates.SCHEDULING_EQUIVALENCE_HASHING)
    workloads = state.workloads
    finished: dict[str, int] = {}
    for wl in workloads.values():
        if wl.phase == FINISHED:
            lq = state.local_queues.get(f"{wl.namespace}/{wl.queue_name}")
            if lq is not None:
                finished[lq.spec.cluster_queue] = finished.get(lq.spec.cluster_queue, 0) + 1
    admitted_in: dict[str, int] = {}
    skips = state.metrics.skips
    out[PREEMPTION_SKIPS.name] = [((cq,), float(n)) for cq, (_, n) in skips.items() if cq in state.cluster_queues]
    for name in sorted(state.cluster_queues):
        labels = (name,)
        inactive = state.inactive_reason(name)
        q = state.queues.get(name)
        _pending(out, name, q, inactive is not None, hashing, values_of is not None)
        if values_of is not None and q is not None:
            _pending_split(out, PENDING_WORKLOADS.name, (name,), q.entries, q.inadmissible, inactive is not None, workloads, values_of)
        holding = [workloads[k] for k in state.reserving.get(name, {}) if k in workloads]
        admitted = [wl for wl in holding if wl.phase == ADMITTED]
        admitted_in[name] = len(admitted)
        out[RESERVING_ACTIVE.name].append((labels, float(len(holding))))
        if values_of is None:
            out[ADMITTED_ACTIVE.name].append((labels, float(len(admitted))))
        else:
            out[ADMITTED_ACTIVE.name] += _split(labels, admitted, values_of)
        out[FINISHED_WORKLOADS.name].append((labels, float(finished.get(name, 0))))
        status = "terminating" if inactive == "Terminating" else "active" if inactive is None else "pending"
        out[CQ_STATUS.name] += [((name, s), 1.0 if s == status else 0.0) for s in ("pending", "active", "terminating")]
        if resources:
            _cluster_queue_resources(out, state, name, admitted)
            _resource_pending(out, state, name, q)
    if state.gate(gates.UNADMITTED_WORKLOADS_OBSERVABILITY):
        _unadmitted(state, out, local)
    if state.gate(gates.METRICS_FOR_COHORTS):
        _info(out, state)
    _cohort_subtrees(out, state, admitted_in)
    if fair_share.enabled(document):
        _weighted_shares(state, out, resources)
    out[MULTIKUEUE_CLUSTER_STATUS.name] = multikueue_metrics.cluster_status(state)
    for name in out:
        out[name].sort()
    return out


def _unadmitted(state: ClusterState, out: Gauges, local: bool) -> None:
    """``unadmitted_workloads`` and, with the LocalQueue metrics, its LocalQueue twin: every workload neither
    admitted nor finished, ConcurrentAdmission's variants left out (their parent stands for them), counted by
    ClusterQueue — the one it holds quota in, else its LocalQueue's; none when that LocalQueue is missing — and
    by :func:`unadmitted_labels` (Kueue's queue manager, KEP-10852)."""
    per_cq: dict[tuple[str, str, str], int] = {}
    per_lq: dict[tuple[str, str, str, str, str], int] = {}
    local_queues = state.local_queues
    for wl in state.workloads.values():
        if wl.phase == FINISHED or parent_name(wl):
            continue
        adm = wl.condition("Admitted")
        if adm is not None and adm.status == "True":
            continue
        lq = local_queues.get(f"{wl.namespace}/{wl.queue_name}")
        cq = wl.cluster_queue if wl.reserving else lq.spec.cluster_queue if lq is not None else ""
        if not cq:
            continue
        reason, cause = unadmitted_labels(wl)
        per_cq[cq, reason, cause] = per_cq.get((cq, reason, cause), 0) + 1
        if local and lq is not None:
            k = (wl.queue_name, wl.namespace, cq, reason, cause)
            per_lq[k] = per_lq.get(k, 0) + 1
    out[UNADMITTED.name] += [(k, float(n)) for k, n in per_cq.items()]
    if local:
        out[LQ_UNADMITTED.name] += [(k, float(n)) for k, n in per_lq.items()]


def unadmitted_labels(wl: WorkloadInfo) -> tuple[str, str]:
    """(reason, underlying_cause) of a workload not admitted: its Admitted reason (``NoReservation`` while it
    shows no Admitted condition), and its QuotaReserved reason while False — empty while True,
    ``PendingEvaluation`` while it shows none (a workload no one has written a status for yet)."""
    adm = wl.condition("Admitted")
    qr = wl.condition("QuotaReserved")
    cause = "PendingEvaluation" if qr is None else "" if qr.status == "True" else qr.reason
    return (adm.reason if adm is not None else "NoReservation"), cause


def _pending(out: Gauges, name: str, q: ClusterQueueQueue | None, inactive: bool, hashing: bool,
             split: bool) -> None:
    """Pending workloads, and their scheduling-equivalence classes (Kueue's scheduling hashes: here the shapes the
    queue parks by), of ClusterQueue ``name``. Kueue counts every one of an inactive queue as inadmissible (it can
    admit none of them), and reports the classes only while SchedulingEquivalenceHashing is on. The workloads only when not
    ``split`` by their values (:func:`_pending_split`)."""
    waiting = len(q.entries) if q is not None else 0
    parked = len(q.inadmissible) if q is not None else 0
    if inactive:
        waiting, parked = 0, waiting + parked
    if not split:
        out[PENDING_WORKLOADS.name] += [((name, "active"), float(waiting)), ((name, "inadmissible"), float(parked))]
    if not hashing:
        return
    active = inadmissible = 0
    if q is not None:
        shapes = q.shapes
        active_shapes = {shapes[k] for k in q.entries}
        parked_shapes = {shapes[k] for k in q.inadmissible}
        if inactive:
            inadmissible = len(active_shapes | parked_shapes)
        else:
            active, inadmissible = len(active_shapes), len(parked_shapes)
    out[PENDING_SCHEDULING_HASHES.name] += [((name, "active"), float(active)),
                                            ((name, "inadmissible"), float(inadmissible))]


def _pending_split(out: Gauges, metric: str, labels: tuple[str, ...], waiting: Iterable[str], parked: Iterable[str],
                   inactive: bool, workloads: dict[str, WorkloadInfo], values_of: ValuesOf) -> None:
    """``pending_workloads`` (or the LocalQueue's, by ``labels``) split by the values of the pending workloads
    ``waiting`` and ``parked`` (keys): a series per status and value set that has workloads, as Kueue reports
    them (it deletes the series of a value set once its last workload leaves it)."""
    found = [workloads[k] for k in waiting if k in workloads]
    found_parked = [workloads[k] for k in parked if k in workloads]
    if inactive:
        found, found_parked = [], found + found_parked
    out[metric] += _split((*labels, "active"), found, values_of) + _split((*labels, "inadmissible"), found_parked,
                                                                        values_of)


def _cluster_queue_resources(out: Gauges, state: ClusterState, name: str, admitted: list[WorkloadInfo]) -> None:
    """The resource gauges of ClusterQueue ``name`` (Kueue's optional ones, under
    ``metrics.enableClusterQueueResources``): its quotas and limits in force (under DynamicQuotaOrchestration its
    effective ones, as Kueue reports its cache's), and what its workloads reserve and use."""
    cq = state.cluster_queues[name]
    cohort = cq.spec.cohort_name
    reserved = state.usage.get(name, {})
    used: dict[str, int] = {}
    for wl in admitted:
        for fr, v in wl.usage.items():
            used[fr] = used.get(fr, 0) + v
    quota_frs = []
    for rg in effective_quotas.in_force(cq, state.dynamic_quotas).spec.resource_groups:
        for fq in rg.flavors:
            for rq in fq.resources:
                fr_labels = (cohort, name, fq.name, rq.name)
                quota_frs.append(f"{fq.name}/{rq.name}")
                out[CQ_NOMINAL.name].append((fr_labels, _amount(rq.name, to_int(rq.name, rq.nominal_quota))))
                out[CQ_BORROWING.name].append((fr_labels, _limit(rq.name, rq.borrowing_limit)))
                out[CQ_LENDING.name].append((fr_labels, _limit(rq.name, rq.lending_limit)))
    extra = sorted(fr for fr in set(reserved) | set(used) if fr not in quota_frs and (reserved.get(fr) or used.get(fr)))
    for fr in [*quota_frs, *extra]:
        flavor, _, resource = fr.partition("/")
        fr_labels = (cohort, name, flavor, resource)
        out[CQ_RESERVATION.name].append((fr_labels, _amount(resource, reserved.get(fr, 0))))
        out[CQ_USAGE.name].append((fr_labels, _amount(resource, used.get(fr, 0))))


def _resource_pending(out: Gauges, state: ClusterState, name: str, q: ClusterQueueQueue | None) -> None:
    """``cluster_queue_resource_pending`` of ClusterQueue ``name`` (Kueue v0.18, #10485; v0.20's #13660): the
    requests (per pod times count) of the workloads waiting in its queue, active and inadmissible, per resource.
    Kueue seeds every resource of the spec's resource groups at 0 and keeps the others it sums; here one the spec
    does not name is reported while asked for (Kueue keeps its 0 until the ClusterQueue is next updated)."""
    configured = {rq.name for rg in state.cluster_queues[name].spec.resource_groups for fq in rg.flavors
                  for rq in fq.resources}
    totals = dict.fromkeys(configured, 0)
    if q is not None:
        workloads = state.workloads
        for key in (*q.entries, *q.inadmissible):
            wl = workloads.get(key)
            if wl is None:
                continue
            for ps in wl.pod_sets:
                for resource, per_pod in ps.requests:
                    totals[resource] = totals.get(resource, 0) + per_pod * ps.count
    out[CQ_RESOURCE_PENDING.name] += [((name, r), _amount(r, v)) for r, v in sorted(totals.items())
                                      if v or r in configured]


def _info(out: Gauges, state: ClusterState) -> None:
    """Kueue's info gauges (``MetricsForCohorts``): where each ClusterQueue and cohort sits in its tree, and the
    orchestrator whose effective quotas are in force for it (Kueue v0.20, #15201)."""
    forest = state.forest
    dynamic = state.dynamic_quotas
    for name in sorted(state.cluster_queues):
        parent = forest.parent.get("cq:" + name, "")
        root = forest.root.get("cq:" + name, "")
        dqo = effective_quotas.orchestrator(state.cluster_queues[name], dynamic)
        out[CQ_INFO.name].append(((name, parent[3:], root[3:] if root.startswith("co:") else "", dqo), 1.0))
    for name in sorted(forest.cohort_names):
        node = "co:" + name
        dqo = effective_quotas.orchestrator(state.cohorts.get(name), dynamic)
        out[COHORT_INFO.name].append(((name, forest.parent.get(node, "")[3:], forest.root[node][3:], dqo), 1.0))


def _cohort_subtrees(out: Gauges, state: ClusterState, admitted_in: dict[str, int]) -> None:
    """The subtree gauges of every cohort of the projection's quota tree (which leaves cyclic trees out, as Kueue
    reports nothing for them): its subtree quota and its ClusterQueues' reservations, values above 0 only, and
    the admitted workloads of those ClusterQueues, for a cohort with any ClusterQueue below it."""
    tree = state.quota
    usage = state.usage
    memo: dict[str, tuple[dict[str, int], int, bool]] = {}

    def below(node: QuotaNode) -> tuple[dict[str, int], int, bool]:
        """What the ClusterQueues of ``node``'s subtree reserve, how many workloads they admit, whether any."""
        found = memo.get(node.name)
        if found is None:
            reserved: dict[str, int] = {}
            admitted, any_cq = 0, False
            for child in node.children:
                if child.is_cq:
                    frs, n, has = usage.get(child.name, {}), admitted_in.get(child.name, 0), True
                else:
                    frs, n, has = below(child)
                for fr, v in frs.items():
                    reserved[fr] = reserved.get(fr, 0) + v
                admitted, any_cq = admitted + n, any_cq or has
            found = memo[node.name] = (reserved, admitted, any_cq)
        return found

    for name in sorted(tree.cohorts):
        node = tree.cohorts[name]
        reserved, admitted, any_cq = below(node)
        for fr in sorted(set(node.subtree) | set(reserved)):
            flavor, _, resource = fr.partition("/")
            if node.subtree.get(fr, 0) > 0:
                out[COHORT_SUBTREE_QUOTA.name].append(((name, flavor, resource), _amount(resource, node.subtree[fr])))
            if reserved.get(fr, 0) > 0:
                out[COHORT_SUBTREE_RESERVATIONS.name].append(((name, flavor, resource), _amount(resource, reserved[fr])))
        if any_cq:
            out[COHORT_SUBTREE_ADMITTED_ACTIVE.name].append(((name,), float(admitted)))


def _weighted_shares(state: ClusterState, out: Gauges, cluster_queues: bool) -> None:
    """Kueue's weighted shares, from the projection's quota tree (which leaves cyclic cohort trees out, so their
    nodes report none); the ClusterQueues' only with ``cluster_queues`` (``metrics.enableClusterQueueResources``).
    A node of weight 0 that borrows, ClusterQueue or Cohort, reports NaN: Kueue turns an infinite share into
    NaN for the gauge (its status saturates at MaxInt64 instead; cohort_controller_test.go,
    TestUpdateCohortStatusIfChanged)."""
    tree = state.quota
    memo: dict[str, dict[str, float]] = {}
    weights = fair_share.state_flavor_weights(state)
    for name in sorted(tree.cluster_queues) if cluster_queues else ():
        node = tree.cluster_queues[name]
        share = fair_share.dominant_share(node, memo=memo, weights=weights).weighted
        cohort = node.parent.name if node.parent is not None else ""
        out[CQ_WEIGHTED_SHARE.name].append(((name, cohort), math.nan if share == math.inf else share))
    for name in sorted(tree.cohorts):
        share = fair_share.dominant_share(tree.cohorts[name], memo=memo, weights=weights).weighted
        out[COHORT_WEIGHTED_SHARE.name].append(((name,), math.nan if share == math.inf else share))


def _local_queue_gauges(state: ClusterState, out: Gauges, values_of: ValuesOf | None) -> None:
    """The LocalQueue gauges, counted as the LocalQueue status the connector writes counts them
    (``projections.queue_status.local_queue_status``); ``local_queue_pending_workloads`` and
    ``local_queue_admitted_active_workloads`` split by the workloads' values while ``values_of`` (Workload custom
    labels) is given."""
    workloads = state.workloads
    for key in sorted(state.local_queues):
        lq = state.local_queues[key]
        namespace, _, name = key.partition("/")
        labels = (name, namespace)
        cq_name = lq.spec.cluster_queue
        cq = state.cluster_queues.get(cq_name)
        members = [workloads[k] for k in state.lq_members.get(key, {}) if k in workloads]
        q = state.queues.get(cq_name)
        stopped = lq.spec.stopped
        active = inadmissible = 0
        if q is not None and not stopped:
            active = sum(1 for wl in members if wl.key in q.entries)
            inadmissible = sum(1 for wl in members if wl.key in q.inadmissible)
            if state.inactive_reason(cq_name) is not None:  # as for the ClusterQueue
                active, inadmissible = 0, active + inadmissible
        if values_of is None:
            out[LQ_PENDING.name] += [((*labels, "active"), float(active)),
                                     ((*labels, "inadmissible"), float(inadmissible))]
        elif q is not None and not stopped:
            _pending_split(out, LQ_PENDING.name, labels, (wl.key for wl in members if wl.key in q.entries),
                           (wl.key for wl in members if wl.key in q.inadmissible),
                           state.inactive_reason(cq_name) is not None, workloads, values_of)
        out[LQ_FINISHED.name].append((labels, float(sum(1 for wl in members if wl.phase == FINISHED))))
        status = state.local_queue_active(key)[0]
        out[LQ_STATUS.name] += [((*labels, s), 1.0 if s == status else 0.0) for s in ("True", "False", "Unknown")]
        if cq is None:  # Kueue's cache holds (and reports) a LocalQueue under an existing ClusterQueue only
            continue
        holding = [wl for wl in members if wl.reserving and wl.cluster_queue == cq_name]
        admitted = [wl for wl in holding if wl.phase == ADMITTED]
        out[LQ_RESERVING_ACTIVE.name].append((labels, float(len(holding))))
        if values_of is None:
            out[LQ_ADMITTED_ACTIVE.name].append((labels, float(len(admitted))))
        else:
            out[LQ_ADMITTED_ACTIVE.name] += _split(labels, admitted, values_of)
        reserved: dict[str, int] = {}
        used: dict[str, int] = {}
        for wl in holding:
            for fr, v in wl.usage.items():
                reserved[fr] = reserved.get(fr, 0) + v
                if wl.phase == ADMITTED:
                    used[fr] = used.get(fr, 0) + v
        quota_frs = [f"{fq.name}/{rq.name}" for rg in effective_quotas.in_force(cq, state.dynamic_quotas).spec.resource_groups
                     for fq in rg.flavors for rq in fq.resources]
        extra = sorted(fr for fr in set(reserved) | set(used) if fr not in quota_frs and (reserved.get(fr) or used.get(fr)))
        for fr in [*quota_frs, *extra]:
            flavor, _, resource = fr.partition("/")
            out[LQ_RESERVATION.name].append(((*labels, flavor, resource), _amount(resource, reserved.get(fr, 0))))
            out[LQ_USAGE.name].append(((*labels, flavor, resource), _amount(resource, used.get(fr, 0))))
