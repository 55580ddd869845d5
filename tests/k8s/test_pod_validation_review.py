"""Kueue's validating Pod webhook (``vpod.kb.io``): with the pod integration on, what Kueue refuses in a Pod on
creation (its labels, the managed label, a malformed pod group) and on update (a queue name or group name changed,
a group's unretriable Pod made retriable, ...), in Kueue's words; with it off, every Pod allowed. And its
registration beside ``vjob.kb.io``."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import msgspec
import pytest

from connectors.k8s import pod_validation
from connectors.k8s.certs import self_signed
from connectors.k8s.pod_webhook import allowed_as_is
from connectors.k8s.validating import configuration
from connectors.k8s.webhook import WebhookServer

Q = "kueue.x-k8s.io/queue-name"
GROUP = "kueue.x-k8s.io/pod-group-name"
TOTAL = "kueue.x-k8s.io/pod-group-total-count"
RETRIABLE = "kueue.x-k8s.io/retriable-in-group"
MANAGED = "kueue.x-k8s.io/managed"
GATE = [{"name": "kueue.x-k8s.io/admission"}]
BOTH = f"both the '{TOTAL}' annotation and the '{GROUP}' label should be set"


def pod(labels: dict | None = None, annotations: dict | None = None, *, gated: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "team", "labels": {Q: "lq", **(labels or {})}}
    if annotations is not None:
        meta["annotations"] = annotations
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if gated:
        spec["schedulingGates"] = GATE
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _review(new: dict, old: dict | None = None, *, default_queue: bool = False, gates: dict | None = None) -> dict:
    async def has_default_queue(namespace: str) -> bool:
        return default_queue

    request: dict[str, Any] = {"uid": "u", "operation": "UPDATE" if old else "CREATE", "namespace": "team",
                               "object": new}
    if old is not None:
        request["oldObject"] = old
    body = msgspec.json.encode({"request": request})
    return asyncio.run(pod_validation.review(body, gates or {}, has_default_queue))["response"]


def _message(response: dict) -> str:
    assert response["allowed"] is False and response["status"]["code"] == 403
    return response["status"]["message"]


# --- create ------------------------------------------------------------------------------------------------------

def test_a_well_formed_pod_is_allowed() -> None:
    assert _review(pod())["allowed"] is True
    assert _review(pod({GROUP: "g", MANAGED: "true"}, {TOTAL: "2"}))["allowed"] is True


@pytest.mark.parametrize(("labels", "annotations", "want"), [
    ({GROUP: "g"}, {}, f"metadata.annotations[{TOTAL}]: Required value: {BOTH}"),
    ({}, {TOTAL: "2"}, f"metadata.labels[{GROUP}]: Required value: {BOTH}"),
    ({GROUP: "g"}, {TOTAL: "0"}, f"metadata.annotations[{TOTAL}]: Invalid value: \"0\": incorrect annotation value "
                                 f"'{TOTAL}=0': group total count should be greater than zero"),
    ({MANAGED: "yes"}, {}, f"metadata.labels[{MANAGED}]: Forbidden: managed label value can only be 'true'"),
    ({"kueue.x-k8s.io/max-exec-time-seconds": "0"}, {},
     "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: 0: should be greater than 0"),
])
def test_what_kueue_refuses_in_a_new_pod(labels: dict, annotations: dict, want: str) -> None:
    assert _message(_review(pod(labels, annotations))) == want


def test_several_errors_are_joined() -> None:
    assert _message(_review(pod({GROUP: "g", MANAGED: "no"}))) == (
        f"[metadata.labels[{MANAGED}]: Forbidden: managed label value can only be 'true', "
        f"metadata.annotations[{TOTAL}]: Required value: {BOTH}]")


def test_a_group_named_in_an_annotation_is_checked_there_under_workload_identifier_annotations() -> None:
    """Kueue's ``GetPodGroupName``: under the gate (beta, on) the ``kueue.x-k8s.io/pod-group-name`` annotation names
    the group, and the errors say so; off, the annotation is no group name."""
    both = f"both the '{TOTAL}' annotation and the '{GROUP}' annotation should be set"
    assert _message(_review(pod({}, {GROUP: "g"}))) == f"metadata.annotations[{TOTAL}]: Required value: {both}"
    assert _message(_review(pod({}, {GROUP: "G", TOTAL: "2"}))).startswith(
        f'metadata.annotations[{GROUP}]: Invalid value: "G": a lowercase RFC 1123 subdomain')
    assert _review(pod({}, {GROUP: "g", TOTAL: "2"}))["allowed"] is True
    off = {"WorkloadIdentifierAnnotations": False}
    assert _review(pod({}, {GROUP: "g"}), gates=off)["allowed"] is True, "no group, no count: nothing to check"
    assert _message(_review(pod({}, {GROUP: "g", TOTAL: "2"}), gates=off)) == (
        f"metadata.labels[{GROUP}]: Required value: {BOTH}")


def test_a_group_named_in_an_annotation_is_fixed_once_set() -> None:
    old = pod({GROUP: "g"}, {GROUP: "g", TOTAL: "2"})
    new = copy.deepcopy(old)
    new["metadata"]["annotations"][GROUP] = "h"
    assert _message(_review(new, old)) == f'metadata.annotations[{GROUP}]: Invalid value: "h": field is immutable'
    assert _review(new, old, gates={"WorkloadIdentifierAnnotations": False})["allowed"] is True, "the label is"


def test_a_groups_pod_naming_a_prebuilt_workload_names_its_groups() -> None:
    """Kueue's ``validatePrebuiltWorkloadName``, on create and update alike."""
    prebuilt = "kueue.x-k8s.io/prebuilt-workload-name"
    assert _review(pod({GROUP: "g", prebuilt: "g"}, {TOTAL: "2"}))["allowed"] is True
    assert _review(pod({prebuilt: "w"}))["allowed"] is True, "a Pod in no group: any"
    assert _message(_review(pod({GROUP: "g", prebuilt: "w"}, {TOTAL: "2"}))) == (
        f'metadata.labels[{prebuilt}]: Invalid value: "w": prebuilt workload and pod group should be equal')
    named = pod({GROUP: "g"}, {TOTAL: "2", prebuilt: "w"})
    assert _message(_review(named)) == (
        f'metadata.annotations[{prebuilt}]: Invalid value: "w": prebuilt workload and pod group should be equal')
    assert _review(named, gates={"WorkloadIdentifierAnnotations": False})["allowed"] is True, (
        "with the gate off a short name in the annotation is not read")
    assert _message(_review(named, copy.deepcopy(named))).endswith("prebuilt workload and pod group should be equal")


# --- update ------------------------------------------------------------------------------------------------------

def _relabelled(doc: dict, **labels: str) -> dict:
    out = copy.deepcopy(doc)
    out["metadata"]["labels"].update(labels)
    return out


def test_the_queue_name_is_fixed_once_the_pod_is_ungated() -> None:
    running = pod(gated=False)
    assert _message(_review(_relabelled(running, **{Q: "other"}), running)) == (
        f'metadata.labels[{Q}]: Invalid value: "other": field is immutable')
    gated = pod()
    assert _review(_relabelled(gated, **{Q: "other"}), gated)["allowed"] is True, "gated, it may change"


def test_ungating_is_allowed() -> None:
    """kueue-es's own write when the Pod's Workload is admitted."""
    assert _review(pod(gated=False), pod())["allowed"] is True


def test_the_queue_name_stays_in_a_namespace_with_a_default_queue() -> None:
    old, new = pod(), pod()
    del new["metadata"]["labels"][Q]
    assert _review(new, old)["allowed"] is True
    assert _message(_review(new, old, default_queue=True)) == (
        f'metadata.labels[{Q}]: Invalid value: "": queue-name must not be empty in namespace with default queue')


def test_the_group_name_is_fixed_once_set() -> None:
    old = pod({GROUP: "g"}, {TOTAL: "2"})
    assert _message(_review(_relabelled(old, **{GROUP: "h"}), old)) == (
        f'metadata.labels[{GROUP}]: Invalid value: "h": field is immutable')
    ungrouped = pod()
    joined = pod({GROUP: "g"}, {TOTAL: "2"})
    assert _review(joined, ungrouped)["allowed"] is True, "a Pod in no group may join one"


def test_a_groups_unretriable_pod_stays_unretriable() -> None:
    old = pod({GROUP: "g"}, {TOTAL: "2", RETRIABLE: "false"})
    new = copy.deepcopy(old)
    new["metadata"]["annotations"][RETRIABLE] = "true"
    assert _message(_review(new, old)) == (
        f"metadata.annotations[{RETRIABLE}]: Forbidden: unretriable pod group can't be converted to retriable")
    assert _review(old, new)["allowed"] is True, "a retriable one may become unretriable"


def test_an_update_is_checked_as_a_creation_for_the_group_and_managed_label() -> None:
    old = pod()
    assert _message(_review(_relabelled(old, **{MANAGED: "false"}), old)) == (
        f"metadata.labels[{MANAGED}]: Forbidden: managed label value can only be 'true'")


# --- TAS annotations ---------------------------------------------------------------------------------------------

REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
SLICE = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
LAYERS = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
MA = "metadata.annotations"
TAS_OFF = {"TopologyAwareScheduling": False, "TASMultiLayerTopology": False}


@pytest.mark.parametrize("gates", [{}, TAS_OFF], ids=["tas-on", "tas-off"])
@pytest.mark.parametrize(("annotations", "want"), [
    ({REQUIRED: "rack", PREFERRED: "block"},
     f'{MA}: Invalid value: must not contain more than one topology annotation: ["{REQUIRED}", "{PREFERRED}", '
     '"kueue.x-k8s.io/podset-unconstrained-topology"]'),
    ({SLICE_SIZE: "2"}, f"{MA}[{SLICE_SIZE}]: Forbidden: may not be set when '{SLICE}' is not specified"),
    ({REQUIRED: "rack", SLICE: "rack", SLICE_SIZE: "0"},
     f'{MA}[{SLICE_SIZE}]: Invalid value: "0": must be greater than or equal to 1'),
])
def test_a_pods_tas_annotations_are_held_to_kueues_rules_whatever_the_tas_gate(
        annotations: dict, want: str, gates: dict) -> None:
    """Kueue's Pod webhook checks them on every Pod it sees, managed or not, TopologyAwareScheduling on or off."""
    assert _message(_review(pod(annotations=annotations), gates=gates)) == want
    unmanaged = pod(annotations=annotations, gated=False)
    del unmanaged["metadata"]["labels"][Q]
    assert _message(_review(unmanaged, gates=gates)) == want
    assert _message(_review(unmanaged, unmanaged, gates=gates)) == want, "and again on every update"


@pytest.mark.parametrize("gates", [{}, TAS_OFF], ids=["tas-on", "tas-off"])
def test_a_pods_slice_may_exceed_its_pod_count(gates: dict) -> None:
    """No upper bound from a pod count on a Pod: a single Pod, or a group's, may ask for a larger slice."""
    assert _review(pod(annotations={REQUIRED: "rack", SLICE: "rack", SLICE_SIZE: "8"}), gates=gates)["allowed"]
    grouped = pod({GROUP: "g"}, {TOTAL: "2", REQUIRED: "rack", SLICE: "rack", SLICE_SIZE: "4"})
    assert _review(grouped, gates=gates)["allowed"] is True


def test_a_pods_slice_layers_need_the_multi_layer_gate() -> None:
    layers = '[{"topology": "block", "size": 8}, {"topology": "rack", "size": 3}]'
    assert _message(_review(pod(annotations={REQUIRED: "block", LAYERS: layers}))) == (
        f"{MA}[{LAYERS}][1].size: Invalid value: 3: must evenly divide the parent layer size 8")
    assert _message(_review(pod(annotations={REQUIRED: "block", LAYERS: layers}), gates=TAS_OFF)) == (
        f"{MA}[{LAYERS}]: Forbidden: the TASMultiLayerTopology feature gate must be enabled to use this annotation")


def test_tas_errors_follow_the_group_metadata() -> None:
    assert _message(_review(pod({GROUP: "g"}, {SLICE_SIZE: "2"}))) == (
        f"[{MA}[{TOTAL}]: Required value: {BOTH}, "
        f"{MA}[{SLICE_SIZE}]: Forbidden: may not be set when '{SLICE}' is not specified]")


# --- the server: the integration on or off ------------------------------------------------------------------------

class _Request:
    def __init__(self, body: bytes) -> None:
        self.body = body

    async def read(self) -> bytes:
        return self.body


@pytest.mark.parametrize("on", [True, False])
def test_with_the_pod_integration_off_every_pod_is_allowed(on: bool) -> None:
    async def no_default(*_: object) -> bool:
        return False

    validations = pod_validation.reviewer({}, no_default) if on else allowed_as_is
    server = WebhookServer(no_default, pod_validations=validations)
    body = msgspec.json.encode({"request": {"uid": "u-9", "operation": "CREATE", "namespace": "team",
                                            "object": pod({GROUP: "g"})}})

    async def answer() -> dict:
        resp = await server._validate("Pod", _Request(body))  # type: ignore[arg-type]
        return msgspec.json.decode(resp.body)["response"]

    response = asyncio.run(answer())
    assert response["uid"] == "u-9" and response["allowed"] is not on
    assert server.validations == 1 and server.validations_refused == int(on)


# --- registration ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("pods", [True, False])
def test_registered_beside_the_job_webhook_for_pods_outside_the_excluded_namespaces(pods: bool) -> None:
    """Fail-closed only while the pod integration is on, as Kueue's manifests register it: off, a webhook that
    cannot be reached must not stop every Pod in the cluster."""
    doc = configuration(self_signed(["127.0.0.1"]).ca_pem, service=("kueue-es-webhook", "kueue-system", 443),
                        excluded_namespaces=("kube-system", "kueue-es"), pods=pods)
    names = [h["name"] for h in doc["webhooks"]]
    assert names.index("vpod.kb.io") == names.index("vjob.kb.io") + 1
    hook = doc["webhooks"][names.index("vpod.kb.io")]
    assert hook["clientConfig"]["service"]["path"] == pod_validation.PATH == "/validate--v1-pod"
    assert hook["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                              "resources": ["pods"], "scope": "Namespaced"}]
    assert hook["failurePolicy"] == ("Fail" if pods else "Ignore") and hook["sideEffects"] == "None"
    assert doc["webhooks"][names.index("vjob.kb.io")]["failurePolicy"] == "Fail"
    assert hook["namespaceSelector"] == {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "kueue-es"]}]}


def test_a_pods_false_unconstrained_annotation_is_refused_under_tas_reject_false_unconstrained_topology() -> None:
    unconstrained = "kueue.x-k8s.io/podset-unconstrained-topology"
    false_one = pod(annotations={unconstrained: "false"})
    assert _message(_review(false_one)) == f'{MA}[{unconstrained}]: Invalid value: "false": must be "true" when set'
    assert _review(false_one, gates={"TASRejectFalseUnconstrainedTopology": False})["allowed"] is True
    assert _review(pod(annotations={unconstrained: "true"}))["allowed"] is True
