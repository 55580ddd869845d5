"""The events of the log: one tagged union, in five families.

* observed facts — what a watcher saw in the cluster (objects upserted or deleted, pods ready, jobs finished),
  and what the job integration did to a Job;
* clock ticks — time passing with nothing else to say, so timeouts fire from the log and not from a wall clock;
* the scheduler's configuration — the Kueue Configuration the decisions that follow were made under;
* scheduler decisions — what the scheduler decided, each naming the cycle and the input offset it decided on;
* connector outcomes — whether a decision reached the cluster.

Rules of evolution: an event's ``type`` tag is never reused or renamed; new fields get defaults; a field never
changes type. Events are frozen and never hold their own offset: the log assigns it (see :class:`Record`).
Time is integer milliseconds since the Unix epoch, as carried from the source.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Union

import msgspec

from events.objects import (
    Admission,
    Condition,
    KueueObject,
    PodSetUpdate,
    PodTemplate,
    PreemptionGateState,
    ProvisioningRequest,
    ReclaimablePod,
    ResourceGroup,
    TopologyAssignment,
)

SCHEMA_VERSION = 1


class Event(
    msgspec.Struct,
    frozen=True,
    gc=False,
    kw_only=True,
    omit_defaults=True,
    rename="camel",
    tag_field="type",
    forbid_unknown_fields=False,
):
    """Envelope fields shared by every event. Events are immutable and acyclic: not tracked by the cycle
    collector (``gc=False``), which makes decoding a log faster."""

    time: int
    """Observed time in ms since the epoch, carried from the source; projections never read a clock."""
    key: str = ""
    """Object key: ``namespace/name`` for namespaced objects, ``name`` for cluster-scoped ones."""
    uid: str = ""
    resource_version: str = ""
    id: str = ""
    """Producer-assigned event id, stable across retries (used to de-duplicate)."""
    schema: int = SCHEMA_VERSION


# --- observed facts ----------------------------------------------------------------------------------------------


class ObjectUpserted(Event, tag="ObjectUpserted"):
    """An object was created or changed; ``obj`` is its new state."""

    obj: KueueObject


class ObjectDeleted(Event, tag="ObjectDeleted"):
    kind: str


class PodsReadyChanged(Event, tag="PodsReadyChanged"):
    """The workload's pods became ready (or stopped being ready), as the job integration saw it."""

    ready: bool
    reason: str = ""


class WorkloadFinished(Event, tag="WorkloadFinished"):
    """The workload's job finished; its quota is released."""

    reason: str = "Succeeded"
    message: str = ""


class JobStopped(Event, tag="JobStopped"):
    """The job of an evicted workload has no running pods any more, so its quota may be released."""


class ReclaimablePodsChanged(Event, tag="ReclaimablePodsChanged"):
    """Pods of the workload finished and need no quota any more, as the job integration counts them (Kueue's
    ``status.reclaimablePods``, written from here): the whole list, replacing the one before."""

    reclaimable_pods: list[ReclaimablePod] = []


class ReplacementPodsChanged(Event, tag="ReplacementPodsChanged"):
    """Whether a pod group's Workload waits for Pods to replace ones that failed or were stopped, as the pod
    integration counts them (fewer runnable Pods of a role than its pod set's count): Kueue's
    ``WaitingForReplacementPods`` condition, written from here (its reason and message follow from the
    Workload's state when folded). While it is True the Workload is not queued."""

    waiting: bool = False


class WorkloadOnHoldChanged(Event, tag="WorkloadOnHoldChanged"):
    """The pod integration puts a StatefulSet's group Workload on hold (``on_hold``) while the set is scaled to zero,
    or clears the hold once it is scaled up again (Kueue v0.20's StatefulSet reconciler, #12233): QuotaReserved=False
    reason ``OnHold``, its quota given back and its admission cleared, and not queued until cleared
    (``PendingEvaluation``). The status is written from here."""

    on_hold: bool = False


class JobActed(Event, tag="JobActed"):
    """The job integration acted on a batch/v1 Job (``key``/``uid``): created its Workload, started it, or stopped
    it, updated or deleted a Workload it no longer matched, or gave it no Workload for want of its
    WorkloadPriorityClass; or the pod integration on a plain Pod (``kind`` Pod). Appended once the write succeeded
    (or was refused): the record that it was done, from which the connector records the Event Kueue's job
    reconciler records on the Job or Pod (so a restart, folding the log again, reports no action twice)."""

    action: str
    """``CreatedWorkload``, ``Started``, ``Stopped``, ``UpdatedWorkload``, ``DeletedWorkload``,
    ``WorkloadPriorityClassNotFound``, (a pod group's Pod beyond its count, deleted) ``ExcessPodDeleted``, (a pod
    group too small for its Workload, on its first Pod) ``ErrWorkloadCompose``, (a pod group whose name a Workload
    not made for a group has, on its first Pod) ``WorkloadNameConflict``, (a pod group's Pods made owners of its
    Workload, on the Workload: ``kind`` Workload) ``OwnerReferencesAdded`` or (a Pod
    whose Workload finished, once finalized) ``FinishedWorkload`` (a
    reader that does not know an action records nothing for it)."""
    kind: str = "Job"
    """What was acted on: ``Job`` (batch/v1), ``Pod`` (v1), ``Workload`` (a pod group's), ``JobSet`` (jobset.x-k8s.io/v1alpha2), ``MPIJob``
    (kubeflow.org/v2beta1), a training operator's kubeflow.org/v1 job (``PyTorchJob``, ``TFJob``, ...), ``RayJob``,
    ``RayCluster`` or ``RayService`` (ray.io/v1), ``SparkApplication`` (sparkoperator.k8s.io/v1beta2)."""
    workload: str = ""
    """Key of the Job's Workload (the one created, updated or deleted, or the one it started under)."""
    cluster_queue: str = ""
    """Started: the ClusterQueue that admitted it."""
    message: str = ""
    """Stopped: why (the eviction message, or that it was not admitted, or had no Workload, or no matching one);
    UpdatedWorkload, DeletedWorkload, WorkloadPriorityClassNotFound, WorkloadNameConflict: the Event's message."""
    creation_latency_ms: int | None = None
    """CreatedWorkload: the created Workload's creationTimestamp minus the job's, in ms, when the job's generation
    was at most 1 (what Kueue's ``workload_creation_latency_seconds`` observes); None otherwise, and in logs
    written before it was recorded."""


class SchedulingGateRemoved(Event, tag="SchedulingGateRemoved"):
    """A connector's patch removed one of Kueue's scheduling gates from a Pod (``key``/``uid``) of an admitted
    Workload: the record, at the connector's clock, from which Kueue's ``pod_scheduling_gate_removal_seconds``
    is folded (the time since the Workload's Admitted transition). Appended once the patch succeeded, only
    when the Pod as patched carried the gate."""

    gate: str = ""
    """``kueue.x-k8s.io/admission`` (the pod integration starting a Pod), ``kueue.x-k8s.io/topology`` (the
    topology ungater) or ``kueue.x-k8s.io/elastic-job`` (an elastic Job's slice releasing its pods)."""
    workload: str = ""
    """Key of the Workload whose admission the gate was lifted for."""
    workload_uid: str = ""
    """Its uid (empty: not known): a Workload made anew under the same name is not the one admitted."""
    is_group: bool = False
    """The Pod is one of a plain pod group's."""


class AdmissionCheckStateChanged(Event, tag="AdmissionCheckStateChanged"):
    """A check controller outside kueue-es set the state of one admission check on a workload."""

    check: str
    state: str
    message: str = ""
    requeue_after_seconds: int | None = None
    pod_set_updates: list[PodSetUpdate] = []


class MultiKueueClusterObserved(Event, tag="MultiKueueClusterObserved"):
    """What the MultiKueue connector found when it last tried to reach a worker cluster (``key``: its
    MultiKueueCluster): connected, or why not (``BadConfig``: its kubeconfig could not be read;
    ``BadKubeConfig``: its kubeconfig path was refused; ``InsecureKubeConfig``: its kubeconfig is unsafe to use;
    ``ClientConnectionFailed``: the cluster did not answer).
    Appended when that changes."""

    connected: bool
    reason: str = ""
    message: str = ""


class RemoteWorkloadObserved(Event, tag="RemoteWorkloadObserved"):
    """A worker cluster's copy of a manager's Workload (``key``/``uid``: the manager's one) as the MultiKueue
    connector's watch of that worker last showed it: gone (``exists`` false), or with these conditions (the ones
    MultiKueue reads: QuotaReserved, Admitted, Evicted, Finished). Appended when they change."""

    cluster: str
    exists: bool = True
    conditions: list[Condition] = []
    topology_pod_sets: list[str] = []
    """The copy's pod sets whose admission there has a topology assignment (placed by the worker's TAS)."""
    preemption_gates: list[PreemptionGateState] = []
    """The copy's ``status.preemptionGates`` (MultiKueueOrchestratedPreemption: the manager opens its gate)."""


class WorkerQueuesObserved(Event, tag="WorkerQueuesObserved"):
    """A worker cluster's (``key``: its MultiKueueCluster) LocalQueues and ClusterQueues as the MultiKueue
    connector last listed or watched them, for MultiKueueManagerQuotaAutomation: which ClusterQueue each LocalQueue
    (``namespace/name``) feeds, and each ClusterQueue's ``spec.resourceGroups`` as the worker has them. Appended when
    that changes, only while some MultiKueueConfig listing the worker asks for ``quotaManagement: Automated``."""

    local_queues: dict[str, str] = {}
    cluster_queues: dict[str, list[ResourceGroup]] = {}


class OwnerObserved(Event, tag="OwnerObserved"):
    """The ``spec.managedBy`` of a manager Workload's owner that the log does not hold (a JobSet: another project's
    API), as the MultiKueue connector read it from the manager's apiserver (empty: none), for the MultiKueue
    adapter of its kind to decide whether MultiKueue may run it. Appended once it differs from what the log holds.
    For an owner that makes several Workloads (a LeaderWorkerSet, which has no managedBy: Kueue's adapter takes it
    as MultiKueue's), how many it makes (``spec.replicas``), which MultiKueue waits for before dispatching them."""

    managed_by: str = ""
    replicas: int | None = None


# --- time --------------------------------------------------------------------------------------------------------


class ClockTicked(Event, tag="ClockTicked"):
    """Time passed; carries nothing but ``time``."""


# --- the scheduler's configuration -------------------------------------------------------------------------------


class ConfigRecorded(Event, tag="ConfigRecorded"):
    """The Kueue Configuration (config.kueue.x-k8s.io ``kind: Configuration``) the scheduler decides under from
    here on. Decisions depend on it (fairSharing, waitForPodsReady, resources, ...), so it is in the log: the
    latest one recorded is in force from its offset on; before the first one, Kueue's defaults are. A scheduler
    records the one it runs with whenever it differs from the one in force (first start, restart with a changed
    configuration). ``time`` is the log's time when it was recorded: it moves no clock."""

    document: dict[str, Any]
    """The Configuration document as the user gave it (plain data, as read from YAML), to be loaded again by
    ``kueue_es.scheduler.config.load_config``; fields kueue-es does not use are kept too."""
    writer: str = ""
    """Who recorded it: the scheduler instance (``kueue-es run``'s instance id) or ``simulator``."""
    source: str = ""
    """Where the writer read the document from (a file path); empty for Kueue's defaults."""


# --- scheduler decisions -----------------------------------------------------------------------------------------


class Decision(Event):
    """A decision of the scheduler about one workload (``key``/``uid``)."""

    cycle: int
    """Scheduler cycle number; all decisions of one cycle are appended as one batch."""
    input: int
    """Offset of the last event the scheduler had applied when it decided (-1 for an empty log)."""


class QuotaReserved(Decision, tag="QuotaReserved"):
    admission: Admission
    message: str = ""
    considered_flavors: str = ""
    """The flavors the assignment tried and did not simply fit on, in Kueue's words (its
    ``FormatFlavorAssignmentAttemptsForEvents``), for the QuotaReserved Event's "; Flavors considered: ..."
    suffix (:mod:`kueue_es.scheduler.considered`); empty when there is none, and in logs written before it
    was carried."""


class WorkloadAdmitted(Decision, tag="WorkloadAdmitted"):
    """Every required admission check is Ready (or there are none): Admitted=True."""

    message: str = ""


class FlavorScan(msgspec.Struct, frozen=True, gc=False, kw_only=True, omit_defaults=True, rename="camel"):
    """How far the flavor scan of a pending workload got (Kueue's FlavorFungibilityPreserveScanProgress).

    ``tried`` holds, per pod set in spec order (up to the one that failed), the pairs (resource, index of the
    last flavor tried in its resource group) for the resources that got a flavor, sorted by resource; -1 when
    the scan reached the group's last flavor. The next attempt starts each resource group one past it. Under
    Kueue's ``FlavorFungibility`` gate off it is 0 for every resource that got a flavor, and nothing resumes from it.
    """

    tried: tuple[tuple[tuple[str, int], ...], ...]
    generation: int = 0
    """The ClusterQueue's allocatable generation the attempt saw: once it has grown the progress is stale,
    unless it was recorded by the latest batch of decisions."""
    changes: int = 0
    """How many changes (records other than pending statuses) the state had folded when the attempt that began
    this pass over the flavors was made: a pass that ended with nothing changed since is not started over (see
    the scheduler). A count, not a log offset, so it is the same whatever offsets the log gives."""
    attempts: int = 1
    """Attempts in this pass; a pass that goes on longer than there are flavors to try is ended."""
    cycle: int = 0
    """The cycle of the decision that recorded it: stamped when the decision is folded (0 in the event)."""

    @property
    def pending(self) -> bool:
        """Some resource group still has flavors after the last one tried (Kueue's PendingFlavors)."""
        return any(i != -1 for ps in self.tried for _, i in ps)


class WaitedPodSet(msgspec.Struct, frozen=True, gc=False, kw_only=True, rename="camel"):
    """A pod set of the assignment waitForPodsReady.blockAdmission's held entry waits with."""

    name: str
    count: int
    flavors: tuple[tuple[str, str], ...] = ()
    """(resource, flavor), by resource."""
    topology_levels: tuple[str, ...] = ()
    topology_domains: tuple[tuple[tuple[str, ...], int], ...] = ()
    """Its TAS placement: the levels, and each domain's level values with its pod count, as placed when it was
    held (empty: no topology placed, or a log from before it was recorded)."""


class WorkloadPending(Decision, tag="WorkloadPending"):
    """An admission attempt failed: QuotaReserved=False with Kueue's reason and message."""

    reason: str
    message: str
    requeue_reason: str = ""
    parked: bool = False
    """True when the scheduler asks to move the workload to the inadmissible set (BestEffortFIFO) instead of back
    to the heap; the queue keeps it on the heap anyway while ``scan`` has untried flavors (Kueue's requeue rule)."""
    scan: FlavorScan | None = None
    """The flavor scan progress after this attempt (None: the next attempt starts at the first flavors)."""
    waited: tuple[WaitedPodSet, ...] = ()
    """Held by waitForPodsReady.blockAdmission: the assignment it waits with (its pod sets' counts, flavors and TAS
    placements), on which Kueue's scheduler admits it once it wakes. Empty for any other attempt."""
    preemption_gated: bool = False
    """The attempt would have preempted but a preemption gate of the workload is closed
    (``MultiKueueOrchestratedPreemption``): it also sets ``BlockedOnPreemptionGates`` True."""
    preemption_skipped: bool = False
    """The attempt was skipped for another workload of its cycle after getting preemption targets: they overlap
    the victims already chosen (and recomputing them did not help), or, preempting, it no longer fits. Kueue
    counts these per ClusterQueue and cycle (``kueue_admission_cycle_preemption_skips``). False in logs written
    before it was recorded."""


class WorkloadPreempted(Decision, tag="WorkloadPreempted"):
    """Preempted=True (reason is the variant) and Evicted=True with reason Preempted, in one write."""

    reason: str
    message: str
    preemptor: str = ""
    preemption_config: str = ""
    """ConfigurablePreemptions: the PreemptionConfig whose rules selected this victim (reason
    ``ConfigurablePreemption``); empty for any other victim, and in a log from before it was recorded."""
    selected_by: tuple[tuple[str, tuple[int, ...]], ...] = ()
    """The rules of ``preemption_config`` that selected the victim, each with the indexes of its candidate
    selectors that did (in the config's order), which ``message`` lists
    (:func:`kueue_es.scheduler.preemption.configured_message`); the config is the eviction's underlying cause."""


class WorkloadEvicted(Decision, tag="WorkloadEvicted"):
    reason: str
    message: str
    underlying_cause: str = ""
    requeue_at: int | None = None
    """Set with a PodsReady timeout: the backoff deadline (ms), written in the same patch as the eviction."""
    requeue_count: int | None = None


class WorkloadRequeued(Decision, tag="WorkloadRequeued"):
    """The Requeued condition changed; with ``release`` the reservation is cleared and quota freed."""

    status: bool
    reason: str
    message: str = ""
    release: bool = False
    requeue_at: int | None = None
    """Backoff deadline in ms (waitForPodsReady); None leaves the requeue state as it is."""
    requeue_count: int | None = None


class WorkloadDeactivated(Decision, tag="WorkloadDeactivated"):
    reason: str
    message: str


class QuotaReservationUnset(Decision, tag="QuotaReservationUnset"):
    """The workload controller takes back the quota of a workload not admitted yet (its checks pending) because
    its LocalQueue or ClusterQueue is stopped, missing or terminating: QuotaReserved=False with ``reason`` and
    ``message``, admission cleared, quota released; no eviction and no Requeued condition (Kueue's
    ``UnsetQuotaReservationWithCondition`` in ``reconcileOn{Local,Cluster}QueueActiveState``)."""

    reason: str
    message: str


class RequeueStateCleared(Decision, tag="RequeueStateCleared"):
    """The workload controller drops the ``status.requeueState`` (count and requeueAt) of an inactive workload
    that shows Evicted=True already, so is not evicted again (Kueue's inactive branch, #2219, #7734):
    reactivated, it owes no backoff and its requeuing limit counts from zero. The status writer writes
    ``requeueState: null``."""


class RequeueAtRaised(Decision, tag="RequeueAtRaised"):
    """The workload controller pushes ``status.requeueState.requeueAt`` of an unfinished workload out to the
    latest lastTransitionTime + requeueAfterSeconds of its Retry checks, a check having reported Retry after
    the eviction (or while the workload waits pending): KEP-3258 lets a check update its state after the
    eviction, and Kueue's ``NeedsRequeueAtUpdate`` raises the time only, never the requeue count. The workload
    is not requeued before then. The status writer writes the new requeueAt."""

    requeue_at: int
    """The new ``requeueAt`` (ms); the fold keeps the later of it and the current one."""


class RequeueAtCleared(Decision, tag="RequeueAtCleared"):
    """The workload controller drops ``status.requeueState.requeueAt`` of an active workload that waits
    pending (no quota reservation, not finished) once that time has passed, the requeue count left alone; a
    workload whose Requeued=False backoff ends gets ``WorkloadRequeued`` BackoffFinished instead, which clears
    the time too (the newest Kueue's ``Reconcile``: "Pending workload requeued after backoff", then its
    Requeued switch at the next reconcile). Where it waits in its queue does not change (Kueue's
    ``PushOrUpdate`` leaves a parked workload whose conditions did not change where it is). The status writer
    writes ``requeueAt: null``."""


class WorkloadSliceReplaced(Decision, tag="WorkloadSliceReplaced"):
    """The scheduler admits the slice that replaces this one (an elastic Job scaled up): Finished=True with reason
    ``WorkloadSliceReplaced``, its quota released. Appended in the batch that admits the replacement, before it."""

    replacement: str
    """Key of the slice that replaces it."""
    message: str
    reason: str = "WorkloadSliceReplaced"


class RetentionExpired(Decision, tag="RetentionExpired"):
    """A retention period of Kueue's ``objectRetentionPolicies.workloads`` ran out: delete ``target`` —
    ``Workload`` (finished ``afterFinished`` ago) or ``Job`` (its owner, deactivated by Kueue
    ``afterDeactivatedByKueue`` ago). Carried out by the connector."""

    target: str
    message: str = ""


class TopologyAssigned(Decision, tag="TopologyAssigned"):
    """Second pass or node replacement: a pod set's topology assignment was (re)computed."""

    pod_set: str
    assignment: TopologyAssignment


class AdmissionCheckUpdated(Decision, tag="AdmissionCheckUpdated"):
    """A check controller run by kueue-es (the ProvisioningRequest check) set one admission check of a workload.

    It carries the whole new state of the check, as Kueue's controller writes it: ``lastTransitionTime`` moves
    only when ``state`` changes; ``retryCount`` None leaves the current count as it is.
    """

    check: str
    state: str
    message: str = ""
    requeue_after_seconds: int | None = None
    retry_count: int | None = None
    pod_set_updates: list[PodSetUpdate] = []


class ProvisioningRequestCreated(Decision, tag="ProvisioningRequestCreated"):
    """Create a ProvisioningRequest for a workload's check (``key``/``uid`` name the Workload).

    Everything the connector writes is here: ``podTemplates`` first (controller owner: the Workload), then
    ``request`` (controller owner: the Workload), then the templates' controller owner moves to the request.
    """

    check: str
    attempt: int
    request: ProvisioningRequest
    pod_templates: list[PodTemplate] = []


class ProvisioningRequestDeleted(Decision, tag="ProvisioningRequestDeleted"):
    """Delete a ProvisioningRequest a workload owns (its PodTemplates go with it, by owner reference)."""

    name: str
    namespace: str
    reason: str
    """``Finished``, ``Evicted`` (CleanupProvisioningRequestsOnEviction), ``Superseded`` (not the active one) or
    ``ReservationForgotten`` (decided for a reservation that was never written, so never created)."""
    request_uid: str = ""
    """The request's uid when it has been observed (a precondition for the delete), else empty."""


class UnhealthyNodesChanged(Decision, tag="UnhealthyNodesChanged"):
    """``status.unhealthyNodes`` of an admitted TAS workload: the nodes under it that failed (Kueue lists them
    and replaces the first in place; an empty list clears them)."""

    nodes: list[str] = []
    kept: list[str] = []
    """Nodes taken off the list with the placement kept on them (SkipReassignmentForPodOwnedWorkloads: a
    workload owned by a single Pod is not moved off a failed node). Not part of the status: the node controller
    lists such a node again only once it looks at that node anew (``projections.cluster``)."""


class SecondPassFailed(Decision, tag="SecondPassFailed"):
    """A second-pass attempt (delayed topology or node replacement) found no placement: quota and conditions stay,
    and the workload is retried after a backoff (Kueue's Warning event of the same name)."""

    message: str = ""


class ClustersNominated(Decision, tag="ClustersNominated"):
    """MultiKueue's dispatcher: ``status.nominatedClusterNames`` of a workload holding quota on the manager (the
    all-at-once dispatcher nominates every connected worker of the check's MultiKueueConfig, the incremental one
    adds a round of workers; an external dispatcher's are observed on the Workload instead); the connector
    creates the Workload's copy on each and deletes it from the others."""

    clusters: list[str] = []


class WorkerClusterAssigned(Decision, tag="WorkerClusterAssigned"):
    """MultiKueue: the first worker to admit the workload's copy runs it: ``status.clusterName`` is set (for good)
    and the nominations are cleared. The connector deletes the other copies and creates the job's copy there."""

    cluster: str
    topology_ready: list[str] = []
    """Pod sets whose delayed topology request is Pending here and was placed on the worker: now Ready (the
    topology itself is the worker's, never placed on a manager)."""


class RemotePreemptionGateOpened(Decision, tag="RemotePreemptionGateOpened"):
    """MultiKueueOrchestratedPreemption: the manager opens ``gate`` on the workload's copy on worker ``cluster``
    (``Open``, its ``lastTransitionTime`` the decision's time), letting that worker preempt for it; the connector
    writes it to the copy's ``status.preemptionGates``."""

    cluster: str
    gate: str


class PreemptionGatesSynced(Decision, tag="PreemptionGatesSynced"):
    """MultiKueueOrchestratedPreemption: Kueue's workload controller makes ``status.preemptionGates`` list exactly
    the spec's gates — a spec gate it does not list yet is added ``Closed`` (its ``lastTransitionTime`` the
    decision's time), an entry of a gate the spec does not list is dropped. ``gates`` is the whole list after; the
    status writer writes it (:mod:`kueue_es.scheduler.gate_states`)."""

    gates: list[PreemptionGateState]


class RemoteWorkloadFinished(Decision, tag="RemoteWorkloadFinished"):
    """MultiKueue: the workload's copy finished on its worker: the manager's Workload finishes with the same
    reason and message (Finished=True, quota released)."""

    cluster: str
    reason: str = "Succeeded"
    message: str = ""


class ParentLabelled(Decision, tag="ParentLabelled"):
    """``ConcurrentAdmission``: Kueue's workload controller labels a workload of a ClusterQueue with a
    ``concurrentAdmissionPolicy`` (not itself a variant) a parent, ``kueue.x-k8s.io/concurrent-admission-parent:
    "true"``: it leaves its queue, to be pursued through its variants. The connector writes the label."""


class VariantCreated(Decision, tag="VariantCreated"):
    """``ConcurrentAdmission``: Kueue's variant controller makes a parent's variant for one flavor. ``key`` is the
    variant's (Kueue's name: the parent's without its hash, ``-variant-<flavor>``, a hash of its own); ``uid`` is
    empty until the variant is observed. The variant is the parent's copy (spec, labels but the parent label,
    annotations), controller-owned by the parent, its allowed-flavors annotation naming ``flavor``, with the
    ``kueue.x-k8s.io/concurrent-admission`` preemption gate. The connector creates it from the parent as the
    apiserver holds it."""

    parent: str
    """The parent Workload's name (in the variant's namespace)."""
    parent_uid: str
    flavor: str


class VariantActivation(Decision, tag="VariantActivation"):
    """``ConcurrentAdmission``: Kueue's variant controller sets a variant's ``spec.active`` (its event
    ``ActivatedVariant`` or ``DeactivatedVariant`` with ``message``), as the migration policy has it once a sibling
    is admitted, or all of them with the parent."""

    active: bool
    message: str


class VariantPreemptionGateOpened(Decision, tag="VariantPreemptionGateOpened"):
    """``ConcurrentAdmission``: Kueue's variant controller opens the variant's ``kueue.x-k8s.io/concurrent-admission``
    preemption gate (``status.preemptionGates`` ``Open``, its ``lastTransitionTime`` the decision's time; its event
    ``PreemptionUngatedVariant``), letting the scheduler preempt for that variant: one variant at a time
    (:mod:`kueue_es.scheduler.variant_gates`)."""

    gate: str


class ParentPreemptionSignal(Decision, tag="ParentPreemptionSignal"):
    """``ConcurrentAdmission``: Kueue's variant controller mirrors its variants' ``BlockedOnPreemptionGates`` onto a
    parent that lists preemption gates of its own (a MultiKueue worker's copy): True with the reason of the variant
    blocked longest, ``message`` naming it, ``since`` its ``lastTransitionTime``; False
    (``VariantsNotPreemptionGated``) once none is blocked."""

    status: bool
    reason: str
    message: str
    since: str = ""


class VariantPodsReadySynced(Decision, tag="VariantPodsReadySynced"):
    """``ConcurrentAdmission``: Kueue's variant controller copies the parent's ``PodsReady`` condition onto its
    admitted variant (its Job's pods are the parent's): ``status``, ``reason``, ``message`` as the parent shows them,
    ``since`` the parent's ``lastTransitionTime``, taken when the variant's status changes."""

    status: bool
    reason: str
    message: str
    since: str = ""


class VariantDeleted(Decision, tag="VariantDeleted"):
    """``ConcurrentAdmission``: the variant's flavor is no longer in its ClusterQueue's resource group, so Kueue's
    variant controller deletes it (its event ``DeletedVariant`` on the parent). The connector deletes it,
    conditioned on its uid."""

    parent: str
    flavor: str


class ParentAdmitted(Decision, tag="ParentAdmitted"):
    """``ConcurrentAdmission``: a variant of this parent is admitted, so Kueue's variant controller gives the parent
    the variant's admission, QuotaReserved and Admitted (``message``: "The variant <name> is admitted"). The
    parent's Job runs by it; the quota stays the variant's (Kueue's cache counts no parent)."""

    admission: Admission
    variant: str
    """The admitted variant's name."""
    message: str


class VariantFinished(Decision, tag="VariantFinished"):
    """``ConcurrentAdmission``: the parent finished, so Kueue's variant controller finishes each of its variants with
    the parent's Finished reason and message (quota released)."""

    reason: str
    message: str


# --- connector outcomes ------------------------------------------------------------------------------------------


class DecisionApplied(Event, tag="DecisionApplied"):
    """A decision reached the cluster. From the status writer, ``resource_version`` is the Workload's at which its
    status shows the log's admission check states as of the decision (empty: not known, or from another writer)."""

    decision: int
    """Offset of the decision that reached the cluster."""


class DecisionRejected(Event, tag="DecisionRejected"):
    decision: int
    reason: str
    message: str = ""


class ProvisioningRequestCreateFailed(Event, tag="ProvisioningRequestCreateFailed"):
    """The apiserver refused to create a ``ProvisioningRequestCreated`` decision's PodTemplate or request
    (``key`` and ``uid`` name the Workload): one per attempt, appended just before the decision's
    ``DecisionRejected``. Kueue's check controller then shows ``message`` on the check, records a Warning
    ``FailedCreate`` Event and tries again after a backoff (:mod:`kueue_es.scheduler.provisioning`)."""

    decision: int
    """Offset of the ``ProvisioningRequestCreated`` decision."""
    check: str
    name: str
    """The request's name (the attempt's: a retry creates the same name again)."""
    message: str
    """Kueue's words: ``Error creating ProvisioningRequest "<name>": <error>`` or ``Error creating PodTemplate
    "<name>": <error>``, cut to a condition message's 32 KiB."""


AnyEvent = Union[  # noqa: UP007 - one tagged union, a member per line
    ObjectUpserted,
    ObjectDeleted,
    PodsReadyChanged,
    WorkloadFinished,
    JobStopped,
    ReclaimablePodsChanged,
    ReplacementPodsChanged,
    WorkloadOnHoldChanged,
    AdmissionCheckStateChanged,
    MultiKueueClusterObserved,
    RemoteWorkloadObserved,
    OwnerObserved,
    WorkerQueuesObserved,
    JobActed,
    SchedulingGateRemoved,
    ClockTicked,
    ConfigRecorded,
    QuotaReserved,
    WorkloadAdmitted,
    WorkloadPending,
    WorkloadPreempted,
    WorkloadEvicted,
    WorkloadRequeued,
    WorkloadDeactivated,
    QuotaReservationUnset,
    RequeueStateCleared,
    RequeueAtRaised,
    RequeueAtCleared,
    WorkloadSliceReplaced,
    TopologyAssigned,
    AdmissionCheckUpdated,
    ProvisioningRequestCreated,
    ProvisioningRequestDeleted,
    UnhealthyNodesChanged,
    SecondPassFailed,
    RetentionExpired,
    ClustersNominated,
    WorkerClusterAssigned,
    RemotePreemptionGateOpened,
    PreemptionGatesSynced,
    RemoteWorkloadFinished,
    ParentLabelled,
    VariantCreated,
    VariantActivation,
    VariantPreemptionGateOpened,
    ParentPreemptionSignal,
    VariantPodsReadySynced,
    VariantDeleted,
    ParentAdmitted,
    VariantFinished,
    DecisionApplied,
    DecisionRejected,
    ProvisioningRequestCreateFailed,
]

EVENT_TYPES: tuple[str, ...] = tuple(t.__struct_config__.tag for t in AnyEvent.__args__)  # type: ignore[attr-defined]
DECISION_TYPES: tuple[type[Decision], ...] = tuple(
    t for t in AnyEvent.__args__ if issubclass(t, Decision)  # type: ignore[attr-defined]
)


class Record(NamedTuple):
    """An event at its place in the log. The offset belongs to the log, never to the event."""

    offset: int
    event: AnyEvent
