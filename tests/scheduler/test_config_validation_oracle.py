"""Kueue's own Configuration tests as the oracle: ``pkg/config/validation_test.go`` (TestValidate,
TestValidateDeviceClassMappings, TestValidateCustomLabels) and ``pkg/config/config_test.go`` (TestLoad).
Each case is Kueue's, named in its id; its ``wantErr`` is the list of fields Kueue's validation reports
(``field.Error.Field``, which its tests compare), and no fields means Kueue accepts the configuration.

Kueue's tests hand ``Validate`` a Configuration its defaulting has not filled; kueue-es validates a file
after defaulting it, as Kueue's start-up does, so each case here is the file that gives Kueue's test object
once defaulted (``integrations.frameworks: [batch/job]``, which Kueue's tests set, is the default). The
feature gates a case sets are given in ``featureGates``, with the gates they depend on (Kueue's test
helper sets a gate alone; its start-up refuses a gate whose dependency is off)."""

from __future__ import annotations

import re

import pytest

from events.errors import InvalidInput
from kueue_es.scheduler.config import load_config

V1BETA2 = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}
NAME = "kubernetes.io/metadata.name"
PROVIDER = {"name": "p", "execConfig": {"command": "c", "apiVersion": "client.authentication.k8s.io/v1",
                                        "interactiveMode": "Never"}}
PARTITIONABLE = {"KueueDRAIntegration": True, "KueueDRAIntegrationPartitionableDevices": True}
CONSUMABLE = {"KueueDRAIntegration": True, "KueueDRAIntegrationConsumableCapacity": True}
NVIDIA = {"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}
EXAMPLE = {"cel": {"expression": "device.driver == 'gpu.example.com'"}}


def _provider(**exec_config: object) -> dict:
    return {**PROVIDER, "execConfig": {**PROVIDER["execConfig"], **exec_config}}


def _source(kind: str, name: str, driver: str, selector: dict | None) -> dict:
    source = {"name": name, "driver": driver, **({"deviceSelector": selector} if selector else {})}
    return {kind: source}


def _counter(name: str = "memory", driver: str = "gpu.nvidia.com", selector: dict | None = NVIDIA) -> dict:
    return _source("counter", name, driver, selector)


def _capacity(name: str = "memory", driver: str = "gpu.example.com", selector: dict | None = EXAMPLE) -> dict:
    return _source("capacity", name, driver, selector)


def _mapping(name: str, classes: list[str], sources: list[dict] | None = None) -> dict:
    mapping = {"name": name, "deviceClassNames": classes}
    return mapping if sources is None else {**mapping, "sources": sources}


def _dra(mappings: list[dict], gates: dict | None = None) -> dict:
    return {"resources": {"deviceClassMappings": mappings}, **({"featureGates": gates} if gates else {})}


def _labels(*entries: dict) -> dict:
    return {"metrics": {"customLabels": list(entries)}}


CASES = [
    # --- TestValidate ---
    ("unregistered integrations.frameworks", {"integrations": {"frameworks": ["unregistered/jobframework"]}},
     ["integrations.frameworks[0]"]),
    ("duplicate integrations.frameworks", {"integrations": {"frameworks": ["batch/job", "batch/job"]}},
     ["integrations.frameworks[1]"]),
    ("duplicate frameworks between integrations.frameworks and integrations.externalFrameworks",
     {"integrations": {"frameworks": ["batch/job"], "externalFrameworks": ["Job.v1.batch"]}},
     ["integrations.externalFrameworks[0]"]),
    ("invalid format integrations.externalFrameworks",
     {"integrations": {"frameworks": ["batch/job"], "externalFrameworks": ["invalid"]}},
     ["integrations.externalFrameworks[0]"]),
    ("duplicate integrations.externalFrameworks",
     {"integrations": {"frameworks": ["batch/job"], "externalFrameworks": ["Foo.v1.example.com"] * 2}},
     ["integrations.externalFrameworks[1]"]),
    ("valid managedJobsNamespaceSelector",
     {"managedJobsNamespaceSelector": {"matchExpressions": [
         {"key": NAME, "operator": "NotIn", "values": ["kube-system", "kueue-system"]}]}}, []),
    ("prohibited namespace in MatchLabels managedJobsNamespaceSelector",
     {"managedJobsNamespaceSelector": {"matchLabels": {NAME: "kube-system"}}},
     ["managedJobsNamespaceSelector"]),
    ("prohibited namespace in MatchExpressions with operator In managedJobsNamespaceSelector",
     {"managedJobsNamespaceSelector": {"matchExpressions": [{"key": NAME, "operator": "In",
                                                            "values": ["kube-system"]}]}},
     ["managedJobsNamespaceSelector"]),
    ("no supported waitForPodsReady.requeuingStrategy.timestamp",
     {"waitForPodsReady": {"timeout": "5m", "requeuingStrategy": {"timestamp": "NoSupported"}}},
     ["waitForPodsReady.requeuingStrategy.timestamp"]),
    ("negative waitForPodsReady.timeout", {"waitForPodsReady": {"timeout": "-1ns"}},
     ["waitForPodsReady.timeout"]),
    ("negative waitForPodsReady.recoveryTimeout",
     {"waitForPodsReady": {"timeout": "5m", "recoveryTimeout": "-1ns"}},
     ["waitForPodsReady.recoveryTimeout"]),
    ("valid waitForPodsReady",
     {"waitForPodsReady": {"timeout": "50ns", "recoveryTimeout": "3ns", "blockAdmission": False,
                           "requeuingStrategy": {"timestamp": "Creation", "backoffLimitCount": 10,
                                                 "backoffBaseSeconds": 30, "backoffMaxSeconds": 1800}}}, []),
    ("negative waitForPodsReady.requeuingStrategy.backoffLimitCount",
     {"waitForPodsReady": {"timeout": "5m", "requeuingStrategy": {"backoffLimitCount": -1}}},
     ["waitForPodsReady.requeuingStrategy.backoffLimitCount"]),
    ("negative waitForPodsReady.requeuingStrategy.backoffBaseSeconds",
     {"waitForPodsReady": {"timeout": "5m", "requeuingStrategy": {"backoffBaseSeconds": -1}}},
     ["waitForPodsReady.requeuingStrategy.backoffBaseSeconds"]),
    ("negative waitForPodsReady.requeuingStrategy.backoffMaxSeconds",
     {"waitForPodsReady": {"timeout": "5m", "requeuingStrategy": {"backoffMaxSeconds": -1}}},
     ["waitForPodsReady.requeuingStrategy.backoffMaxSeconds"]),
    ("negative multiKueue.gcInterval", {"multiKueue": {"gcInterval": "-1s"}}, ["multiKueue.gcInterval"]),
    ("negative multiKueue.workerLostTimeout", {"multiKueue": {"workerLostTimeout": "-1s"}},
     ["multiKueue.workerLostTimeout"]),
    ("invalid .multiKueue.origin label value", {"multiKueue": {"origin": "=]"}}, ["multiKueue.origin"]),
    ("valid .multiKueue configuration",
     {"multiKueue": {"gcInterval": "1s", "origin": "valid", "workerLostTimeout": "2s"}}, []),
    ("valid multiKueue.incrementalDispatcherConfig with incremental dispatcher",
     {"multiKueue": {"dispatcherName": "kueue.x-k8s.io/multikueue-dispatcher-incremental",
                     "incrementalDispatcherConfig": {"stepSize": 2}}}, []),
    ("multiKueue.incrementalDispatcherConfig without incremental dispatcher",
     {"multiKueue": {"dispatcherName": "kueue.x-k8s.io/multikueue-dispatcher-all-at-once",
                     "incrementalDispatcherConfig": {"stepSize": 2}}},
     ["multiKueue.incrementalDispatcherConfig"]),
    ("multiKueue.incrementalDispatcherConfig.stepSize below minimum",
     {"multiKueue": {"dispatcherName": "kueue.x-k8s.io/multikueue-dispatcher-incremental",
                     "incrementalDispatcherConfig": {"stepSize": 0}}},
     ["multiKueue.incrementalDispatcherConfig.stepSize"]),
    ("empty multiKueue.clusterProfile.accessProviders.name",
     {"multiKueue": {"clusterProfile": {"accessProviders": [{**PROVIDER, "name": ""}]}}},
     ["multiKueue.clusterProfile.accessProviders.name"]),
    ("empty multiKueue.clusterProfile.accessProviders.execConfig.env.name",
     {"multiKueue": {"clusterProfile": {"accessProviders": [_provider(env=[{"name": "", "value": "v"}])]}}},
     ["multiKueue.clusterProfile.accessProviders.execConfig.env.name"]),
    ("empty multiKueue.clusterProfile.accessProviders.execConfig.interactiveMode",
     {"multiKueue": {"clusterProfile": {"accessProviders": [_provider(interactiveMode="")]}}},
     ["multiKueue.clusterProfile.accessProviders.execConfig.interactiveMode"]),
    ("invalid multiKueue.clusterProfile.accessProviders.execConfig.interactiveMode",
     {"multiKueue": {"clusterProfile": {"accessProviders": [_provider(interactiveMode="Invalid")]}}},
     ["multiKueue.clusterProfile.accessProviders.execConfig.interactiveMode"]),
    ("valid multiKueue.clusterProfile credentialsProviders configuration",
     {"multiKueue": {"clusterProfile": {
         "credentialsProviders": [_provider(env=[{"name": "V", "value": "v"}])]}}},
     []),
    ("multiKueue.clusterProfile accessProviders and credentialsProviders are mutually exclusive",
     {"multiKueue": {"clusterProfile": {"accessProviders": [PROVIDER], "credentialsProviders": [PROVIDER]}}},
     ["multiKueue.clusterProfile.credentialsProviders"]),
    ("invalid multiKueue.clusterProfile.credentialsProviders configuration",
     {"multiKueue": {"clusterProfile": {"credentialsProviders": [_provider(command="")]}}},
     ["multiKueue.clusterProfile.credentialsProviders.execConfig.command"]),
    ("invalid an empty preemption strategy", {"fairSharing": {}}, ["fairSharing.preemptionStrategies"]),
    ("unsupported preemption strategy",
     {"fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "UNKNOWN",
                                               "LessThanInitialShare", "LessThanOrEqualToFinalShare"]}},
     ["fairSharing.preemptionStrategies"]),
    ("valid admissionFairSharing configuration",
     {"admissionFairSharing": {"usageHalfLifeTime": "1s", "usageSamplingInterval": "1s",
                               "resourceWeights": {"cpu": 0.5, "memory": 0.5}}}, []),
    ("invalid admissionFairSharing.usageHalfLifeTime configuration",
     {"admissionFairSharing": {"usageHalfLifeTime": "-1s", "usageSamplingInterval": "1s"}},
     ["admissionFairSharing.usageHalfLifeTime"]),
    ("invalid admissionFairSharing.usageSamplingInterval configuration",
     {"admissionFairSharing": {"usageSamplingInterval": "-1s"}},
     ["admissionFairSharing.usageSamplingInterval"]),
    ("invalid admissionFairSharing.resourceWeights configuration",
     {"admissionFairSharing": {"usageSamplingInterval": "1s", "resourceWeights": {"cpu": -0.5}}},
     ["admissionFairSharing.resourceWeights[cpu]"]),
    ("invalid .internalCertManagement.webhookSecretName",
     {"internalCertManagement": {"enable": True, "webhookSecretName": ":)"}},
     ["internalCertManagement.webhookSecretName"]),
    ("disabled .internalCertManagement with invalid .internalCertManagement.webhookServiceName",
     {"internalCertManagement": {"enable": False, "webhookServiceName": "0-invalid"}}, []),
    ("invalid .resources.transformations.strategy",
     {"resources": {"transformations": [{"input": "cpu", "strategy": "invalid"}]}},
     ["resources.transformations[0].strategy"]),
    ("invalid .resources.transformations.inputs",
     {"resources": {"transformations": [{"input": r, "strategy": "Retain"}
                                        for r in ("cpu", "memory", "cpu")]}},
     ["resources.transformations[2].input"]),
    ("zero afterFinished in .objectRetentionPolicies.workloads",
     {"objectRetentionPolicies": {"workloads": {"afterFinished": "0s"}}}, []),
    ("negative afterDeactivatedByKueue in .objectRetentionPolicies.workloads",
     {"objectRetentionPolicies": {"workloads": {"afterDeactivatedByKueue": "-1ns"}}},
     ["objectRetentionPolicies.workloads.afterDeactivatedByKueue"]),
    ("invalid TLS with TLS 1.3 and cipher suites",
     {"tls": {"minVersion": "VersionTLS13", "cipherSuites": ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]}},
     ["tls.cipherSuites"]),
    ("invalid TLS and invalid cipher suites", {"tls": {"minVersion": "DUMMY", "cipherSuites": ["DUMMY"]}},
     ["tls"]),
    ("valid TLS with curve preferences",
     {"tls": {"minVersion": "VersionTLS12", "curvePreferences": [23, 29]}}, []),
    ("invalid TLS with invalid curve preferences",
     {"tls": {"minVersion": "VersionTLS12", "curvePreferences": [0]}}, ["tls"]),
    ("invalid .visibilityServer.bindAddress", {"visibilityServer": {"bindAddress": "invalid"}},
     ["visibilityServer.bindAddress"]),
    ("invalid .visibilityServer.bindPort", {"visibilityServer": {"bindPort": 0}},
     ["visibilityServer.bindPort"]),
    ("quotaCheckStrategy with value ignoreUndeclared not allowed with excludeResourcePrefixes",
     {"resources": {"quotaCheckStrategy": "IgnoreUndeclared", "excludeResourcePrefixes": ["foo.com/device"]}},
     ["resources.quotaCheckStrategy"]),
    ("quotaCheckStrategy with value blockundeclared allowed with excludeResourcePrefixes",
     {"resources": {"quotaCheckStrategy": "BlockUndeclared",
                    "excludeResourcePrefixes": ["foo.com/device"]}}, []),
    ("quotaCheckStrategy validation skipped when feature gate disabled",
     {"featureGates": {"QuotaCheckStrategy": False}, "resources": {"quotaCheckStrategy": "test"}}, []),
    ("multi-counter: same DeviceClass with different counter names allowed",
     _dra([_mapping("gpu.memory", ["mig.nvidia.com"], [_counter()]),
           _mapping("gpu.compute", ["mig.nvidia.com"], [_counter("multiprocessors")])], PARTITIONABLE), []),
    ("multi-counter: same DeviceClass with same counter name rejected",
     _dra([_mapping("gpu.memory", ["mig.nvidia.com"], [_counter()]),
           _mapping("gpu.memory2", ["mig.nvidia.com"], [_counter()])], PARTITIONABLE),
     ["resources.deviceClassMappings[1].deviceClassNames[0]"]),
    ("multi-counter: whole-device and counter for same DeviceClass rejected",
     _dra([_mapping("gpu", ["gpu.nvidia.com"]), _mapping("gpu.memory", ["gpu.nvidia.com"], [_counter()])],
          PARTITIONABLE), ["resources.deviceClassMappings[1].deviceClassNames[0]"]),
    ("sources configured but KueueDRAIntegrationPartitionableDevices disabled",
     _dra([_mapping("gpu.memory", ["mig.nvidia.com"], [_counter()])],
          {"KueueDRAIntegrationPartitionableDevices": False}),
     ["resources.deviceClassMappings[0].sources[0].counter"]),
    ("sources: missing deviceSelector",
     _dra([_mapping("gpu.memory", ["mig.nvidia.com"], [_counter(selector=None)])], PARTITIONABLE),
     ["resources.deviceClassMappings[0].sources[0].counter.deviceSelector.cel.expression"]),
    ("sources: driver name exceeds max length",
     _dra([_mapping("gpu.memory", ["mig.nvidia.com"],
                    [_counter(driver="gpu-accelerator.nvidia-corporation.datacenter.example.com.internal")])],
          PARTITIONABLE), ["resources.deviceClassMappings[0].sources[0].counter.driver"]),
    ("counter and capacity mixing rejected",
     _dra([_mapping("gpu.memory", ["mig.nvidia.com"],
                    [_counter(), _capacity("cores", "gpu.nvidia.com", NVIDIA)])],
          {**PARTITIONABLE, **CONSUMABLE}), ["resources.deviceClassMappings[0].sources"]),
    ("capacity source with mixed-case driver rejected",
     _dra([_mapping("gpu.memory", ["vgpu.example.com"], [_capacity(driver="Gpu.Example.Com")])], CONSUMABLE),
     ["resources.deviceClassMappings[0].sources[0].capacity.driver"]),
    # --- TestValidateDeviceClassMappings (KueueDRAIntegrationConsumableCapacity on) ---
    ("valid capacity name with uppercase domain",
     _dra([_mapping("gpu.memory", ["vgpu.example.com"], [_capacity("GPU.example.com/memory")])],
          CONSUMABLE), []),
    ("capacity name with empty domain",
     _dra([_mapping("gpu.memory", ["vgpu.example.com"], [_capacity("/memory")])], CONSUMABLE),
     ["resources.deviceClassMappings[0].sources[0].capacity.name"]),
    ("capacity name identifier exceeds max length",
     _dra([_mapping("gpu.memory", ["vgpu.example.com"], [_capacity("gpu.example.com/" + "a" * 33)])],
          CONSUMABLE),
     ["resources.deviceClassMappings[0].sources[0].capacity.name"]),
    ("valid single resource", _dra([_mapping("whole-foo", ["foo.com/device"])]), []),
    ("multiple validation errors",
     _dra([_mapping("@invalid", []), _mapping("valid-name", ["@invalid-device", "valid.com/device"])]),
     ["resources.deviceClassMappings[0].name", "resources.deviceClassMappings[0].deviceClassNames",
      "resources.deviceClassMappings[1].deviceClassNames[0]"]),
    ("empty string resource name", _dra([_mapping("", ["foo.com/device"])]),
     ["resources.deviceClassMappings[0].name"]),
    ("max length resource name", _dra([_mapping("a" * 240 + "/" + "b" * 12, ["foo.com/device"])]), []),
    ("over max length device class name", _dra([_mapping("valid-name", ["x" * 240 + "/" + "y" * 14])]),
     ["resources.deviceClassMappings[0].deviceClassNames[0]"]),
    ("too many device class mappings",
     _dra([_mapping(f"resource-{i}", [f"device-{i}.example.com"]) for i in range(17)]),
     ["resources.deviceClassMappings"]),
    ("exactly max device class names per mapping",
     _dra([_mapping("max-devices", [f"device-{i}.example.com" for i in range(8)])]), []),
    # --- TestValidateCustomLabels ---
    ("name with underscore valid as k8s label key", _labels({"name": "has_underscore"}), []),
    ("valid multiple entries",
     _labels({"name": "team"}, {"name": "env", "sourceLabelKey": "environment"},
             {"name": "cost", "sourceAnnotationKey": "billing/cost"}), []),
    ("invalid name - leading digit", _labels({"name": "1team"}), ["metrics.customLabels[0].name"]),
    ("invalid name - empty", _labels({"name": ""}), ["metrics.customLabels[0].name"] * 2),
    ("mutually exclusive sources",
     _labels({"name": "team", "sourceLabelKey": "team-label", "sourceAnnotationKey": "team-annotation"}),
     ["metrics.customLabels[0]"]),
    ("unknown source kind", _labels({"name": "team", "sourceKind": "Unknown"}), ["metrics.customLabels"]),
    ("too many custom labels in total", _labels(*({"name": f"c{i}"} for i in range(1, 22))),
     ["metrics.customLabels"] * 2),
    ("workload without tracked values", _labels({"name": "team", "sourceKind": "Workload"}),
     ["metrics.customLabels[0].trackedValues"]),
    ("too many tracked values for workload",
     _labels({"name": "team", "sourceKind": "Workload", "trackedValues": [str(i) for i in range(1, 14)]}),
     ["metrics.customLabels[0].trackedValues"]),
    ("duplicate tracked values",
     _labels({"name": "team", "sourceKind": "Cohort", "trackedValues": ["a", "b", "a"]}),
     ["metrics.customLabels[0].trackedValues"]),
]


@pytest.mark.parametrize(("doc", "fields"),
                         [pytest.param(doc, fields, id=name) for name, doc, fields in CASES])
def test_kueue_s_validation_case(doc: dict, fields: list[str]) -> None:
    """The fields kueue-es refuses the file on are Kueue's, in its order; none when Kueue accepts it."""
    if not fields:
        load_config({**V1BETA2, **doc}, "kueue.yaml")
        return
    with pytest.raises(InvalidInput) as refused:
        load_config({**V1BETA2, **doc}, "kueue.yaml")
    found = re.findall(r"field `([^`]*)`: ", str(refused.value))
    assert found == fields, str(refused.value)


@pytest.mark.parametrize("name", ["kube-system", "kueue-tenant-a"])
def test_kueue_s_load_case_namespace_overwrite_config(name: str) -> None:
    """config_test.go TestLoad "namespace overwrite config": the default managedJobsNamespaceSelector leaves
    out kube-system and the Configuration's own namespace; "default config": batch/job alone, MultiKueue's
    defaults."""
    config = load_config({**V1BETA2, "namespace": "kueue-tenant-a"})
    requirement = config.managed_jobs_selector.match_expressions[0]
    assert (requirement.key, requirement.operator) == (NAME, "NotIn") and name in requirement.values
    default = load_config(V1BETA2)
    assert default.frameworks == ("batch/job",)
    mk = default.multi_kueue
    assert (mk.gc_interval, mk.origin, mk.worker_lost_timeout, mk.dispatcher_name) == (
        "1m", "multikueue", "15m", "kueue.x-k8s.io/multikueue-dispatcher-all-at-once")


TAS_OFF = {"TopologyAwareScheduling": False, "TASProfileMixed": False, "TASHandleOverlappingFlavors": False,
           "TASFailedNodeReplacement": False, "TASFailedNodeReplacementFailFast": False,
           "TASReplaceNodeOnPodTermination": False, "TASReplaceNodeOnNodeTaints": False,
           "TASMultiLayerTopology": False}
GATE_CASES = [
    # validation_test.go TestLoadAndValidateFeatureGates: (case, featureGateMap, whether Kueue refuses it)
    ("cannot set TAS profile with TAS disabled", {**TAS_OFF, "TASProfileMixed": True}, True),
    ("TASReplaceNodeDueToNotReadyOverFixedTime requires TASFailedNodeReplacement",
     {"TASReplaceNodeDueToNotReadyOverFixedTime": True, "TopologyAwareScheduling": True,
      "TASFailedNodeReplacement": False, "TASFailedNodeReplacementFailFast": False,
      "TASReplaceNodeOnPodTermination": False, "TASProfileMixed": False}, True),
    ("ElasticJobsViaWorkloadSlicesWithTAS requires ElasticJobsViaWorkloadSlices",
     {"ElasticJobsViaWorkloadSlicesWithTAS": True, "TopologyAwareScheduling": True,
      "ElasticJobsViaWorkloadSlices": False, "TASProfileMixed": False}, True),
    ("ElasticJobsViaWorkloadSlicesWithTAS valid when all dependencies enabled",
     {"ElasticJobsViaWorkloadSlicesWithTAS": True, "ElasticJobsViaWorkloadSlices": True,
      "TopologyAwareScheduling": True, "TASProfileMixed": False}, False),
    ("KueueDRAIntegrationConsumableCapacity requires KueueDRAIntegration",
     {"KueueDRAIntegrationConsumableCapacity": True, "KueueDRAIntegration": False,
      "KueueDRAIntegrationExtendedResource": False, "KueueDRAIntegrationPartitionableDevices": False}, True),
    ("UnadmittedWorkloadsExplicitStatus requires UnadmittedWorkloadsObservability",
     {"UnadmittedWorkloadsExplicitStatus": True, "UnadmittedWorkloadsObservability": False}, True),
    ("TASHandleOverlappingFlavors valid when all dependencies enabled",
     {"TopologyAwareScheduling": True, "TASHandleOverlappingFlavors": True}, False),
    ("TASRespectNodeAffinityPreferred requires TopologyAwareScheduling",
     {**TAS_OFF, "TASRespectNodeAffinityPreferred": True}, True),
    ("TASReplaceNodeOnPodTermination requires TASFailedNodeReplacement",
     {"TopologyAwareScheduling": True, "TASFailedNodeReplacement": False,
      "TASFailedNodeReplacementFailFast": False, "TASReplaceNodeOnPodTermination": True}, True),
    ("all TAS sub-features valid when TopologyAwareScheduling and TASFailedNodeReplacement enabled",
     {"TopologyAwareScheduling": True, "TASFailedNodeReplacement": True,
      "TASFailedNodeReplacementFailFast": True, "TASReplaceNodeOnPodTermination": True,
      "TASBalancedPlacement": True, "TASReplaceNodeOnNodeTaints": True, "TASMultiLayerTopology": True,
      "TASRespectNodeAffinityPreferred": True, "TASHandleOverlappingFlavors": True}, False),
]


@pytest.mark.parametrize(("gates", "refused"),
                         [pytest.param(gates, refused, id=name) for name, gates, refused in GATE_CASES])
def test_kueue_s_feature_gate_case(gates: dict, refused: bool) -> None:
    """Whether Kueue starts on the gates: the same decision. The words differ on purpose: the stored
    validation.go says "X requires Y to be enabled" itself; v0.20 leaves the dependencies to the gate
    library, whose words kueue-es says (:data:`projections.gates.DEPENDENCIES`)."""
    doc = {**V1BETA2, "featureGates": gates}
    if not refused:
        load_config(doc)
        return
    with pytest.raises(InvalidInput, match=r"field `featureGates`: Invalid value: .*depends on features"):
        load_config(doc)
