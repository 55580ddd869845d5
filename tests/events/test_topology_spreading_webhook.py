"""Kueue's Workload webhook rules for ``kueue.x-k8s.io/podset-topology-spreading`` (alpha gate TASTopologySpreading):
under the gate the annotation comes with a required topology, is valid, and agrees across a pod-set group; off,
it is not looked at."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import pytest

from events.errors import InvalidInput
from events.manifests import Checks, decode_object
from projections import gates

ANN = "kueue.x-k8s.io/podset-topology-spreading"
AT = f"spec.podSets[{{}}].template.metadata.annotations[{ANN}]"
ON = Checks(topology_spreading=True)
VALID = json.dumps({"rules": [{"topologyKey": "rack", "maxShareAllowingPlacement": "0.45"}]})


def _pod_set(name: str, annotation: str | None, topology: dict | None) -> dict[str, Any]:
    ps: dict[str, Any] = {"name": name, "count": 1, "template": {
        "metadata": {"annotations": {ANN: annotation} if annotation is not None else {}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}
    if topology is not None:
        ps["topologyRequest"] = topology
    return ps


def _workload(*pod_sets: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "team"}, "spec": {"queueName": "lq", "podSets": list(pod_sets)}}


def _refused(doc: dict[str, Any], checks: Checks = ON) -> str:
    with pytest.raises(InvalidInput) as refused:
        decode_object(doc, "Workload team/w", checks=checks)
    return str(refused.value)


def test_the_gate_is_off_by_default_and_read_from_the_configuration() -> None:
    assert not Checks().topology_spreading
    assert Checks.under(partial(gates.enabled, {"TASTopologySpreading": True})).topology_spreading


def test_valid_annotation_with_a_required_topology_is_taken() -> None:
    decode_object(_workload(_pod_set("main", VALID, {"required": "rack"})), "Workload team/w", checks=ON)
    # a required-topology annotation does not stand for the field (Kueue's "invalid: companion
    # required-topology annotation without structured required request")
    ps = _pod_set("main", VALID, None)
    ps["template"]["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] = "rack"
    assert "Forbidden: may only be set together with" in _refused(_workload(ps))


def test_only_with_a_required_topology() -> None:
    doc = _workload(_pod_set("main", VALID, {"preferred": "rack"}))
    assert _refused(doc) == (f"Workload team/w: field `{AT.format(0)}`: Forbidden: may only be set together with "
                             "spec.podSets[0].topologyRequest.required")
    decode_object(doc, "Workload team/w", checks=Checks())  # gate off: not looked at


def test_every_problem_of_the_value_is_named() -> None:
    value = json.dumps({"rules": [{"topologyKey": "rack", "maxShareAllowingPlacement": "1"},
                                  {"topologyKey": "rack", "maxShareAllowingPlacement": "0.5",
                                   "enforcementMode": "Maybe"}]})
    doc = _workload(_pod_set("main", value, {"required": "rack"}))
    at = AT.format(0)
    assert _refused(doc) == (
        f"Workload team/w: [field `{at}.rules[0].maxShareAllowingPlacement`: Invalid value: \"1\": must be greater "
        f"than 0 and less than 1, field `{at}.rules[1].enforcementMode`: Unsupported value: \"Maybe\": supported "
        f"values: \"Required\", \"Preferred\", field `{at}.rules[1].topologyKey`: Duplicate value: "
        "\"rack (also at index 0)\"]")
    decode_object(doc, "Workload team/w", checks=Checks())


def test_members_of_a_group_agree() -> None:
    same = json.dumps({"rules": [{"maxShareAllowingPlacement": "0.45", "topologyKey": "rack"}]})  # same JSON
    ok = _workload(_pod_set("leader", VALID, {"required": "rack", "podSetGroupName": "g"}),
                   _pod_set("workers", same, {"required": "rack", "podSetGroupName": "g"}))
    decode_object(ok, "Workload team/w", checks=ON)
    bad = _workload(_pod_set("leader", VALID, {"required": "rack", "podSetGroupName": "g"}),
                    _pod_set("workers", None, {"required": "rack", "podSetGroupName": "g"}))
    assert _refused(bad) == (
        f"Workload team/w: field `{AT.format(1)}`: Invalid value: must specify the same '{ANN}' annotation as "
        f"'{AT.format(0)}' in group 'g', or omit the annotation from all members of the group")
    decode_object(bad, "Workload team/w", checks=Checks())
