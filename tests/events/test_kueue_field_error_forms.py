"""Refusals of Kueue's own kinds read as Kueue's field errors (``<path>: Invalid value: <bad>: <detail>``,
``Unsupported value: "x": supported values: ...``, ``Required value: ...``, ``Forbidden: ...``), and list every
error Kueue lists where it lists several (s37 review of its webhook tests: L2, L5, L6, L7, L8)."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest

from connectors.k8s.validating import refusal
from events.errors import InvalidInput
from events.field_errors import CEL_NOT_CHECKED
from events.manifests import check_foldable, decode_object
from events.objects import Workload

V1B2 = "kueue.x-k8s.io/v1beta2"
KEY_NAME = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
            "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
            "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
VALUE = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
         "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
         "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")


def _refused(doc: dict[str, Any]) -> str:
    meta = doc["metadata"]
    where = f"{doc['kind']} {meta['namespace'] + '/' if meta.get('namespace') else ''}{meta['name']}"
    with pytest.raises(InvalidInput) as refused:
        decode_object(copy.deepcopy(doc), where)
    webhook = refusal(doc["kind"], "CREATE", copy.deepcopy(doc), None, {})
    assert webhook == str(refused.value), "the webhook refuses as kueue-es import does"
    return str(refused.value)


def _workload(**status: Any) -> dict[str, Any]:
    return {"apiVersion": V1B2, "kind": "Workload", "metadata": {"name": "w", "namespace": "team"},
            "spec": {"queueName": "lq", "podSets": [{"name": "ps1", "count": 3, "template": {"spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]},
            "status": status}


def _flavor(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": V1B2, "kind": "ResourceFlavor", "metadata": {"name": "rf"}, "spec": spec}


# --- Workload: reclaimable pods (L2) ---------------------------------------------------------------------------


def test_every_bad_reclaimable_entry_is_listed_in_kueue_s_words() -> None:
    """Kueue's "invalid reclaimablePods": a count above its pod set's and a pod set that is not there, both."""
    assert _refused(_workload(reclaimablePods=[{"name": "ps1", "count": 4}, {"name": "ps2", "count": 1}])) == (
        "Workload team/w: [field `status.reclaimablePods[ps1].count`: Invalid value: 4: should be less or equal to 3, "
        'field `status.reclaimablePods[ps2].name`: Unsupported value: "ps2": supported values: "ps1"]')


def test_a_stored_workload_naming_no_pod_set_is_still_not_folded() -> None:
    """The watch holds a stored Workload to its reclaimable pods naming its pod sets (the fold needs them)."""
    wl = msgspec.convert(_workload(reclaimablePods=[{"name": "ps2", "count": 1}]), Workload, strict=False)
    with pytest.raises(InvalidInput, match=r"reclaimablePods\[ps2\]\.name`: Unsupported value"):
        check_foldable(wl, "Workload team/w")


# --- Workload: slice sizes (L5), assignment usage (L6) ----------------------------------------------------------


@pytest.mark.parametrize(("topology", "error"), [
    ({"podSetSliceRequiredTopology": "rack", "podSetSliceSize": 0}, "podSetSliceSize`: Invalid value: 0: "
     "spec.podSets[0].topologyRequest.podSetSliceSize in body should be greater than or equal to 1"),
    ({"required": "rack", "podSetSliceSize": 2}, "podSetSliceSize`: Forbidden: may only be set together with "
                                                 "podSetSliceRequiredTopology"),
    ({"podSetSliceRequiredTopology": "rack"}, "podSetSliceSize`: Required value: must be set when "
                                              "podSetSliceRequiredTopology is set"),
    ({"required": "rack", "podsetSliceRequiredTopologyConstraints": [{"topology": "rack", "size": 0}]},
     "podsetSliceRequiredTopologyConstraints[0].size`: Invalid value: 0: must be greater than 0"),
], ids=["non-positive", "without-topology", "without-size", "layer-size"])
def test_slice_size_refusals_are_field_errors(topology: dict[str, Any], error: str) -> None:
    doc = _workload()
    doc["spec"]["podSets"][0]["topologyRequest"] = topology
    assert _refused(doc) == f"Workload team/w: field `spec.podSets[0].topologyRequest.{error}"


def test_an_assignment_not_a_multiple_of_its_count_shows_the_usage() -> None:
    doc = _workload(conditions=[{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                                 "lastTransitionTime": "2024-01-01T00:00:00Z"}],
                    admission={"clusterQueue": "cq", "podSetAssignments": [
                        {"name": "ps1", "flavors": {"cpu": "a"}, "resourceUsage": {"cpu": "4"}, "count": 3}]})
    assert _refused(doc) == ('Workload team/w: field `status.admission.podSetAssignments[0].resourceUsage[cpu]`: '
                             'Invalid value: "4": is not a multiple of 3')


# --- Labels and selectors (L7) ----------------------------------------------------------------------------------


def test_every_bad_key_and_value_of_a_label_map_is_listed() -> None:
    """apimachinery's ValidateLabels: each key's faults then its value's, all at the map's path."""
    assert _refused(_flavor(nodeLabels={"@abc": "x", "foo": "@abc"})) == (
        f'ResourceFlavor rf: [field `spec.nodeLabels`: Invalid value: "@abc": {KEY_NAME}, '
        f'field `spec.nodeLabels`: Invalid value: "@abc": {VALUE}]')


def test_a_namespace_selector_lists_every_fault() -> None:
    cq = {"apiVersion": V1B2, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
        "namespaceSelector": {"matchLabels": {"@abc": "ok"},
                              "matchExpressions": [{"key": "team", "operator": "In"}]},
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": "a", "resources": [{"name": "cpu", "nominalQuota": 1}]}]}]}}
    assert _refused(cq) == (
        f'ClusterQueue cq: [field `spec.namespaceSelector.matchLabels`: Invalid value: "@abc": {KEY_NAME}, '
        "field `spec.namespaceSelector.matchExpressions[0].values`: Required value: must be specified when "
        "`operator` is 'In' or 'NotIn']")


def test_a_pod_set_update_s_labels_and_node_selector_are_all_listed() -> None:
    doc = _workload(admissionChecks=[{"name": "ac", "state": "Ready", "lastTransitionTime": "2024-01-01T00:00:00Z",
                                      "podSetUpdates": [{"name": "ps1", "labels": {"a": "b c"},
                                                         "nodeSelector": {"@abc": "x"}}]}])
    at = "field `status.admissionChecks[0].podSetUpdates[0]"
    assert _refused(doc) == (f'Workload team/w: [{at}.nodeSelector`: Invalid value: "@abc": {KEY_NAME}, '
                             f'{at}.labels`: Invalid value: "b c": {VALUE}]')


# --- ResourceFlavor: every error together (L8) ------------------------------------------------------------------


def test_a_flavor_s_crd_rules_are_refused_together_before_its_webhook_s() -> None:
    """Kueue's "bad tolerations": the CRD's CEL rules (a value with Exists, an unknown effect) are the apiserver's,
    all of them, before the webhook (which would refuse the first key) is called."""
    doc = _flavor(tolerations=[{"key": "@abc", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
                               {"key": "abc", "operator": "Exists", "value": "v", "effect": "NoSchedule"},
                               {"key": "abc", "operator": "Equal", "value": "v", "effect": "not-valid"},
                               {"key": "abc", "operator": "Equal", "value": "v", "effect": "NoSchedule"}])
    assert _refused(doc) == (  # each at the list the rule sits on, as the apiserver words a CEL rule's error
        'ResourceFlavor rf: [field `spec.tolerations`: Invalid value: "array": a value must be empty when '
        "'operator' is 'Exists', field `spec.tolerations`: Invalid value: \"array\": supported taint effect "
        "values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute']")


def test_a_flavor_s_webhook_errors_are_all_listed_in_kueue_s_order() -> None:
    """Kueue's ResourceFlavor webhook: the node labels, then the taints (a value's faults joined by ';'), then the
    tolerations' keys."""
    doc = _flavor(nodeLabels={"pool": "a b"},
                  nodeTaints=[{"key": "@t", "value": "x" * 64 + "!", "effect": "NoSchedule"}],
                  tolerations=[{"key": "@abc", "operator": "Exists"}])
    assert _refused(doc) == (
        f'ResourceFlavor rf: [field `spec.nodeLabels`: Invalid value: "a b": {VALUE}, '
        f'field `spec.nodeTaints[0].key`: Invalid value: "@t": {KEY_NAME}, '
        f'field `spec.nodeTaints[0].value`: Invalid value: "{"x" * 64}!": must be no more than 63 characters;{VALUE}, '
        f'field `spec.tolerations[0].key`: Invalid value: "@abc": {KEY_NAME}]')


# --- ClusterQueue enums (L10) -----------------------------------------------------------------------------------


def test_an_unknown_queueing_strategy_is_refused_as_the_crd_s_enum() -> None:
    """The apiserver's refusal of a value the CRD's enum lacks (an empty one too), its values in the enum's order."""
    cq = {"apiVersion": V1B2, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
        "queueingStrategy": "", "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": "a", "resources": [{"name": "cpu", "nominalQuota": 1}]}]}]}}
    assert _refused(cq) == ('ClusterQueue cq: [field `spec.queueingStrategy`: Unsupported value: "": '
                            f'supported values: "StrictFIFO", "BestEffortFIFO", {CEL_NOT_CHECKED}]')
