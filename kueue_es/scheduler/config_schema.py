"""Kueue's ``Configuration``, both versions, typed field by field as Kueue's decoder types it.

Kueue does not start on a configuration file with a value of the wrong type anywhere in it, in a field it reads
or not (``clientConnection.burst: "100"``, ``webhook.port: 9443.5``, ``leaderElection.leaseDuration: soon``):
its decoder refuses the file before anything looks at it. kueue-es decodes only the part of the file that changes
its decisions (:class:`~kueue_es.scheduler.config.SchedulerConfig`), so it first checks the whole file against
these types (:func:`schema_for`), which describe every field of Kueue's Configuration of each ``apiVersion`` (the
shared fields once, then the ones each version alone has; ``ONLY_IN`` in :mod:`kueue_es.scheduler.config_fields`
names the same split). They are also the field list :mod:`~kueue_es.scheduler.config_fields` refuses unknown
fields by.

How Go's JSON decoding reads each kind of field, and so how it is written here:

* ``null`` is taken for any field (it leaves a value unset) but a duration that is not a pointer (``Duration``
  without ``| None``: its decoder parses ``null`` as the empty string, which is no duration); what it means there,
  and as a map value or list entry, is :mod:`kueue_es.scheduler.config_nulls`' (which reads ``| None`` here);
* integers have their Go width (``Int32``, ``Int64``: a larger value is refused), ``float32`` its range;
* a duration (``metav1.Duration``) is a string ``time.ParseDuration`` takes (``90s``, ``1h30m``, ``-5m``, ``0``;
  the pattern says the forms, :mod:`kueue_es.scheduler.config_durations` the range);
  ``controller.cacheSyncTimeout`` is a Go ``time.Duration`` with no decoder of its own: a number of nanoseconds;
* a quantity (``resources.transformations[].outputs``) is a string or a number;
* a whole float in an integer field is the integer Kueue's YAML-to-JSON step writes
  (:mod:`kueue_es.scheduler.config_numbers`, applied before).

Field names and types follow Kueue's ``apis/config/v1beta2`` and ``v1beta1`` ``configuration_types.go`` (the newest
stored, older than v0.20, for the fields kueue-es does not read; v0.20's additions as kueue-es models them; v1beta2's
``metrics.localQueueMetrics`` and ``visibilityServer``, which that copy predates, as v0.20's generated deep copies and
defaults type them: ``enable`` a bool, the selector a label selector, ``bindAddress`` a string, ``bindPort`` an
``int32``), the
``LeaderElectionConfiguration`` of ``k8s.io/component-base/config/v1alpha1`` and client-go's ``clientcmd/api``
``ExecConfig``. What a field means is checked elsewhere (:func:`~kueue_es.scheduler.config.load_config`).
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

V1BETA1 = "config.kueue.x-k8s.io/v1beta1"
V1BETA2 = "config.kueue.x-k8s.io/v1beta2"

Int32 = Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)]
Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
FLOAT32_MAX = 3.4028234663852886e38
Float32 = Annotated[float, msgspec.Meta(ge=-FLOAT32_MAX, le=FLOAT32_MAX)]
GO_DURATION = r"\A[-+]?(?:0|(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h))+)\Z"
"""The strings Go's ``time.ParseDuration`` takes (its range aside)."""
Duration = Annotated[str, msgspec.Meta(pattern=GO_DURATION)]
Quantity = str | int | float
Strings = list[str | None]


class _Fields(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=False):
    """Unknown fields pass here: :mod:`~kueue_es.scheduler.config_fields` names them all, after the types."""


class LabelSelectorRequirement(_Fields):
    key: str | None = None
    operator: str | None = None
    values: Strings | None = None


class LabelSelector(_Fields):
    """``metav1.LabelSelector`` as Kueue's decoder types it. Apart on purpose from :class:`events.objects.LabelSelector`
    (the API object's, into which the scheduler decodes the selectors it reads): every part here may be ``null``,
    list entries and map values too, and an unknown field passes to :mod:`~kueue_es.scheduler.config_fields`; the
    two share only their field names, which a common base would have each redeclare with its own types."""

    match_labels: dict[str, str | None] | None = None
    match_expressions: list[LabelSelectorRequirement | None] | None = None


class ControllerWebhook(_Fields):
    port: Int64 | None = None
    host: str | None = None
    cert_dir: str | None = None


class LeaderElection(_Fields):
    leader_elect: bool | None = None
    lease_duration: Duration = "0s"
    renew_deadline: Duration = "0s"
    retry_period: Duration = "0s"
    resource_lock: str | None = None
    resource_name: str | None = None
    resource_namespace: str | None = None


class ControllerHealth(_Fields):
    health_probe_bind_address: str | None = None
    readiness_endpoint_name: str | None = None
    liveness_endpoint_name: str | None = None


class ControllerConfigurationSpec(_Fields):
    group_kind_concurrency: dict[str, Int64 | None] | None = None
    cache_sync_timeout: Int64 | None = None


class TLSOptions(_Fields):
    min_version: str | None = None
    cipher_suites: Strings | None = None
    curve_preferences: list[Int32 | None] | None = None
    """v0.19 (#11832), in both versions: ``[]int32``."""


class InternalCertManagement(_Fields):
    enable: bool | None = None
    webhook_service_name: str | None = None
    webhook_secret_name: str | None = None


class ClientConnection(_Fields):
    qps: Float32 | None = None
    burst: Int32 | None = None


class RequeuingStrategy(_Fields):
    timestamp: str | None = None
    backoff_limit_count: Int32 | None = None
    backoff_base_seconds: Int32 | None = None
    backoff_max_seconds: Int32 | None = None


class _WaitForPodsReady(_Fields):
    block_admission: bool | None = None
    requeuing_strategy: RequeuingStrategy | None = None
    recovery_timeout: Duration | None = None


class WaitForPodsReadyV1beta2(_WaitForPodsReady):
    timeout: Duration = "0s"
    unscheduled_timeout: Duration | None = None
    max_timeout_on_workload: Duration | None = None


class WaitForPodsReadyV1beta1(_WaitForPodsReady):
    enable: bool | None = None
    timeout: Duration | None = None


class ExternalFramework(_Fields):
    name: str | None = None


class IncrementalDispatcherConfig(_Fields):
    step_size: Int32 | None = None


class ExecEnvVar(_Fields):
    name: str | None = None
    value: str | None = None


class ExecConfig(_Fields):
    command: str | None = None
    args: Strings | None = None
    env: list[ExecEnvVar | None] | None = None
    api_version: str | None = None
    install_hint: str | None = None
    provide_cluster_info: bool | None = None
    interactive_mode: str | None = None


class ClusterProfileAccessProvider(_Fields):
    name: str | None = None
    exec_config: ExecConfig | None = None


class ClusterProfile(_Fields):
    access_providers: list[ClusterProfileAccessProvider | None] | None = None
    credentials_providers: list[ClusterProfileAccessProvider | None] | None = None


class _MultiKueue(_Fields):
    gc_interval: Duration | None = None
    origin: str | None = None
    worker_lost_timeout: Duration | None = None
    dispatcher_name: str | None = None
    external_frameworks: list[ExternalFramework | None] | None = None


class MultiKueueV1beta2(_MultiKueue):
    single_cluster_preemption_timeout: Duration | None = None
    incremental_dispatcher_config: IncrementalDispatcherConfig | None = None
    cluster_profile: ClusterProfile | None = None


class MultiKueueV1beta1(_MultiKueue):
    pass


class FairSharingV1beta2(_Fields):
    preemption_strategies: Strings | None = None


class FairSharingV1beta1(FairSharingV1beta2):
    enable: bool | None = None


class AdmissionFairSharing(_Fields):
    usage_half_life_time: Duration = "0s"
    usage_sampling_interval: Duration = "0s"
    resource_weights: dict[str, float | None] | None = None


class ResourceTransformation(_Fields):
    input: str | None = None
    strategy: str | None = None
    multiply_by: str | None = None
    outputs: dict[str, Quantity | None] | None = None


class DeviceSelectorCel(_Fields):
    expression: str | None = None


class DeviceSelector(_Fields):
    cel: DeviceSelectorCel | None = None


class DeviceSource(_Fields):
    name: str | None = None
    driver: str | None = None
    device_selector: DeviceSelector | None = None


class DeviceClassSource(_Fields):
    counter: DeviceSource | None = None
    capacity: DeviceSource | None = None


class DeviceClassMappingV1beta1(_Fields):
    name: str | None = None
    device_class_names: Strings | None = None


class DeviceClassMappingV1beta2(DeviceClassMappingV1beta1):
    sources: list[DeviceClassSource | None] | None = None


class _Resources(_Fields):
    exclude_resource_prefixes: Strings | None = None
    transformations: list[ResourceTransformation | None] | None = None


class ResourcesV1beta2(_Resources):
    quota_check_strategy: str | None = None
    device_class_mappings: list[DeviceClassMappingV1beta2 | None] | None = None


class ResourcesV1beta1(_Resources):
    device_class_mappings: list[DeviceClassMappingV1beta1 | None] | None = None


class CustomLabelV1beta1(_Fields):
    name: str | None = None
    source_label_key: str | None = None
    source_annotation_key: str | None = None


class CustomLabelV1beta2(CustomLabelV1beta1):
    source_kind: str | None = None
    tracked_values: Strings | None = None


class _ControllerMetrics(_Fields):
    bind_address: str | None = None
    enable_cluster_queue_resources: bool | None = None


class LocalQueueMetrics(_Fields):
    enable: bool | None = None
    local_queue_selector: LabelSelector | None = None


class ControllerMetricsV1beta2(_ControllerMetrics):
    custom_labels: list[CustomLabelV1beta2 | None] | None = None
    local_queue_metrics: LocalQueueMetrics | None = None


class ControllerMetricsV1beta1(_ControllerMetrics):
    custom_labels: list[CustomLabelV1beta1 | None] | None = None


class IntegrationsV1beta2(_Fields):
    frameworks: Strings | None = None
    external_frameworks: Strings | None = None
    label_keys_to_copy: Strings | None = None


class PodIntegrationOptions(_Fields):
    namespace_selector: LabelSelector | None = None
    pod_selector: LabelSelector | None = None


class IntegrationsV1beta1(IntegrationsV1beta2):
    pod_options: PodIntegrationOptions | None = None


class ClusterQueueVisibility(_Fields):
    max_count: Int32 | None = None


class QueueVisibility(_Fields):
    cluster_queues: ClusterQueueVisibility | None = None
    update_interval_seconds: Int32 | None = None


class WorkloadRetentionPolicy(_Fields):
    after_finished: Duration | None = None
    after_deactivated_by_kueue: Duration | None = None


class ObjectRetentionPolicies(_Fields):
    workloads: WorkloadRetentionPolicy | None = None


class VisibilityServer(_Fields):
    bind_address: str | None = None
    bind_port: Int32 | None = None


class _Configuration(_Fields):
    """The fields both versions have, typed alike."""

    api_version: str | None = None
    kind: str | None = None
    namespace: str | None = None
    webhook: ControllerWebhook | None = None
    leader_election: LeaderElection | None = None
    health: ControllerHealth | None = None
    pprof_bind_address: str | None = None
    controller: ControllerConfigurationSpec | None = None
    tls: TLSOptions | None = None
    manage_jobs_without_queue_name: bool | None = None
    managed_jobs_namespace_selector: LabelSelector | None = None
    internal_cert_management: InternalCertManagement | None = None
    client_connection: ClientConnection | None = None
    admission_fair_sharing: AdmissionFairSharing | None = None
    feature_gates: dict[str, bool | None] | None = None
    object_retention_policies: ObjectRetentionPolicies | None = None


class ConfigurationV1beta2(_Configuration):
    metrics: ControllerMetricsV1beta2 | None = None
    wait_for_pods_ready: WaitForPodsReadyV1beta2 | None = None
    integrations: IntegrationsV1beta2 | None = None
    multi_kueue: MultiKueueV1beta2 | None = None
    fair_sharing: FairSharingV1beta2 | None = None
    resources: ResourcesV1beta2 | None = None
    visibility_server: VisibilityServer | None = None


class ConfigurationV1beta1(_Configuration):
    metrics: ControllerMetricsV1beta1 | None = None
    wait_for_pods_ready: WaitForPodsReadyV1beta1 | None = None
    integrations: IntegrationsV1beta1 | None = None
    multi_kueue: MultiKueueV1beta1 | None = None
    fair_sharing: FairSharingV1beta1 | None = None
    resources: ResourcesV1beta1 | None = None
    queue_visibility: QueueVisibility | None = None


SCHEMAS: dict[str, type[_Configuration]] = {V1BETA2: ConfigurationV1beta2, V1BETA1: ConfigurationV1beta1}


def schema_for(api_version: Any) -> type[_Configuration]:
    """The Configuration type Kueue decodes a file of ``api_version`` as; an apiVersion it has not (refused
    elsewhere) is taken as v1beta2."""
    return SCHEMAS.get(api_version, ConfigurationV1beta2) if isinstance(api_version, str) else ConfigurationV1beta2
