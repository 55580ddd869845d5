"""Snapshots of :class:`ClusterState` and its digest.

A snapshot is the whole state in canonical form (every map sorted, derived indexes left out), so two states
that will behave the same encode to the same bytes, whatever order they were built in and whatever
PYTHONHASHSEED the process has. The digest is SHA-256 over those bytes.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import msgspec

from events import objects as o
from events import schema as ev
from events.errors import InvalidInput
from projections import eviction_stats, variants
from projections.admissionchecks import ClusterLink
from projections.afs_ledger import AFS_CHECKPOINT, AfsCheckpoint
from projections.cluster import ClusterState
from projections.eviction_undo import KeptEvictions, Refusal, UnconfirmedEviction
from projections.metrics import MetricsFold, MetricsSnapshot
from projections.queue_order import order_of
from projections.queues import ClusterQueueQueue
from projections.variants import charges_nothing
from projections.workloads import (
    WorkloadInfo,
    grouped_owner,
    intern_scan,
    intern_templates,
    waits_on_requeue_at,
)

SNAPSHOT_VERSION = 73
"""2: the Kueue Configuration in force (``config``, ``config_offset``). 3: the metrics' counters and histograms
(``metrics``). 4: which evictions of each workload ``evicted_workloads_once_total`` has counted
(``metrics.evicted_once``). 5: the LocalQueue counters and histograms (``local_queue_*``, under the
``LocalQueueMetrics`` gate), in ``metrics`` beside the others: the layout is version 4's. 6: each workload's
admission gate (``WorkloadInfo.admission_gate``, its ``kueue.x-k8s.io/admission-gated-by`` annotation). 7: the
reason each parked shape was parked for (``parked_reasons``), and shapes that leave pod-set names out under
``SchedulingEquivalenceHashingIgnorePodSetName``. 8: whether each workload is owned by a single Pod
(``WorkloadInfo.pod_owned``) and the failed nodes its placement was kept on (``WorkloadInfo.kept_nodes``), for
SkipReassignmentForPodOwnedWorkloads. 9: each workload's ``kueue.x-k8s.io/priority-boost`` annotation and the boost
it adds under PriorityBoost (``WorkloadInfo.boost_annotation``, ``WorkloadInfo.boost``). 10: the admissions counted
per cohort (``cohort_subtree_admitted_workloads_total``), in ``metrics`` beside the others: the layout is version
9's. 11: each queue's preemptor workload in either queueing strategy (``QueueSnapshot.preemptor``), for
PrioritizePreemptorWorkloads. 12: each pod set's preferred node affinity (``PodSetInfo.preferred_terms``, which TAS
placement weighs under TASRespectNodeAffinityPreferred), and pod sets' shapes that hold it. 13: each workload's
annotations that ``sourceKind: Workload`` custom metric labels read (``WorkloadInfo.metric_annotations``). 14: the
elastic Job slice each workload replaces (``WorkloadInfo.replaces``, under ElasticJobsViaWorkloadSlices). 15:
MultiKueue: its objects, what was observed of worker clusters (``links``), each workload's owner, worker,
nominations and remote copies (``WorkloadInfo.owner``, ``cluster_name``, ``nominated``, ``remotes``); DRA: the
ResourceClaimTemplates and each pod set's DRA charge or error (``PodSetInfo.dra_requests``, ``dra_error``). 16: when
each workload's nominations last changed (``WorkloadInfo.nominated_at``: the incremental dispatcher's round). 17:
each workload's owner's ``spec.managedBy`` as observed for an owner the log does not hold
(``WorkloadInfo.owner_managed_by``: a JobSet's, for its MultiKueue adapter). 18: each Cohort's status (its
``effectiveQuotas``, in force under DynamicQuotaOrchestration). 19: the DeviceClasses (the extended resources they
serve are charged as DRA devices under KueueDRAIntegrationExtendedResource). 20: each workload's checks whose state
the log set and no upsert has shown yet, with where it was set and written (``WorkloadInfo.unshown_checks``). 21:
the states of checks kueue-es does not run as each workload's last read Workload shows them
(``WorkloadInfo.shown_checks``), and the assignment blockAdmission's held entry waits with
(``WorkloadInfo.waited``). 22: each workload's index among the Workloads its owner makes together and how many
its owner makes as observed (``WorkloadInfo.component_index``, ``owner_replicas``: a LeaderWorkerSet's groups, for
MultiKueue). 23: the TAS placements in the assignment a held entry waits with (``WaitedPodSet.topology_levels``,
``topology_domains``). 24: the UID of the owner of each Workload its owner makes together with others
(``WorkloadInfo.owner_uid``: a LeaderWorkerSet's group is its set's by UID, for MultiKueue). 25: the ResourceSlices
(the devices counter sources of ``deviceClassMappings`` are charged from, under
KueueDRAIntegrationPartitionableDevices). 26: the owner UID of every Workload of a LeaderWorkerSet, not only of those with
a component index (``WorkloadInfo.owner_uid``, indexed by ``ClusterState.owner_groups``); the layout is version 25's.
27: whether each workload is an elastic Job's slice (``WorkloadInfo.elastic``, its ``kueue.x-k8s.io/elastic-job``
annotation, read under ElasticJobsViaWorkloadSlicesWithTAS). 28: each workload's allowed flavors
(``WorkloadInfo.allowed_flavors``, its ``kueue.x-k8s.io/workload-allowed-resource-flavors`` annotation, read under
ConcurrentAdmission). 29: the ``capacity.requests`` of ResourceClaimTemplates' requests (what capacity sources
charge, under KueueDRAIntegrationConsumableCapacity). 30: the workers' LocalQueues and ClusterQueues
(``ClusterState.worker_queues``, under MultiKueueManagerQuotaAutomation); restored from an older one, none is known
until the connector lists them again. 31: each pod set's host ports (``PodSetInfo.host_ports``, read under
SchedulerLibraryIntegration; restored from an older snapshot, a pod set taken before it asks for none until its
workload's templates are taken again). 32: each workload's preemption gates (``WorkloadInfo.preemption_gated`` and
``gate_states``, and the gates of its copies on workers, ``RemoteCopy.preemption_gates``, read under
MultiKueueOrchestratedPreemption). 33: the UID of each ConcurrentAdmission variant's parent
(``WorkloadInfo.owner_uid`` of a Workload owned by a Workload, whose variants ``ClusterState.variants_of`` indexes);
the layout is version 32's. 34: the names of each workload's spec preemption gates
(``WorkloadInfo.spec_gates``, which its status is made to list under MultiKueueOrchestratedPreemption). 35: ``afs_history`` anchored as
``AdmissionFairSharingAnchorAtQuotaReservation`` says (at quota reservation while it is on); an older one was anchored
at admission, so restored under the gate its workloads holding quota without admission enter their LocalQueues' usage
at the restore, as on a configuration turning the gate on. The layout is version 34's. 36: ``gate_states`` also of a
workload whose spec names no preemption gate (the entries Kueue's controller drops); restored from an older one, such
a workload lists none until its next upsert. The layout is version 35's. 37: each workload's
``kueue.x-k8s.io/tas-unhealthy-nodes-eviction-threshold`` (``WorkloadInfo.unhealthy_threshold``, read under
TASReplaceMultipleFailedNodes); restored from an older one, a workload has none until its next upsert. 38: each pod set's
``kueue.x-k8s.io/podset-topology-spreading`` annotation (``PodSetInfo.spreading``; an older one restores without it
until the workload's next upsert). 39: each workload's own
waitForPodsReady timeouts (``WorkloadInfo.own_pods_ready``, its ``kueue.x-k8s.io/wait-for-pods-ready`` annotation,
read under WorkloadLevelWaitForPodsReady); restored from an older one, a workload has none until its next upsert. 40:
whether the log ever showed a Node (``ClusterState.nodes_seen``: the node failure rules apply once Nodes are
watched, every Node deleted too); restored from an older one, it is whether the snapshot holds a Node. 41:
the ResourceClaimTemplates each pod set's claims name (``PodSetInfo.claim_templates``, for KueueDRADeviceFeasibility's
device check), and the ResourceClaims holding devices and the DeviceTaintRules (``ClusterState.resource_claims``,
``ClusterState.device_taint_rules``); an older one restores without them until the workload's next upsert, and
without claims or rules. 42:
each Pod's ``PodScheduled`` condition (``PodStatus.conditions``, read under WaitForPodsReadyUnscheduledTimeout);
restored from an older one, a Pod shows none, so counts as not scheduled, until its next update (the layout is
version 41's). 43: the PreemptionConfigs (ConfigurablePreemptions) among the objects; an older one holds
none. 44: each workload's eviction record (``WorkloadInfo.evictions``, its ``status.schedulingStats.evictions``),
which replaces ``metrics.evicted_once`` (written empty); restored from an older one, a workload's record is each pair
``evicted_once`` held for it, counted once. 45: what topology placement counts of each pod set's pods where it is
not its requests less its DRA charge (``PodSetInfo.placement``: the template's requests before the Configuration's
``resources`` rules, Kueue's #12006); restored from an older one under such rules, every workload takes it from its
template again, and a shape parked then of pod sets that take one matches no workload until the next flush forgets
it (a pod set without one is encoded in a shape as before, so without rules the layout is version 44's but for that
field). 46: ``afs_history`` also holds each LocalQueue's seed (sign 0) from its first appearance: the consumed usage
its status persisted (Kueue's warm start), which also anchors its status samples; restored from an older one, a
LocalQueue whose status shows consumed usage is seeded with it at the restore, as Kueue seeds at a restart, and one
without gets its status from its first admission on (the layout is version 45's). 47: ``afs_history`` kept only for
the LocalQueues that need it (of a ClusterQueue ordering by Admission Fair Sharing, or every one while the recorded
Configuration turns it on, as Kueue samples them all), dropped for a deleted one, with the admitted usage of
ClusterQueues that do not order by it (sign 2: no settlement); restored from an older one, the history of LocalQueues
gone or of such ClusterQueues is dropped and, with Admission Fair Sharing on, the latter start at the restore from
their status as on Kueue's restart (the layout is version 46's). 48: each ClusterQueue's preemption
skips of the last cycle that had any (``metrics.preemption_skips``, ``kueue_admission_cycle_preemption_skips``);
restored from an older one, none are known until the next cycle that skips one. 49: the Admission Fair Sharing history
per LocalQueue (``afs_queues``: LocalQueue key, its checkpoint, its entries without the key), sorted by key, compacted
(:mod:`projections.afs_ledger`); restored from an older one, ``afs_history``'s entries are grouped by LocalQueue in
their order (the fold of one never reads another's), compacted from their next entry on; one holding entries older
than its recorded Configuration is refused (:func:`_refuse_unconvertible_afs`: the log is folded instead). 50: no
Admission Fair Sharing history while no Configuration is recorded (the first one turning it on starts every
LocalQueue from its status, as Kueue's start does); restored from an older one with none recorded, its history is
dropped, and one holding history older than its recorded Configuration, which may have been recorded while none
was, is refused (the layout is version 49's). 51: the log may hold ``QuotaReservationUnset`` decisions (a workload
not admitted yet giving its quota back to a stopped, missing or terminating queue), which older readers cannot
fold (the layout is version 50's). 52: each pod set's requests (``PodSetInfo.requests``, ``placement``) count a
sidecar declared after a regular init container once, as Kubernetes totals a pod, and no template overhead naming
``pods`` or a negative quantity (the layout is version 51's). 53: a workload's usage rescaled by its reclaimable
pods re-enters its LocalQueue's Admission Fair Sharing history without a second entry penalty (the layout is
version 52's). 54: whether the reservation a workload last lost was one the fold forgot
(``WorkloadInfo.reservation_forgotten``), as only then is a ProvisioningRequest the watch never showed withdrawn, one
of a reservation given back being kept; restored from an older one, none is, so a request decided for a forgotten
reservation whose withdrawal was not decided before the snapshot is kept as after an unset. Also from 54 on, the fold
marks the link of a deleted MultiKueueCluster lost at its deletion (restored from an older one, a link of a cluster
deleted before the snapshot still reads connected: a workload dispatched there is retried at once, not after
``workerLostTimeout``), and a pod set's resource-validation messages name the resources as JSON (``["cpu"]``;
restored from an older one, Go's ``[]v1.ResourceName{...}`` stays until the workload's pod sets are folded again).
A version 54 snapshot taken by a lazily decoding fold (a restart's or a replay's) before the fix of session 39 missed
a ``DeactivationTarget`` a Workload upsert showed: restored, such a workload stays active until its Workload is
shown again (that fix changed no layout; every version 55 snapshot was taken by the fixed fold). 55: a Job's ``spec.completionMode`` and
``status.completedIndexes`` (an Indexed Job's reclaimable pods are its completed and failed indexes below its
completions, Kueue's #13178); restored from an older one, a Job's completion mode is not known until its next upsert
(the watch's relist), and its reclaimable pods are counted from ``status.succeeded`` until then, as before. 56: the
digest of each Workload pod set's whole template (``PodTemplateSpec.digest`` in ``template_pool``,
:mod:`events.template_digest`); a version 55 snapshot holds none (nor does a log written before digests):
``IdenticalPodTemplates`` then merges by the fold's view of the templates, as before, until the workload's next
upsert by a producer that stamps them. The same version also has a MultiKueue worker's copies (a Workload labelled
``kueue.x-k8s.io/multikueue-origin``) at their ``spec.priority``, the manager's; restored from a version 55 snapshot,
a copy keeps the worker's class value it was folded at until its next upsert. 57: the log may hold
``WorkloadOnHoldChanged`` (a StatefulSet's Workload put on hold while the set is at zero replicas, or released),
which older readers cannot fold, and a held workload (QuotaReserved=False ``OnHold``) is kept out of its queue (the
layout is version 56's). 58: each pod set's requests (``PodSetInfo.requests``) are the Configuration's
``transformations`` applied before ``excludeResourcePrefixes`` (Kueue v0.20's #15954, #16041): an excluded resource
still multiplies and is still transformed; restored from an older one under rules where an excluded resource is an
input or a multiplier, its pending workloads' pod sets are taken anew (Kueue recounts them at restart; workloads
holding quota keep what their admission says) (the layout is version 57's). 59: what each eviction decision
still awaiting its outcome counted (``metrics.unconfirmed``), taken back if the connector rejects it (Kueue
counts an eviction only once its status write succeeds, #6360); restored from an older one, none is
remembered, so an eviction decided before the snapshot and rejected after it stays counted. 60: the log may
hold ``RequeueStateCleared`` decisions (an inactive workload already evicted losing its
``status.requeueState``), which older readers cannot fold (the layout is version 59's). 61: a Workload
condition the fold sets carries the Workload's ``metadata.generation`` as its ``observedGeneration`` (a
Preempted=True none), as Kueue's do; restored from an older one, a condition keeps none until it is set again
(the layout is version 60's). 62: a Pending decision that rewrites a held workload's QuotaReserved (taken
before the hold) lifts the hold and queues it, as Kueue's update handler does; restored from an older one,
such a workload stays out of its queue until its next enqueue (the layout is version 61's). 63: each
workload's ProvisioningRequest creations the apiserver refused (``WorkloadInfo.failed_creates``: the check's
message and the backoff before the creation is decided again); restored from an older one, a workload has none
(such a log holds no ``ProvisioningRequestCreateFailed``). 64: each preemption or eviction still awaiting its
outcome, with its workload before and after it (``unconfirmed_evictions``), and the workloads whose rejected
eviction was taken back and not decided again until their next event or their backoff's end
(``refused_evictions``): a rejected eviction puts its workload back as it was (Kueue changes nothing when that
write fails); restored from an older one, none is remembered, so an eviction decided before the snapshot and
rejected after it stays folded, as before. 65: the histogram ``pod_scheduling_gate_removal_seconds``, folded
from ``SchedulingGateRemoved`` records (in ``metrics``: the layout is version 64's; bumped so that an older
reader, which would drop its series, refuses the snapshot). 66: whether each eviction awaiting its outcome is
a preemption (``UnconfirmedEviction.preemption``: a refused one is retried after the scheduling loop's
backoff, 1 ms doubling to 10 s, not the workload controller's 1 s doubling to 1000 s), and a refusal kept,
lifted, across an event of its workload until its retry (its count kept, as controller-runtime's); restored
from version 64 or 65, an eviction awaiting its outcome reads as the workload controller's (the layout is
version 65's plus a trailing field). 67: a Workload first seen with ``requeueState.requeueAt`` is put on the
backoff clock (``backoff``) only if something waits on that time (evicted for PodsReadyTimeout/AdmissionCheck
and holding quota, or Requeued=False for one), as the log's own ``RequeueAtRaised`` does; restored from an
older one, a pending workload never evicted that was first seen with a requeueAt still gets Requeued=True
BackoffFinished at that time, as before (the layout is version 66's). 68: the log may hold
``RequeueAtCleared`` (a passed ``requeueAt`` of a workload waiting pending cleared, the newest Kueue's), which
older readers cannot fold, and the ``requeueAt`` of an active workload that holds no quota is on the backoff
clock for it; restored from an older one, such a time is put on the clock as the fold puts it now (the layout
is version 67's). 69: a Workload first seen holding quota, not evicted, takes MultiKueue's
``status.clusterName``, else its ``status.nominatedClusterNames`` (``WorkloadInfo.cluster_name``,
``nominated``); restored from an older one, such a workload is on no worker, as before (the layout is version
68's). 70: each ResourceFlavor's ``spec.resourceWeights`` (KEP-8902: Fair Sharing's dominant resource
shares weigh each flavor-resource by it); bumped so that an older reader, which would drop the weights,
refuses the snapshot; restored from an older one, whose writer dropped them, a flavor weighs every resource 1
until its next upsert shows its weights. 71: where parked workloads were last sent back to their heaps
(``flushes``: every queue, a cohort tree, one queue), so that a failed attempt decided on the log before such
a flush does not park its workload (Kueue's requeue during scheduling); restored from an older one, no flush
is known, so an attempt decided before the snapshot and folded after it parks as before; :func:`take_as`
leaves the marks out when such a state is held against the fold (``log verify --checkpoints``). 72: a pod
set's pod-level ``resources`` count only for cpu, memory and ``hugepages-*`` (the names Kubernetes manages at
the pod level, all that Kueue's ``PodRequests`` reads there); restored from an older one holding a template
whose pod-level resources name any other, the pending workloads' pod sets are taken anew (workloads holding
quota keep what their admission says). 73: a pod set's missing pod-level requests are defaulted as the API
server of 1.37 does and Kueue mirrors it when it knows no server version (the containers' aggregate for cpu
and memory, else the pod-level limit; a Pod-type LimitRange's defaults after that), and only the pod-level
requests are charged (not the limits); restored from an older one holding a template with pod-level
resources, the pending workloads' pod sets are taken anew (workloads holding quota keep what their admission
says)."""
READABLE_VERSIONS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28,
                     29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54,
                     55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73)
"""Version 1 snapshots predate recorded configurations: none was in force in the logs they were taken of (their
writers could not read a ``ConfigRecorded`` event). Versions 1 and 2 predate the metrics: restored from one, the
counters count from the snapshot's offset on. Version 3 predates ``evicted_once``: restored from one, an eviction
for a reason a workload was already evicted for before the snapshot is counted once more. Versions up to 4 predate
the LocalQueue metrics: restored from one, they count from the snapshot's offset on. Versions up to 5 predate
admission gates (their writers queued gated workloads): restored from one, a workload is taken as ungated until
its next upsert shows its annotation. Versions up to 6 predate the parked shapes' reasons and named every pod set
in a shape: restored from one, the shapes parked then are kept with no reason (the workload controller shows none
for them) and, under the gate's default, match no workload until the next flush forgets them. Versions up to 7
predate single-Pod ownership: restored from one, a workload counts as not owned by a single Pod (its failed nodes
are replaced, its evictions requeued as before) until its next upsert shows its owner. Versions up to 8 predate
priority boosts (their writers never read the annotation): restored from one, a workload has no boost annotation,
and its priority no boost, until its next upsert shows the annotation. Versions up to 9 predate the cohorts'
admission counts: restored from one, they count from the snapshot's offset on. Versions up to 10 kept only the
BestEffortFIFO queues' preemptor (``sticky``): restored from one, a StrictFIFO queue has none until its next
preemption. Versions up to 11 predate preferred node affinity (their writers did not read it): restored from one,
a pod set has none, so weighs none in a placement, until its workload's next upsert; the shapes parked then match
no workload until the next flush forgets them. Versions up to 12 predate Workload custom metric labels (their
writers kept no annotation for them): restored from one, a workload's annotation-sourced values are "" (reported
untracked) until its next upsert. Versions up to 13 predate workload slices (their writers kept no replacement
link): restored from one, a replacement slice is scheduled as a workload of its own until its next upsert.
Versions up to 14 predate MultiKueue (their writers ran none): restored from one, nothing MultiKueue is known;
those of writers before DRA charged no claims: their pod sets count none until their workloads' next upsert.
Version 15 predates the incremental dispatcher's rounds: restored from one, a round in progress is over (as when
Kueue restarts, its round times being in memory), so the next one starts at once. Versions up to 16 predate the
JobSet adapter: restored from one, a JobSet's managedBy is not known until the connector observes it again.
Versions up to 17 kept no Cohort's status (their writers dropped it): restored from one, a Cohort's
``effectiveQuotas`` is not known, and its spec's quotas are in force, until its next upsert. Versions up to 18
predate DeviceClasses (their writers neither watched nor kept them): restored from one, no class is known, so no
extended resource is charged as a device, until they are observed again. Versions up to 19 did not keep which
checks' states the log set and the Workload has not shown: restored from one, every such state counts as shown,
so a check's controller's state differing from the log's is taken from the next upsert. Versions up to 20 did not
keep the check states the last read Workload shows: restored from one, none is known until the workload's next
upsert, so a check listed anew (or reset) before it waits for a write of its state to be shown, as before; nor
the assignment a held entry waits with: restored from one, the entry is nominated anew when the scheduler wakes.
Versions up to 21 did not keep the component indexes nor the observed replicas: restored from one, a component
Workload counts as its owner's only one until its next upsert, and its owner's replicas as unread until observed
again. Versions 21 and 22 kept a held entry's assignment without its TAS placements: restored from one, its
topology is placed anew on the flavors it waited with. Versions up to 23 kept no owner UIDs: restored from one, a
group Workload matches any of its owner's name until its next upsert. Versions up to 24 kept no ResourceSlice: restored
from one, no device is known until the slices are observed again (the watch's relist upserts them), and a class charged by
counter sources leaves its workloads inadmissible for want of devices until then. Versions 24 and 25 kept the owner UID
of a LeaderWorkerSet's Workloads with a component index only: restored from one, another of its Workloads matches
any of its owner's name until its next upsert. Versions up to 26 kept no elastic annotation: restored from one, a
slice is placed as a workload of its own under ElasticJobsViaWorkloadSlicesWithTAS until its next upsert. Versions up to 27 kept no
allowed flavors: restored from one, a workload is taken as allowed every flavor until its next upsert shows its
annotation. Versions up to 28 kept no template's ``capacity.requests`` (their writers dropped them)
and charged a class with capacity sources by count: restored from one, a template asks for no capacity until its
next upsert, and a pending workload keeps the charge it had until its claims are charged anew (a template,
DeviceClass, ResourceSlice or configuration change). Versions up to 31 kept no preemption gates: restored from one, a
workload is taken as ungated until its next upsert shows its gates. Versions up to 32 kept no variant's parent UID:
restored from one, a variant is its parent's by name until its next upsert (a variant the fold made, until the watch
brings it back). Versions up to 33 kept no spec gate names: restored from one, a workload's status is not made to
list its spec's gates until its next upsert. Versions up to 50 were written by a fold that took a deactivation of a
workload already being evicted (a check Rejected during the eviction) for a second eviction: restored from one, such a
workload keeps the Evicted and Requeued conditions written then (the fold of the whole log keeps the first
eviction's). Versions up to 51 were written by a fold that added a sidecar declared after a regular init container to
that container's peak and charged a template overhead naming ``pods``: restored from one, a workload keeps that
per-pod count (quota, TAS per-pod fit, the LimitRange Pod bounds) until its next upsert; running Pods' node usage is
counted anew at the restore. Versions up to 52 were written by a fold that settled a second entry penalty on a
LocalQueue whenever a workload's usage was rescaled by its reclaimable pods: restored from one, those penalties
stay in the LocalQueue's history, decaying as its usage does. Versions up to 60 were written by a fold that
set its conditions with no ``observedGeneration``: restored from one, a condition set before the snapshot
keeps none (as the Workload that fold wrote shows it) until it is set again."""

Shape = tuple[int, bytes]


class QueueSnapshot(msgspec.Struct, array_like=True):
    cluster_queue: str
    active: list[tuple[int, int, str, str]]
    inadmissible: list[tuple[int, int, str, str]]
    parked_shapes: list[Shape]
    sticky: str | None
    parked_reasons: list[str] = []
    """The reason each of ``parked_shapes`` was parked for, in that order (none before version 7)."""
    preemptor: str | None = None
    """``ClusterQueueQueue.preemptor`` (from version 11 on; before, ``sticky`` stands for it)."""


class Snapshot(msgspec.Struct, array_like=True):
    version: int
    offset: int
    time: int
    last_cycle: int
    namespaces: list[tuple[str, dict[str, str]]]
    objects: list[o.KueueObject]
    workloads: list[WorkloadInfo]
    queues: list[QueueSnapshot]
    usage: list[tuple[str, list[tuple[str, int]]]]
    awaiting_release: list[str]
    backoff: list[tuple[str, int]]
    afs_history: list[tuple[int, str, int, list[tuple[str, int]]]] = []
    """Admission Fair Sharing facts of versions 33 to 48, one list for every LocalQueue (empty from version 49)."""
    template_pool: list[list[o.PodTemplateSpec]] = []
    """The distinct pod-template tuples of ``ClusterState.pod_templates``, each once."""
    templates: list[tuple[str, int]] = []
    """Workload key -> index into ``template_pool``."""
    deleted_requests: list[str] = []
    """``ClusterState.deleted_requests``."""
    quota_epoch: int = 0
    generations: list[tuple[str, int]] = []
    changes: int = 0
    """The inputs of ClusterQueues' allocatable generations and of flavor scan progress (``ClusterState``'s
    fields of these names); absent from older snapshots, whose workloads carry no scan progress either."""
    config: ev.ConfigRecorded | None = None
    config_offset: int = -1
    """The Kueue Configuration in force and its offset (``ClusterState.config``); from version 2 on."""
    metrics: MetricsSnapshot | None = None
    """``ClusterState.metrics``; from version 3 on."""
    links: list[tuple[str, bool, str, str, int]] = []
    """``ClusterState.cluster_links`` (name, connected, reason, message, since); from version 15 on."""
    worker_queues: list[ev.WorkerQueuesObserved] = []
    """``ClusterState.worker_queues``, by worker name; from version 30 on."""
    nodes_seen: bool = False
    """``ClusterState.nodes_seen``; from version 40 on."""
    afs_queues: list[tuple[str, AfsCheckpoint | None, list[tuple[int, int, list[tuple[str, int]]]]]] = []
    """Admission Fair Sharing facts per LocalQueue, sorted by key: its checkpoint if compacted, then its entries
    (``ClusterState.afs_history``; version 49 on). Last, as every field added after the first: the struct is an
    array, so a field put before others would shift them in every older snapshot."""
    unconfirmed_evictions: list[UnconfirmedEviction] = []
    """``ClusterState.unconfirmed_evictions`` by decision offset; from version 64 on."""
    refused_evictions: list[tuple[str, Refusal]] = []
    """``ClusterState.refused_evictions``, sorted; from version 64 on."""
    flushes: list[tuple[str, int]] = []
    """``ClusterState.flushes``, sorted; from version 71 on."""


_encoder = msgspec.msgpack.Encoder(order="sorted")
_decoder = msgspec.msgpack.Decoder(Snapshot)


def _object_tables(state: ClusterState) -> list[dict[str, o.KObject]]:
    return [
        state.flavors, state.cluster_queues, state.cohorts, state.local_queues, state.workload_priority_classes,
        state.priority_classes, state.topologies, state.admission_checks, state.provisioning_configs,
        state.preemption_configs, state.nodes, state.pods, state.jobs, state.provisioning_requests, state.limit_ranges, state.runtime_classes,
        state.claim_templates, state.device_classes, state.multikueue_configs, state.multikueue_clusters,
        state.resource_slices.by_name, state.resource_claims, state.device_taint_rules,
    ]


def take(state: ClusterState) -> Snapshot:
    objects: list[o.KObject] = []
    for table in _object_tables(state):
        objects.extend(table[k] for k in sorted(table))
    queues = []
    for name in sorted(state.queues):
        q = state.queues[name]
        if not len(q) and not q.parked_shapes and q.sticky is None and q.preemptor is None:
            continue
        parked = sorted(q.parked_shapes)
        queues.append(
            QueueSnapshot(
                cluster_queue=name,
                active=list(q.active),
                inadmissible=sorted(q.inadmissible.values()),
                parked_shapes=parked,
                sticky=q.sticky,
                parked_reasons=[q.parked_shapes[shape] for shape in parked],
                preemptor=q.preemptor,
            )
        )
    usage = [
        (cq, sorted((fr, v) for fr, v in state.usage[cq].items() if v))
        for cq in sorted(state.usage)
        if any(state.usage[cq].values())
    ]
    pool: dict[bytes, int] = {}
    template_pool: list[list[o.PodTemplateSpec]] = []
    templates: list[tuple[str, int]] = []
    for key in sorted(state.pod_templates):
        t = state.pod_templates[key]
        b = _encoder.encode(t)
        index = pool.get(b)
        if index is None:
            index = pool[b] = len(template_pool)
            template_pool.append(list(t))
        templates.append((key, index))
    return Snapshot(
        version=SNAPSHOT_VERSION,
        offset=state.offset,
        time=state.time,
        last_cycle=state.last_cycle,
        namespaces=sorted(state.namespaces.items()),
        objects=objects,  # type: ignore[arg-type]
        workloads=[state.workloads[k] for k in sorted(state.workloads)],
        queues=queues,
        usage=usage,
        awaiting_release=sorted(state.awaiting_release),
        backoff=sorted(state.backoff.items()),
        afs_queues=[_afs_queue(lq, state.afs_history[lq]) for lq in sorted(state.afs_history)],
        template_pool=template_pool,
        templates=templates,
        deleted_requests=sorted(state.deleted_requests),
        quota_epoch=state.quota_epoch,
        generations=sorted(state.generations.items()),
        changes=state.changes,
        config=state.config,
        config_offset=state.config_offset,
        metrics=state.metrics.snapshot(),
        links=[(k, *state.cluster_links[k]) for k in sorted(state.cluster_links)],
        worker_queues=[state.worker_queues[k] for k in sorted(state.worker_queues)],
        nodes_seen=state.nodes_seen,
        unconfirmed_evictions=list(state.unconfirmed_evictions.values()),  # (kept in decision order)
        refused_evictions=sorted(state.refused_evictions.items()),
        flushes=sorted(state.flushes.items()),
    )


def _clock_pending_requeue_at(state: ClusterState) -> None:
    """Before version 68 the ``requeueAt`` of a workload waiting pending with no backoff to end was on no
    clock: put it on the one the fold puts it on now (:func:`projections.workloads.waits_on_requeue_at`), so
    that the time is cleared when it passes, as after a full fold."""
    for key in sorted(state.workloads):
        wl = state.workloads[key]
        if wl.requeue_at is not None and key not in state.backoff and waits_on_requeue_at(wl):
            state.backoff[key] = wl.requeue_at


def restore(snap: Snapshot) -> ClusterState:
    if snap.version not in READABLE_VERSIONS:
        raise InvalidInput(f"snapshot version {snap.version} is not supported (expected one of "
                           f"{', '.join(map(str, READABLE_VERSIONS))})")
    _refuse_unconvertible_afs(snap)
    state = ClusterState()
    state.offset, state.time, state.last_cycle = snap.offset, snap.time, snap.last_cycle
    state.config, state.config_offset = snap.config, snap.config_offset  # the queues' shapes follow it
    state.namespaces = {k: dict(v) for k, v in snap.namespaces}
    tables = {
        "ResourceFlavor": state.flavors, "ClusterQueue": state.cluster_queues, "Cohort": state.cohorts,
        "LocalQueue": state.local_queues, "WorkloadPriorityClass": state.workload_priority_classes,
        "PriorityClass": state.priority_classes, "Topology": state.topologies,
        "AdmissionCheck": state.admission_checks, "ProvisioningRequestConfig": state.provisioning_configs,
        "PreemptionConfig": state.preemption_configs,
        "Node": state.nodes, "Pod": state.pods, "Job": state.jobs, "LimitRange": state.limit_ranges,
        "RuntimeClass": state.runtime_classes, "ResourceClaimTemplate": state.claim_templates,
        "DeviceClass": state.device_classes,
        "MultiKueueConfig": state.multikueue_configs, "MultiKueueCluster": state.multikueue_clusters,
        "ResourceSlice": state.resource_slices.by_name, "ResourceClaim": state.resource_claims,
        "DeviceTaintRule": state.device_taint_rules,
    }
    for obj in snap.objects:
        if isinstance(obj, o.ProvisioningRequest):
            state.put_request(obj)
            continue
        tables[type(obj).__struct_config__.tag][obj.key] = obj  # type: ignore[attr-defined]
    pool = [intern_templates(tuple(t)) for t in snap.template_pool]
    state.pod_templates = {key: pool[index] for key, index in snap.templates}
    retake = snap.version < 45 and state.request_rules is not None
    for wl in snap.workloads:
        if retake:
            state.retake_placement(wl)  # before it is queued or charged: its shape and usage follow it
        state.workloads[wl.key] = wl
        state.reflag(wl)
        state.lq_members.setdefault(f"{wl.namespace}/{wl.queue_name}", {})[wl.key] = None
        if grouped_owner(wl.owner):
            state.owner_groups.setdefault(wl.owner_uid, {})[wl.key] = None
        elif wl.owner:
            variants.index(state, wl)
        if wl.reserving and wl.cluster_queue and not charges_nothing(wl):
            state.reserving.setdefault(wl.cluster_queue, {})[wl.key] = None
        if wl.second_pass is not None:
            state.second_pass[wl.key] = wl.second_pass[1]
        if wl.kept_nodes:
            state.keeping[wl.key] = None
    for qs in snap.queues:
        q = ClusterQueueQueue(qs.cluster_queue, state.parked_queues)
        for sk in qs.active:
            sk = tuple(sk)
            q.entries[sk[3]] = sk
            q.shapes[sk[3]] = state.shape_of(state.workloads[sk[3]])
        q.active.update(q.entries.values())
        for sk in qs.inadmissible:
            sk = tuple(sk)
            q.inadmissible[sk[3]] = sk
            q.shapes[sk[3]] = state.shape_of(state.workloads[sk[3]])
        reasons = qs.parked_reasons or [""] * len(qs.parked_shapes)
        q.parked_shapes = {(prio, shape): reason for (prio, shape), reason in zip(qs.parked_shapes, reasons,
                                                                                  strict=True)}
        q.sticky = qs.sticky
        q.preemptor = qs.preemptor if snap.version >= 11 else qs.sticky
        q.local_queue_of = {k: (state.workloads[k].namespace, state.workloads[k].queue_name)
                            for k in sorted((*q.entries, *q.inadmissible))}
        if q.inadmissible or q.parked_shapes:
            state.parked_queues.add(qs.cluster_queue)
        state.queues[qs.cluster_queue] = q
    state.usage = {cq: dict(frs) for cq, frs in snap.usage}
    state.awaiting_release = set(snap.awaiting_release)
    state.backoff = dict(snap.backoff)
    if snap.version < 68:
        _clock_pending_requeue_at(state)
    # none before version 64
    state.unconfirmed_evictions = KeptEvictions(snap.unconfirmed_evictions)  # its index rebuilt
    state.refused_evictions = dict(snap.refused_evictions)
    state.flushes = dict(snap.flushes)  # none before version 71
    state.afs_history = {lq: ([(cp.time, AFS_CHECKPOINT, cp)] if cp is not None else [])
                         + [(t, sign, tuple((r, v) for r, v in u)) for t, sign, u in entries]
                         for lq, cp, entries in snap.afs_queues}
    for t, lq, sign, u in snap.afs_history:  # before version 49: one list for every LocalQueue
        state.afs_history.setdefault(lq, []).append((t, sign, tuple((r, v) for r, v in u)))
    for key in sorted(state.pods):
        state.tas.pod_changed(key, state.pods[key])
        state.link_pod(None, state.pods[key])
    for key in sorted(state.workloads):
        wl = state.workloads[key]
        if wl.reserving and wl.cluster_queue and not charges_nothing(wl):
            state.tas.charge(wl)
    state.deleted_requests = dict.fromkeys(snap.deleted_requests)
    state.cluster_links = {name: ClusterLink(*rest) for name, *rest in snap.links}
    state.worker_queues = {e.key: e for e in snap.worker_queues}
    state.nodes_seen = snap.nodes_seen or bool(state.nodes)
    state.quota_epoch, state.changes = snap.quota_epoch, snap.changes
    state.generations = dict(snap.generations)
    state.queue_order = order_of(snap.config.document if snap.config is not None else None)
    if snap.metrics is not None:
        state.metrics = MetricsFold.restore(snap.metrics)
        for key, pairs in snap.metrics.evicted_once:  # before version 44: the pairs counted stand for the record
            wl = state.workloads.get(key)
            if wl is not None and not wl.evictions:
                wl.evictions = eviction_stats.from_pairs(pairs)
    for wl in snap.workloads:
        if wl.scan is not None:
            wl.scan = intern_scan(wl.scan, wl.scan.cycle)
    for key in sorted(state.workloads):
        state.reindex(key)
        if state.workloads[key].failed_creates:
            state.index_create_retry(state.workloads[key])
    for name in sorted(state.nodes):
        state.index_node_wait(name)
    if snap.version < 35 and state.afs_anchor_at_reservation:
        state.reanchor_afs()
    if snap.version < 46:
        for key in sorted(state.workloads):
            wl = state.workloads[key]
            wl.evictions = eviction_stats.from_configurable_entries(wl.evictions)
        for key in sorted(state.local_queues):
            state.seed_afs(state.local_queues[key], only_persisted=True)
    if snap.version < 47:
        state.retrack_afs()
    rules = state.request_rules
    if snap.version < 58 and rules is not None and rules.exclude and rules.transforms:
        state.recount_pending()  # counted excluding first: counted anew, as Kueue counts them at restart
    if snap.version < 73 and any(_sets_pod_level(tpl) for tpl in state.pod_templates.values()):
        state.recount_pending()  # an older writer charged pod-level limits (before 72 every pod-level name)
    state.untrack_afs()  # a snapshot written before session 32 may hold history a full fold no longer keeps
    return state


def _sets_pod_level(templates: tuple[o.PodTemplateSpec, ...]) -> bool:
    """Whether a template of ``templates`` has pod-level ``resources``, which writers before version 73
    counted otherwise: their limits as requests (and before version 72 every name, not only those Kubernetes
    manages at the pod level). Even an empty one counts: a Pod-type LimitRange default limit became a
    request."""
    return any(t.spec.resources is not None for t in templates)


def _refuse_unconvertible_afs(snap: Snapshot) -> None:
    """Refuse (:class:`InvalidInput`, so the caller passes it over and folds the log) a snapshot before version 50
    holding Admission Fair Sharing history older than its recorded Configuration. Its writer kept history while no
    Configuration was recorded and folded it under the first one; version 50 keeps none then and starts every
    LocalQueue afresh under the first one turning it on. Before version 49 its writer also folded every entry
    under the latest configuration, where version 49 folds each under the one in force when it was recorded. The
    snapshot says neither when its first Configuration was recorded nor which one an entry was recorded under, so
    converting it could differ from a full fold. Conservative: any configuration recorded after such an entry
    counts, whether or not it was the first or changed the half-life or interval (a LocalQueue's checkpoint counts
    from the LocalQueue's first appearance, its anchor). An entry of the configuration's very time is taken as
    recorded under it: nothing has decayed in between, and a LocalQueue seen in that millisecond before the first
    Configuration would be seeded then all the same (from the status it was first seen with, where a full fold
    takes the one it shows at the Configuration: they differ only if it was written again in that millisecond)."""
    if snap.version >= 50 or snap.config is None:
        return
    since = snap.config.time
    firsts = [t for t, _, _, _ in snap.afs_history]
    for _, cp, entries in snap.afs_queues:
        if cp is not None:
            firsts.append(cp.anchor if cp.anchor is not None else since - 1)
        firsts.extend(t for t, _, _ in entries[:1])
    if any(t < since for t in firsts):
        raise InvalidInput(f"snapshot version {snap.version} holds Admission Fair Sharing history recorded before "
                           f"its Configuration (recorded at {since}): folded from the log instead, as version 50 "
                           "keeps none before the first Configuration and folds each entry under the one it was "
                           "recorded under")


def _afs_queue(lq: str, entries: list) -> tuple[str, AfsCheckpoint | None, list]:
    cp = entries[0][2] if entries and entries[0][1] == AFS_CHECKPOINT else None
    return lq, cp, [(t, sign, list(u)) for t, sign, u in entries[cp is not None:]]


def encode(state: ClusterState) -> bytes:
    return _encoder.encode(take(state))


def decode(data: bytes) -> ClusterState:
    try:
        return restore(_decoder.decode(data))
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise InvalidInput(f"not a kueue-es snapshot: {exc}") from exc


def digest(state: ClusterState) -> str:
    return hashlib.sha256(encode(state)).hexdigest()


class _Versioned(msgspec.Struct, array_like=True):
    version: int


def version_of(data: bytes) -> int:
    """The version the snapshot ``data`` was written at, read without restoring it."""
    try:
        return msgspec.msgpack.decode(data, type=_Versioned).version
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise InvalidInput(f"not a kueue-es snapshot: {exc}") from exc


def take_as(state: ClusterState, version: int) -> Snapshot:
    """:func:`take`, less what a snapshot of ``version`` cannot hold and its restore cannot rebuild, so that a
    state restored from it and the fold of the same log compare equal: before 71, the flush marks (see the
    version notes: none is known after such a restore, and the fold holds one for nearly every log)."""
    taken = take(state)
    return msgspec.structs.replace(taken, flushes=[]) if version < 71 else taken


def digest_as(state: ClusterState, version: int) -> str:
    """:func:`digest` of :func:`take_as`."""
    return hashlib.sha256(_encoder.encode(take_as(state, version))).hexdigest()


def save(state: ClusterState, path: str | os.PathLike[str]) -> None:
    """Write atomically: a crash leaves the old snapshot or the new one, never half of one."""
    target = Path(path)
    tmp = target.with_suffix(target.suffix + ".tmp")
    with open(tmp, "wb") as f:
        f.write(encode(state))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)


def load(path: str | os.PathLike[str]) -> ClusterState:
    return decode(Path(path).read_bytes())
