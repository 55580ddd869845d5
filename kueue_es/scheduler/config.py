"""The part of Kueue's ``Configuration`` (config.kueue.x-k8s.io/v1beta2) that changes admission decisions.

A user's existing Kueue configuration file is accepted as it is: Kueue's fields kueue-es does not use are ignored
but type-checked as Kueue's decoder types them, like every other (:mod:`kueue_es.scheduler.config_schema`),
defaults are Kueue's, and a field Kueue does not know is refused, as Kueue's strict decoding refuses it
(:mod:`kueue_es.scheduler.config_fields`).
"""

from __future__ import annotations

import ipaddress
import math
import re
import types
import typing
from functools import cached_property, lru_cache
from typing import Any, NamedTuple

import msgspec

from events import objects as o
from events.doc_paths import leaves
from events.errors import InvalidInput, aggregate
from events.field_errors import (
    IS_NEGATIVE,
    OWN_RULE,
    FieldErrors,
    go_bool_map,
    go_float_map,
    go_quote,
    go_string_slice,
    not_supported,
    too_long,
    too_many,
)
from events.labels import (
    NAME_MAX,
    dns_label_problems,
    label_key_problems,
    label_value_problems,
    regex_error,
    selector_field_errors,
    selector_problem,
    subdomain_problems,
)
from kueue_es.scheduler import (
    config_durations,
    config_fields,
    config_nulls,
    config_numbers,
    config_schema,
    tls_options,
)
from projections import afs_ledger, config_version, custom_labels, gates, go_duration, workloads
from projections.admissionchecks import ALL_AT_ONCE_DISPATCHER, INCREMENTAL_DISPATCHER
from projections.clusterqueues import selector_matches
from projections.pods_ready import (
    WaitForPodsReadyConfig,
    pods_ready_in_force,
    v1beta2_defaulted,
)
from projections.queue_order import REQUEUING_TIMESTAMPS
from projections.request_rules import (
    RESERVED,
    ResourceTransformation,
    check_output_quantities,
    transformation_problems,
)


class _Cfg(msgspec.Struct, kw_only=True, rename="camel", frozen=True, forbid_unknown_fields=False):
    pass


class FairSharingConfig(_Cfg):
    enable: bool = True
    """v1beta1's switch (v1beta2 has none: the stanza's presence switches it on). A v1beta1 stanza that is not
    enabled is dropped when loaded (:mod:`projections.config_version`), so a loaded one is on; kept so that a
    v1beta1 configuration's document says so (:func:`~kueue_es.scheduler.config_record.document_of`)."""
    preemption_strategies: list[str] = []


class AdmissionFairSharingConfig(_Cfg):
    usage_half_life_time: str = afs_ledger.DEFAULT_HALF_LIFE
    usage_sampling_interval: str = afs_ledger.DEFAULT_INTERVAL
    resource_weights: dict[str, float] = {}

    @property
    def key(self) -> tuple[float, int]:
        """(half-life, sampling interval) in ms as the history is folded under them: the projection's reading
        (:func:`projections.afs_ledger.key_from`), which compacts the history under the recorded ones."""
        try:
            return afs_ledger.key_from(self.usage_half_life_time, self.usage_sampling_interval)
        except go_duration.DurationError:
            parse_duration_ns(self.usage_half_life_time, "admissionFairSharing.usageHalfLifeTime")
            parse_duration_ns(self.usage_sampling_interval, "admissionFairSharing.usageSamplingInterval")
            raise

    @property
    def sampling_interval_ms(self) -> int:
        """``usageSamplingInterval``; zero (or unset) is Kueue's default of 5 minutes."""
        return self.key[1]


class DeviceSelectorCel(_Cfg):
    expression: str = ""


class DeviceSelectorConfig(_Cfg):
    """A ``deviceSelector`` (resource.k8s.io/v1 DeviceSelector): a CEL expression over a device."""

    cel: DeviceSelectorCel | None = None


class DeviceSource(_Cfg):
    """A ``sources[].counter`` or ``sources[].capacity``: the counter (in a device's ``consumesCounters``) or the
    capacity dimension (in its ``capacity``) that the devices of ``driver`` matching ``deviceSelector`` publish."""

    name: str = ""
    driver: str = ""
    device_selector: DeviceSelectorConfig = DeviceSelectorConfig()


class DeviceClassSource(_Cfg):
    """One ``deviceClassMappings[].sources`` entry: exactly one of ``counter`` (partitionable devices, under
    ``KueueDRAIntegrationPartitionableDevices``) and ``capacity`` (consumable capacity, under
    ``KueueDRAIntegrationConsumableCapacity``)."""

    counter: DeviceSource | None = None
    capacity: DeviceSource | None = None


class DeviceClassMapping(_Cfg):
    """One ``resources.deviceClassMappings`` entry: the logical resource the devices of these DeviceClasses are
    charged to quota as (:mod:`projections.dra`, which reads them from the recorded document). ``sources`` are
    validated as Kueue validates them; counter and capacity sources are charged from ResourceSlices as Kueue
    charges them."""

    name: str = ""
    device_class_names: list[str] = []
    sources: list[DeviceClassSource] = []


class ResourcesConfig(_Cfg):
    exclude_resource_prefixes: list[str] = []
    transformations: list[ResourceTransformation] = []
    """What they do to requests: :mod:`projections.request_rules` (the projection reads them from the recorded
    document)."""
    quota_check_strategy: str = "BlockUndeclared"
    device_class_mappings: list[DeviceClassMapping] = []


QUOTA_CHECK_STRATEGIES = ("BlockUndeclared", "IgnoreUndeclared")


class WorkloadRetentionPolicy(_Cfg):
    after_finished: str | None = None
    """How long a finished Workload is kept before it is deleted (None: forever)."""
    after_deactivated_by_kueue: str | None = None
    """How long after Kueue deactivated a Workload (Evicted ``DeactivatedDueTo...``) its Job is deleted."""


class ObjectRetentionPolicies(_Cfg):
    workloads: WorkloadRetentionPolicy | None = None


DEFAULT_STEP_SIZE = 3
"""How many workers the incremental dispatcher adds per round unless ``stepSize`` says otherwise."""


class IncrementalDispatcherConfig(_Cfg):
    step_size: int | None = None
    """Workers added per round (at least 1; None: 3). Read only under MultiKueueIncrementalDispatcherConfig."""


class ExternalFramework(_Cfg):
    """One ``multiKueue.externalFrameworks`` entry: a custom job kind MultiKueue runs with its generic adapter."""

    name: str = ""
    """The kind as ``Kind.version.group`` (:func:`external_kind`)."""


def external_kind(name: str) -> tuple[str, str] | None:
    """The (apiVersion, kind) an ``externalFrameworks`` name stands for, read as Kubernetes reads a
    ``Kind.version.group`` argument (the kind up to the first dot, the version up to the second, the group the
    rest); None when it has fewer than two dots."""
    if name.count(".") < 2:
        return None
    kind, version, group = name.split(".", 2)
    return (f"{group}/{version}" if group else version), kind


EXEC_INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")
"""A credential plugin's ``interactiveMode`` values Kubernetes' client library knows."""


class ExecEnvVar(_Cfg):
    name: str = ""
    value: str = ""


class ExecConfig(_Cfg):
    """A Kubernetes client credential plugin (a kubeconfig user's ``exec``, in the client library's field names):
    the command run, with its arguments and extra environment, to get a worker's credentials."""

    command: str = ""
    args: list[str] = []
    env: list[ExecEnvVar] = []
    api_version: str = ""
    """The ``client.authentication.k8s.io`` version of the ExecCredential the plugin is handed and answers."""
    install_hint: str = ""
    provide_cluster_info: bool = False
    """Whether the plugin is handed the worker's cluster (server, CA, the profile's exec extension) in
    ``KUBERNETES_EXEC_INFO``."""
    interactive_mode: str = ""


class AccessProvider(_Cfg):
    """One ``multiKueue.clusterProfile.accessProviders`` entry: a ClusterProfile access provider's name and the
    plugin that gets credentials for it."""

    name: str = ""
    exec_config: ExecConfig = ExecConfig()


class ClusterProfileConfig(_Cfg):
    """Kueue's ``multiKueue.clusterProfile`` (read under MultiKueueClusterProfile)."""

    access_providers: list[AccessProvider] = []
    credentials_providers: list[AccessProvider] = []
    """Deprecated spelling of ``accessProviders``; not both."""

    def providers(self) -> list[AccessProvider]:
        """The providers in force, in order: ``accessProviders``, then any ``credentialsProviders`` entry of a name
        not among them (Kueue's defaulting merges the old list into the new)."""
        names = {p.name for p in self.access_providers}
        return [*self.access_providers, *(p for p in self.credentials_providers if p.name not in names)]


class MultiKueueSettings(_Cfg):
    """Kueue's ``multiKueue`` section, with Kueue's defaults."""

    gc_interval: str = "1m"
    """How often remote objects no manager Workload owns are collected (the connector's sweep)."""
    origin: str = "multikueue"
    """The value of the ``kueue.x-k8s.io/multikueue-origin`` label on what this manager creates on workers."""
    worker_lost_timeout: str = "15m"
    """How long a workload's worker may stay unreachable before its MultiKueue check is set to Retry."""
    single_cluster_preemption_timeout: str = "5m"
    """MultiKueueOrchestratedPreemption: how long after the manager opened one worker copy's preemption gate it
    waits before it opens another's (:mod:`kueue_es.scheduler.preemption_gates`)."""
    dispatcher_name: str = ALL_AT_ONCE_DISPATCHER
    """Who nominates workers: all at once (every connected worker), incremental (rounds of ``stepSize`` workers
    every 5 minutes) or, any other name, an external controller whose nominations are observed on the Workload
    (:mod:`kueue_es.scheduler.multikueue`)."""
    incremental_dispatcher_config: IncrementalDispatcherConfig | None = None
    external_frameworks: list[ExternalFramework] = []
    """Custom job kinds run by MultiKueue's generic adapter under MultiKueueAdaptersForCustomJobs
    (:func:`kueue_es.scheduler.multikueue.adapters_in_force`)."""
    cluster_profile: ClusterProfileConfig | None = None
    """The credential plugins by which workers named by a ClusterProfile are reached
    (:mod:`connectors.k8s.clusterprofile`)."""


class CustomLabelConfig(_Cfg):
    """One ``metrics.customLabels`` entry (:mod:`projections.custom_labels`)."""

    name: str = ""
    source_label_key: str = ""
    source_annotation_key: str = ""
    source_kind: str | None = None
    tracked_values: list[str] = []
    """[] when not given too, so that an unchanged configuration's recorded document (:func:`config_record.
    document_of`) stays the same; the field errors that show a nil list apart from an empty one read the document
    (:func:`_nil_tracked_values`)."""


class IntegrationsConfig(_Cfg):
    frameworks: list[str] = []
    """Kueue's ``integrations.frameworks``: the job frameworks it manages (empty: its default, batch/job only)."""
    label_keys_to_copy: list[str] | None = None
    """Kueue's ``integrations.labelKeysToCopy``: the labels of a Job (of a Pod, of every Pod of a group) its
    Workload gets when it is made, and keeps whatever becomes of the Job's (:attr:`SchedulerConfig.keys_to_copy`)."""
    external_frameworks: list[str | None] | None = None
    """Kueue's ``integrations.externalFrameworks``: ``Kind.version.group`` names of kinds an external
    controller runs for Kueue (it makes their Workloads); a controller of such a kind is a parent Kueue
    manages (:attr:`SchedulerConfig.external_job_kinds`)."""


class KeysToCopy(NamedTuple):
    """What a job integration copies from the job onto the Workload it makes: the label and annotation keys."""

    labels: tuple[str, ...] = ()
    annotations: tuple[str, ...] = ()


NO_KEYS = KeysToCopy()
MULTIKUEUE_ORIGIN_LABEL = workloads.MULTIKUEUE_ORIGIN_LABEL
"""A label Kueue's controllers write on a Workload: Kueue refuses it among ``labelKeysToCopy``."""


JOB_FRAMEWORK = "batch/job"
POD_FRAMEWORK = "pod"
DEPLOYMENT_FRAMEWORK = "deployment"
STATEFULSET_FRAMEWORK = "statefulset"
JOBSET_FRAMEWORK = "jobset.x-k8s.io/jobset"
MPIJOB_FRAMEWORK = "kubeflow.org/mpijob"
RAYJOB_FRAMEWORK = "ray.io/rayjob"
RAYCLUSTER_FRAMEWORK = "ray.io/raycluster"
RAYSERVICE_FRAMEWORK = "ray.io/rayservice"
LWS_FRAMEWORK = "leaderworkerset.x-k8s.io/leaderworkerset"
APPWRAPPER_FRAMEWORK = "workload.codeflare.dev/appwrapper"
TRAINJOB_FRAMEWORK = "trainer.kubeflow.org/trainjob"
SPARK_FRAMEWORK = "sparkoperator.k8s.io/sparkapplication"
KUBEFLOW_FRAMEWORKS = {"PyTorchJob": "kubeflow.org/pytorchjob", "TFJob": "kubeflow.org/tfjob",
                       "XGBoostJob": "kubeflow.org/xgboostjob", "PaddleJob": "kubeflow.org/paddlejob",
                       "JAXJob": "kubeflow.org/jaxjob"}
"""Kind -> Kueue's framework name for the Kubeflow training operator's kubeflow.org/v1 jobs (each off unless listed)."""
FRAMEWORK_KINDS = {
    JOB_FRAMEWORK: ("batch/v1", "Job"),
    POD_FRAMEWORK: ("v1", "Pod"),
    DEPLOYMENT_FRAMEWORK: ("apps/v1", "Deployment"),
    STATEFULSET_FRAMEWORK: ("apps/v1", "StatefulSet"),
    JOBSET_FRAMEWORK: ("jobset.x-k8s.io/v1alpha2", "JobSet"),
    **{framework: ("kubeflow.org/v1", kind) for kind, framework in KUBEFLOW_FRAMEWORKS.items()},
    MPIJOB_FRAMEWORK: ("kubeflow.org/v2beta1", "MPIJob"),
    RAYJOB_FRAMEWORK: ("ray.io/v1", "RayJob"),
    RAYCLUSTER_FRAMEWORK: ("ray.io/v1", "RayCluster"),
    RAYSERVICE_FRAMEWORK: ("ray.io/v1", "RayService"),
    APPWRAPPER_FRAMEWORK: ("workload.codeflare.dev/v1beta2", "AppWrapper"),
    TRAINJOB_FRAMEWORK: ("trainer.kubeflow.org/v1alpha1", "TrainJob"),
    LWS_FRAMEWORK: ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
    SPARK_FRAMEWORK: ("sparkoperator.k8s.io/v1beta2", "SparkApplication"),
}
"""Every integration framework Kueue registers -> the (apiVersion, kind) of the job it manages: the names
``integrations.frameworks`` may hold (Kueue's ``GetIntegrationsList``), and the kinds an
``integrations.externalFrameworks`` entry may not repeat (:func:`_validate_integrations`)."""
KNOWN_FRAMEWORKS = tuple(sorted(FRAMEWORK_KINDS))
"""The framework names as Kueue lists them when it refuses another: sorted."""
MULTIKUEUE_ADAPTER_FRAMEWORKS = {FRAMEWORK_KINDS[framework]: framework for framework in FRAMEWORK_KINDS
                                 if framework not in (DEPLOYMENT_FRAMEWORK, SPARK_FRAMEWORK)}
"""(apiVersion, kind) of each built-in MultiKueue adapter -> its integration framework: Kueue builds the adapter
only while ``integrations.frameworks`` lists it (its ``GetMultiKueueAdapters``); the adapters themselves are
:data:`kueue_es.scheduler.multikueue.ADAPTERS`."""


def built_in_kinds(frameworks: tuple[str, ...]) -> frozenset[tuple[str, str]]:
    """The owner kinds whose built-in MultiKueue adapter is in force with the integration ``frameworks``."""
    return frozenset(kind for kind, framework in MULTIKUEUE_ADAPTER_FRAMEWORKS.items() if framework in frameworks)
DEFAULT_FRAMEWORKS = (JOB_FRAMEWORK,)
"""The frameworks Kueue manages when the Configuration lists none (its defaulting, not the manifest it ships, which
lists more): the plain-Pod integration (``pod``), JobSets and MPIJobs are off."""
FRAMEWORK_IMPLIES = {DEPLOYMENT_FRAMEWORK: (POD_FRAMEWORK,), STATEFULSET_FRAMEWORK: (POD_FRAMEWORK,),
                     LWS_FRAMEWORK: (POD_FRAMEWORK,)}
"""Framework -> the frameworks it turns on by itself: a Deployment's, StatefulSet's or LeaderWorkerSet's pods are
run by the pod integration, which Kueue (since v0.15, #6736: the integrations' ``ImplicitlyEnabledFrameworkNames``,
in place of the ``DependencyList`` it refused to start without) sets up with one listed without ``pod`` — the
whole pod integration, its webhook and reconciler with the same options (namespace selector,
``manageJobsWithoutQueueName``), as if listed; ``integrations.frameworks`` itself stays as written (its MultiKueue
adapters and validation read the list). Kueue's checkEnabledListDependencies still runs over the two together, and
no built-in integration has a dependency left for it to find missing."""


class LocalQueueMetricsConfig(_Cfg):
    """Kueue's ``metrics.localQueueMetrics`` (v1beta2): with the ``LocalQueueMetrics`` gate, the LocalQueue metrics
    are exposed while ``enable`` is on, for the LocalQueues ``localQueueSelector`` selects (all without one). Kueue
    defaults only an absent stanza, to ``{enable: true}``: a stanza without ``enable`` turns them off. The metrics
    read it from the recorded document (:mod:`projections.local_queue_metrics`)."""

    enable: bool = False
    local_queue_selector: o.LabelSelector | None = None


class ControllerMetrics(_Cfg):
    local_queue_metrics: LocalQueueMetricsConfig | None = None
    enable_cluster_queue_resources: bool = False
    """Kueue reports the ClusterQueue resource gauges and weighted share only when on; the metrics read it from
    the recorded document (:func:`projections.metrics.cluster_queue_resources`)."""
    custom_labels: list[CustomLabelConfig] = []
    """Checked whatever the ``CustomMetricLabels`` gate, as Kueue checks them; the metrics read them from the
    recorded document, and carry them only under the gate."""


NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""The label the apiserver gives every Namespace: its name."""


class TLSConfig(_Cfg):
    """Kueue's ``tls`` stanza (:mod:`kueue_es.scheduler.tls_options`)."""

    min_version: str = ""
    cipher_suites: list[str] = []
    curve_preferences: list[int] = []


class SchedulerConfig(_Cfg, dict=True):
    """Decoded from a Kueue Configuration document; every field defaults as Kueue defaults it.

    ``dict=True`` gives instances a ``__dict__`` (never encoded, compared or hashed) for the
    ``functools.cached_property`` values read on hot paths; a copy made by ``msgspec.structs.replace`` starts
    without them."""

    api_version: str = "config.kueue.x-k8s.io/v1beta2"
    kind: str = "Configuration"
    fair_sharing: FairSharingConfig | None = None
    admission_fair_sharing: AdmissionFairSharingConfig | None = None
    """None also when the ``AdmissionFairSharing`` gate is off (:func:`load_config`)."""
    wait_for_pods_ready: WaitForPodsReadyConfig | None = None
    resources: ResourcesConfig = ResourcesConfig()
    object_retention_policies: ObjectRetentionPolicies | None = None
    metrics: ControllerMetrics | None = None
    feature_gates: dict[str, bool] = {}
    """Kueue's ``featureGates``: gate name -> on/off over its default (see :mod:`projections.gates`)."""
    namespace: str = "kueue-system"
    """Kueue's own namespace (only what the default :attr:`managed_jobs_selector` leaves out)."""
    managed_jobs_namespace_selector: o.LabelSelector | None = None
    integrations: IntegrationsConfig | None = None
    tls: TLSConfig | None = None
    """Kueue's ``tls``: always read, ``TLSOptions`` being locked on (:attr:`server_tls`)."""
    multi_kueue: MultiKueueSettings = MultiKueueSettings()
    manage_jobs_without_queue_name: bool = False
    """Kueue's ``manageJobsWithoutQueueName``: Jobs (and, with the pod integration, Pods) without a queue name
    in the namespaces :attr:`managed_jobs_selector` selects are Kueue's too, held until a queue admits them
    (:mod:`connectors.k8s.job_selection`)."""

    @property
    def frameworks(self) -> tuple[str, ...]:
        """The job frameworks managed (``integrations.frameworks``), Kueue's default when none are listed."""
        listed = self.integrations.frameworks if self.integrations is not None else []
        return tuple(listed) or DEFAULT_FRAMEWORKS

    @property
    def enabled_frameworks(self) -> tuple[str, ...]:
        """The frameworks whose integrations run: :attr:`frameworks` and, after them in name order, those a listed
        one turns on by itself (:data:`FRAMEWORK_IMPLIES`), as Kueue's set-up unites the two."""
        listed = self.frameworks
        implied = {name for framework in listed for name in FRAMEWORK_IMPLIES.get(framework, ())}
        return listed + tuple(sorted(implied - set(listed)))

    @cached_property
    def external_job_kinds(self) -> frozenset[tuple[str, str]]:
        """The (apiVersion, kind) of each ``integrations.externalFrameworks`` entry (:func:`external_kind`):
        Kueue registers each as a job type of its own (``RegisterExternalJobType``), so its ancestor walk
        reads a controller of that kind and takes it for a parent it manages (``IsOwnerManagedByKueue``), its
        children left to it (:mod:`connectors.k8s.job_selection`). Computed once per Configuration: the
        webhooks and reconcilers ask it at every owner check."""
        names = (self.integrations.external_frameworks if self.integrations is not None else None) or []
        return frozenset(kind for kind in map(external_kind, filter(None, names)) if kind is not None)

    @property
    def keys_to_copy(self) -> KeysToCopy:
        """The labels and annotations a job integration copies from the job onto the Workload it makes, as
        Kueue's start-up gathers them: ``integrations.labelKeysToCopy`` and, under the ``CustomMetricLabels``
        gate, the labels and annotations its ``sourceKind: Workload`` custom metric labels read
        (:func:`projections.custom_labels.workload_sources`). Sorted, each once."""
        labels = set(self.integrations.label_keys_to_copy or ()) if self.integrations is not None else set()
        annotations: set[str] = set()
        if self.metrics is not None and self.gate(gates.CUSTOM_METRIC_LABELS):
            read_labels, read_annotations = custom_labels.workload_sources(self.metrics.custom_labels)
            labels.update(read_labels)
            annotations.update(read_annotations)
        if not labels and not annotations:
            return NO_KEYS
        return KeysToCopy(tuple(sorted(labels)), tuple(sorted(annotations)))

    @property
    def manages_jobs(self) -> bool:
        """Kueue's batch/v1 Job integration is on (``batch/job`` among the frameworks, as by default): off, no Job
        gets a Workload or is suspended, and the Job webhooks change and refuse nothing."""
        return JOB_FRAMEWORK in self.frameworks

    @property
    def manages_pods(self) -> bool:
        """Kueue's plain-Pod integration is on (``pod`` among the frameworks, listed or turned on by one listed:
        :attr:`enabled_frameworks`; off by default)."""
        return POD_FRAMEWORK in self.enabled_frameworks

    @property
    def manages_deployments(self) -> bool:
        """Kueue's ``deployment`` integration is on (off by default; turns ``pod`` on): a Deployment naming a queue has
        its pod template marked so that its pods are held as single Pods (:mod:`connectors.k8s.deployment_webhook`)."""
        return DEPLOYMENT_FRAMEWORK in self.frameworks

    @property
    def manages_statefulsets(self) -> bool:
        """Kueue's ``statefulset`` integration is on (off by default; turns ``pod`` on): a StatefulSet naming a queue has
        its pods held as one serving pod group (:mod:`connectors.k8s.statefulset_webhook`)."""
        return STATEFULSET_FRAMEWORK in self.frameworks

    @property
    def manages_jobsets(self) -> bool:
        """Kueue's JobSet integration is on (``jobset.x-k8s.io/jobset`` among the frameworks; off unless listed): a
        JobSet naming a queue runs only while its Workload is admitted (:mod:`connectors.k8s.jobset_integration`)."""
        return JOBSET_FRAMEWORK in self.frameworks

    @property
    def manages_mpijobs(self) -> bool:
        """Kueue's MPIJob integration is on (``kubeflow.org/mpijob`` among the frameworks; off unless listed): an
        MPIJob naming a queue runs only while its Workload is admitted (:mod:`connectors.k8s.mpijob_integration`)."""
        return MPIJOB_FRAMEWORK in self.frameworks

    def manages_kubeflow(self, kind: str) -> bool:
        """Kueue's integration for the training operator's ``kind`` (``PyTorchJob``, ``TFJob``, ...) is on: its
        framework (:data:`KUBEFLOW_FRAMEWORKS`) is listed (:mod:`connectors.k8s.kubeflow_integration`)."""
        return KUBEFLOW_FRAMEWORKS.get(kind) in self.frameworks

    @property
    def kubeflow_kinds(self) -> frozenset[str]:
        """The training operator's kinds whose integration is on (:meth:`manages_kubeflow`)."""
        return frozenset(k for k in KUBEFLOW_FRAMEWORKS if self.manages_kubeflow(k))

    @property
    def manages_rayjobs(self) -> bool:
        """Kueue's RayJob integration is on (``ray.io/rayjob`` among the frameworks; off unless listed): a RayJob
        naming a queue runs only while its Workload is admitted (:mod:`connectors.k8s.ray_integration`)."""
        return RAYJOB_FRAMEWORK in self.frameworks

    @property
    def manages_rayclusters(self) -> bool:
        """Kueue's RayCluster integration is on (``ray.io/raycluster`` among the frameworks; off unless listed): a
        RayCluster naming a queue runs only while its Workload is admitted (:mod:`connectors.k8s.ray_integration`)."""
        return RAYCLUSTER_FRAMEWORK in self.frameworks

    @property
    def manages_rayservices(self) -> bool:
        """Kueue's RayService integration is on (``ray.io/rayservice`` among the frameworks; off unless listed): a
        RayService naming a queue runs its cluster only while its Workload is admitted
        (:mod:`connectors.k8s.ray_integration`)."""
        return RAYSERVICE_FRAMEWORK in self.frameworks

    @property
    def manages_leaderworkersets(self) -> bool:
        """Kueue's LeaderWorkerSet integration is on (``leaderworkerset.x-k8s.io/leaderworkerset`` among the
        frameworks; off unless listed; turns the pod integration on): each group of a queued LeaderWorkerSet runs on a
        Workload made for it (:mod:`connectors.k8s.lws_integration`)."""
        return LWS_FRAMEWORK in self.frameworks

    @property
    def manages_appwrappers(self) -> bool:
        """Kueue's AppWrapper integration is on (``workload.codeflare.dev/appwrapper`` among the frameworks; off
        unless listed): a queued AppWrapper runs only while its Workload is admitted, what it wraps being its
        children (:mod:`connectors.k8s.appwrapper_integration`)."""
        return APPWRAPPER_FRAMEWORK in self.frameworks

    @property
    def manages_trainjobs(self) -> bool:
        """Kueue's Kubeflow Trainer integration is on (``trainer.kubeflow.org/trainjob`` among the frameworks; off
        unless listed): a queued TrainJob runs only while its Workload is admitted
        (:mod:`connectors.k8s.trainjob_integration`)."""
        return TRAINJOB_FRAMEWORK in self.frameworks

    @property
    def manages_sparkapplications(self) -> bool:
        """Kueue's SparkApplication integration is on (``sparkoperator.k8s.io/sparkapplication`` among the
        frameworks, which the ``SparkApplicationIntegration`` gate must allow: :func:`load_config`): a queued
        SparkApplication runs only while its Workload is admitted (:mod:`connectors.k8s.spark_integration`)."""
        return SPARK_FRAMEWORK in self.frameworks

    @property
    def managed_jobs_selector(self) -> o.LabelSelector:
        """The namespaces whose Jobs are managed (``managedJobsNamespaceSelector``), by default all but
        ``kube-system`` and Kueue's own, as Kueue defaults it."""
        return self.managed_jobs_namespace_selector or o.LabelSelector(match_expressions=[
            o.LabelSelectorRequirement(key=NAMESPACE_NAME_LABEL, operator="NotIn",
                                       values=["kube-system", self.namespace])])

    def gate(self, name: str) -> bool:
        """Whether feature gate ``name`` is on."""
        return gates.enabled(self.feature_gates, name)

    @property
    def server_tls(self) -> tls_options.TLSSettings | None:
        """What the ``tls`` stanza sets on the HTTPS servers (webhooks, visibility API): the ``TLSOptions``
        gate is GA and locked on since Kueue v0.20, so the stanza is always read. None (the TLS library's
        defaults) with no stanza, or one Kueue cannot parse (which :func:`load_config` refuses, as Kueue's
        validation does; a log may have recorded one while the visibility API was off). Curves this build does
        not name, which only a recorded document can hold (:func:`_validate_tls`), drop neither the version
        nor the suites: the curves are not applied anyway, and the servers say so
        (:func:`connectors.k8s.https.server_tls`)."""
        if self.tls is None:
            return None
        tls = self.tls
        settings = tls_options.parse(tls.min_version, tls.cipher_suites, tls.curve_preferences)[0]
        if settings is None and tls.curve_preferences:
            settings = tls_options.parse(tls.min_version, tls.cipher_suites)[0]
            return None if settings is None else settings._replace(curves=tuple(tls.curve_preferences))
        return settings

    @property
    def ignore_undeclared(self) -> bool:
        """``resources.quotaCheckStrategy: IgnoreUndeclared`` is in force (only under the ``QuotaCheckStrategy``
        gate, on by default): a resource no resource group covers is left out of the quota check."""
        return (self.resources.quota_check_strategy == "IgnoreUndeclared"
                and gates.enabled(self.feature_gates, gates.QUOTA_CHECK_STRATEGY))

    @property
    def fair_sharing_enabled(self) -> bool:
        return self.fair_sharing is not None

    @property
    def pods_ready(self) -> WaitForPodsReadyConfig:
        """waitForPodsReady as in force: Kueue's defaults when the stanza is absent, and off altogether under the
        ``DisableWaitForPodsReady`` gate (no timeout, no eviction, no blockAdmission): the rule the fold applies to
        the recorded document too (:mod:`projections.pods_ready`)."""
        return pods_ready_in_force(self.wait_for_pods_ready, self.feature_gates, self.api_version)

    @property
    def blocks_admission(self) -> bool:
        """waitForPodsReady with ``blockAdmission: true`` is in force (Kueue's cache then tracks PodsReady and its
        scheduler holds new admissions while any workload holding quota has pods not ready)."""
        w = self.wait_for_pods_ready
        return w is not None and w.block_admission and self.pods_ready.enable

    @property
    def workload_retention(self) -> tuple[int | None, int | None]:
        """(afterFinished, afterDeactivatedByKueue) in ms; None where Workloads are kept forever."""
        w = self.object_retention_policies.workloads if self.object_retention_policies else None
        if w is None:
            return None, None
        return (None if w.after_finished is None else parse_duration(w.after_finished),
                None if w.after_deactivated_by_kueue is None else parse_duration(w.after_deactivated_by_kueue))


DEFAULT = SchedulerConfig()


@lru_cache(maxsize=256)
def parse_duration(text: str, where: str = "duration") -> int:
    """A Go duration (``"30m"``, ``"1h30m"``, ``"500ms"``, ``"250us"``) in kueue-es's milliseconds, rounded up
    (:mod:`kueue_es.scheduler.config_durations`); one Go refuses is an error naming ``where``."""
    return config_durations.ceil_ms(parse_duration_ns(text, where))


@lru_cache(maxsize=256)
def parse_duration_ns(text: str, where: str = "duration") -> int:
    """A Go duration in nanoseconds, exactly as Go reads it: for comparing durations as Kueue compares them."""
    try:
        return go_duration.parse_ns(text)
    except go_duration.DurationError as exc:
        raise InvalidInput(f"{where}: {exc}") from None


def _validate_external_frameworks(cfg: SchedulerConfig, errs: FieldErrors) -> None:
    """Kueue's checks of ``multiKueue.externalFrameworks`` (whatever MultiKueueAdaptersForCustomJobs), in its words:
    each name in ``Kind.version.group`` form, no kind given twice, none a kind a built-in adapter of an enabled
    framework handles (a repeated one that does is refused for both, as Kueue refuses it)."""
    built_in = built_in_kinds(cfg.frameworks)
    seen: set[tuple[str, str]] = set()
    for i, entry in enumerate(cfg.multi_kueue.external_frameworks):
        at = f"multiKueue.externalFrameworks[{i}].name"
        kind = external_kind(entry.name)
        if kind is None:
            errs.add(at, f"Invalid value: {go_quote(entry.name)}: must be in 'kind.version.group' format")
            continue
        if kind in seen:
            errs.add(at, f"Duplicate value: {go_quote(entry.name)}")
        seen.add(kind)
        if kind in built_in:
            errs.add(at, f"Invalid value: {go_quote(entry.name)}: conflicts with a built-in MultiKueue adapter")


def _validate_cluster_profile(cp: ClusterProfileConfig, errs: FieldErrors) -> None:
    """Kueue's checks of ``multiKueue.clusterProfile``, in its words and its order, every one: not both lists; each
    provider of the list in use named, its plugin with a command, an apiVersion, named env entries and a known
    interactiveMode. Kueue's paths name the list, not the entry (no ``[i]``), so two providers missing the same
    field give one message."""
    at = "multiKueue.clusterProfile"
    if cp.access_providers and cp.credentials_providers:
        errs.add(f"{at}.credentialsProviders", "Forbidden: must not be specified when accessProviders is specified")
    where = f"{at}.{'accessProviders' if cp.access_providers else 'credentialsProviders'}"
    for p in cp.access_providers or cp.credentials_providers:
        ex = p.exec_config
        missing = [name for name, value in (("name", p.name), ("execConfig.command", ex.command),
                                            ("execConfig.apiVersion", ex.api_version)) if not value]
        missing += ["execConfig.env.name" for v in ex.env if not v.name]
        missing += [] if ex.interactive_mode else ["execConfig.interactiveMode"]
        for name in missing:
            errs.add(f"{where}.{name}", "Required value: must be specified")
        if ex.interactive_mode and ex.interactive_mode not in EXEC_INTERACTIVE_MODES:
            errs.add(f"{where}.execConfig.interactiveMode",
                     not_supported(go_quote(ex.interactive_mode), EXEC_INTERACTIVE_MODES))


def _validate_multikueue(cfg: SchedulerConfig, source: str, strict: bool, errs: FieldErrors) -> None:
    """Kueue's validateMultiKueue, in its order and words: the durations' signs, ``origin`` a label value (an empty
    one has been given its default by then, as Kueue's defaulting gives it; checked since session 33, so not for a
    recorded document), ``externalFrameworks``, ``clusterProfile``, ``incrementalDispatcherConfig``."""
    mk = cfg.multi_kueue
    for name, value in (("gcInterval", mk.gc_interval), ("workerLostTimeout", mk.worker_lost_timeout),
                        ("singleClusterPreemptionTimeout", mk.single_cluster_preemption_timeout)):
        ns = parse_duration_ns(value, f"{source}: field `multiKueue.{name}`")
        if ns < 0 and name != "singleClusterPreemptionTimeout":  # Kueue leaves that one's sign alone
            errs.add(f"multiKueue.{name}", _negative(ns))
    problems = label_value_problems(mk.origin) if strict else []
    if problems:  # Kueue joins them with ","
        errs.add("multiKueue.origin", f"Invalid value: {go_quote(mk.origin)}: {','.join(problems)}")
    _validate_external_frameworks(cfg, errs)
    if mk.cluster_profile is not None:
        _validate_cluster_profile(mk.cluster_profile, errs)
    incremental = mk.incremental_dispatcher_config
    if incremental is None:
        return
    if mk.dispatcher_name != INCREMENTAL_DISPATCHER:  # Kueue's detail; its value part dumps a Go pointer: left out
        errs.add("multiKueue.incrementalDispatcherConfig", "incrementalDispatcherConfig is only valid when "
                                                           "dispatcherName is set to the incremental dispatcher")
    if incremental.step_size is not None and incremental.step_size < 1:
        errs.add("multiKueue.incrementalDispatcherConfig.stepSize",
                 f"Invalid value: {incremental.step_size}: must be greater than or equal to 1")


def _pods_ready_durations(w: WaitForPodsReadyConfig, source: str, api_version: str,
                          on: bool) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """waitForPodsReady's durations parse (Kueue's decoding, on or off: one that does not is refused at once); then
    (Kueue's refusals, kueue-es's own), each ``(path, body)``. While waitForPodsReady is in force (``on``: Kueue's
    validateWaitForPodsReady returns at once otherwise) Kueue refuses a negative ``recoveryTimeout``; kueue-es
    refuses a negative v0.20 ``unscheduledTimeout`` or one above ``timeout`` (as defaulted; the rule KEP-13502 gives
    it), and a ``maxTimeoutOnWorkload`` not above zero: rules Kueue's validation does not have, so each said in the
    form of Kueue's ``field.Invalid`` and marked :data:`OWN_RULE`. Compared in nanoseconds, as Kueue compares
    them."""
    where = f"{source}: field `waitForPodsReady."
    in_force = w.timeout if api_version == config_version.V1BETA1 else v1beta2_defaulted(w).timeout
    timeout = parse_duration_ns(w.timeout, f"{where}timeout`")
    if in_force != w.timeout:
        timeout = parse_duration_ns(in_force)
    found = {name: parse_duration_ns(value, f"{where}{name}`") for name, value in (
        ("recoveryTimeout", w.recovery_timeout), ("unscheduledTimeout", w.unscheduled_timeout),
        ("maxTimeoutOnWorkload", w.max_timeout_on_workload)) if value is not None}
    kueue: list[tuple[str, str]] = []
    own: list[tuple[str, str]] = []
    if on and found.get("recoveryTimeout", 0) < 0:
        kueue.append(("waitForPodsReady.recoveryTimeout", _negative(found["recoveryTimeout"])))
    if on and found.get("unscheduledTimeout", 0) < 0:  # tracking reads any nonzero value as on: never negative
        own.append(("waitForPodsReady.unscheduledTimeout", f"{_negative(found['unscheduledTimeout'])} {OWN_RULE}"))
    elif on and "unscheduledTimeout" in found and found["unscheduledTimeout"] > timeout:
        own.append(("waitForPodsReady.unscheduledTimeout",
                    f"Invalid value: {go_duration.format_ns(found['unscheduledTimeout'])}: must be less than or equal "
                    f"to waitForPodsReady.timeout ({go_duration.format_ns(timeout)}) {OWN_RULE}"))
    if found.get("maxTimeoutOnWorkload", 1) <= 0:
        own.append(("waitForPodsReady.maxTimeoutOnWorkload",
                    f"Invalid value: {go_duration.format_ns(found['maxTimeoutOnWorkload'])}: must be greater than 0 "
                    f"{OWN_RULE}"))
    return kueue, own



def _validate_wait_for_pods_ready(cfg: SchedulerConfig, strict: bool, durations: tuple[list[tuple[str, str]], ...],
                                  errs: FieldErrors) -> None:
    """Kueue's validateWaitForPodsReady, in its order, while waitForPodsReady is in force (Kueue checks the stanza
    only then): ``timeout`` required (a zero one, which only v1beta1 leaves: its defaulting fills an unset one,
    v1beta2's a zero one too; since session 33, so not for a recorded document, which keeps its zero) and not
    negative, ``recoveryTimeout`` not negative, ``requeuingStrategy.timestamp`` one Kueue knows, the backoffs not
    negative (since session 33); then kueue-es's own rules (``durations``: :func:`_pods_ready_durations`)."""
    kueue, own = durations
    w = cfg.wait_for_pods_ready
    if w is not None and cfg.pods_ready.enable:
        if strict and parse_duration_ns(cfg.pods_ready.timeout) == 0:
            errs.add("waitForPodsReady.timeout", "Required value: must be specified")
        if parse_duration_ns(w.timeout) < 0:
            errs.add("waitForPodsReady.timeout", _negative(parse_duration_ns(w.timeout)))
    for path, body in kueue:
        errs.add(path, body)
    if w is not None and cfg.pods_ready.enable:
        timestamp = w.requeuing_strategy.timestamp
        if timestamp not in REQUEUING_TIMESTAMPS:
            errs.add("waitForPodsReady.requeuingStrategy.timestamp",
                     not_supported(go_quote(timestamp), ("Creation", "Eviction")))  # Kueue's order
    if strict and cfg.pods_ready.enable:
        strategy = cfg.pods_ready.requeuing_strategy
        for name, value in (("backoffLimitCount", strategy.backoff_limit_count),
                            ("backoffBaseSeconds", strategy.backoff_base_seconds),
                            ("backoffMaxSeconds", strategy.backoff_max_seconds)):
            if value is not None and value < 0:
                errs.add(f"waitForPodsReady.requeuingStrategy.{name}", f"Invalid value: {value}: {IS_NEGATIVE}")
    for path, body in own:
        errs.add(path, body)


def _negative(ns: int, *, as_string: bool = False) -> str:
    """Kueue's refusal of a negative duration (``field.Invalid`` with apimachinery's message), the value as Go's
    ``Duration.String`` writes it; quoted where Kueue hands the message that string rather than the duration."""
    shown = go_duration.format_ns(ns)
    return f"Invalid value: {go_quote(shown) if as_string else shown}: {IS_NEGATIVE}"


def load_config(doc: dict[str, Any], source: str = "<config>", *, strict: bool = True) -> SchedulerConfig:
    """``doc`` as the configuration it sets, refused (naming ``source`` and the field) where Kueue refuses to start
    on it, in three steps as Kueue's start-up takes them. Decoding: ``strict``, as Kueue's strict decoder, a value
    JSON cannot hold (:func:`_check_json_numbers`), a value of the wrong type in any field of the Configuration of
    its ``apiVersion`` (:func:`_check_types`), then a field that Configuration does not have, every one named
    (:mod:`kueue_es.scheduler.config_fields`), is the only error said; off for a document the log recorded, which
    is loaded as it was taken. Validation (:func:`_validate`): every field error found, together, as Kueue's
    validation reports them. Then what Kueue refuses as it sets its controllers up, the first it meets."""
    schema = config_schema.schema_for(doc.get("apiVersion"))
    doc = config_nulls.nulls_as_go(doc, schema)  # a recorded document has none, unless recorded before
    if not strict:  # recorded: as kueue-es's older reading took its durations
        doc = config_durations.map_durations(doc, schema, config_schema.GO_DURATION, config_durations.legacy)
    if strict:
        doc = _string_keys(doc)
        _check_json_numbers(doc, source)
        _check_gate_values(doc.get("featureGates"), source)
        for target in (SchedulerConfig, schema):  # as Kueue's YAML-to-JSON step writes them
            doc = config_numbers.whole_floats_as_ints(doc, target)
    cfg = _decode(doc, source, strict)  # the fields kueue-es reads: their types, in its own words as before
    if strict:
        _check_types(doc, schema, source)  # Kueue's decoder returns a type error before its unknown fields
        unknown = config_fields.unknown_fields(doc, config_fields.known_in(str(doc.get("apiVersion", ""))))
        if unknown:
            raise InvalidInput(f"{source}: Configuration: strict decoding error: "
                               + ", ".join(f'unknown field "{path}"' for path in unknown))
    durations: tuple[list[tuple[str, str]], ...] = ([], [])
    if cfg.wait_for_pods_ready is not None:  # a duration that does not parse fails Kueue's decoding, on or off
        durations = _pods_ready_durations(cfg.wait_for_pods_ready, source, cfg.api_version, cfg.pods_ready.enable)
    check_output_quantities(cfg.resources.transformations, f"{source}: Configuration")  # decoded as Quantity
    hub = config_version.as_hub(doc)
    if hub is not doc:  # v1beta1, with Kueue's meaning of its switches written out
        cfg = _decode(hub, source, strict)
    bad = aggregate(gates.errors(cfg.feature_gates))
    if bad is not None:  # Kueue sets its gates before it validates the rest (its validation reads them)
        raise InvalidInput(f"{source}: field `featureGates`: Invalid value: {go_bool_map(cfg.feature_gates)}: {bad}")
    if not cfg.multi_kueue.origin:  # Kueue's defaulting (both versions) gives an empty one its default
        cfg = msgspec.structs.replace(cfg, multi_kueue=msgspec.structs.replace(
            cfg.multi_kueue, origin=MultiKueueSettings().origin))
    _validate(cfg, doc, source, strict, durations)
    _validate_label_keys_to_copy(cfg, source)
    _validate_framework_gates(cfg, source)
    _validate_local_queue_selector(cfg.metrics.local_queue_metrics if cfg.metrics else None, source)
    if cfg.admission_fair_sharing is not None and not gates.enabled(cfg.feature_gates, gates.ADMISSION_FAIR_SHARING):
        # as Kueue, which hands the stanza to nothing while its gate is off
        cfg = msgspec.structs.replace(cfg, admission_fair_sharing=None)
    return cfg


def _validate(cfg: SchedulerConfig, doc: dict[str, Any], source: str, strict: bool,
              durations: tuple[list[tuple[str, str]], ...]) -> None:
    """The newest Kueue's validation (``pkg/config/validation.go`` Validate), every field error it finds, in the
    order it checks: waitForPodsReady, integrations (with the namespace selector when the pod integration is on),
    multiKueue, fairSharing, admissionFairSharing, internalCertManagement, resources' transformations and device
    class mappings, managedJobsNamespaceSelector, objectRetentionPolicies, tls, visibilityServer, the metrics'
    custom labels, the quota check strategy; kueue-es's own rules with the stanza they check. Refused together
    (:class:`~events.field_errors.FieldErrors`). Rules kueue-es took up in session 33 and after are not applied
    to a recorded document (``strict`` off)."""
    errs = FieldErrors()
    _validate_wait_for_pods_ready(cfg, strict, durations, errs)
    selector_first = POD_FRAMEWORK in cfg.frameworks  # Kueue checks it with the pod integration's options then
    if strict:
        _validate_integrations(doc, cfg.frameworks, errs)
    if selector_first:
        _validate_managed_selector(cfg, strict, errs)
    _validate_multikueue(cfg, source, strict, errs)
    if cfg.fair_sharing is not None:
        _validate_preemption_strategies(cfg.fair_sharing.preemption_strategies, strict, errs)
    if cfg.admission_fair_sharing is not None:
        _validate_admission_fair_sharing(cfg.admission_fair_sharing, source, errs)
    if strict:
        _validate_internal_cert_management(doc, errs)
    _validate_resources(cfg, strict, errs)
    if not selector_first:  # with the pod integration, its messages were said already (Kueue's are said once)
        _validate_managed_selector(cfg, strict, errs)
    _validate_retention(cfg, source, errs)
    if cfg.tls is not None:
        _validate_tls(cfg, cfg.tls, strict, errs)
    if strict:
        _validate_visibility_server(doc, errs)
    if cfg.metrics is not None:
        for path, body in custom_labels.problems(cfg.metrics.custom_labels, _nil_tracked_values(doc)):
            errs.add(path, body)
    _validate_quota_check_strategy(cfg, errs)
    errs.refuse(source)


def _nil_tracked_values(doc: dict[str, Any]) -> frozenset[int]:
    """The ``metrics.customLabels`` entries of ``doc`` that give no ``trackedValues`` (absent or null): Go holds a
    nil list for them, which its field errors show apart from an empty one."""
    metrics = doc.get("metrics")
    entries = metrics.get("customLabels") if isinstance(metrics, dict) else None
    if not isinstance(entries, list):
        return frozenset()
    return frozenset(i for i, e in enumerate(entries) if isinstance(e, dict) and e.get("trackedValues") is None)


def _validate_retention(cfg: SchedulerConfig, source: str, errs: FieldErrors) -> None:
    """Kueue's validateObjectRetentionPolicies: neither retention period negative."""
    retention = cfg.object_retention_policies.workloads if cfg.object_retention_policies else None
    if retention is None:
        return
    for name, value in (("afterFinished", retention.after_finished),
                        ("afterDeactivatedByKueue", retention.after_deactivated_by_kueue)):
        at = f"objectRetentionPolicies.workloads.{name}"
        ns = parse_duration_ns(value, f"{source}: field `{at}`") if value is not None else 0
        if ns < 0:  # Kueue shows afterDeactivatedByKueue's as a string, so quoted
            errs.add(at, _negative(ns, as_string=name == "afterDeactivatedByKueue"))


def _check_json_numbers(doc: Any, source: str) -> None:
    """A number JSON cannot hold (NaN, an infinity) anywhere in ``doc`` is refused as Kueue's decoding refuses it:
    it turns the YAML file into JSON before it decodes it, and that step fails on one whatever field holds it."""
    for at, value in leaves(doc):
        if isinstance(value, float) and not math.isfinite(value):
            shown = "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
            raise InvalidInput(f"{source}: Configuration: field `{at}`: json: unsupported value: {shown}")


def _validate_tls(cfg: SchedulerConfig, tls: TLSConfig, strict: bool, errs: FieldErrors) -> None:
    """The newest Kueue's validateTLS: a stanza it cannot parse is refused, every problem in one error on
    ``tls`` (:func:`~kueue_es.scheduler.tls_options.parse`; nothing else of it checked then), and
    cipher suites beside ``minVersion: VersionTLS13`` (whose suites are not configurable). Before it, Kueue exited
    on the first only while its visibility server ran (it parses the stanza); a document recorded then is held to
    that alone. ``curvePreferences`` (Kueue v0.19) are checked in a new document only: kueue-es refused the
    field before session 44, so none it recorded holds one, and one that does loads rather than stop the
    scheduler."""
    curves = tls.curve_preferences if strict else []
    problem = tls_options.parse(tls.min_version, tls.cipher_suites, curves)[1]
    if problem is not None and (strict or cfg.gate(gates.VISIBILITY_ON_DEMAND)):
        errs.add("tls", problem)  # Kueue's field.Invalid(tls, ...): its value dumps a Go struct, left out
        return
    if strict and tls.min_version == "VersionTLS13" and tls.cipher_suites:
        shown = go_string_slice("string", tls.cipher_suites)
        errs.add("tls.cipherSuites", f"Invalid value: {shown}: may not be specified when `minVersion` is "
                 "'VersionTLS13'")


def _validate_preemption_strategies(strategies: list[str], strict: bool, errs: FieldErrors) -> None:
    """``fairSharing.preemptionStrategies`` is one of Kueue's three lists. An empty or missing one is refused as
    the newest Kueue refuses it (its v1beta2 defaulting fills none; a v1beta1 ``enable: true`` gets the two-step
    list from the conversion first); a document the log recorded keeps loading, as the two-step list Kueue's
    preemption takes for an empty one."""
    at = "fairSharing.preemptionStrategies"
    if not strategies:
        if strict:
            errs.add(at, "Required value: must be specified")
        return
    if strategies not in PREEMPTION_STRATEGY_LISTS:  # Kueue's words: the list as Go prints it, the lists it takes
        shown = go_string_slice("v1beta2.PreemptionStrategy", strategies)  # validated as the v1beta2 hub
        errs.add(at, not_supported(shown, [",".join(s) for s in PREEMPTION_STRATEGY_LISTS]))


PREEMPTION_STRATEGY_LISTS = (["LessThanOrEqualToFinalShare"], ["LessThanInitialShare"],
                             ["LessThanOrEqualToFinalShare", "LessThanInitialShare"])
"""The ``fairSharing.preemptionStrategies`` Kueue takes, in the order its refusal lists them."""


def as_decoded(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` (a Configuration :func:`load_config` takes) with its ``null`` values as Kueue's decoder reads them
    (:mod:`kueue_es.scheduler.config_nulls`): the document a scheduler records, so that what reads the record (the
    folds read it as plain data) meets no ``null`` where Go keeps none."""
    return config_nulls.nulls_as_go(doc, config_schema.schema_for(doc.get("apiVersion")))  # type: ignore[no-any-return]


def _check_gate_values(gates_map: Any, source: str) -> None:
    """Each gate set to a bool (msgspec's own error would not name the gate)."""
    if not isinstance(gates_map, dict):
        return
    for name in sorted(gates_map, key=str):
        value = gates_map[name]
        if not isinstance(value, bool):
            raise InvalidInput(f"{source}: field `featureGates.{name}`: Expected `bool`, got "
                               f"`{type(value).__name__}` ({value!r})")


def _decode(doc: dict[str, Any], source: str, strict: bool) -> SchedulerConfig:
    """``strict``: a value of another JSON type than its field's (``"true"`` or ``1`` for a bool, ``"5"`` for an
    int) is refused, as Go's JSON decoding refuses it when Kueue loads its Configuration; a document the log
    recorded before kueue-es refused them is read as it was then (such values converted)."""
    try:
        return msgspec.convert(doc, SchedulerConfig, strict=strict)
    except msgspec.ValidationError as exc:
        raise InvalidInput(f"{source}: Configuration: {_field_error(str(exc))[1]}") from None


def _field_error(msg: str) -> tuple[str, str]:
    """msgspec's ``<text> - at `$.a.b[0]``` as (``a.b[0]``, ``field `a.b[0]`: <text>``)."""
    if " - at `$" not in msg:
        return "", msg
    text, _, at = msg.partition(" - at `$")
    path = at.rstrip("`").lstrip(".")
    return path, f"field `{path}`: {text}"


def _check_types(doc: dict[str, Any], schema: type, source: str) -> None:
    """Every value of ``doc`` of the type Kueue's decoder gives its field, in the fields kueue-es does not read
    too (:mod:`kueue_es.scheduler.config_schema`), the first wrong one named with the type expected (msgspec's
    words, as for the fields kueue-es reads; ``| null`` where Go's decoder takes null). A duration Go does not
    parse (out of range too) is said as :func:`parse_duration` says one."""
    try:
        msgspec.convert(doc, schema, strict=True)
    except msgspec.ValidationError as exc:
        path, msg = _field_error(str(exc))
        if path.endswith("[...]"):  # a map's value: msgspec does not say which
            path, msg = _map_value_error(doc, schema, path.removesuffix("[...]"), msg)
        if "matching regex" in msg:
            value = _value_at(doc, path)
            parse_duration_ns(value if isinstance(value, str) else "", f"{source}: field `{path}`")
            raise InvalidInput(f"{source}: field `{path}`: invalid duration {value!r}") from None
        raise InvalidInput(f"{source}: Configuration: {msg}") from None
    config_durations.map_durations(doc, schema, config_schema.GO_DURATION, _in_range(source))


def _in_range(source: str) -> Any:
    """A :func:`~kueue_es.scheduler.config_durations.map_durations` step refusing a duration out of Go's range
    (which the type's pattern does not say), naming its field."""
    def check(path: str, value: str) -> str:
        parse_duration_ns(value, f"{source}: field `{path}`")
        return value
    return check


def _string_keys(value: Any) -> Any:
    """``value`` with every mapping key a string, as Kueue's YAML-to-JSON step writes them (``1: x`` is the
    field ``"1"``: for a Configuration an unknown one, said after the types; in a map, a key like any
    other), and each mapping's keys in sorted order, as that step writes them from a Go map: the order
    Kueue's decoder meets them in, so the first wrong value it names is the first in that order (Kueue's
    config_test.go TestLoad "invalid config"). A part that has neither to change is returned as it is."""
    if isinstance(value, dict):
        out = {k if isinstance(k, str) else str(k): _string_keys(v) for k, v in value.items()}
        out = dict(sorted(out.items()))
        same = (len(out) == len(value) and list(out) == list(value)
                and all(isinstance(k, str) and out[k] is v for k, v in value.items()))
        return value if same else out
    if isinstance(value, list):
        items = [_string_keys(v) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


_PATH_PARTS = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
"""A msgspec error path's parts: a field's name, or a list index."""


def _map_value_error(doc: dict[str, Any], schema: type, at: str, msg: str) -> tuple[str, str]:
    """The first entry (in the document's order) of the map at ``at`` whose value is not of its type, named as
    ``at.key`` (as ``featureGates.<gate>`` is), with msgspec's error for it."""
    value_type = typing.get_args(_type_at(schema, at))[1]
    entries = _value_at(doc, at)
    for key, value in entries.items() if isinstance(entries, dict) else ():
        try:
            msgspec.convert(value, value_type, strict=True)
        except msgspec.ValidationError as exc:
            return f"{at}.{key}", f"field `{at}.{key}`: {exc}"
    return at, msg


def _type_at(tp: Any, path: str) -> Any:
    """The type (a dict, list or Struct type) a schema gives the value at ``path`` (``a.b[0].c``)."""
    for name, index in _PATH_PARTS.findall(path):
        tp = next(t for t in (typing.get_args(tp) if _is_union(tp) else (tp,))
                  if isinstance(t, type) and issubclass(t, msgspec.Struct) or typing.get_origin(t) in (list, dict))
        if index:
            tp = typing.get_args(tp)[-1]
        else:
            tp = next(f.type for f in msgspec.structs.fields(tp) if f.encode_name == name)
    return next(t for t in (typing.get_args(tp) if _is_union(tp) else (tp,)) if typing.get_origin(t) is dict)


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def _value_at(doc: Any, path: str) -> Any:
    """The value at a msgspec error's path (``a.b[0].c``) in ``doc``; None where there is none."""
    for name, index in _PATH_PARTS.findall(path):
        if index:
            doc = doc[int(index)] if isinstance(doc, list) and int(index) < len(doc) else None
        else:
            doc = doc.get(name) if isinstance(doc, dict) else None
    return doc


def _validate_label_keys_to_copy(cfg: SchedulerConfig, source: str) -> None:
    """Kueue checks no key's syntax (a key no job carries copies nothing), but refuses a label its own controllers
    write on a Workload."""
    keys = cfg.integrations.label_keys_to_copy if cfg.integrations is not None else None
    for i, key in enumerate(keys or ()):
        if key == MULTIKUEUE_ORIGIN_LABEL:
            raise InvalidInput(f"{source}: Configuration: field `integrations.labelKeysToCopy[{i}]`: {key!r} is "
                               "written by a Kueue controller and must not be copied onto a Workload")



FRAMEWORK_GATES = {SPARK_FRAMEWORK: gates.SPARK_APPLICATION_INTEGRATION}
"""An alpha framework -> the gate without which Kueue will not run it (its ``CanSupportIntegration``)."""


def _validate_framework_gates(cfg: SchedulerConfig, source: str) -> None:
    """A framework listed while its gate is off is refused, as Kueue fails to set up its reconcilers and does not
    start, in the words of its ``CanSupportIntegration`` (after the field)."""
    for i, name in enumerate(cfg.frameworks):
        gate = FRAMEWORK_GATES.get(name)
        if gate is not None and not cfg.gate(gate):
            raise InvalidInput(f"{source}: Configuration: field `integrations.frameworks[{i}]`: {name} integration is "
                               f"alpha feature. please enable {gate} featuregate")


def _validate_selector(selector: o.LabelSelector, at: str, strict: bool, errs: FieldErrors) -> bool:
    """A label selector's faults as apimachinery's ValidateLabelSelector reports them, in its words
    (:func:`~events.labels.selector_field_errors`). Whether it has none (one that has selects nothing Kueue checks
    further, as Kueue's LabelSelectorAsSelector then fails). A recorded document (``strict`` off) is held to the
    operator and values rules alone, as kueue-es held it before session 34, not to its keys' or values' spelling."""
    found = selector_field_errors(selector.match_labels,
                                  [(r.key, r.operator, r.values) for r in selector.match_expressions], at,
                                  syntax=strict)
    for path, body in found:
        errs.add(path, body)
    return not found


def _validate_managed_selector(cfg: SchedulerConfig, strict: bool, errs: FieldErrors) -> None:
    """``managedJobsNamespaceSelector``: a valid label selector, then (Kueue's validateManagedJobsNamespaceSelector,
    since session 33, so not for a recorded document) one leaving out ``kube-system`` and Kueue's own namespace
    (when one is set), whichever integrations are on. Kueue's message holds an "Invalid value: " part printing the
    selector as Go prints its struct; kueue-es leaves that part out rather than imitate Go's dump."""
    selector = cfg.managed_jobs_namespace_selector
    if selector is None or not _validate_selector(selector, "managedJobsNamespaceSelector", strict, errs) \
            or not strict:
        return
    for namespace in ("kube-system", cfg.namespace):
        if namespace and selector_matches(selector, {NAMESPACE_NAME_LABEL: namespace}):
            errs.add("managedJobsNamespaceSelector", f"should not match the {go_quote(namespace)} namespace")


def _validate_visibility_server(doc: dict[str, Any], errs: FieldErrors) -> None:
    """Kueue's validateVisibilityServer (an IP address, a port number), read from the document (kueue-es serves the
    visibility API on its own setting); in Kueue's words."""
    vs = doc.get("visibilityServer") or {}
    address, port = vs.get("bindAddress"), vs.get("bindPort")
    if address is not None and not _is_ip(address):
        errs.add("visibilityServer.bindAddress", f"Invalid value: {go_quote(address)}: must be a valid IP address")
    if port is not None and not 1 <= port <= 65535:
        errs.add("visibilityServer.bindPort", f"Invalid value: {port}: must be a valid port number (1-65535)")


def _validate_internal_cert_management(doc: dict[str, Any], errs: FieldErrors) -> None:
    """Kueue's validateInternalCertManagement, while it is enabled (as by default): a DNS-1035 service name, a
    DNS-1123 secret name; read from the document (kueue-es manages no certificates from them); in Kueue's words."""
    icm = doc.get("internalCertManagement") or {}
    if icm.get("enable") is False:
        return
    for name, problems in (("webhookServiceName", _dns1035_problems), ("webhookSecretName", subdomain_problems)):
        value = icm.get(name)
        found = problems(value) if value is not None else []
        if found:
            errs.add(f"internalCertManagement.{name}", f"Invalid value: {go_quote(value)}: " + ",".join(found))


def _validate_integrations(doc: dict[str, Any], frameworks: tuple[str, ...], errs: FieldErrors) -> None:
    """Kueue's validateIntegrations: each of ``integrations.frameworks`` a framework it registers
    (:data:`KNOWN_FRAMEWORKS`), none twice; each of ``integrations.externalFrameworks`` a ``Kind.version.group``
    (:func:`external_kind`) whose kind neither a listed framework's job (:data:`FRAMEWORK_KINDS`) nor an earlier
    entry has. Kueue keys both lists by kind; two registered names never share one, so a repeated name is the only
    repeated framework. ``frameworks`` as defaulted, as Kueue validates after defaulting."""
    for i, name in enumerate(frameworks):
        if name not in FRAMEWORK_KINDS:
            errs.add(f"integrations.frameworks[{i}]", not_supported(go_quote(name), KNOWN_FRAMEWORKS))
        elif name in frameworks[:i]:
            errs.add(f"integrations.frameworks[{i}]", f"Duplicate value: {go_quote(name)}")
    seen = {FRAMEWORK_KINDS[name] for name in frameworks if name in FRAMEWORK_KINDS}
    for i, name in enumerate((doc.get("integrations") or {}).get("externalFrameworks") or []):
        at = f"integrations.externalFrameworks[{i}]"
        kind = external_kind(name)
        if kind is None:
            errs.add(at, f"Invalid value: {go_quote(name)}: must be format, 'Kind.version.group.com'")
        elif kind in seen:
            errs.add(at, f"Duplicate value: {go_quote(name)}")
        else:
            seen.add(kind)


def _is_ip(text: str) -> bool:
    """Go's ``net.ParseIP``: an IPv4 or IPv6 address, without a zone."""
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return "%" not in text


DNS1035_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"


def _dns1035_problems(value: str) -> list[str]:
    """Why ``value`` is no DNS-1035 label, in Kubernetes' words (``IsDNS1035Label``)."""
    found = [f"must be no more than {NAME_MAX} characters"] if len(value) > NAME_MAX else []
    if not re.fullmatch(DNS1035_FMT, value):
        found.append(regex_error("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
                                 "with an alphabetic character, and end with an alphanumeric character",
                                 DNS1035_FMT, "my-name", "abc-123"))
    return found


def _validate_local_queue_selector(lqm: LocalQueueMetricsConfig | None, source: str) -> None:
    """Kueue v0.20 (#16379) does not start on a ``localQueueSelector`` that is no valid label selector while the
    stanza is enabled (its LocalQueue controller fails to set up, naming the field); disabled, the selector is not
    read. Before, such a selector selected every LocalQueue."""
    selector = lqm.local_queue_selector if lqm is not None and lqm.enable else None
    if selector is None:
        return
    found = selector_problem(selector.match_labels,
                             [(r.key, r.operator, r.values) for r in selector.match_expressions])
    if found is not None:
        raise InvalidInput(f"{source}: Configuration: field `metrics.localQueueMetrics.localQueueSelector."
                           f"{found[0]}`: {found[1]}")


def _validate_admission_fair_sharing(afs: AdmissionFairSharingConfig, source: str, errs: FieldErrors) -> None:
    """Kueue's validateAdmissionFairSharing: the half-life not negative; the sampling interval above zero once
    defaulted (zero is Kueue's default, 5 minutes: :attr:`sampling_interval_ms`), shown with its own value where
    Kueue's message shows the half-life's; each weight not negative, named by its key with the whole map shown as
    Go prints it, as Kueue does, one error per weight in the resources' sorted order (Kueue ranges over a Go map,
    in no set order). NaN and infinities never get here: Kueue's decoding refuses them (:func:`_check_json_numbers`)."""
    at = "admissionFairSharing"
    half_life = parse_duration_ns(afs.usage_half_life_time, f"{source}: field `{at}.usageHalfLifeTime`")
    if half_life < 0:
        errs.add(f"{at}.usageHalfLifeTime", _negative(half_life))
    interval = parse_duration_ns(afs.usage_sampling_interval, f"{source}: field `{at}.usageSamplingInterval`")
    if interval < 0:
        errs.add(f"{at}.usageSamplingInterval", f"Invalid value: {go_duration.format_ns(interval)}: must be greater "
                                                "than 0")
    weights = afs.resource_weights
    for resource in sorted(weights):
        if weights[resource] < 0:
            errs.add(f"{at}.resourceWeights[{resource}]",
                     f"Invalid value: {go_float_map('v1.ResourceName', weights)}: {IS_NEGATIVE}")


MAX_DEVICE_CLASS_MAPPINGS, MAX_DEVICE_CLASSES_PER_MAPPING = 16, 8


def _validate_device_class_mappings(mappings: list[DeviceClassMapping], flags: dict[str, bool], strict: bool,
                                    errs: FieldErrors) -> None:
    """Kueue's validateDeviceClassMappings, every fault in its order and words: at most 16 entries; each named by a
    label key (``IsLabelKey``'s details joined by "; "), of at most 253 characters (since session 34, so not for a
    recorded document), given once; one to eight DeviceClass names, each a label key of at most 253 characters,
    not repeated in the entry nor mapped to two resources — unless both mappings count a counter source, each a
    counter of its own (the counter of a mapping is its first source's); then its ``sources``
    (:func:`_validate_device_sources`) under the gates ``flags``. The names are ``corev1.ResourceName``s, which
    Go's field errors show by their ``String()``: unquoted. Under ``KueueDRAIntegration`` and
    ``ReservedResourceNameValidation`` no entry may be named ``pods`` (Kueue v0.20, #13989: the name flavor
    assignment keeps for the pod count; not in the newest stored validation.go, so in kueue-es's words)."""
    at = "resources.deviceClassMappings"
    if len(mappings) > MAX_DEVICE_CLASS_MAPPINGS:
        errs.add(at, too_many(len(mappings), MAX_DEVICE_CLASS_MAPPINGS))
    reserved = all(gates.enabled(flags, g) for g in (gates.KUEUE_DRA_INTEGRATION,
                                                     gates.RESERVED_RESOURCE_NAME_VALIDATION))
    names: set[str] = set()
    mapped_to: dict[str, str] = {}
    counters: dict[str, set[str]] = {}
    """DeviceClass -> the counters mappings naming it count (several only when each counts its own)."""
    for i, m in enumerate(mappings):
        _validate_resource_name(m.name, f"{at}[{i}].name", strict, errs)
        if reserved and m.name == RESERVED:
            errs.add(f"{at}[{i}].name", f"{RESERVED!r} is reserved for internal kueue use")
        if m.name in names:
            errs.add(f"{at}[{i}].name", f"Duplicate value: {m.name}")
        names.add(m.name)
        if not m.device_class_names:
            errs.add(f"{at}[{i}].deviceClassNames", "Required value: at least one device class name is required")
        if len(m.device_class_names) > MAX_DEVICE_CLASSES_PER_MAPPING:
            errs.add(f"{at}[{i}].deviceClassNames",
                     too_many(len(m.device_class_names), MAX_DEVICE_CLASSES_PER_MAPPING))
        first = m.sources[0].counter if m.sources else None
        counter = first.name if first is not None else ""
        for j, dc in enumerate(m.device_class_names):
            where = f"{at}[{i}].deviceClassNames[{j}]"
            _validate_resource_name(dc, where, strict, errs)
            if m.device_class_names.index(dc) != j:
                errs.add(where, f"Duplicate value: {dc}")
            if dc not in mapped_to:
                mapped_to[dc] = m.name
                counters[dc] = {counter} if counter else set()
            elif mapped_to[dc] != m.name:
                if not counter or not counters[dc]:
                    errs.add(where, f"Invalid value: {dc}: device class already mapped to resource {mapped_to[dc]}")
                elif counter in counters[dc]:
                    errs.add(where, f"Invalid value: {dc}: device class already has a counter source for counter "
                                    f"{go_quote(counter)}")
                else:
                    counters[dc].add(counter)
        _validate_device_sources(m.sources, f"{at}[{i}].sources", flags, errs)


RESOURCE_NAME_MAX = 253


def _validate_resource_name(name: str, where: str, strict: bool, errs: FieldErrors) -> None:
    """A mapping's resource or DeviceClass name as Kueue checks it: a label key, then (``strict``) its length."""
    problems = label_key_problems(name)
    if problems:
        errs.add(where, f"Invalid value: {name}: {'; '.join(problems)}")
    if strict and len(name.encode()) > RESOURCE_NAME_MAX:
        errs.add(where, f"Invalid value: {name}: must not exceed {RESOURCE_NAME_MAX} characters")


DRIVER_NAME_MAX, DEVICE_ID_MAX, DEVICE_DOMAIN_MAX = 63, 32, 63
"""resource.k8s.io/v1 limits: a driver name, a C identifier in a qualified name, the domain before it."""

_C_IDENTIFIER_FMT = "[A-Za-z_][A-Za-z0-9_]*"
_C_IDENTIFIER = re.compile(_C_IDENTIFIER_FMT)


def _validate_device_sources(sources: list[DeviceClassSource], at: str, flags: dict[str, bool],
                             errs: FieldErrors) -> None:
    """Kueue's checks of a mapping's ``sources`` (``at``: their field), every fault, in its words: each sets exactly
    one of ``counter`` (refused while ``KueueDRAIntegrationPartitionableDevices`` is off) and ``capacity``
    (refused while ``KueueDRAIntegrationConsumableCapacity`` is off; either refusal ends that entry's checks, as
    Kueue's), not both kinds in one mapping; a counter is named by a DNS label, a capacity by a qualified name (a
    C identifier after an optional DNS-subdomain domain); both give their DRA driver (a DNS subdomain of at most
    63 characters) and a CEL ``deviceSelector`` (required, and compiled: cel-python's parser, so an expression
    that parses but does not type as a bool is only refused when a claim is charged, and a compilation error is
    cel-python's)."""
    kinds: set[str] = set()
    for k, source in enumerate(sources):
        where = f"{at}[{k}]"
        if source.counter is None and source.capacity is None:
            errs.add(where, "Required value: exactly one source type must be set per entry")
            continue
        if source.counter is not None and source.capacity is not None:
            errs.add(where, 'Invalid value: "counter+capacity": exactly one source type must be set per entry')
            continue
        kind, gate = (("counter", gates.KUEUE_DRA_INTEGRATION_PARTITIONABLE_DEVICES) if source.counter is not None
                      else ("capacity", gates.KUEUE_DRA_INTEGRATION_CONSUMABLE_CAPACITY))
        kinds.add(kind)
        if not gates.enabled(flags, gate):
            errs.add(f"{where}.{kind}", f"Invalid value: true: {kind} sources require {gate} to be enabled")
            continue
        src = source.counter or source.capacity
        assert src is not None
        _validate_device_source(src, kind, f"{where}.{kind}", errs)
    if len(kinds) > 1:
        errs.add(at, f"Invalid value: {len(sources)}: cannot mix counter and capacity sources in the same mapping")


def _validate_device_source(src: DeviceSource, kind: str, where: str, errs: FieldErrors) -> None:
    """One counter or capacity source (:func:`_validate_device_sources`): its name, driver and device selector."""
    if kind == "counter":
        problems = dns_label_problems(src.name)
        if not src.name:
            errs.add(f"{where}.name", "Required value")
        elif problems:
            errs.add(f"{where}.name", f"Invalid value: {go_quote(src.name)}: {','.join(problems)}")
    else:
        for body in _device_qualified_name_problems(src.name):
            errs.add(f"{where}.name", body)
    if not src.driver:
        errs.add(f"{where}.driver", "Required value")
    elif len(src.driver.encode()) > DRIVER_NAME_MAX:
        errs.add(f"{where}.driver", f"Invalid value: {go_quote(src.driver)}: must not exceed {DRIVER_NAME_MAX} "
                                    "characters")
    elif problems := subdomain_problems(src.driver):
        errs.add(f"{where}.driver", f"Invalid value: {go_quote(src.driver)}: {','.join(problems)}")
    cel = src.device_selector.cel
    if cel is None or not cel.expression:
        errs.add(f"{where}.deviceSelector.cel.expression", "Required value")
        return
    from projections.dra_cel import compile_selector  # noqa: PLC0415 - CEL's parser only for sources

    compiled = compile_selector(cel.expression)
    if compiled.error:
        errs.add(f"{where}.deviceSelector.cel.expression", f"Invalid value: {go_quote(cel.expression)}: CEL "
                                                           f"compilation failed: {compiled.error}")


def _device_qualified_name_problems(name: str) -> list[str]:
    """What resource.k8s.io/v1 says is wrong with a qualified name of a capacity, each a field error's body as
    Kueue's validateQualifiedName gives it: a C identifier of at most 32 characters, optionally after a domain (a
    DNS subdomain, checked lowercased, of at most 63 characters) and '/'. As the API server does, a name of more
    than one '/' passes."""
    parts = name.split("/")
    if len(parts) > 2:
        return []
    if len(parts) == 1:
        return _c_identifier_problems(name)
    domain, ident = parts
    found = []
    if not domain:
        found.append('Invalid value: "": the domain must not be empty')
    else:
        if len(domain.encode()) > DEVICE_DOMAIN_MAX:
            found.append(too_long(DEVICE_DOMAIN_MAX))
        found += [f"Invalid value: {go_quote(domain)}: {m}" for m in subdomain_problems(domain.lower())]
    if not ident:
        found.append('Invalid value: "": the name must not be empty')
    else:
        found += _c_identifier_problems(ident)
    return found


def _c_identifier_problems(ident: str) -> list[str]:
    """resource.k8s.io/v1's check of a C identifier (at most 32 characters), each a field error's body."""
    found = [too_long(DEVICE_ID_MAX)] if len(ident.encode()) > DEVICE_ID_MAX else []
    if not _C_IDENTIFIER.fullmatch(ident):
        found.append(f"Invalid value: {go_quote(ident)}: " + regex_error(
            "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric "
            "characters or '_'", _C_IDENTIFIER_FMT, "my_name", "MY_NAME", "MyName"))
    return found


def _validate_resources(cfg: SchedulerConfig, strict: bool, errs: FieldErrors) -> None:
    """Kueue's checks of ``resources`` in its order: the transformations (always; ``pods`` in one under
    ``ReservedResourceNameValidation``), the device class mappings."""
    r = cfg.resources
    errs.messages += transformation_problems(
        r.transformations, reserved_names=gates.enabled(cfg.feature_gates, gates.RESERVED_RESOURCE_NAME_VALIDATION))
    _validate_device_class_mappings(r.device_class_mappings, cfg.feature_gates, strict, errs)


def _validate_quota_check_strategy(cfg: SchedulerConfig, errs: FieldErrors) -> None:
    """Kueue's validateQuotaCheckStrategy, under its gate: one of the two strategies, and no
    ``excludeResourcePrefixes`` beside ``IgnoreUndeclared``."""
    r = cfg.resources
    if not gates.enabled(cfg.feature_gates, gates.QUOTA_CHECK_STRATEGY):
        return
    at = "resources.quotaCheckStrategy"
    if r.quota_check_strategy == "IgnoreUndeclared" and r.exclude_resource_prefixes:
        errs.add(at, f"Invalid value: {go_quote(r.quota_check_strategy)}: excludeResourcePrefixes is not "
                 "allowed when quotaCheckStrategy is IgnoreUndeclared")
    if r.quota_check_strategy not in QUOTA_CHECK_STRATEGIES:
        errs.add(at, not_supported(go_quote(r.quota_check_strategy),
                                   ("IgnoreUndeclared", "BlockUndeclared")))  # Kueue's order
