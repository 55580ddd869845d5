"""Kueue's feature gates, as its Configuration's ``featureGates`` map sets them.

Kueue hands that map to the Kubernetes feature-gate machinery at start-up and refuses to start when it is wrong:
an unknown name ("unrecognized feature gate"), a gate locked to its default set otherwise, or an enabled gate
whose dependency is disabled. ``AllAlpha`` / ``AllBeta`` set every alpha / beta gate the map does not name. The
names, stages and defaults below are Kueue v0.20.0's (``pkg/features/kube_features.go``, its release notes and docs).

Only the gates in :data:`MODELLED` change what kueue-es does, each read where its rule is (docs/scheduling.md lists what
each one does). The fold reads these from the recorded document: ``ReclaimablePods``,
``PrioritySortingWithinCohort`` (:mod:`projections.queue_order`), ``LocalQueueMetrics`` and ``MetricsForCohorts``
(:mod:`projections.metrics`), ``TopologyAwareScheduling`` (:mod:`projections.clusterqueues`),
``AdmissionGatedBy`` (a gated workload is not queued: :mod:`projections.cluster`),
``SchedulingEquivalenceHashing`` and ``SchedulingEquivalenceHashingIgnorePodSetName`` (how queues park equivalent
workloads together, :mod:`projections.queues`), ``TASReplaceNodeOnNodeTaints`` (whether a taint change makes the
node controller look at a node anew, which lists again a failed node a pod-owned workload's placement was kept on
under ``SkipReassignmentForPodOwnedWorkloads``: :mod:`projections.cluster`), ``PriorityBoost`` (a workload's
``kueue.x-k8s.io/priority-boost`` annotation is added to its priority: :mod:`projections.cluster`),
``CustomMetricLabels`` (``metrics.customLabels`` on the metrics: :mod:`projections.custom_labels`),
``UnadmittedWorkloadsObservability`` (the Admitted condition of a workload not admitted:
:mod:`projections.admitted_condition`),
``MetricForWorkloadCreationLatency`` (whether a job integration's record of a Workload it created is observed:
:mod:`projections.metrics`),
``KueueDRAIntegration``, ``KueueDRARejectWorkloadsWhenDRADisabled`` and ``KueueDRAIntegrationPrioritizedList``
(what a pod's DRA claims cost, or whether they make its workload inadmissible: :mod:`projections.dra`),
``KueueDRADeviceFeasibility`` and ``KueueDRAIntegrationDeviceTaints`` (whether a ResourceSlice, DeviceClass,
ResourceClaim or DeviceTaintRule changing sends the parked workloads back; TAS placement reads them too,
:mod:`kueue_es.scheduler.tas.devices`), ``MultiKueue`` (whether MultiKueue checks are
acted on) and ``DynamicQuotaOrchestration`` (whether a ClusterQueue's or Cohort's ``status.effectiveQuotas``
stands for its spec's quotas: :mod:`projections.effective_quotas`).
``kueue-es import`` also reads there the gates of the checks Kueue's webhooks make only under a gate
(:meth:`events.manifests.Checks.under`): ``TASValidateWorkloadSliceSize``, ``WorkloadValidationForPodSetMetadata``,
``RejectUpdatesToCQWithInvalidOnFlavors``, ``WorkloadValidateResourcesAreNonNegative``, ``AdmissionGatedBy``'s,
``PartialAdmission``'s and ``ConcurrentAdmission``'s (an object failing a check is refused only while its gate is
on), and
``ElasticJobsViaWorkloadSlicesWithPartialReplicaScaleUp``'s, which lets an elastic Workload carry ``minCount`` (the
scheduler then admits its scale-up in part: :func:`kueue_es.scheduler.cycle.nominate`); the LeaderWorkerSet and
Ray validating webhooks read ``LWSImmutableGroupSize``, ``ValidateRayAndSparkJobUpdates`` and
``RayServiceValidateUpgradeStrategy``; the validating webhook
and a STATE.yaml read them from the loaded configuration, as the conversion webhook reads
``TASAssignmentsEncodingByHostnamePrefix`` (how it writes a topology assignment in v1beta2, as the scheduler does)
and ``kueue-es run --kube`` ``VisibilityOnDemand`` (whether it serves the visibility API; what its HTTPS servers accept
follows the ``tls`` stanza, ``TLSOptions`` being locked on: :mod:`kueue_es.scheduler.tls_options`); the connector reads
``EnforceProvisioningPodTemplateContents`` (whether a PodTemplate found at a ProvisioningRequest's template name
unlike the one derived is replaced: :meth:`connectors.k8s.provreqs.RequestApplier._template`), ``SkipChildJobSuspension`` (whether a job with a Kueue-managed ancestor is
suspended while that ancestor's Workload is not admitted: :meth:`connectors.k8s.jobframework.JobReconciler._child`),
``FailureRecoveryPolicy`` there (whether it forces pods stuck terminating on an unreachable node to Failed,
:mod:`connectors.k8s.failure_recovery`), ``TASFailedNodeReplacement`` with ``TASReplaceNodeOnPodTermination`` and
``TASReplaceNodeOnNodeTaints`` (whether pods pinned to a failed node are failed: :mod:`connectors.k8s.pinned_pods`)
and ``RemoveFinalizersWithStrictPatch`` (whether a Pod's finalizer goes in a patch
conditioned on its resourceVersion), and the MultiKueue connector
``MultiKueueBatchJobClearingTTLSecondsAfterFinishedOnWorkerCluster`` (whether a Job's copy on a worker keeps
``spec.ttlSecondsAfterFinished``: :func:`connectors.k8s.multikueue.owner_copy`) and
``MultiKueueKubeConfigPathValidation`` (whether a ``locationType: Path`` kubeconfig must be under
``/etc/multikueue/kubeconfigs``: :func:`connectors.k8s.multikueue.allowed_kubeconfig_path`) and
``MultiKueueRemoteSpecSync`` (whether a RayService's ``serveConfigV2`` edited on the manager is forwarded to its
copy: :func:`kueue_es.scheduler.multikueue.remote_spec_patch`) and ``MultiKueueOrchestratedPreemption`` (whether the
copies it makes carry the ``kueue.x-k8s.io/multikueue`` preemption gate: :func:`connectors.k8s.multikueue.workload_copy`);
the scheduler reads that gate too (a head with a closed preemption gate does not preempt:
:mod:`kueue_es.scheduler.cycle`; the manager opens one copy's gate at a time: :mod:`kueue_es.scheduler.preemption_gates`),
and ``ElasticJobsViaWorkloadSlicesFlavorChangeFromZero`` (whether a replacement slice's pod set the old slice ran no
pods of is bound to its flavors: :func:`kueue_es.scheduler.flavors.assign_flavors`);
the queue status writer and
:mod:`connectors.k8s.manager_quota` read ``MultiKueueManagerQuotaAutomation`` (whether a MultiKueue manager's
ClusterQueue takes its workers' summed quota: :mod:`projections.manager_quota`). The configuration
loader reads ``ReservedResourceNameValidation`` (:func:`projections.request_rules.transformation_problems`) and
``SparkApplicationIntegration`` (without it a Configuration listing the SparkApplication framework is refused), and
``KueueDRAIntegrationPartitionableDevices`` and ``KueueDRAIntegrationConsumableCapacity`` (without them a device
class mapping's counter or capacity ``sources`` are refused; the fold charges them: :mod:`projections.dra`). Every
other gate
is known so that a user's existing configuration is accepted as Kueue accepts it; one set away from its
default is named in a warning (:func:`ignored`).

The table and :func:`enabled` live beside the projections because the fold reads gates too, from the
Configuration recorded in the log (:func:`of_document`); the scheduler validates the map (:func:`errors`) before
a configuration is recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

ALPHA, BETA, GA, DEPRECATED = "Alpha", "Beta", "GA", "Deprecated"

DISABLE_WAIT_FOR_PODS_READY = "DisableWaitForPodsReady"
MULTIKUEUE_ORCHESTRATED_PREEMPTION = "MultiKueueOrchestratedPreemption"

TOPOLOGY_AWARE_SCHEDULING = "TopologyAwareScheduling"
TAS_BALANCED_PLACEMENT = "TASBalancedPlacement"
DEFER_RAY_SERVICE_FINALIZATION = "DeferRayServiceFinalizationForRedisCleanup"
TAS_MULTI_LAYER_TOPOLOGY = "TASMultiLayerTopology"
TAS_REJECT_FALSE_UNCONSTRAINED = "TASRejectFalseUnconstrainedTopology"
TAS_PROFILE_MIXED = "TASProfileMixed"
TAS_ASSIGNMENTS_ENCODING_BY_HOSTNAME_PREFIX = "TASAssignmentsEncodingByHostnamePrefix"
TAS_RESPECT_NODE_AFFINITY_PREFERRED = "TASRespectNodeAffinityPreferred"
TAS_NODE_FEASIBILITY_FOR_ALL_LEVELS = "TASNodeFeasibilityForAllLevels"
TAS_PARTIAL_SLICES = "TASPartialSlices"
TAS_TOPOLOGY_SPREADING = "TASTopologySpreading"
TAS_GROUPED_POD_SET_SLICING = "TASGroupedPodSetSlicing"
TAS_LEADER_POD_SET_FEASIBILITY = "TASLeaderPodSetFeasibility"
SCHEDULER_LIBRARY_INTEGRATION = "SchedulerLibraryIntegration"
VISIBILITY_ON_DEMAND = "VisibilityOnDemand"
UNADMITTED_WORKLOADS_OBSERVABILITY = "UnadmittedWorkloadsObservability"
QUOTA_CHECK_STRATEGY = "QuotaCheckStrategy"
LOCAL_QUEUE_METRICS = "LocalQueueMetrics"
METRICS_FOR_COHORTS = "MetricsForCohorts"
WORKLOAD_PRIORITY_CLASS_DEFAULTING = "WorkloadPriorityClassDefaulting"
PARTIAL_ADMISSION = "PartialAdmission"
ADMISSION_FAIR_SHARING = "AdmissionFairSharing"
ADMISSION_FAIR_SHARING_ANCHOR_AT_QUOTA_RESERVATION = "AdmissionFairSharingAnchorAtQuotaReservation"
FAIR_SHARING_PREEMPT_WITHIN_NOMINAL = "FairSharingPreemptWithinNominal"
FAIR_SHARING_PRIORITIZE_NON_BORROWING = "FairSharingPrioritizeNonBorrowing"
TAS_FAILED_NODE_REPLACEMENT = "TASFailedNodeReplacement"
FLAVOR_FUNGIBILITY = "FlavorFungibility"
FLAVOR_FUNGIBILITY_PRESERVE_SCAN_PROGRESS = "FlavorFungibilityPreserveScanProgress"
TAS_FAILED_NODE_REPLACEMENT_FAIL_FAST = "TASFailedNodeReplacementFailFast"
TAS_REPLACE_NODE_ON_NODE_TAINTS = "TASReplaceNodeOnNodeTaints"
TAS_REPLACE_NODE_ON_POD_TERMINATION = "TASReplaceNodeOnPodTermination"
TAS_REPLACE_NODE_DUE_TO_NOT_READY_OVER_FIXED_TIME = "TASReplaceNodeDueToNotReadyOverFixedTime"
TAS_REPLACE_MULTIPLE_FAILED_NODES = "TASReplaceMultipleFailedNodes"
CLEANUP_PROVISIONING_REQUESTS_ON_EVICTION = "CleanupProvisioningRequestsOnEviction"
ASSIGN_QUEUE_LABELS_FOR_PODS = "AssignQueueLabelsForPods"
FINISH_ORPHANED_WORKLOADS = "FinishOrphanedWorkloads"
FAST_QUOTA_RELEASE_IN_POD_INTEGRATION = "FastQuotaReleaseInPodIntegration"
TAS_HANDLE_OVERLAPPING_FLAVORS = "TASHandleOverlappingFlavors"
TAS_RECOMPUTE_ASSIGNMENT_WITHIN_SCHEDULING_CYCLE = "TASRecomputeAssignmentWithinSchedulingCycle"
ADMISSION_GATED_BY = "AdmissionGatedBy"
MULTIKUEUE = "MultiKueue"
MULTIKUEUE_INCREMENTAL_DISPATCHER_CONFIG = "MultiKueueIncrementalDispatcherConfig"
MULTIKUEUE_INCREMENTAL_DISPATCHER_RESPECT_CONFIG_ORDER = "MultiKueueIncrementalDispatcherRespectConfigOrder"
MULTIKUEUE_BATCH_JOB_CLEARING_TTL = "MultiKueueBatchJobClearingTTLSecondsAfterFinishedOnWorkerCluster"
MULTIKUEUE_KUBECONFIG_PATH_VALIDATION = "MultiKueueKubeConfigPathValidation"
MULTIKUEUE_REMOTE_SPEC_SYNC = "MultiKueueRemoteSpecSync"
MULTIKUEUE_ADAPTERS_FOR_CUSTOM_JOBS = "MultiKueueAdaptersForCustomJobs"
MULTIKUEUE_CLUSTER_PROFILE = "MultiKueueClusterProfile"
MULTIKUEUE_MANAGER_QUOTA_AUTOMATION = "MultiKueueManagerQuotaAutomation"
SCHEDULING_EQUIVALENCE_HASHING = "SchedulingEquivalenceHashing"
SCHEDULING_EQUIVALENCE_HASHING_IGNORE_POD_SET_NAME = "SchedulingEquivalenceHashingIgnorePodSetName"
UNADMITTED_WORKLOADS_EXPLICIT_STATUS = "UnadmittedWorkloadsExplicitStatus"
SHORT_WORKLOAD_NAMES = "ShortWorkloadNames"
SKIP_ANCESTOR_CHECK_FOR_DELETED_WORKLOADS = "SkipAncestorCheckForDeletedWorkloads"
SKIP_REASSIGNMENT_FOR_POD_OWNED_WORKLOADS = "SkipReassignmentForPodOwnedWorkloads"
KUEUE_DRA_INTEGRATION = "KueueDRAIntegration"
KUEUE_DRA_INTEGRATION_EXTENDED_RESOURCE = "KueueDRAIntegrationExtendedResource"
KUEUE_DRA_REJECT_WORKLOADS_WHEN_DRA_DISABLED = "KueueDRARejectWorkloadsWhenDRADisabled"
KUEUE_DRA_INTEGRATION_PARTITIONABLE_DEVICES = "KueueDRAIntegrationPartitionableDevices"
KUEUE_DRA_INTEGRATION_CONSUMABLE_CAPACITY = "KueueDRAIntegrationConsumableCapacity"
KUEUE_DRA_INTEGRATION_PRIORITIZED_LIST = "KueueDRAIntegrationPrioritizedList"
PRIORITY_BOOST = "PriorityBoost"
WORKLOAD_IDENTIFIER_ANNOTATIONS = "WorkloadIdentifierAnnotations"
TAS_VALIDATE_WORKLOAD_SLICE_SIZE = "TASValidateWorkloadSliceSize"
WORKLOAD_VALIDATION_FOR_POD_SET_METADATA = "WorkloadValidationForPodSetMetadata"
WORKLOAD_VALIDATE_RESOURCES_ARE_NON_NEGATIVE = "WorkloadValidateResourcesAreNonNegative"
REJECT_UPDATES_TO_CQ_WITH_INVALID_ON_FLAVORS = "RejectUpdatesToCQWithInvalidOnFlavors"
RESERVED_RESOURCE_NAME_VALIDATION = "ReservedResourceNameValidation"
CUSTOM_METRIC_LABELS = "CustomMetricLabels"
RECOMPUTE_ASSIGNMENT_UPON_PREEMPTION_TARGETS_OVERLAP = "RecomputeAssignmentUponPreemptionTargetsOverlap"
PRIORITIZE_PREEMPTOR_WORKLOADS = "PrioritizePreemptorWorkloads"
FAIR_SHARING_REEVALUATE_PREEMPTION_CANDIDATES = "FairSharingReevaluatePreemptionCandidates"
FAIR_SHARING_REFILL = "FairSharingRefill"
CONFIGURABLE_PREEMPTIONS = "ConfigurablePreemptions"
POD_INTEGRATION_VALIDATE_GROUP_OWNER = "PodIntegrationValidateGroupOwner"
ELASTIC_JOBS_VIA_WORKLOAD_SLICES = "ElasticJobsViaWorkloadSlices"
ELASTIC_PARTIAL_SCALE_UP = "ElasticJobsViaWorkloadSlicesWithPartialReplicaScaleUp"
ELASTIC_JOBS_VIA_WORKLOAD_SLICES_WITH_TAS = "ElasticJobsViaWorkloadSlicesWithTAS"
FAILURE_RECOVERY_POLICY = "FailureRecoveryPolicy"
METRIC_FOR_WORKLOAD_CREATION_LATENCY = "MetricForWorkloadCreationLatency"
LWS_IMMUTABLE_GROUP_SIZE = "LWSImmutableGroupSize"
MANAGED_JOBS_NAMESPACE_SELECTOR_ALWAYS_RESPECTED = "ManagedJobsNamespaceSelectorAlwaysRespected"
VALIDATE_RAY_AND_SPARK_JOB_UPDATES = "ValidateRayAndSparkJobUpdates"
RAY_SERVICE_VALIDATE_UPGRADE_STRATEGY = "RayServiceValidateUpgradeStrategy"
SKIP_CHILD_JOB_SUSPENSION = "SkipChildJobSuspension"
ENFORCE_PROVISIONING_POD_TEMPLATE_CONTENTS = "EnforceProvisioningPodTemplateContents"
ELASTIC_FLAVOR_CHANGE_FROM_ZERO = "ElasticJobsViaWorkloadSlicesFlavorChangeFromZero"
ELASTIC_JOBS_FOR_PROVISIONING_REQUESTS = "ElasticJobsViaWorkloadSlicesForProvisioningRequests"
SPARK_APPLICATION_INTEGRATION = "SparkApplicationIntegration"
TLS_OPTIONS = "TLSOptions"
POD_INTEGRATION_COUNT_SUCCEEDED_PODS_AS_READY = "PodIntegrationCountSucceededPodsAsReady"
WAIT_FOR_PODS_READY_MAX_NOT_READY = "WaitForPodsReadyMaxNotReady"
WORKLOAD_LEVEL_WAIT_FOR_PODS_READY = "WorkloadLevelWaitForPodsReady"
WAIT_FOR_PODS_READY_UNSCHEDULED_TIMEOUT = "WaitForPodsReadyUnscheduledTimeout"
POD_GROUP_SCHEDULING_SHAPE_ORDERING = "PodGroupSchedulingShapeOrdering"
DEPLOYMENT_JOB_UID_LABEL = "DeploymentJobUIDLabel"
REMOVE_FINALIZERS_WITH_STRICT_PATCH = "RemoveFinalizersWithStrictPatch"
DYNAMIC_QUOTA_ORCHESTRATION = "DynamicQuotaOrchestration"
CONCURRENT_ADMISSION = "ConcurrentAdmission"
KUEUE_DRA_DEVICE_FEASIBILITY = "KueueDRADeviceFeasibility"
KUEUE_DRA_INTEGRATION_DEVICE_TAINTS = "KueueDRAIntegrationDeviceTaints"
HIGH_MAX_PARALLELISM_WITHIN_RECONCILE = "HighMaxParallelismWithinReconcile"
MULTIKUEUE_REUSE_CLIENT_CONNECTION_CONFIG_FOR_WORKERS = "MultiKueueReuseClientConnectionConfigForWorkers"
MULTIKUEUE_RAY_IN_TREE_AUTOSCALING = "MultiKueueRayInTreeAutoscaling"

GATES: dict[str, tuple[str, bool]] = {
    PARTIAL_ADMISSION: (BETA, True),
    ELASTIC_PARTIAL_SCALE_UP: (ALPHA, False),
    FLAVOR_FUNGIBILITY: (BETA, True),
    VISIBILITY_ON_DEMAND: (BETA, True),
    DISABLE_WAIT_FOR_PODS_READY: (ALPHA, False),
    "PrioritySortingWithinCohort": (BETA, True),
    FAIR_SHARING_PREEMPT_WITHIN_NOMINAL: (BETA, True),
    FAIR_SHARING_PRIORITIZE_NON_BORROWING: (BETA, True),
    MULTIKUEUE: (BETA, True),
    MULTIKUEUE_BATCH_JOB_CLEARING_TTL: (ALPHA, False),
    TOPOLOGY_AWARE_SCHEDULING: (BETA, True),
    LOCAL_QUEUE_METRICS: (BETA, True),
    TAS_PROFILE_MIXED: (BETA, True),
    ADMISSION_FAIR_SHARING: (BETA, True),
    TAS_FAILED_NODE_REPLACEMENT: (BETA, True),
    ELASTIC_JOBS_VIA_WORKLOAD_SLICES: (BETA, True),
    ELASTIC_JOBS_VIA_WORKLOAD_SLICES_WITH_TAS: (ALPHA, False),
    TAS_FAILED_NODE_REPLACEMENT_FAIL_FAST: (BETA, True),
    TAS_REPLACE_NODE_ON_POD_TERMINATION: (BETA, True),
    SKIP_REASSIGNMENT_FOR_POD_OWNED_WORKLOADS: (BETA, True),
    TAS_REPLACE_NODE_DUE_TO_NOT_READY_OVER_FIXED_TIME: (DEPRECATED, False),
    MANAGED_JOBS_NAMESPACE_SELECTOR_ALWAYS_RESPECTED: (GA, True),
    TAS_BALANCED_PLACEMENT: (ALPHA, False),
    TAS_ASSIGNMENTS_ENCODING_BY_HOSTNAME_PREFIX: (BETA, True),
    KUEUE_DRA_INTEGRATION: (BETA, True),
    KUEUE_DRA_INTEGRATION_EXTENDED_RESOURCE: (BETA, True),
    RESERVED_RESOURCE_NAME_VALIDATION: (BETA, True),
    KUEUE_DRA_REJECT_WORKLOADS_WHEN_DRA_DISABLED: (BETA, True),
    KUEUE_DRA_INTEGRATION_PARTITIONABLE_DEVICES: (BETA, True),
    KUEUE_DRA_INTEGRATION_CONSUMABLE_CAPACITY: (ALPHA, False),
    KUEUE_DRA_INTEGRATION_PRIORITIZED_LIST: (ALPHA, False),
    MULTIKUEUE_ADAPTERS_FOR_CUSTOM_JOBS: (BETA, True),
    "WorkloadRequestUseMergePatch": (ALPHA, False),
    MULTIKUEUE_KUBECONFIG_PATH_VALIDATION: (BETA, True),
    "ReclaimablePods": (BETA, True),
    "MultiKueueClusterProfile": (ALPHA, False),
    FAILURE_RECOVERY_POLICY: (ALPHA, False),
    TLS_OPTIONS: (GA, True),
    REMOVE_FINALIZERS_WITH_STRICT_PATCH: (BETA, True),
    TAS_REPLACE_NODE_ON_NODE_TAINTS: (BETA, True),
    ASSIGN_QUEUE_LABELS_FOR_PODS: (BETA, True),
    TAS_MULTI_LAYER_TOPOLOGY: (BETA, True),
    SCHEDULING_EQUIVALENCE_HASHING: (BETA, True),
    SCHEDULING_EQUIVALENCE_HASHING_IGNORE_POD_SET_NAME: (BETA, True),
    CUSTOM_METRIC_LABELS: (ALPHA, False),
    SPARK_APPLICATION_INTEGRATION: (ALPHA, False),
    MULTIKUEUE_ORCHESTRATED_PREEMPTION: (BETA, True),
    PRIORITY_BOOST: (ALPHA, False),
    ADMISSION_GATED_BY: (BETA, True),
    SHORT_WORKLOAD_NAMES: (ALPHA, False),
    FAST_QUOTA_RELEASE_IN_POD_INTEGRATION: (ALPHA, False),
    REJECT_UPDATES_TO_CQ_WITH_INVALID_ON_FLAVORS: (BETA, True),
    FINISH_ORPHANED_WORKLOADS: (BETA, True),
    MULTIKUEUE_INCREMENTAL_DISPATCHER_CONFIG: (BETA, True),
    MULTIKUEUE_INCREMENTAL_DISPATCHER_RESPECT_CONFIG_ORDER: (BETA, True),
    CONCURRENT_ADMISSION: (ALPHA, False),
    QUOTA_CHECK_STRATEGY: (BETA, True),
    METRIC_FOR_WORKLOAD_CREATION_LATENCY: (BETA, True),
    TAS_RESPECT_NODE_AFFINITY_PREFERRED: (ALPHA, False),
    TAS_NODE_FEASIBILITY_FOR_ALL_LEVELS: (BETA, True),
    MULTIKUEUE_MANAGER_QUOTA_AUTOMATION: (ALPHA, False),
    WORKLOAD_IDENTIFIER_ANNOTATIONS: (BETA, True),
    WORKLOAD_PRIORITY_CLASS_DEFAULTING: (BETA, True),
    METRICS_FOR_COHORTS: (BETA, True),
    CLEANUP_PROVISIONING_REQUESTS_ON_EVICTION: (BETA, True),
    TAS_HANDLE_OVERLAPPING_FLAVORS: (BETA, True),
    UNADMITTED_WORKLOADS_OBSERVABILITY: (BETA, True),
    TAS_RECOMPUTE_ASSIGNMENT_WITHIN_SCHEDULING_CYCLE: (BETA, True),
    UNADMITTED_WORKLOADS_EXPLICIT_STATUS: (BETA, False),
    DEFER_RAY_SERVICE_FINALIZATION: (BETA, True),
    "TASCacheNodeMatchResults": (BETA, True),
    "TASCachingRemainingResources": (BETA, True),
    "TASCacheTopologyTree": (BETA, True),
    SCHEDULER_LIBRARY_INTEGRATION: (ALPHA, False),
    "VectorizedResourceRequests": (BETA, True),
    WORKLOAD_VALIDATE_RESOURCES_ARE_NON_NEGATIVE: (BETA, True),
    TAS_VALIDATE_WORKLOAD_SLICE_SIZE: (BETA, True),
    WORKLOAD_VALIDATION_FOR_POD_SET_METADATA: (BETA, True),
    PRIORITIZE_PREEMPTOR_WORKLOADS: (ALPHA, False),
    LWS_IMMUTABLE_GROUP_SIZE: (BETA, True),
    FLAVOR_FUNGIBILITY_PRESERVE_SCAN_PROGRESS: (BETA, True),
    SKIP_ANCESTOR_CHECK_FOR_DELETED_WORKLOADS: (BETA, True),
    MULTIKUEUE_REMOTE_SPEC_SYNC: (BETA, True),
    RECOMPUTE_ASSIGNMENT_UPON_PREEMPTION_TARGETS_OVERLAP: (BETA, True),
    POD_INTEGRATION_VALIDATE_GROUP_OWNER: (BETA, True),
    VALIDATE_RAY_AND_SPARK_JOB_UPDATES: (BETA, True),
    FAIR_SHARING_REEVALUATE_PREEMPTION_CANDIDATES: (ALPHA, False),
    FAIR_SHARING_REFILL: (ALPHA, False),
    DYNAMIC_QUOTA_ORCHESTRATION: (ALPHA, False),
    # new in v0.20.0
    ADMISSION_FAIR_SHARING_ANCHOR_AT_QUOTA_RESERVATION: (BETA, True),
    RAY_SERVICE_VALIDATE_UPGRADE_STRATEGY: (BETA, True),
    "ConfigurablePreemptions": (ALPHA, False),
    HIGH_MAX_PARALLELISM_WITHIN_RECONCILE: (BETA, True),
    KUEUE_DRA_DEVICE_FEASIBILITY: (ALPHA, False),
    KUEUE_DRA_INTEGRATION_DEVICE_TAINTS: (ALPHA, False),
    ELASTIC_JOBS_FOR_PROVISIONING_REQUESTS: (ALPHA, False),
    ELASTIC_FLAVOR_CHANGE_FROM_ZERO: (BETA, True),
    MULTIKUEUE_REUSE_CLIENT_CONNECTION_CONFIG_FOR_WORKERS: (BETA, True),
    MULTIKUEUE_RAY_IN_TREE_AUTOSCALING: (ALPHA, False),
    TAS_REPLACE_MULTIPLE_FAILED_NODES: (ALPHA, False),
    TAS_GROUPED_POD_SET_SLICING: (BETA, True),
    TAS_TOPOLOGY_SPREADING: (ALPHA, False),
    TAS_PARTIAL_SLICES: (BETA, True),
    "TASLeaderPodSetFeasibility": (BETA, True),
    "TASRejectFalseUnconstrainedTopology": (BETA, True),
    WAIT_FOR_PODS_READY_MAX_NOT_READY: (ALPHA, False),
    WAIT_FOR_PODS_READY_UNSCHEDULED_TIMEOUT: (ALPHA, False),
    WORKLOAD_LEVEL_WAIT_FOR_PODS_READY: (ALPHA, False),
    DEPLOYMENT_JOB_UID_LABEL: (BETA, True),
    POD_GROUP_SCHEDULING_SHAPE_ORDERING: (BETA, True),
    POD_INTEGRATION_COUNT_SUCCEEDED_PODS_AS_READY: (BETA, True),
    ENFORCE_PROVISIONING_POD_TEMPLATE_CONTENTS: (BETA, True),
    SKIP_CHILD_JOB_SUSPENSION: (BETA, True),
}
"""Name -> (stage, default)."""

LOCKED = frozenset({MANAGED_JOBS_NAMESPACE_SELECTOR_ALWAYS_RESPECTED, TLS_OPTIONS})
"""GA gates locked to their default: a configuration setting one otherwise is refused (:func:`errors`), so only the
default is ever in force, and the code that implements it reads no gate."""

CACHE_ONLY = frozenset({"TASCacheNodeMatchResults", "TASCachingRemainingResources", "TASCacheTopologyTree",
                        "VectorizedResourceRequests"})
"""Gates that switch a cache or a faster representation in Kueue's TAS snapshot and scheduler (node matches kept
per pod set within a cycle, remaining capacity kept instead of cloned, the topology tree shared across cycles,
resource requests indexed by slice instead of map): Kueue decides and writes the same either way, and so does
kueue-es, which keeps none of them: both settings are modelled by reading neither."""

PATCH_STYLE_ONLY = frozenset({"WorkloadRequestUseMergePatch"})
"""Gates that switch only how Kueue sends a write, not what it writes: WorkloadRequestUseMergePatch has Kueue
send a Workload's status as a JSON merge patch of the object it read instead of a server-side apply. The status
the apiserver then holds is the same either way; what differs is the field ownership recorded in
``managedFields`` (an Apply by Kueue's field managers, or an Update), which nothing in Kueue's or kueue-es's
decisions reads. kueue-es always sends one merge patch of the status it computes, conditioned on the Workload's
resourceVersion (:mod:`connectors.k8s.writer`), and so models both settings by reading neither."""

PACING_ONLY = frozenset({HIGH_MAX_PARALLELISM_WITHIN_RECONCILE, MULTIKUEUE_REUSE_CLIENT_CONNECTION_CONFIG_FOR_WORKERS})
"""Gates that switch only how fast Kueue talks to an apiserver: HighMaxParallelismWithinReconcile lets one reconcile
send up to 32 writes at a time instead of 8, MultiKueueReuseClientConnectionConfigForWorkers has the clients of the
worker clusters take ``clientConnection``'s QPS and burst instead of the client library's defaults. The writes
and what they say are the same either way. kueue-es sets no client-side rate limit and sends the writes of a
decision as its writer does (:mod:`connectors.k8s.writer`), and so models both settings by reading neither."""

INTERNAL_ONLY = CACHE_ONLY | PATCH_STYLE_ONLY | PACING_ONLY
"""The gates whose settings change how Kueue works inside, never what it decides or the objects it leaves."""

ALL_ALPHA, ALL_BETA = "AllAlpha", "AllBeta"

DEPENDENCIES: dict[str, tuple[str, ...]] = {
    "TASFailedNodeReplacement": ("TopologyAwareScheduling",),
    TAS_FAILED_NODE_REPLACEMENT_FAIL_FAST: ("TASFailedNodeReplacement", "TopologyAwareScheduling"),
    TAS_REPLACE_NODE_ON_POD_TERMINATION: ("TASFailedNodeReplacement", "TopologyAwareScheduling"),
    TAS_REPLACE_NODE_DUE_TO_NOT_READY_OVER_FIXED_TIME: ("TASFailedNodeReplacement", "TopologyAwareScheduling"),
    TAS_BALANCED_PLACEMENT: ("TopologyAwareScheduling",),
    TAS_REPLACE_NODE_ON_NODE_TAINTS: ("TopologyAwareScheduling",),
    TAS_MULTI_LAYER_TOPOLOGY: ("TopologyAwareScheduling",),
    TAS_RESPECT_NODE_AFFINITY_PREFERRED: ("TopologyAwareScheduling",),
    UNADMITTED_WORKLOADS_EXPLICIT_STATUS: (UNADMITTED_WORKLOADS_OBSERVABILITY,),
    TAS_HANDLE_OVERLAPPING_FLAVORS: ("TopologyAwareScheduling",),
    TAS_PROFILE_MIXED: ("TopologyAwareScheduling",),
    TAS_RECOMPUTE_ASSIGNMENT_WITHIN_SCHEDULING_CYCLE: ("TopologyAwareScheduling",),
    ELASTIC_JOBS_VIA_WORKLOAD_SLICES_WITH_TAS: ("ElasticJobsViaWorkloadSlices", "TopologyAwareScheduling"),
    KUEUE_DRA_INTEGRATION_EXTENDED_RESOURCE: (KUEUE_DRA_INTEGRATION,),
    KUEUE_DRA_INTEGRATION_PARTITIONABLE_DEVICES: (KUEUE_DRA_INTEGRATION,),
    KUEUE_DRA_INTEGRATION_CONSUMABLE_CAPACITY: (KUEUE_DRA_INTEGRATION,),
    FLAVOR_FUNGIBILITY_PRESERVE_SCAN_PROGRESS: (FLAVOR_FUNGIBILITY,),
    SCHEDULING_EQUIVALENCE_HASHING_IGNORE_POD_SET_NAME: (SCHEDULING_EQUIVALENCE_HASHING,),
    SCHEDULER_LIBRARY_INTEGRATION: (TOPOLOGY_AWARE_SCHEDULING,),
    TAS_NODE_FEASIBILITY_FOR_ALL_LEVELS: (TOPOLOGY_AWARE_SCHEDULING,),
    ADMISSION_FAIR_SHARING_ANCHOR_AT_QUOTA_RESERVATION: (ADMISSION_FAIR_SHARING,),
    KUEUE_DRA_DEVICE_FEASIBILITY: (KUEUE_DRA_INTEGRATION, TAS_NODE_FEASIBILITY_FOR_ALL_LEVELS, TOPOLOGY_AWARE_SCHEDULING),
    KUEUE_DRA_INTEGRATION_DEVICE_TAINTS: (KUEUE_DRA_DEVICE_FEASIBILITY,),
}
"""Gate -> the gates it depends on, as Kueue v0.20 declares them to the gate library (``pkg/features/
kube_features.go``, ``AddDependencies``; the library sorts each list), whose ``SetFromMap`` refuses an enabled gate
with one off: :func:`errors` says it in the library's words. Releases before v0.20 (v0.16.x to v0.19) checked
these pairs themselves after setting the gates (``pkg/config/validation.go``: "X requires Y to be enabled",
"cannot use a TAS profile with TAS disabled"); v0.20 replaced those checks with this table (Kueue PR 13412), and a
TAS-profile check left after the gates are set is never reached, ``TASProfileMixed`` depending on
``TopologyAwareScheduling`` here. kueue-es says v0.20's words, as it models v0.20's gates."""


MODELLED = INTERNAL_ONLY | frozenset({
    MULTIKUEUE_RAY_IN_TREE_AUTOSCALING,
    ADMISSION_FAIR_SHARING, ADMISSION_FAIR_SHARING_ANCHOR_AT_QUOTA_RESERVATION, ADMISSION_GATED_BY, CONFIGURABLE_PREEMPTIONS, ASSIGN_QUEUE_LABELS_FOR_PODS, CLEANUP_PROVISIONING_REQUESTS_ON_EVICTION, CUSTOM_METRIC_LABELS, DEFER_RAY_SERVICE_FINALIZATION, DEPLOYMENT_JOB_UID_LABEL,
    DISABLE_WAIT_FOR_PODS_READY, DYNAMIC_QUOTA_ORCHESTRATION, ENFORCE_PROVISIONING_POD_TEMPLATE_CONTENTS, SPARK_APPLICATION_INTEGRATION,
    ELASTIC_FLAVOR_CHANGE_FROM_ZERO, ELASTIC_JOBS_FOR_PROVISIONING_REQUESTS, ELASTIC_JOBS_VIA_WORKLOAD_SLICES,
    ELASTIC_JOBS_VIA_WORKLOAD_SLICES_WITH_TAS, ELASTIC_PARTIAL_SCALE_UP,
    FAILURE_RECOVERY_POLICY, FAIR_SHARING_PREEMPT_WITHIN_NOMINAL, FAIR_SHARING_PRIORITIZE_NON_BORROWING,
    FAIR_SHARING_REEVALUATE_PREEMPTION_CANDIDATES, FAIR_SHARING_REFILL, FAST_QUOTA_RELEASE_IN_POD_INTEGRATION, FINISH_ORPHANED_WORKLOADS,
    FLAVOR_FUNGIBILITY, KUEUE_DRA_DEVICE_FEASIBILITY, KUEUE_DRA_INTEGRATION, KUEUE_DRA_INTEGRATION_CONSUMABLE_CAPACITY,
    KUEUE_DRA_INTEGRATION_DEVICE_TAINTS, KUEUE_DRA_INTEGRATION_EXTENDED_RESOURCE, KUEUE_DRA_INTEGRATION_PARTITIONABLE_DEVICES,
    KUEUE_DRA_INTEGRATION_PRIORITIZED_LIST, KUEUE_DRA_REJECT_WORKLOADS_WHEN_DRA_DISABLED,
    FLAVOR_FUNGIBILITY_PRESERVE_SCAN_PROGRESS, LOCAL_QUEUE_METRICS, LWS_IMMUTABLE_GROUP_SIZE,
    MANAGED_JOBS_NAMESPACE_SELECTOR_ALWAYS_RESPECTED, METRIC_FOR_WORKLOAD_CREATION_LATENCY, CONCURRENT_ADMISSION,
    METRICS_FOR_COHORTS, MULTIKUEUE, MULTIKUEUE_ADAPTERS_FOR_CUSTOM_JOBS, MULTIKUEUE_BATCH_JOB_CLEARING_TTL,
    MULTIKUEUE_CLUSTER_PROFILE, MULTIKUEUE_INCREMENTAL_DISPATCHER_CONFIG,
    MULTIKUEUE_INCREMENTAL_DISPATCHER_RESPECT_CONFIG_ORDER, MULTIKUEUE_KUBECONFIG_PATH_VALIDATION,
    MULTIKUEUE_MANAGER_QUOTA_AUTOMATION, MULTIKUEUE_ORCHESTRATED_PREEMPTION, MULTIKUEUE_REMOTE_SPEC_SYNC,
    PARTIAL_ADMISSION, RAY_SERVICE_VALIDATE_UPGRADE_STRATEGY,
    POD_GROUP_SCHEDULING_SHAPE_ORDERING, POD_INTEGRATION_COUNT_SUCCEEDED_PODS_AS_READY,
    POD_INTEGRATION_VALIDATE_GROUP_OWNER, PRIORITIZE_PREEMPTOR_WORKLOADS, PRIORITY_BOOST, "PrioritySortingWithinCohort", QUOTA_CHECK_STRATEGY,
    "ReclaimablePods", RECOMPUTE_ASSIGNMENT_UPON_PREEMPTION_TARGETS_OVERLAP,
    REJECT_UPDATES_TO_CQ_WITH_INVALID_ON_FLAVORS, REMOVE_FINALIZERS_WITH_STRICT_PATCH, RESERVED_RESOURCE_NAME_VALIDATION,
    SCHEDULER_LIBRARY_INTEGRATION, SCHEDULING_EQUIVALENCE_HASHING,
    SCHEDULING_EQUIVALENCE_HASHING_IGNORE_POD_SET_NAME, SHORT_WORKLOAD_NAMES,
    SKIP_ANCESTOR_CHECK_FOR_DELETED_WORKLOADS, SKIP_CHILD_JOB_SUSPENSION,
    SKIP_REASSIGNMENT_FOR_POD_OWNED_WORKLOADS, TAS_ASSIGNMENTS_ENCODING_BY_HOSTNAME_PREFIX,
    TAS_BALANCED_PLACEMENT, TAS_FAILED_NODE_REPLACEMENT, TAS_FAILED_NODE_REPLACEMENT_FAIL_FAST,
    TAS_GROUPED_POD_SET_SLICING, TAS_HANDLE_OVERLAPPING_FLAVORS, TAS_LEADER_POD_SET_FEASIBILITY,
    TAS_MULTI_LAYER_TOPOLOGY, TAS_NODE_FEASIBILITY_FOR_ALL_LEVELS, TAS_PARTIAL_SLICES, TAS_PROFILE_MIXED,
    TAS_RECOMPUTE_ASSIGNMENT_WITHIN_SCHEDULING_CYCLE, TAS_REJECT_FALSE_UNCONSTRAINED,
    TAS_REPLACE_MULTIPLE_FAILED_NODES, TAS_REPLACE_NODE_DUE_TO_NOT_READY_OVER_FIXED_TIME,
    TAS_REPLACE_NODE_ON_NODE_TAINTS, TAS_REPLACE_NODE_ON_POD_TERMINATION, TAS_RESPECT_NODE_AFFINITY_PREFERRED,
    TAS_TOPOLOGY_SPREADING,
    TAS_VALIDATE_WORKLOAD_SLICE_SIZE,
    TLS_OPTIONS,
    TOPOLOGY_AWARE_SCHEDULING, UNADMITTED_WORKLOADS_EXPLICIT_STATUS, UNADMITTED_WORKLOADS_OBSERVABILITY,
    VALIDATE_RAY_AND_SPARK_JOB_UPDATES,
    VISIBILITY_ON_DEMAND, WORKLOAD_IDENTIFIER_ANNOTATIONS, WORKLOAD_PRIORITY_CLASS_DEFAULTING,
    WAIT_FOR_PODS_READY_MAX_NOT_READY, WORKLOAD_LEVEL_WAIT_FOR_PODS_READY,
    WAIT_FOR_PODS_READY_UNSCHEDULED_TIMEOUT,
    WORKLOAD_VALIDATE_RESOURCES_ARE_NON_NEGATIVE, WORKLOAD_VALIDATION_FOR_POD_SET_METADATA,
})
"""The gates whose both settings kueue-es models (a :data:`LOCKED` one's only setting; an :data:`INTERNAL_ONLY`
one's by changing nothing). Every other one is accepted, as Kueue accepts it, and kueue-es
behaves as under its default (:func:`ignored`). TASReplaceNodeDueToNotReadyOverFixedTime (deprecated) is modelled
as the shared reference states it (§4.3): a node not Ready for 30 s fails whatever its pods do. With
TASReplaceNodeOnPodTermination off it changes nothing (that gate's 30 s wait already fails the node); with it on,
Kueue's node controller sets no timer and applies the 30 s rule at its next look at the node (a pod on it ending
or being deleted, a taint change, a restart), while kueue-es, whose rules look whenever what they read changes,
wakes at the end of the 30 s (:func:`kueue_es.scheduler.nodefailure.next_wait_end`).
SkipAncestorCheckForDeletedWorkloads is read by the webhooks that default on update too (LeaderWorkerSets,
Deployments, StatefulSets: :func:`connectors.k8s.framework_webhook.managed_above`); the others default at creation
only, when nothing is being deleted.
SchedulerLibraryIntegration (alpha) is modelled as the node filter Kueue runs through the scheduler-library
(:mod:`kueue_es.scheduler.tas.library`): its profile is NodeUnschedulable, TaintToleration, NodeAffinity and NodePorts,
whose inputs (nodes, pod sets, bound pods' host ports) the log holds; NodeResourcesFit, InterPodAffinity, the volume
and DRA plugins are not in it. Left as edge cases: host ports of pods not yet bound (Kueue too tracks only bound
pods) and of the set's own other pods on one node; Kueue's simulator can also be given admitted workloads to stand in
for with virtual pods on their assigned nodes, which only its tests do in the sources read.
ConcurrentAdmission turns on the ClusterQueue webhook's checks of ``concurrentAdmissionPolicy``
(:func:`events.object_rules.check_concurrent_admission`), the flavor assigner's reading of a Workload's
allowed-flavors annotation (:func:`kueue_es.scheduler.flavors.assign_flavors`), the queues' leaving out a parent
Workload (:attr:`projections.cluster.ClusterState.concurrent_admission`), Kueue's workload controller's parent label
and its variant controller (:mod:`kueue_es.scheduler.variants`), the scheduler's rules between sibling variants
(:mod:`kueue_es.scheduler.siblings`), and the variants' ``kueue.x-k8s.io/concurrent-admission`` preemption gate,
opened one variant at a time (:mod:`kueue_es.scheduler.variant_gates`); left as edge cases: the parent's PodsReady
copied onto its admitted variant, a parent's own gate positions copied onto its variants, siblings matched by their
parent's name rather than its UID."""


PARTLY: frozenset[str] = frozenset()
"""Gates the code reads but models only in part, so not counted in :data:`MODELLED`: none now (the last,
``ConcurrentAdmission``, is modelled since its variants' preemption gate is). A gate put here is not :func:`ignored`
(set away from its default it still changes what kueue-es decides) and may give, turned on, a warning of what it
leaves out (:data:`PARTLY_NOTES`, :func:`partly_note`)."""

PARTLY_NOTES: dict[str, str] = {}
"""For a :data:`PARTLY` gate, what a user turning it on would miss (the warning's text after the gate's name)."""


def partly_note(gates: Mapping[str, bool], source: str) -> str | None:
    """The warning for a :data:`PARTLY` gate turned on whose unmodelled part a user would miss (None otherwise:
    none is on, or none is partly modelled)."""
    for name in sorted(PARTLY):
        if enabled(gates, name) and name in PARTLY_NOTES:
            return f"{source}: featureGates: {name}: {PARTLY_NOTES[name]}"
    return None


def ignored(gates: Mapping[str, bool]) -> list[str]:
    """The gates ``gates`` turns away from their default although kueue-es models only the default, in name
    order: what a user should be told, since the setting changes nothing here. A gate turned off along with a
    modelled gate it depends on is not one of them: Kueue gives a gate no effect while a dependency is off, so
    the dependency's setting already says it (a TAS gate turned off with TopologyAwareScheduling, say)."""
    return [name for name in sorted(GATES) if name not in MODELLED and name not in PARTLY
            and enabled(gates, name) != GATES[name][1]
            and not _moot(gates, name)]


def _moot(gates: Mapping[str, bool], name: str) -> bool:
    """Gate ``name`` is off and so is a modelled gate it depends on."""
    return not enabled(gates, name) and any(dep in MODELLED and not enabled(gates, dep)
                                            for dep in DEPENDENCIES.get(name, ()))


def ignored_note(gates: Mapping[str, bool], source: str) -> str | None:
    """The warning for :func:`ignored` gates (None when there are none)."""
    names = ignored(gates)
    if not names:
        return None
    listed = ", ".join(f"{n} (default {'on' if GATES[n][1] else 'off'})" for n in names)
    return (f"{source}: featureGates: kueue-es models {listed} only at the default; the setting is accepted, as "
            "Kueue accepts it, and changes nothing here")


def enabled(gates: Mapping[str, bool], name: str) -> bool:
    """Whether gate ``name`` is on under the configuration's ``gates`` (validated by :func:`errors`)."""
    value = gates.get(name)
    if value is not None:
        return value
    stage, default = GATES[name]
    if stage == ALPHA and ALL_ALPHA in gates:
        return gates[ALL_ALPHA]
    if stage == BETA and ALL_BETA in gates:
        return gates[ALL_BETA]
    return default


def of_document(document: Mapping[str, Any] | None) -> Mapping[str, bool]:
    """The ``featureGates`` map of a recorded Configuration document (empty when it has none). The map was
    validated before the document was recorded; its values are read as the scheduler reads a recorded document
    (loosely: ``"true"`` is on, as kueue-es took it before refusing such values), and anything else in it is left
    out rather than stopping the fold."""
    gates = document.get("featureGates") if document else None
    if not isinstance(gates, dict):
        return {}
    return {k: flag for k, v in gates.items() if (flag := _loose_bool(v)) is not None}


def _loose_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    try:
        return msgspec.convert(value, bool, strict=False)
    except msgspec.ValidationError:
        return None


def errors(gates: Mapping[str, bool]) -> list[str]:
    """Why Kueue would refuse ``gates`` (empty when it accepts them), as its feature gate's ``SetFromMap`` finds
    it: a locked gate set otherwise, each, until an unknown gate, which ends the look (Kueue's gate library returns
    at the first it meets); only when there is none of those, each gate on whose dependency is off. Kueue ranges
    over Go maps, in no set order: kueue-es goes in name order."""
    out: list[str] = []
    for name in sorted(gates):
        if name in (ALL_ALPHA, ALL_BETA):
            continue
        if name not in GATES:
            out.append(f"unrecognized feature gate: {name}")
            return out
        if name in LOCKED and gates[name] != GATES[name][1]:
            out.append(f"cannot set feature gate {name} to {str(gates[name]).lower()}, feature is locked to "
                       f"{str(GATES[name][1]).lower()}")
    if out:
        return out
    for name in sorted(DEPENDENCIES):
        if not enabled(gates, name):
            continue
        off = [dep for dep in sorted(DEPENDENCIES[name]) if not enabled(gates, dep)]
        if off:
            out.append(f"{name} is enabled, but depends on features that are disabled: [{' '.join(off)}]")
    return out
