"""Views of the Kubernetes and Kueue objects that matter to admission.

Each object is a msgspec Struct tagged by its Kubernetes ``kind``, so a union of them decodes straight from
what the API server (or a user's YAML) says. Only fields that influence scheduling are modelled; unknown fields
are ignored on decode, which is also how old logs stay readable when fields are added (new fields always carry
a default). Field names are Kueue's v1beta2 names, in camelCase on the wire.
"""

from __future__ import annotations

from typing import Annotated, Any, Union

import msgspec

Quantity = str | int | float
"""A Kubernetes quantity as written by a user: ``"500m"``, ``"2Gi"`` or a bare number."""
Int32 = Annotated[int, msgspec.Meta(extra_json_schema={"format": "int32"})]
Int64 = Annotated[int, msgspec.Meta(extra_json_schema={"format": "int64"})]
"""An integer field Kueue's API (or the core API it embeds) declares ``int32``/``int64``: the generated CRDs
say so (``format``), which the apiserver holds a value to, and :mod:`events.crd_markers` refuses a value out
of range on import. Decoding is unchanged: a stored object with a value out of range still folds."""


class _ViewMeta(msgspec.StructMeta):
    """Makes every view keyword-only, so required and defaulted fields can come in Kubernetes' order. (On
    Python 3.11 a metaclass written in Python gets no vectorcall: ``SomeView(field=...)`` packs its keywords
    into a dict and unpacks them again, ~4x a plain Struct's construction; ``msgspec.structs.replace`` of a
    blank view does not, for a hot path: ``projections.workloads._BLANK_CONDITION``.)"""

    def __new__(mcls, name, bases, namespace, **kwargs):  # noqa: N804
        kwargs.setdefault("kw_only", True)
        return super().__new__(mcls, name, bases, namespace, **kwargs)


class View(msgspec.Struct, metaclass=_ViewMeta, frozen=True, gc=False, omit_defaults=True, rename="camel", forbid_unknown_fields=False):
    """Base of every object view: camelCase on the wire, defaults omitted, unknown fields tolerated.

    Views are immutable trees, never part of a reference cycle, so the cycle collector does not track them
    (``gc=False``): replaying a log decodes millions of them, and tracking them made every collection slower.
    """


# --- shared pieces -------------------------------------------------------------------------------------------


class OwnerReference(View):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool = False
    block_owner_deletion: bool = False


class ObjectMeta(View):
    name: str
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    owner_references: list[OwnerReference] = []
    finalizers: list[str] = []


class NamespacedView(View):
    """Base of a connector's view of a namespaced object it lists and watches itself (a JobSet, a RayJob, ...):
    keyed ``<namespace>/<name>``, the namespace always written (unlike :attr:`KObject.key`)."""

    metadata: ObjectMeta

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace}/{self.metadata.name}"


class Toleration(View):
    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""
    toleration_seconds: Int64 | None = None


class Taint(View):
    key: str
    value: str = ""
    effect: str


class Condition(View):
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None
    observed_generation: Int64 = 0


class LabelSelectorRequirement(View):
    key: str
    operator: str
    values: list[str] = []


class LabelSelector(View):
    match_labels: dict[str, str] = {}
    match_expressions: list[LabelSelectorRequirement] = []


# Node affinity is held in tuples: a pod set's terms are part of its (hashed, interned) scheduling info.


class NodeSelectorRequirement(View):
    key: str
    operator: str
    values: tuple[str, ...] = ()


class NodeSelectorTerm(View):
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


class NodeSelector(View):
    node_selector_terms: tuple[NodeSelectorTerm, ...] = ()


class PreferredSchedulingTerm(View):
    """A node-affinity preference: a node matching ``preference`` scores ``weight``."""

    weight: Int32 = 0
    preference: NodeSelectorTerm = NodeSelectorTerm()


class NodeAffinity(View):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: tuple[PreferredSchedulingTerm, ...] = ()


class Affinity(View):
    node_affinity: NodeAffinity | None = None


class ResourceRequirements(View):
    requests: dict[str, Quantity] = {}
    limits: dict[str, Quantity] = {}


class ContainerPort(View):
    """One ``ports[]`` entry of a container: read for its host port (Kueue's SchedulerLibraryIntegration runs the
    scheduler's NodePorts filter, :mod:`projections.host_ports`)."""

    container_port: Int32 = 0
    host_port: Int32 = 0
    protocol: str = ""
    host_ip: str = msgspec.field(name="hostIP", default="")
    name: str = ""


class Container(View):
    name: str = ""
    image: str = ""
    """Kept so that a pod template built from a pod set (a ProvisioningRequest's PodTemplate) is a valid one."""
    resources: ResourceRequirements = ResourceRequirements()
    restart_policy: str | None = None
    ports: list[ContainerPort] = []


class PodResourceClaim(View):
    """One ``spec.resourceClaims[]`` entry: a claim by name, or one made per pod from a template."""

    name: str = ""
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodSpec(View):
    containers: list[Container] = []
    init_containers: list[Container] = []
    node_selector: dict[str, str] = {}
    tolerations: list[Toleration] = []
    affinity: Affinity | None = None
    priority_class_name: str = ""
    runtime_class_name: str | None = None
    """RuntimeClass whose ``overhead.podFixed`` Kueue counts when the template sets no ``overhead`` itself."""
    overhead: dict[str, Quantity] = {}
    resources: ResourceRequirements | None = None
    node_name: str = ""
    scheduling_gates: list[dict[str, Any]] = []
    resource_claims: list[PodResourceClaim] = []
    """Dynamic Resource Allocation claims: a claim made from a ResourceClaimTemplate is charged to quota under
    Kueue's ``KueueDRAIntegration`` gate (:mod:`projections.dra`)."""


class TemplateMeta(View):
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}


class PodTemplateSpec(View):
    metadata: TemplateMeta = TemplateMeta()
    spec: PodSpec = PodSpec()
    digest: str | None = msgspec.field(default=None, name="kueueEsDigest")
    """Of a Workload's pod set: the digest of its whole raw template (:mod:`events.template_digest`), stamped by
    whoever decoded the Workload, for what compares whole templates (``IdenticalPodTemplates``). None: not
    stamped (a template of another kind, a log written before digests); never a Kubernetes field."""


# --- core/v1, batch/v1, scheduling.k8s.io -----------------------------------------------------------------------


class KObject(View, tag_field="kind"):
    """Base of every tagged object: ``kind`` is the tag, ``apiVersion`` is informative only."""

    api_version: str = ""
    metadata: ObjectMeta

    @property
    def key(self) -> str:
        m = self.metadata
        return f"{m.namespace}/{m.name}" if m.namespace else m.name


class Namespace(KObject, tag="Namespace"):
    pass


class NodeSpec(View):
    taints: list[Taint] = []
    unschedulable: bool = False


class NodeStatus(View):
    allocatable: dict[str, Quantity] = {}
    conditions: list[Condition] = []


class Node(KObject, tag="Node"):
    spec: NodeSpec = NodeSpec()
    status: NodeStatus = NodeStatus()


class PodStatus(View):
    phase: str = ""
    conditions: list[Condition] = []
    """In the log, only ``PodScheduled`` (type and status): what Kueue's UnscheduledPodsTracker reads
    (:mod:`projections.pods_scheduled`)."""


class Pod(KObject, tag="Pod"):
    spec: PodSpec = PodSpec()
    status: PodStatus = PodStatus()


class JobSpec(View):
    suspend: bool = False
    parallelism: int = 1
    completions: int | None = None
    completion_mode: str | None = None
    """``Indexed`` or ``NonIndexed`` (the apiserver's default); None: not known (a Job kept before it was read)."""
    template: PodTemplateSpec = PodTemplateSpec()
    managed_by: str | None = None
    """``kueue.x-k8s.io/multikueue`` on a MultiKueue manager: the Job runs on a worker, not here."""


class JobStatus(View):
    active: int = 0
    succeeded: int = 0
    failed: int = 0
    failed_indexes: str | None = None
    """An Indexed Job's indexes failed for good under ``backoffLimitPerIndex`` (``"1,3-5"``)."""
    completed_indexes: str | None = None
    """An Indexed Job's indexes that succeeded (``"0-3,5"``)."""
    ready: int | None = None
    conditions: list[Condition] = []


class Job(KObject, tag="Job"):
    spec: JobSpec = JobSpec()
    status: JobStatus = JobStatus()


class PriorityClass(KObject, tag="PriorityClass"):
    value: int = 0
    global_default: bool = False


LIMIT_TYPES = ("Pod", "Container", "PersistentVolumeClaim")


class LimitRangeItem(View):
    """One ``spec.limits[]`` entry. Kueue reads the Container and Pod types: ``default``/``defaultRequest`` fill
    what a template leaves out, ``min``/``max`` bound what it asks for; ``maxLimitRequestRatio`` is summarised but
    never checked (as in Kueue)."""

    type: str = ""
    max: dict[str, Quantity] = {}
    min: dict[str, Quantity] = {}
    default: dict[str, Quantity] = {}
    default_request: dict[str, Quantity] = {}
    max_limit_request_ratio: dict[str, Quantity] = {}


class LimitRangeSpec(View):
    limits: list[LimitRangeItem] = []


class LimitRange(KObject, tag="LimitRange"):
    """core/v1 LimitRange (namespaced): Kueue adjusts and checks the pod templates of its namespace's workloads."""

    spec: LimitRangeSpec = LimitRangeSpec()


class Overhead(View):
    pod_fixed: dict[str, Quantity] = {}


class RuntimeClass(KObject, tag="RuntimeClass"):
    """node.k8s.io/v1 RuntimeClass (cluster-scoped): its fixed pod overhead counts towards quota for templates that
    name it and set no ``overhead`` of their own."""

    handler: str = ""
    overhead: Overhead | None = None


# --- resource.k8s.io ---------------------------------------------------------------------------------------------

DEVICE_ALLOCATION_MODES = ("ExactCount", "All")


class CELDeviceSelector(View):
    expression: str = ""


class DeviceSelector(View):
    """A CEL expression a device must satisfy (``cel``, the only kind resource.k8s.io/v1 has)."""

    cel: CELDeviceSelector | None = None


class CapacityRequirements(View):
    """``exactly.capacity``: how much of each consumable capacity of a device the request asks for, by the
    capacity's qualified name."""

    requests: dict[str, Quantity] = {}


class ExactDeviceRequest(View):
    """``devices.requests[].exactly``: so many devices of one DeviceClass. The API server defaults
    ``allocationMode`` to ExactCount and, for it, ``count`` to 1. Kueue compiles the CEL ``selectors`` and matches
    them against the devices ResourceSlices publish; a class charged by capacity sources is charged what
    ``capacity`` asks for."""

    device_class_name: str = ""
    allocation_mode: str = ""
    count: int | None = None
    admin_access: bool | None = None
    selectors: list[DeviceSelector] = []
    capacity: CapacityRequirements | None = None
    tolerations: list[Toleration] = []
    """The device taints the request tolerates (read by KueueDRAIntegrationDeviceTaints' device check)."""


class DeviceRequest(View):
    name: str = ""
    exactly: ExactDeviceRequest | None = None
    first_available: list[dict[str, Any]] | None = None
    """Prioritized alternatives (sub-requests as the API has them): Kueue refuses them unless
    KueueDRAIntegrationPrioritizedList is on, then charges the largest count of alternatives under one logical
    resource (:func:`projections.dra.first_available_charge`)."""


class DeviceClaim(View):
    requests: list[DeviceRequest] = []


class ResourceClaimSpec(View):
    devices: DeviceClaim = DeviceClaim()


class ResourceClaimTemplateSpec(View):
    spec: ResourceClaimSpec = ResourceClaimSpec()


class ResourceClaimTemplate(KObject, tag="ResourceClaimTemplate"):
    """resource.k8s.io/v1 ResourceClaimTemplate (namespaced): the devices each pod naming it claims, which Kueue
    charges to quota through the Configuration's ``resources.deviceClassMappings``."""

    spec: ResourceClaimTemplateSpec = ResourceClaimTemplateSpec()


class DeviceClassSpec(View):
    extended_resource_name: str | None = None
    selectors: list[DeviceSelector] = []


class DeviceClass(KObject, tag="DeviceClass"):
    """resource.k8s.io/v1 DeviceClass (cluster-scoped): its ``extendedResourceName``, the extended resource whose
    requests kube-scheduler serves from devices of the class (Kueue's KueueDRAIntegrationExtendedResource charges
    those requests to quota as DRA devices), and its CEL ``selectors`` (which the devices charged to a counter
    source must satisfy)."""

    spec: DeviceClassSpec = DeviceClassSpec()


class Counter(View):
    value: Quantity = 0


class CounterSet(View):
    """``sharedCounters[]``: a named set of counters the devices of the pool draw from."""

    name: str = ""
    counters: dict[str, Counter] = {}


class DeviceCounterConsumption(View):
    """``devices[].consumesCounters[]``: what the device takes of one counter set when allocated."""

    counter_set: str = ""
    counters: dict[str, Counter] = {}


class CapacityRequestPolicyRange(View):
    min: Quantity | None = None
    max: Quantity | None = None
    step: Quantity | None = None


class CapacityRequestPolicy(View):
    """How much of a device's capacity one allocation takes: ``default`` when the claim asks for none, rounded up
    to one of ``validValues`` or into ``validRange``."""

    default: Quantity | None = None
    valid_values: list[Quantity] = []
    valid_range: CapacityRequestPolicyRange | None = None


class DeviceCapacity(View):
    value: Quantity = 0
    request_policy: CapacityRequestPolicy | None = None


class DeviceAttribute(View):
    """One of ``int``, ``bool``, ``string``, ``version``."""

    int_value: int | None = msgspec.field(default=None, name="int")
    bool_value: bool | None = msgspec.field(default=None, name="bool")
    string: str | None = None
    version: str | None = None


class Device(View):
    name: str = ""
    attributes: dict[str, DeviceAttribute] = {}
    capacity: dict[str, DeviceCapacity] = {}
    consumes_counters: list[DeviceCounterConsumption] = []
    allow_multiple_allocations: bool | None = None
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    taints: list[Taint] = []
    """Its device taints (``timeAdded`` not kept), which KueueDRAIntegrationDeviceTaints' device check reads."""


class ResourcePool(View):
    """The pool a slice belongs to: only the slices of its newest ``generation`` count, and the pool is complete
    once ``resourceSliceCount`` of them are there."""

    name: str = ""
    generation: int = 0
    resource_slice_count: int = 0


class ResourceSliceSpec(View):
    driver: str = ""
    pool: ResourcePool = ResourcePool()
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    per_device_node_selection: bool | None = None
    shared_counters: list[CounterSet] = []
    devices: list[Device] = []


class DeviceTaintSelector(View):
    """Which devices a DeviceTaintRule taints: those of ``driver``, ``pool`` and named ``device``, each when given."""

    driver: str | None = None
    pool: str | None = None
    device: str | None = None


class DeviceTaintRuleSpec(View):
    device_selector: DeviceTaintSelector | None = None
    taint: Taint


class DeviceTaintRule(KObject, tag="DeviceTaintRule"):
    """resource.k8s.io/v1 DeviceTaintRule (cluster-scoped): a taint an administrator puts on the devices it selects,
    which KueueDRAIntegrationDeviceTaints' device check reads beside the taints ResourceSlices publish."""

    spec: DeviceTaintRuleSpec

    def selects(self, driver: str, pool: str, device: str) -> bool:
        sel = self.spec.device_selector
        if sel is None:
            return True
        return ((sel.driver is None or sel.driver == driver) and (sel.pool is None or sel.pool == pool)
                and (sel.device is None or sel.device == device))


class DeviceRequestAllocationResult(View):
    """One device a claim was allocated (``status.allocation.devices.results[]``)."""

    driver: str = ""
    pool: str = ""
    device: str = ""
    admin_access: bool | None = None
    share_id: str | None = msgspec.field(default=None, name="shareID")


class DeviceAllocationResult(View):
    results: list[DeviceRequestAllocationResult] = []


class AllocationResult(View):
    devices: DeviceAllocationResult = DeviceAllocationResult()


class ResourceClaimStatus(View):
    allocation: AllocationResult | None = None


class ResourceClaim(KObject, tag="ResourceClaim"):
    """resource.k8s.io/v1 ResourceClaim (namespaced), only as far as its ``status.allocation`` goes: the devices it
    holds, which KueueDRADeviceFeasibility's device check counts as taken (:mod:`kueue_es.scheduler.tas.devices`)."""

    status: ResourceClaimStatus = ResourceClaimStatus()

    def held(self) -> tuple[tuple[str, str, str, bool], ...]:
        """The devices it holds as (driver, pool, device, shared), by place in its results: an admin-access
        result holds none, one with a ``shareID`` shares its device."""
        allocation = self.status.allocation
        if allocation is None:
            return ()
        return tuple((r.driver, r.pool, r.device, r.share_id is not None) for r in allocation.devices.results
                     if not r.admin_access)


class ResourceSlice(KObject, tag="ResourceSlice"):
    """resource.k8s.io/v1 ResourceSlice (cluster-scoped): the devices a DRA driver publishes, part of a pool (its
    devices' attributes, capacities and counter consumptions, and the pool's shared counters): what Kueue reads
    to charge the counters and capacities of ``deviceClassMappings`` sources (:mod:`projections.resource_slices`)."""

    spec: ResourceSliceSpec = ResourceSliceSpec()


# --- kueue.x-k8s.io --------------------------------------------------------------------------------------------


class WorkloadPriorityClass(KObject, tag="WorkloadPriorityClass"):
    value: Int32 = 0
    description: str = ""


class ResourceFlavorSpec(View):
    node_labels: dict[str, str] = {}
    node_taints: list[Taint] = []
    tolerations: list[Toleration] = []
    topology_name: str | None = None
    resource_weights: dict[str, Quantity] = {}
    """Resource name -> the multiplier Fair Sharing's dominant resource share gives this flavor's amounts of
    it (Kueue's KEP-8902; 1 when not given): :func:`projections.fair_share.flavor_weights`."""


class ResourceFlavor(KObject, tag="ResourceFlavor"):
    spec: ResourceFlavorSpec = ResourceFlavorSpec()


class ResourceQuota(View):
    name: str
    nominal_quota: Quantity = 0
    borrowing_limit: Quantity | None = None
    lending_limit: Quantity | None = None


class FlavorQuotas(View):
    name: str
    resources: list[ResourceQuota]


class ResourceGroup(View):
    covered_resources: list[str]
    flavors: list[FlavorQuotas]


class BorrowWithinCohort(View):
    policy: str = "Never"
    max_priority_threshold: Int32 | None = None


class ClusterQueuePreemption(View):
    reclaim_within_cohort: str = "Never"
    within_cluster_queue: str = "Never"
    borrow_within_cohort: BorrowWithinCohort | None = None


class FlavorFungibility(View):
    when_can_borrow: str = "MayStopSearch"
    when_can_preempt: str = "TryNextFlavor"
    preference: str | None = None


class FairSharing(View):
    weight: Quantity | None = None


class AdmissionCheckStrategyRule(View):
    name: str
    on_flavors: list[str] = []


class AdmissionChecksStrategy(View):
    admission_checks: list[AdmissionCheckStrategyRule] = []


class AdmissionScope(View):
    admission_mode: str = ""


CONCURRENT_ADMISSION_MODES = ("TryPreferredFlavors", "RetainFirstAdmission")
"""``spec.concurrentAdmissionPolicy.migration.mode`` (the CRD's enum; left out it is ``TryPreferredFlavors``)."""


class ConcurrentAdmissionConstraints(View):
    last_acceptable_flavor_name: str | None = None


class ConcurrentAdmissionMigration(View):
    mode: str = "TryPreferredFlavors"
    constraints: ConcurrentAdmissionConstraints | None = None


class ConcurrentAdmissionPolicy(View):
    """``ConcurrentAdmission`` (alpha, off): each workload of the ClusterQueue is pursued through one variant
    Workload per flavor of its one resource group (:mod:`kueue_es.scheduler.variants`; checked by
    :func:`events.object_rules.check_concurrent_admission`; its variants' preemption gate:
    :mod:`kueue_es.scheduler.variant_gates`)."""

    migration: ConcurrentAdmissionMigration = ConcurrentAdmissionMigration()


class _Stoppable:
    """A queue's spec with a ``stopPolicy`` (ClusterQueue and LocalQueue)."""

    __slots__ = ()
    stop_policy: str

    @property
    def stopped(self) -> bool:
        """Hold or HoldAndDrain: Kueue reads an unset stopPolicy as None, and so does kueue-es an empty one."""
        return self.stop_policy not in ("None", "")


class ClusterQueueSpec(View, _Stoppable):
    resource_groups: list[ResourceGroup] = []
    cohort_name: str = ""
    queueing_strategy: str = "BestEffortFIFO"
    namespace_selector: LabelSelector | None = None
    preemption: ClusterQueuePreemption = ClusterQueuePreemption()
    flavor_fungibility: FlavorFungibility = FlavorFungibility()
    admission_checks_strategy: AdmissionChecksStrategy | None = None
    stop_policy: str = "None"
    fair_sharing: FairSharing | None = None
    admission_scope: AdmissionScope | None = None
    concurrent_admission_policy: ConcurrentAdmissionPolicy | None = None


class ClusterQueue(KObject, tag="ClusterQueue"):
    spec: ClusterQueueSpec = ClusterQueueSpec()
    status: dict[str, Any] = {}
    """As the apiserver showed it (the connector writes it from the log; scheduling reads only ``effectiveQuotas``,
    under DynamicQuotaOrchestration: :mod:`projections.effective_quotas`)."""


class CohortSpec(View):
    parent_name: str = ""
    resource_groups: list[ResourceGroup] = []
    fair_sharing: FairSharing | None = None


class Cohort(KObject, tag="Cohort"):
    spec: CohortSpec = CohortSpec()
    status: dict[str, Any] = {}
    """As the apiserver showed it: scheduling reads only ``effectiveQuotas``, under DynamicQuotaOrchestration
    (:mod:`projections.effective_quotas`)."""


class LocalQueueSpec(View, _Stoppable):
    cluster_queue: str = ""
    stop_policy: str = "None"
    fair_sharing: FairSharing | None = None


class LocalQueue(KObject, tag="LocalQueue"):
    spec: LocalQueueSpec = LocalQueueSpec()
    status: dict[str, Any] = {}
    """As the apiserver showed it (the connector writes it from the log; scheduling never reads it)."""


class TopologyLevel(View):
    node_label: str


class TopologySpec(View):
    levels: list[TopologyLevel] = []


class Topology(KObject, tag="Topology"):
    spec: TopologySpec = TopologySpec()


class AdmissionCheckParameters(View):
    api_group: str = ""
    kind: str = ""
    name: str = ""


class AdmissionCheckSpec(View):
    controller_name: str = ""
    parameters: AdmissionCheckParameters | None = None


class AdmissionCheckStatus(View):
    conditions: list[Condition] = []


class AdmissionCheck(KObject, tag="AdmissionCheck"):
    spec: AdmissionCheckSpec = AdmissionCheckSpec()
    status: AdmissionCheckStatus = AdmissionCheckStatus()


class ProvisioningRequestRetryStrategy(View):
    """Kueue's defaults: three retries, backoff 60 s doubling up to 30 min; a limit of 0 disables retries."""

    backoff_limit_count: Int32 = 3
    backoff_base_seconds: Int32 = 60
    backoff_max_seconds: Int32 = 1800


_DEFAULT_RETRY = ProvisioningRequestRetryStrategy()


class ProvisioningRequestNodeSelectorUpdate(View):
    """A node-selector entry for the pod sets of a provisioned workload, its value read from the request's
    ``status.provisioningClassDetails[valueFromProvisioningClassDetail]``."""

    key: str
    value_from_provisioning_class_detail: str


class ProvisioningRequestPodSetUpdates(View):
    node_selector: list[ProvisioningRequestNodeSelectorUpdate] = []


POD_SET_MERGE_POLICIES = ("IdenticalPodTemplates", "IdenticalWorkloadSchedulingRequirements")


class ProvisioningRequestConfigSpec(View):
    provisioning_class_name: str = ""
    parameters: dict[str, str] = {}
    managed_resources: list[str] = []
    """Resources that make a pod set need provisioning; empty means every resource."""
    retry_strategy: ProvisioningRequestRetryStrategy | None = None
    pod_set_updates: ProvisioningRequestPodSetUpdates | None = None
    pod_set_merge_policy: str | None = None
    """``IdenticalPodTemplates`` or ``IdenticalWorkloadSchedulingRequirements``; None merges nothing."""

    @property
    def retry(self) -> ProvisioningRequestRetryStrategy:
        """The retry strategy in effect (Kueue's defaults when none is given)."""
        return self.retry_strategy if self.retry_strategy is not None else _DEFAULT_RETRY


class ProvisioningRequestConfig(KObject, tag="ProvisioningRequestConfig"):
    spec: ProvisioningRequestConfigSpec = ProvisioningRequestConfigSpec()


# --- ConfigurablePreemptions (alpha, kueue.x-k8s.io/v1alpha1) ----------------------------------------------------

PREEMPTION_CONFIG_ANNOTATION = "kueue.x-k8s.io/preemption-config-name"
"""The ClusterQueue annotation naming the PreemptionConfig it uses (Kueue's alpha reference, no spec field yet)."""

PREEMPTION_TRIGGERS = ("Always", "InsufficientQuota", "QuotaFeasibleAndInsufficientTopology")
PREEMPTION_SCOPES = ("WithinLocalQueue", "WithinClusterQueue", "WithinParentCohort", "WithinCohortTree",
                     "AnyClusterQueue")
NUMERIC_COMPARISONS = ("LessThan", "GreaterThan", "LessThanOrEqual", "GreaterThanOrEqual")
PRIORITY_MODES = ("Base", "Boosted")


class PreemptionConfigNumericLabel(View):
    key: str = ""
    fallback_value: int | None = None
    comparison: str | None = None
    min_value: int | None = None
    max_value: int | None = None


class PreemptionConfigPriority(View):
    mode: str = ""
    comparison: str = ""


class PreemptionConfigCandidateSelector(View):
    scope: str = ""
    cluster_queue_selector: LabelSelector | None = None
    label_selector: LabelSelector | None = None
    numeric_labels: list[PreemptionConfigNumericLabel] = []
    priority: PreemptionConfigPriority | None = None


class PreemptionConfigActivationPolicy(View):
    trigger: str = ""


class PreemptionConfigRule(View):
    name: str = ""
    preemptor_selector: LabelSelector | None = None
    activation_policy: PreemptionConfigActivationPolicy = PreemptionConfigActivationPolicy()
    candidate_selectors: list[PreemptionConfigCandidateSelector] = []


class PreemptionConfigSpec(View):
    rules: list[PreemptionConfigRule] = []


class PreemptionConfig(KObject, tag="PreemptionConfig"):
    """Kueue v0.20's alpha PreemptionConfig (cluster-scoped): rules a ClusterQueue naming it in its
    ``kueue.x-k8s.io/preemption-config-name`` annotation adds preemption candidates by, under the
    ConfigurablePreemptions gate (:mod:`kueue_es.scheduler.preemption_config`)."""

    spec: PreemptionConfigSpec = PreemptionConfigSpec()


# --- MultiKueue -------------------------------------------------------------------------------------------------

MULTIKUEUE_LOCATION_TYPES = ("Secret", "Path")


class MultiKueueKubeConfig(View):
    """Where a worker cluster's kubeconfig is: a Secret in Kueue's namespace (key ``kubeconfig``) or a file path."""

    location: str = ""
    location_type: str = "Secret"


class ClusterProfileReference(View):
    name: str = ""


class MultiKueueClusterSource(View):
    """Exactly one of ``kubeConfig`` or ``clusterProfileRef``."""

    kube_config: MultiKueueKubeConfig | None = None
    cluster_profile_ref: ClusterProfileReference | None = None


class MultiKueueClusterSpec(View):
    cluster_source: MultiKueueClusterSource = MultiKueueClusterSource()


class MultiKueueClusterStatus(View):
    conditions: list[Condition] = []


class MultiKueueCluster(KObject, tag="MultiKueueCluster"):
    """A worker cluster of a MultiKueue manager. Its ``Active`` condition is written by kueue-es from what the
    connector observed of the cluster (``MultiKueueClusterObserved``), never read back."""

    spec: MultiKueueClusterSpec = MultiKueueClusterSpec()
    status: MultiKueueClusterStatus = MultiKueueClusterStatus()


class MultiKueueConfigSpec(View):
    clusters: list[str] = []
    """The MultiKueueClusters a MultiKueue check dispatches to, in order."""
    quota_management: str | None = None
    """``Manual`` or ``Automated`` (unset: Manual); Automated, under MultiKueueManagerQuotaAutomation, makes the
    quota of the manager ClusterQueues behind it follow their workers' (:mod:`projections.manager_quota`)."""


class MultiKueueConfig(KObject, tag="MultiKueueConfig"):
    spec: MultiKueueConfigSpec = MultiKueueConfigSpec()


# --- autoscaling.x-k8s.io/v1 ProvisioningRequest and its core/v1 PodTemplates --------------------------------------


class PodTemplateRef(View):
    name: str


class ProvisioningRequestPodSet(View):
    pod_template_ref: PodTemplateRef
    count: int


class ProvisioningRequestSpec(View):
    provisioning_class_name: str = ""
    parameters: dict[str, str] = {}
    pod_sets: list[ProvisioningRequestPodSet] = []


class ProvisioningRequestStatus(View):
    conditions: list[Condition] = []
    provisioning_class_details: dict[str, str] = {}


class ProvisioningRequest(KObject, tag="ProvisioningRequest"):
    """The cluster autoscaler's request for capacity, which kueue-es creates for the ProvisioningRequest check."""

    spec: ProvisioningRequestSpec = ProvisioningRequestSpec()
    status: ProvisioningRequestStatus = ProvisioningRequestStatus()


class PodTemplate(KObject, tag="PodTemplate"):
    """core/v1 PodTemplate: the pods a ProvisioningRequest pod set asks capacity for. kueue-es creates these
    (the decisions carry them whole) but does not watch them, so the kind is not part of :data:`KueueObject`."""

    template: PodTemplateSpec = PodTemplateSpec()


# --- Workload ----------------------------------------------------------------------------------------------------


class PodSetSliceRequiredTopologyConstraint(View):
    """One slice layer: ``size`` pods per domain of level ``topology`` (Kueue requires both; the defaults only make
    an absent value decodable, and validation names it)."""

    topology: str = ""
    size: Int32 = 0


class PodSetTopologyRequest(View):
    required: str | None = None
    preferred: str | None = None
    unconstrained: bool | None = None
    pod_index_label: str | None = None
    sub_group_index_label: str | None = None
    sub_group_count: Int32 | None = None
    pod_set_group_name: str | None = None
    pod_set_slice_required_topology: str | None = None
    pod_set_slice_size: Int32 | None = None
    podset_slice_required_topology_constraints: tuple[PodSetSliceRequiredTopologyConstraint, ...] = ()
    """Slice layers, outer to inner (Kueue's ``podsetSliceRequiredTopologyConstraints``, v1beta2 only): the first
    is the slice level and size; each inner one groups the pods below the previous layer in its own size."""


class PodSet(View):
    name: str = "main"
    count: Int32 = 1
    min_count: Int32 | None = None
    template: PodTemplateSpec = PodTemplateSpec()
    topology_request: PodSetTopologyRequest | None = None


class PriorityClassRef(View):
    group: str = ""
    kind: str = ""
    name: str = ""


class PreemptionGate(View):
    """One ``spec.preemptionGates[]`` entry: a gate that, while closed, keeps the workload from preempting."""

    name: str = ""


class WorkloadSpec(View):
    pod_sets: list[PodSet] = []
    queue_name: str = ""
    priority_class_ref: PriorityClassRef | None = None
    priority: Int32 | None = None
    active: bool = True
    maximum_execution_time_seconds: Int32 | None = None
    preemption_gates: list[PreemptionGate] = []
    """``MultiKueueOrchestratedPreemption``: gates that must be open (``status.preemptionGates``) before the
    scheduler may preempt for it; one the status does not list yet is closed."""


class TopologyDomainAssignment(View):
    """One leaf domain of a placement: its value per level, and how many pods go there (the logical form)."""

    values: list[str]
    count: Int32


class TopologyAssignmentSliceLevelIndividualValues(View):
    """Per-domain values at one level: domain i's value is ``prefix + roots[i] + suffix``."""

    prefix: str | None = None
    suffix: str | None = None
    roots: list[str] = []


class TopologyAssignmentSliceLevelValues(View):
    """Exactly one of ``universal`` (every domain of the slice has this value) or ``individual``."""

    universal: str | None = None
    individual: TopologyAssignmentSliceLevelIndividualValues | None = None


class TopologyAssignmentSlicePodCounts(View):
    """Exactly one of ``universal`` (every domain gets this many pods) or ``individual`` (one per domain)."""

    universal: Int32 | None = None
    individual: list[Int32] = []


class TopologyAssignmentSlice(View):
    domain_count: Int32
    values_per_level: list[TopologyAssignmentSliceLevelValues]
    pod_counts: TopologyAssignmentSlicePodCounts


class TopologyAssignment(View):
    """v1beta2 wire form: the domains are the slices concatenated in order. :mod:`events.tas_assignment`
    decodes and encodes it; v1beta1's ``domains`` form is converted on input."""

    levels: list[str]
    slices: list[TopologyAssignmentSlice] = []


class TopologyAssignmentV1Beta1(View):
    """v1beta1 wire form (``{levels, domains}``): only met at the edges, converted to and from v1beta2."""

    levels: list[str]
    domains: list[TopologyDomainAssignment] = []


class PodSetAssignment(View):
    name: str
    flavors: dict[str, str] = {}
    resource_usage: dict[str, Quantity] = {}
    count: Int32 | None = None
    topology_assignment: TopologyAssignment | None = None
    delayed_topology_request: str | None = None
    """``Pending`` while the topology assignment waits for admission checks (second pass), then ``Ready``."""


class Admission(View):
    cluster_queue: str
    pod_set_assignments: list[PodSetAssignment] = []


class RequeueState(View):
    count: Int32 | None = None
    requeue_at: str | None = None


class ReclaimablePod(View):
    name: str
    count: Int32


class PodSetUpdate(View):
    """What a Ready admission check asks to add to a pod set's pods when the job starts."""

    name: str
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    node_selector: dict[str, str] = {}
    tolerations: list[Toleration] = []


class AdmissionCheckState(View):
    name: str
    state: str
    last_transition_time: str | None = None
    message: str = ""
    requeue_after_seconds: Int32 | None = None
    retry_count: Int32 | None = None
    pod_set_updates: list[PodSetUpdate] = []


class UnhealthyNode(View):
    name: str


class SchedulingStatsEviction(View):
    """One entry of ``status.schedulingStats.evictions``: how often the workload was evicted for ``reason`` with
    ``underlying_cause``. All three are required by Kueue's CRD (the cause may be empty but is always written)."""

    reason: str
    underlying_cause: str
    count: Int32


class SchedulingStats(View):
    evictions: list[SchedulingStatsEviction] = []
    """In the order each (reason, underlying cause) was first counted; written by Kueue only."""


class PodSetRequest(View):
    """What a pending workload's pod set asks for in all (``status.resourceRequests[]``)."""

    name: str
    resources: dict[str, Quantity] = {}


class PreemptionGateState(View):
    """One ``status.preemptionGates[]`` entry: where a spec gate stands, ``Open`` or ``Closed``."""

    name: str = ""
    position: str = ""
    last_transition_time: str | None = None


class WorkloadStatus(View):
    conditions: list[Condition] = []
    admission: Admission | None = None
    requeue_state: RequeueState | None = None
    reclaimable_pods: list[ReclaimablePod] = []
    admission_checks: list[AdmissionCheckState] = []
    resource_requests: list[PodSetRequest] = []
    """Set by a failed admission attempt, emptied by a quota reservation; written by Kueue only."""
    accumulated_past_execution_time_seconds: Int32 | None = None
    unhealthy_nodes: list[UnhealthyNode] = []
    """Failed nodes under a TAS workload that Kueue is looking to replace; written by Kueue only."""
    cluster_name: str | None = None
    """MultiKueue: the worker cluster the workload was admitted on (immutable once set); written by Kueue only."""
    nominated_cluster_names: list[str] = []
    """MultiKueue: the worker clusters the workload is dispatched to while none admitted it."""
    preemption_gates: list[PreemptionGateState] = []
    """``MultiKueueOrchestratedPreemption``: the positions of the spec's preemption gates."""
    scheduling_stats: SchedulingStats | None = None
    """The evictions counted by reason and underlying cause (:mod:`projections.eviction_stats`)."""


class Workload(KObject, tag="Workload"):
    spec: WorkloadSpec = WorkloadSpec()
    status: WorkloadStatus = WorkloadStatus()


KueueObject = Union[  # noqa: UP007 - one tagged union, a member per line
    Namespace,
    Node,
    Pod,
    Job,
    PriorityClass,
    LimitRange,
    RuntimeClass,
    ResourceClaimTemplate,
    DeviceClass,
    ResourceSlice,
    ResourceClaim,
    DeviceTaintRule,
    WorkloadPriorityClass,
    ResourceFlavor,
    ClusterQueue,
    Cohort,
    LocalQueue,
    Topology,
    AdmissionCheck,
    ProvisioningRequestConfig,
    PreemptionConfig,
    ProvisioningRequest,
    MultiKueueCluster,
    MultiKueueConfig,
    Workload,
]
"""Every object kind the log carries, as one tagged union."""

KINDS: dict[str, type[KObject]] = {t.__struct_config__.tag: t for t in KueueObject.__args__}  # type: ignore[attr-defined]

API_GROUPS: dict[str, tuple[str, ...]] = {
    "Namespace": ("v1",),
    "Node": ("v1",),
    "Pod": ("v1",),
    "Job": ("batch/v1",),
    "PriorityClass": ("scheduling.k8s.io/v1",),
    "LimitRange": ("v1",),
    "RuntimeClass": ("node.k8s.io/v1",),
    "ResourceClaimTemplate": ("resource.k8s.io/v1",),
    "DeviceClass": ("resource.k8s.io/v1",),
    "ResourceSlice": ("resource.k8s.io/v1",),
    "ResourceClaim": ("resource.k8s.io/v1",),
    "DeviceTaintRule": ("resource.k8s.io/v1",),
    "ProvisioningRequestConfig": ("kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1beta1"),
    "PreemptionConfig": ("kueue.x-k8s.io/v1alpha1",),
    "ProvisioningRequest": ("autoscaling.x-k8s.io/v1",),
    "PodTemplate": ("v1",),
}
"""apiVersions accepted per kind; every other kind is a kueue.x-k8s.io kind served as v1beta2 and v1beta1."""

KUEUE_VERSIONS = ("kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1beta1")

CLUSTER_SCOPED = frozenset(
    {
        "Namespace",
        "Node",
        "PriorityClass",
        "RuntimeClass",
        "DeviceClass",
        "ResourceSlice",
        "DeviceTaintRule",
        "WorkloadPriorityClass",
        "ResourceFlavor",
        "ClusterQueue",
        "Cohort",
        "Topology",
        "AdmissionCheck",
        "ProvisioningRequestConfig",
        "PreemptionConfig",
        "MultiKueueCluster",
        "MultiKueueConfig",
    }
)


def accepted_api_versions(kind: str) -> tuple[str, ...]:
    return API_GROUPS.get(kind, KUEUE_VERSIONS)


def resource_version_order(text: str) -> int:
    """A ``resourceVersion`` as a number that orders one object's versions (the apiserver's are decimal revisions),
    -1 for one that is not."""
    return int(text) if text.isascii() and text.isdigit() else -1
