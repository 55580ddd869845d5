"""The conversion webhook's answer to a ConversionReview, and the CRDs' v1beta1 schema and conversion stanza."""

from __future__ import annotations

import base64
from typing import Any

import msgspec
import pytest

from connectors.k8s import crds
from connectors.k8s.conversion import review
from connectors.k8s.resources import BY_KIND

V1, V2 = "kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2"


def _review(objects: Any, desired: str = V2, **over: Any) -> bytes:
    doc = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
           "request": {"uid": "u-1", "desiredAPIVersion": desired, "objects": objects}}
    return msgspec.json.encode({**doc, **over})


CQ = {"apiVersion": V1, "kind": "ClusterQueue", "metadata": {"name": "cq", "uid": "x", "resourceVersion": "7"},
      "spec": {"cohort": "all", "namespaceSelector": {}}}
WL = {"apiVersion": V1, "kind": "Workload", "metadata": {"name": "w", "namespace": "team"},
      "spec": {"queueName": "q", "priorityClassName": "high",
               "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass", "podSets": [{"name": "main"}]}}


def test_every_object_is_converted_in_order() -> None:
    out = review(_review([CQ, WL]))
    assert out["apiVersion"] == "apiextensions.k8s.io/v1" and out["kind"] == "ConversionReview"
    resp = out["response"]
    assert resp["uid"] == "u-1" and resp["result"] == {"status": "Success"}
    cq, wl = resp["convertedObjects"]
    assert cq == {"apiVersion": V2, "kind": "ClusterQueue", "metadata": CQ["metadata"],
                  "spec": {"cohortName": "all", "namespaceSelector": {}}}
    assert wl["apiVersion"] == V2 and wl["spec"] == {
        "queueName": "q", "podSets": [{"name": "main"}],
        "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}}
    back = review(_review(resp["convertedObjects"], V1))["response"]["convertedObjects"]
    assert back == [CQ, WL]


def test_an_empty_review_succeeds() -> None:
    assert review(_review([]))["response"] == {"uid": "u-1", "convertedObjects": [], "result": {"status": "Success"}}


@pytest.mark.parametrize(("body", "message"), [
    (_review([CQ, {**WL, "spec": {"priorityClassName": 3, "priorityClassSource":
                                  "kueue.x-k8s.io/workloadpriorityclass"}}]),
     "Workload team/w: field `spec.priorityClassName`: expected a string, got integer"),
    (_review([{"apiVersion": V1, "kind": "ClusterQueue", "spec": {"cohort": ["a"]}}]),
     "object 0 (ClusterQueue): field `spec.cohort`: expected a string, got array"),
    (_review([CQ], "kueue.x-k8s.io/v1alpha1"),
     "ClusterQueue cq: cannot convert to 'kueue.x-k8s.io/v1alpha1'"),
    (_review("all of them"), "ConversionReview: field `request.objects`: expected an array of objects"),
    (_review([CQ], ""), "ConversionReview: field `request.desiredAPIVersion` is required"),
    (_review([CQ], kind="AdmissionReview"), "not a ConversionReview of apiextensions.k8s.io/v1"),
    (msgspec.json.encode({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview"}),
     "ConversionReview: field `request` is required"),
])
def test_bad_input_fails_naming_the_object_and_the_field(body: bytes, message: str) -> None:
    resp = review(body)["response"]
    assert resp["convertedObjects"] == [], "all or nothing"
    assert resp["result"]["status"] == "Failure"
    assert resp["result"]["message"].startswith(message), resp["result"]["message"]


HOSTS = [f"{pool}-tpu-v5-litepod-workers-{n}" for pool in ("alpha", "bravo") for n in range(4)]
PLACED = {**WL, "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [{
    "name": "main", "flavors": {"cpu": "tas"}, "count": 8, "topologyAssignment": {
        "levels": ["kubernetes.io/hostname"], "domains": [{"values": [h], "count": 1} for h in HOSTS]}}]}}}


def _assignment(wl: dict) -> dict:
    return wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]


@pytest.mark.parametrize(("gates", "slices"), [
    ({}, [{"domainCount": 4, "valuesPerLevel": [{"individual": {"prefix": f"{pool}-tpu-v5-litepod-workers-",
                                                                "roots": ["0", "1", "2", "3"]}}],
           "podCounts": {"universal": 1}} for pool in ("alpha", "bravo")]),
    ({"TASAssignmentsEncodingByHostnamePrefix": False},
     [{"domainCount": 8, "valuesPerLevel": [{"individual": {"roots": HOSTS}}], "podCounts": {"universal": 1}}]),
])
def test_topology_assignments_are_written_as_the_encoding_gate_says(gates: dict, slices: list) -> None:
    """Kueue's conversion encodes a v1beta1 assignment through the same encoder as its scheduler, under
    TASAssignmentsEncodingByHostnamePrefix: a slice per node pool while it is on, one slice while it is off. The
    domains come back the same either way."""
    (v2,) = review(_review([PLACED]), gates)["response"]["convertedObjects"]
    assert _assignment(v2) == {"levels": ["kubernetes.io/hostname"], "slices": slices}
    (back,) = review(_review([v2], V1), gates)["response"]["convertedObjects"]
    assert back == PLACED
    (again,) = review(_review([back]), gates)["response"]["convertedObjects"]
    assert again == v2


def test_not_json_is_not_answered() -> None:
    with pytest.raises(msgspec.DecodeError):
        review(b"<ConversionReview/>")


def test_v1beta1_schema_uses_v1beta1_names() -> None:
    cq = crds.object_schema(BY_KIND["ClusterQueue"], "v1beta1")["properties"]["spec"]["properties"]
    assert "cohort" in cq and "cohortName" not in cq
    assert cq["admissionChecks"] == {"type": "array", "items": {"type": "string"}}
    v2 = crds.object_schema(BY_KIND["ClusterQueue"])["properties"]["spec"]["properties"]
    assert v2["cohortName"] == cq["cohort"]
    assert {k: v for k, v in cq.items() if k not in ("cohort", "admissionChecks")} == \
        {k: v for k, v in v2.items() if k != "cohortName"}
    wl = crds.object_schema(BY_KIND["Workload"], "v1beta1")["properties"]
    assert "priorityClassRef" not in wl["spec"]["properties"]
    assert wl["spec"]["properties"]["priorityClassSource"]["enum"] == [
        "kueue.x-k8s.io/workloadpriorityclass", "scheduling.k8s.io/priorityclass", ""]
    assert "accumulatedPastExexcutionTimeSeconds" in wl["status"]["properties"]
    ta = wl["status"]["properties"]["admission"]["properties"]["podSetAssignments"]["items"]["properties"][
        "topologyAssignment"]["properties"]
    assert "domains" in ta and "slices" not in ta


def test_conversion_stanza() -> None:
    by_url = crds.webhook_conversion(b"CA", url="https://127.0.0.1:9443/")
    assert by_url == {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {
        "url": "https://127.0.0.1:9443/convert", "caBundle": base64.b64encode(b"CA").decode()}}}
    by_service = crds.webhook_conversion(service=("kueue-es-webhook", "kueue-system", 443))
    assert by_service["webhook"]["clientConfig"] == {"service": {
        "name": "kueue-es-webhook", "namespace": "kueue-system", "port": 443, "path": "/convert"}}
    assert all(d["spec"]["conversion"] == by_service for d in crds.all_crds(by_service))
    assert all(d["spec"]["conversion"] == {"strategy": "None"} for d in crds.all_crds())
    with pytest.raises(ValueError):
        crds.webhook_conversion(b"CA")
