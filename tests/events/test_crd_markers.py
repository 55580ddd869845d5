"""The enums and limits Kueue's CRD markers put on its fields: the CRDs kueue-es generates carry them (so the
apiserver refuses what Kueue's CRD refuses), and ``kueue-es import`` and the validating webhooks refuse the
same objects, in the apiserver's words."""

from __future__ import annotations

from typing import Any

import pytest

from connectors.k8s.crds import SERVED_VERSIONS, object_schema
from connectors.k8s.resources import BY_KIND, KUEUE_RESOURCES
from events.errors import InvalidInput, SchemaRefused
from events.field_errors import CEL_NOT_CHECKED
from events.manifests import decode_object
from events.object_rules import WorkloadRefused

STATE_VALUES = '"Pending", "Ready", "Retry", "Rejected"'
MODE_VALUES = '"UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing"'


def _workload(**topology: str) -> dict[str, Any]:
    pod_set: dict[str, Any] = {"name": "main", "count": 1,
                               "template": {"spec": {"containers": [{"name": "c"}]}}}
    if topology:
        pod_set["topologyRequest"] = topology
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "ns"}, "spec": {"podSets": [pod_set]}}


def _with_check_state(state: str) -> dict[str, Any]:
    doc = _workload()
    doc["status"] = {"admissionChecks": [{"name": "ac", "state": state,
                                          "lastTransitionTime": "2024-01-01T00:00:00Z", "message": ""}]}
    return doc


def _cluster_queue(scope: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
            "spec": {"admissionScope": scope}}


def _priority_class(**fields: Any) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
            "metadata": {"name": "p"}, **fields}


def _refusal(doc: dict[str, Any]) -> list[str]:
    """The errors of the CRD's rules ``doc`` is refused for (a Workload's are kept apart from its
    webhook's)."""
    with pytest.raises(InvalidInput) as info:
        decode_object(doc, "object")
    if isinstance(info.value, WorkloadRefused):
        assert not info.value.webhook
        return info.value.schema
    assert isinstance(info.value, SchemaRefused)
    return info.value.errors


@pytest.mark.parametrize(("doc", "errors"), [
    (_with_check_state("Bogus"),
     [f'field `status.admissionChecks[0].state`: Unsupported value: "Bogus": supported values: '
      f"{STATE_VALUES}"]),
    (_cluster_queue({"admissionMode": "UsageBasedAdmissionFairsharing"}),
     ['field `spec.admissionScope.admissionMode`: Unsupported value: "UsageBasedAdmissionFairsharing": '
      f"supported values: {MODE_VALUES}", CEL_NOT_CHECKED]),
    (_cluster_queue({}), ["field `spec.admissionScope.admissionMode`: Required value", CEL_NOT_CHECKED]),
    (_priority_class(description="d"), ["field `value`: Required value"]),
    (_priority_class(value=1, description="d" * 2049),
     ["field `description`: Too long: may not be more than 2048 bytes"]),
    (_workload(required="r" * 64, preferred="p" * 64, podSetSliceRequiredTopology="s" * 64,
               podIndexLabel="i" * 318, subGroupIndexLabel="g" * 318, podSetGroupName="n" * 257),
     [f"field `spec.podSets[0].topologyRequest.{field}`: Too long: may not be more than {most} bytes"
      for field, most in (("required", 63), ("preferred", 63), ("podIndexLabel", 317),
                          ("subGroupIndexLabel", 317), ("podSetGroupName", 256),
                          ("podSetSliceRequiredTopology", 63))]),
])
def test_a_value_kueue_s_crd_refuses_is_refused_naming_its_field(doc: dict[str, Any],
                                                                 errors: list[str]) -> None:
    assert _refusal(doc) == errors


@pytest.mark.parametrize("doc", [
    *(_with_check_state(s) for s in ("Pending", "Ready", "Retry", "Rejected")),
    _cluster_queue({"admissionMode": "NoAdmissionFairSharing"}),
    _priority_class(value=0),
    _priority_class(value=5, description="d" * 2048),
    _workload(required="r" * 63, podIndexLabel="i" * 317, podSetGroupName="n" * 256),
])
def test_the_values_at_the_limits_are_taken(doc: dict[str, Any]) -> None:
    decode_object(doc, "object")


def _at(schema: dict[str, Any], *path: str) -> dict[str, Any]:
    node = schema
    for step in path:
        node = node["items"] if step == "[]" else node["properties"][step]
    return node


@pytest.mark.parametrize("version", SERVED_VERSIONS)
def test_the_generated_crds_carry_the_markers(version: str) -> None:
    wl = object_schema(BY_KIND["Workload"], version)
    assert _at(wl, "status", "admissionChecks", "[]", "state")["enum"] == ["Pending", "Ready", "Retry",
                                                                           "Rejected"]
    topology = _at(wl, "spec", "podSets", "[]", "topologyRequest")
    assert {k: topology["properties"][k].get("maxLength") for k in topology["properties"]
            if k != "unconstrained" and topology["properties"][k]["type"] == "string"} == {
        "required": 63, "preferred": 63, "podIndexLabel": 317, "subGroupIndexLabel": 317,
        "podSetGroupName": 256, "podSetSliceRequiredTopology": 63}
    scope = _at(object_schema(BY_KIND["ClusterQueue"], version), "spec", "admissionScope")
    assert scope["required"] == ["admissionMode"]
    assert scope["properties"]["admissionMode"]["enum"] == ["UsageBasedAdmissionFairSharing",
                                                            "NoAdmissionFairSharing"]
    wpc = object_schema(BY_KIND["WorkloadPriorityClass"], version)
    assert wpc["required"] == ["value"] and wpc["properties"]["description"]["maxLength"] == 2048


def _status(**status: Any) -> dict[str, Any]:
    return {**_workload(), "status": status}


CHECK = {"name": "ac", "state": "Pending", "lastTransitionTime": "2024-01-01T00:00:00Z"}


@pytest.mark.parametrize(("doc", "errors"), [
    (_status(clusterName="c" * 257),
     ["field `status.clusterName`: Too long: may not be more than 256 bytes"]),
    (_status(nominatedClusterNames=[f"w{i}" for i in range(21)]),
     ["field `status.nominatedClusterNames`: Too many: 21: must have at most 20 items"]),
    (_status(requeueState={"count": -1}),
     ["field `status.requeueState.count`: Invalid value: -1: "
      "status.requeueState.count in body should be greater than or equal to 0"]),
    (_status(schedulingStats={"evictions": [{"reason": "r" * 317, "underlyingCause": "", "count": -2}]}),
     ["field `status.schedulingStats.evictions[0].reason`: Too long: may not be more than 316 bytes",
      "field `status.schedulingStats.evictions[0].count`: Invalid value: -2: "
      "status.schedulingStats.evictions[0].count in body should be greater than or equal to 0"]),
    (_status(schedulingStats={"evictions": [{"reason": f"R{i}", "underlyingCause": "", "count": 1}
                                            for i in range(257)]}),
     ["field `status.schedulingStats.evictions`: Too many: 257: must have at most 256 items"]),
    (_status(admissionChecks=[{**CHECK, "message": "m" * 32769}]),
     ["field `status.admissionChecks[0].message`: Too long: may not be more than 32768 bytes"]),
    (_status(admissionChecks=[{**CHECK, "podSetUpdates": [{"name": "main"}] * 9}]),
     ["field `status.admissionChecks[0].podSetUpdates`: Too many: 9: must have at most 8 items"]),
    # Kueue's PodSetAssignment.count: +kubebuilder:validation:Minimum=0 (oracle-webhooks)
    (_status(admission={"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": -1}]}),
     ["field `status.admission.podSetAssignments[0].count`: Invalid value: -1: "
      "status.admission.podSetAssignments[0].count in body should be greater than or equal to 0"]),
])
def test_a_status_beyond_kueue_s_crd_bounds_is_refused(doc: dict[str, Any], errors: list[str]) -> None:
    """Fields Kueue writes itself, so only an imported status or another controller's can break them."""
    assert _refusal(doc) == errors


def test_the_generated_workload_crd_carries_the_status_bounds() -> None:
    status = object_schema(BY_KIND["Workload"])["properties"]["status"]
    assert _at(status, "clusterName")["maxLength"] == 256
    assert _at(status, "nominatedClusterNames")["maxItems"] == 20
    assert _at(status, "requeueState", "count")["minimum"] == 0
    assert _at(status, "admission", "podSetAssignments", "[]", "count")["minimum"] == 0
    assert _at(status, "admission", "podSetAssignments", "[]", "name")["default"] == "main"  # Kueue's default
    evictions = _at(status, "schedulingStats", "evictions")
    assert evictions["maxItems"] == 256
    assert (_at(evictions, "[]", "reason")["maxLength"]
            == _at(evictions, "[]", "underlyingCause")["maxLength"] == 316)
    assert _at(evictions, "[]", "count")["minimum"] == 0
    check = _at(status, "admissionChecks", "[]")
    assert _at(check, "message")["maxLength"] == 32768 and _at(check, "podSetUpdates")["maxItems"] == 8


INT32_MAX = 2**31 - 1


def _int32_error(path: str, value: int) -> str:
    return (f"field `{path}`: Invalid value: {value}: Checked value must be of type integer with format "
            f"int32 in {path}")


def _priority(priority: int) -> dict[str, Any]:
    doc = _workload()
    doc["spec"]["priority"] = priority
    return doc


def _count(count: int, **pod_set: Any) -> dict[str, Any]:
    doc = _workload()
    doc["spec"]["podSets"][0].update(count=count, **pod_set)
    return doc


@pytest.mark.parametrize(("doc", "errors"), [
    (_priority(2**31), [_int32_error("spec.priority", 2**31)]),
    (_count(3_000_000_000), [_int32_error("spec.podSets[0].count", 3_000_000_000)]),
    (_count(1, topologyRequest={"podSetSliceRequiredTopology": "r", "podSetSliceSize": 2**31}),
     [_int32_error("spec.podSets[0].topologyRequest.podSetSliceSize", 2**31)]),
    (_status(requeueState={"count": 2**31}), [_int32_error("status.requeueState.count", 2**31)]),
    (_priority_class(value=3_000_000_000), [_int32_error("value", 3_000_000_000)]),
    ({**_cluster_queue({}), "spec": {"preemption": {"reclaimWithinCohort": "Any", "borrowWithinCohort": {
        "policy": "LowerPriority", "maxPriorityThreshold": 2**31}}}},
     [_int32_error("spec.preemption.borrowWithinCohort.maxPriorityThreshold", 2**31)]),
    ({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ProvisioningRequestConfig",
      "metadata": {"name": "prc"},
      "spec": {"provisioningClassName": "c", "retryStrategy": {"backoffMaxSeconds": 2**32}}},
     [_int32_error("spec.retryStrategy.backoffMaxSeconds", 2**32)]),
])
def test_an_int32_out_of_range_is_refused_in_the_apiserver_s_words(doc: dict[str, Any],
                                                                    errors: list[str]) -> None:
    """Kueue's CRDs declare these fields ``format: int32``, which the apiserver holds a value to (it names the
    field but shows the value as ``""``; kueue-es shows it)."""
    assert _refusal(doc) == errors


@pytest.mark.parametrize("doc", [
    _priority(-(2**31)),
    _count(INT32_MAX),
    _priority_class(value=INT32_MAX),
    _priority_class(value=-(2**31)),
])
def test_the_int32_bounds_are_taken(doc: dict[str, Any]) -> None:
    decode_object(doc, "object")


@pytest.mark.parametrize("version", SERVED_VERSIONS)
def test_the_generated_crds_carry_kueue_s_integer_formats(version: str) -> None:
    """Every integer field of every kind, in both versions, carries the format Kueue's Go type gives it."""
    wl = object_schema(BY_KIND["Workload"], version)
    spec, status = wl["properties"]["spec"], wl["properties"]["status"]
    pod_set = _at(spec, "podSets", "[]")
    for node in (_at(spec, "priority"), _at(spec, "maximumExecutionTimeSeconds"), _at(pod_set, "count"),
                 _at(pod_set, "minCount"), _at(pod_set, "topologyRequest", "podSetSliceSize"),
                 _at(pod_set, "template", "spec", "containers", "[]", "ports", "[]", "containerPort"),
                 _at(status, "requeueState", "count"),
                 _at(status, "admission", "podSetAssignments", "[]", "count"),
                 _at(status, "admissionChecks", "[]", "retryCount"),
                 _at(status, "reclaimablePods", "[]", "count")):
        assert node["format"] == "int32", node
    assert _at(pod_set, "template", "spec", "tolerations", "[]", "tolerationSeconds")["format"] == "int64"
    assert _at(status, "conditions", "[]", "observedGeneration")["format"] == "int64"
    wpc = object_schema(BY_KIND["WorkloadPriorityClass"], version)
    assert wpc["properties"]["value"]["format"] == "int32"
    cq = object_schema(BY_KIND["ClusterQueue"], version)
    assert _at(cq, "spec", "preemption", "borrowWithinCohort", "maxPriorityThreshold")["format"] == "int32"
    prc = object_schema(BY_KIND["ProvisioningRequestConfig"], version)
    assert _at(prc, "spec", "retryStrategy", "backoffLimitCount")["format"] == "int32"
    for resource in KUEUE_RESOURCES:
        assert not list(_unformatted(object_schema(resource, version), resource.kind)), resource.kind


def _unformatted(node: dict[str, Any], at: str) -> Any:
    """The integer fields under ``node`` that carry no format (an int-or-string quantity is none)."""
    if node.get("type") == "integer" and "format" not in node:
        yield at
    for name, child in node.get("properties", {}).items():
        yield from _unformatted(child, f"{at}.{name}")
    if "items" in node:
        yield from _unformatted(node["items"], f"{at}[]")


CLASS_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
KEY_PATTERN = (r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
               r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$")
"""Kueue's ``provisioningrequestconfig_types.go`` patterns: the class name a DNS subdomain, a node-selector
key a label key."""


def _prc(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ProvisioningRequestConfig",
            "metadata": {"name": "prc"}, "spec": spec}


def _selector(key: str, detail: str = "d") -> dict[str, str]:
    return {"key": key, "valueFromProvisioningClassDetail": detail}


@pytest.mark.parametrize(("doc", "errors"), [
    (_prc(provisioningClassName="Check_Capacity", managedResources=["cpu", "gpu", "cpu"],
          podSetUpdates={"nodeSelector": [_selector("bad key!", ""), _selector("pool"),
                                          _selector("bad key!")]}),
     ["field `spec.provisioningClassName`: Invalid value: \"Check_Capacity\": "
      f"spec.provisioningClassName in body should match '{CLASS_PATTERN}'",
      "field `spec.podSetUpdates.nodeSelector[0].key`: Invalid value: \"bad key!\": "
      f"spec.podSetUpdates.nodeSelector[0].key in body should match '{KEY_PATTERN}'",
      "field `spec.podSetUpdates.nodeSelector[2].key`: Invalid value: \"bad key!\": "
      f"spec.podSetUpdates.nodeSelector[2].key in body should match '{KEY_PATTERN}'",
      "field `spec.podSetUpdates.nodeSelector[0].valueFromProvisioningClassDetail`: Invalid value: \"\": "
      "spec.podSetUpdates.nodeSelector[0].valueFromProvisioningClassDetail in body should be at least 1 "
      "chars long",
      'field `spec.managedResources[2]`: Duplicate value: "cpu"',
      'field `spec.podSetUpdates.nodeSelector[2]`: Duplicate value: {"key":"bad key!"}']),
    (_prc(), ["field `spec.provisioningClassName`: Required value"]),
    (_prc(provisioningClassName="c" * 254, podSetMergePolicy="Identical",
          parameters={**{f"p{i}": "v" for i in range(100)}, "long": "v" * 256}),
     ["field `spec.provisioningClassName`: Too long: may not be more than 253 bytes",
      "field `spec.parameters`: Too many: 101: must have at most 100 items",
      "field `spec.parameters.long`: Too long: may not be more than 255 bytes",
      'field `spec.podSetMergePolicy`: Unsupported value: "Identical": supported values: '
      '"IdenticalPodTemplates", "IdenticalWorkloadSchedulingRequirements"']),
    (_prc(provisioningClassName="c", managedResources=[f"r{i}" for i in range(101)],
          podSetUpdates={"nodeSelector": [_selector(f"k{i}") for i in range(9)]}),
     ["field `spec.managedResources`: Too many: 101: must have at most 100 items",
      "field `spec.podSetUpdates.nodeSelector`: Too many: 9: must have at most 8 items"]),
    (_prc(provisioningClassName="c", podSetUpdates={"nodeSelector": [_selector("k" * 318, "d" * 32769)]}),
     ["field `spec.podSetUpdates.nodeSelector[0].key`: Too long: may not be more than 317 bytes",
      "field `spec.podSetUpdates.nodeSelector[0].valueFromProvisioningClassDetail`: Too long: may not be "
      "more than 32768 bytes"]),
])
def test_a_provisioning_request_config_breaking_kueue_s_crd_is_refused_in_the_apiserver_s_words(
        doc: dict[str, Any], errors: list[str]) -> None:
    """Kueue's ``provisioningrequestconfig_types.go`` markers (it has no webhook for the kind): the schema's
    errors, every one, then the list types' duplicates, as the apiserver validates a custom resource."""
    assert _refusal(doc) == errors


@pytest.mark.parametrize("doc", [
    _prc(provisioningClassName="check-capacity.autoscaling.x-k8s.io",
         parameters={f"p{i}": "v" * 255 for i in range(100)}, managedResources=[f"r{i}" for i in range(100)],
         podSetUpdates={"nodeSelector": [_selector("cloud.google.com/gke-nodepool", "d" * 32768),
                                         *(_selector(f"k{i}") for i in range(7))]},
         podSetMergePolicy="IdenticalWorkloadSchedulingRequirements"),
    _prc(provisioningClassName="c", retryStrategy={"backoffLimitCount": -1, "backoffBaseSeconds": -5,
                                                   "backoffMaxSeconds": -(2**31)}),
])
def test_a_provisioning_request_config_within_kueue_s_crd_is_taken(doc: dict[str, Any]) -> None:
    """Kueue's CRD puts no minimum on the retry strategy: a negative value is stored (and acted on sanely)."""
    decode_object(doc, "object")


@pytest.mark.parametrize("version", SERVED_VERSIONS)
def test_the_generated_provisioning_request_config_crd_carries_kueue_s_markers(version: str) -> None:
    spec = _at(object_schema(BY_KIND["ProvisioningRequestConfig"], version), "spec")
    assert spec["required"] == ["provisioningClassName"]
    assert {k: v for k, v in spec["properties"]["provisioningClassName"].items() if k != "type"} == {
        "maxLength": 253, "minLength": 1, "pattern": CLASS_PATTERN}
    parameters = spec["properties"]["parameters"]
    assert parameters["maxProperties"] == 100 and parameters["additionalProperties"]["maxLength"] == 255
    managed = spec["properties"]["managedResources"]
    assert managed["maxItems"] == 100 and managed["x-kubernetes-list-type"] == "set"
    selectors = _at(spec, "podSetUpdates", "nodeSelector")
    assert (selectors["maxItems"], selectors["x-kubernetes-list-type"],
            selectors["x-kubernetes-list-map-keys"]) == (8, "map", ["key"])
    key, detail = (selectors["items"]["properties"][k] for k in ("key", "valueFromProvisioningClassDetail"))
    assert (key["minLength"], key["maxLength"], key["pattern"]) == (1, 317, KEY_PATTERN)
    assert (detail["minLength"], detail["maxLength"]) == (1, 32768)
    assert spec["properties"]["podSetMergePolicy"]["enum"] == ["IdenticalPodTemplates",
                                                               "IdenticalWorkloadSchedulingRequirements"]
    assert all("minimum" not in field for field in _at(spec, "retryStrategy")["properties"].values())
