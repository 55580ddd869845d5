"""The validating webhooks ratchet the CRD markers (:mod:`events.crd_markers`) on update, as the apiserver
ratchets a CRD's validation (KEP-4008, GA in Kubernetes 1.33): an update that leaves a field the old object
already broke a marker with as it was is taken, so that an object stored under an older, laxer CRD stays
updatable (its status written, a label added); a changed value, and any create, is held to the marker."""

from __future__ import annotations

import copy
from typing import Any

from connectors.k8s.validating import refusal

V1B2 = "kueue.x-k8s.io/v1beta2"
TOO_LONG_REQUIRED = ("field `spec.podSets[0].topologyRequest.required`: Too long: may not be more than 63 "
                     "bytes")
TOO_LONG_DESCRIPTION = "field `description`: Too long: may not be more than 2048 bytes"


def _workload(required: str) -> dict[str, Any]:
    pod_set = {"name": "main", "count": 1, "topologyRequest": {"required": required},
               "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}
    return {"apiVersion": V1B2, "kind": "Workload", "metadata": {"name": "w", "namespace": "ns", "uid": "u1"},
            "spec": {"queueName": "lq", "podSets": [pod_set]}}


def _with_status(doc: dict[str, Any]) -> dict[str, Any]:
    return {**copy.deepcopy(doc), "status": {"conditions": [
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "m",
         "lastTransitionTime": "2024-01-01T00:00:00Z"}]}}


def _priority_class(description: str, value: int = 1, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": V1B2, "kind": "WorkloadPriorityClass", "metadata": {"name": "p", **meta},
            "value": value, "description": description}


def test_a_status_write_of_a_workload_keeping_a_too_long_topology_is_allowed() -> None:
    stored = _workload("x" * 64)
    assert TOO_LONG_REQUIRED in str(refusal("Workload", "CREATE", stored, None, {})), "a create stays strict"
    assert refusal("Workload", "UPDATE", _with_status(stored), stored, {}) is None


def test_changing_a_too_long_topology_to_another_too_long_one_is_refused() -> None:
    stored = _workload("x" * 64)
    changed = _workload("y" * 64)
    assert TOO_LONG_REQUIRED in str(refusal("Workload", "UPDATE", changed, stored, {}))


def test_a_marker_broken_anew_elsewhere_is_refused_while_the_kept_one_is_not_reported() -> None:
    stored = _workload("x" * 64)
    new = _with_status(stored)
    new["status"]["admissionChecks"] = [{"name": "ac", "state": "Unknown", "message": "",
                                         "lastTransitionTime": "2024-01-01T00:00:00Z"}]
    words = str(refusal("Workload", "UPDATE", new, stored, {}))
    assert "status.admissionChecks[0].state" in words and "topologyRequest" not in words


def test_a_label_added_to_a_priority_class_keeping_a_too_long_description_is_allowed() -> None:
    stored = _priority_class("d" * 2049)
    assert TOO_LONG_DESCRIPTION in str(refusal("WorkloadPriorityClass", "CREATE", stored, None, {}))
    labelled = _priority_class("d" * 2049, labels={"a": "b"})
    assert refusal("WorkloadPriorityClass", "UPDATE", labelled, stored, {}) is None
    rewritten = _priority_class("e" * 2049, labels={"a": "b"})
    assert TOO_LONG_DESCRIPTION in str(refusal("WorkloadPriorityClass", "UPDATE", rewritten, stored, {}))


def test_a_label_added_to_a_cluster_queue_with_an_empty_admission_scope_is_allowed() -> None:
    stored = {"apiVersion": V1B2, "kind": "ClusterQueue", "metadata": {"name": "cq"},
              "spec": {"admissionScope": {}}}
    missing = "field `spec.admissionScope.admissionMode`: Required value"
    assert missing in str(refusal("ClusterQueue", "CREATE", stored, None, {}))
    labelled = {**copy.deepcopy(stored), "metadata": {"name": "cq", "labels": {"a": "b"}}}
    assert refusal("ClusterQueue", "UPDATE", labelled, stored, {}) is None
    moded = copy.deepcopy(labelled)
    moded["spec"]["admissionScope"]["admissionMode"] = "Sometimes"
    assert "spec.admissionScope.admissionMode" in str(refusal("ClusterQueue", "UPDATE", moded, stored, {}))


def test_an_integer_kept_past_its_format_is_ratcheted_and_one_changed_is_not() -> None:
    """The integer formats (``int32``) ratchet as the markers do: a priority class stored with a value past
    int32 takes a label, not a new value past it."""
    stored = _priority_class("d", value=2**31)
    out_of_range = ("field `value`: Invalid value: 2147483648: Checked value must be of type integer with "
                    "format int32")
    assert out_of_range in str(refusal("WorkloadPriorityClass", "CREATE", stored, None, {}))
    labelled = _priority_class("d", labels={"a": "b"}, value=2**31)
    assert refusal("WorkloadPriorityClass", "UPDATE", labelled, stored, {}) is None
    changed = _priority_class("d", value=2**31 + 1)
    refused = refusal("WorkloadPriorityClass", "UPDATE", changed, stored, {})
    assert "field `value`: Invalid value: 2147483649" in str(refused)


def _flavor(weights: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": V1B2, "kind": "ResourceFlavor", "metadata": {"name": "spot"},
            "spec": {"resourceWeights": weights, **spec}}


def test_a_flavor_stored_with_a_weight_that_is_no_quantity_takes_an_update_of_another_field() -> None:
    """kueue-es's CRD has no quantity pattern on ``resourceWeights``, so such a weight can be stored (the
    webhook bypassed); Kueue's CRD types it a quantity, which the apiserver ratchets while it stays as it was.
    A changed weight, and one added, are still refused."""
    stored = _flavor({"cpu": "heavy"})
    assert "spec.resourceWeights[cpu]" in str(refusal("ResourceFlavor", "CREATE", stored, None, {}))
    assert refusal("ResourceFlavor", "UPDATE", _flavor({"cpu": "heavy"}, nodeLabels={"pool": "spot"}),
                   stored, {}) is None
    changed = refusal("ResourceFlavor", "UPDATE", _flavor({"cpu": "heavier"}), stored, {})
    assert 'spec.resourceWeights[cpu]`: Invalid value: "heavier"' in str(changed)
    added = str(refusal("ResourceFlavor", "UPDATE", _flavor({"cpu": "heavy", "memory": "big"}), stored, {}))
    assert "spec.resourceWeights[memory]" in added and "spec.resourceWeights[cpu]" not in added
