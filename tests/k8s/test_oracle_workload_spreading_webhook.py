"""Kueue's ``pkg/webhooks/workload_spreading_test.go`` (``TestValidateWorkloadSpreadingCreate``,
``TestValidateWorkloadSpreadingUpdate``), walked through kueue-es's Workload webhook
(:func:`connectors.k8s.validating.refusal`) under the alpha gate ``TASTopologySpreading``: each case taken or
refused as Kueue's table says, the refusal naming the pod set Kueue's names (Kueue's table compares the field
path and type, not the detail)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from connectors.k8s.validating import refusal

ANN = "kueue.x-k8s.io/podset-topology-spreading"
REQUIRED_ANN = "kueue.x-k8s.io/podset-required-topology"
LEVEL = "cloud.com/block"
VALID = '{"rules":[{"topologyKey":"cloud.com/block","maxShareAllowingPlacement":"0.45"}]}'
EQUIVALENT = ('{"rules":[{"topologyKey":"cloud.com/block","maxShareAllowingPlacement":"0.45",'
              '"enforcementMode":"Required"}]}')
EMPTY_SELECTORS = ('{"workloadLabelSelectors":[],"rules":[{"topologyKey":"cloud.com/block",'
                   '"maxShareAllowingPlacement":"0.45"}]}')
OTHER = '{"rules":[{"topologyKey":"cloud.com/block","maxShareAllowingPlacement":"0.5"}]}'
INVALID = "not-json"
SHARE_ONE = '{"rules":[{"topologyKey":"cloud.com/block","maxShareAllowingPlacement":"1"}]}'
SHARE_ONE_MILLI = '{"rules":[{"topologyKey":"cloud.com/block","maxShareAllowingPlacement":"1000m"}]}'
ON = {"TASTopologySpreading": True}
OFF = {"TASTopologySpreading": False}
TOPOLOGY = {"required": {"required": LEVEL}, "rack": {"required": "cloud.com/rack"},
            "preferred": {"preferred": LEVEL}, "unconstrained": {"unconstrained": True}, "empty": {},
            None: None}


def ps(name: str, count: int = 1, spreading: str | None = None, topology: str | None = "required",
       group: str | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    notes = dict(annotations or {})
    if spreading is not None:
        notes[ANN] = spreading
    out: dict[str, Any] = {"name": name, "count": count, "template": {
        "metadata": {"annotations": notes}, "spec": {
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}}}
    request = TOPOLOGY[topology]
    if group is not None:
        request = {**(request or {}), "podSetGroupName": group}
    if request is not None:
        out["topologyRequest"] = request
    return out


def member(name: str, count: int, group: str, spreading: str) -> dict[str, Any]:
    return ps(name, count, spreading, group=group)


def wl(*pod_sets: dict[str, Any], queue: str = "q1") -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": "w", "namespace": "ns"},
            "spec": {"queueName": queue, "podSets": list(pod_sets)}}


def at(i: int) -> str:
    return f"field `spec.podSets[{i}].template.metadata.annotations[{ANN}]"


CREATE = {
    "valid: absent spreading annotation is unaffected": (wl(ps("main", topology=None)), ON, None),
    "valid: structured required topology, omitted selectors, no job UID or companion annotation": (
        wl(ps("main", spreading=VALID)), ON, None),
    "valid: empty selectors remain accepted": (wl(ps("main", spreading=EMPTY_SELECTORS)), ON, None),
    "valid: group members have matching spreading annotations": (
        wl(member("a", 1, "g", VALID), member("b", 2, "g", VALID)), ON, None),
    "valid: group members have equivalent parsed spreading annotations": (
        wl(member("a", 1, "g", VALID), member("b", 2, "g", EQUIVALENT)), ON, None),
    "valid: standalone PodSet and a named group with the same name stay distinct": (
        wl(ps("g", 1, OTHER), member("leader", 1, "g", VALID), member("workers", 1, "g", VALID)), ON, None),
    "valid: unrelated named groups do not participate in one another's comparison": (
        wl(member("a1", 1, "g1", VALID), member("a2", 1, "g1", VALID), member("b1", 1, "g2", OTHER),
           member("b2", 1, "g2", OTHER)), ON, None),
    "valid: neither group member carries the spreading annotation": (
        wl(ps("a", group="g"), ps("b", group="g")), ON, None),
    "valid: gate off, malformed annotation left unvalidated": (wl(ps("main", spreading=INVALID)), OFF, None),
    "invalid: empty spreading annotation": (wl(ps("main", spreading="")), ON, f"{at(0)}`: Invalid value"),
    "invalid: share of 1 is rejected at the Workload field path": (
        wl(ps("main", spreading=SHARE_ONE)), ON,
        f"{at(0)}.rules[0].maxShareAllowingPlacement`: Invalid value"),
    "invalid: nil topology request": (
        wl(ps("main", spreading=VALID, topology=None)), ON, f"{at(0)}`: Forbidden"),
    "invalid: topology request without required": (
        wl(ps("main", spreading=VALID, topology="empty")), ON, f"{at(0)}`: Forbidden"),
    "invalid: preferred-only topology request": (
        wl(ps("main", spreading=VALID, topology="preferred")), ON, f"{at(0)}`: Forbidden"),
    "invalid: unconstrained-only topology request": (
        wl(ps("main", spreading=VALID, topology="unconstrained")), ON, f"{at(0)}`: Forbidden"),
    "invalid: companion required-topology annotation without structured required request": (
        wl(ps("main", spreading=VALID, topology=None, annotations={REQUIRED_ANN: LEVEL})), ON,
        f"{at(0)}`: Forbidden"),
    "invalid: group members have different spreading annotations": (
        wl(member("leader", 1, "g", VALID), member("workers", 1, "g", OTHER)), ON,
        f"{at(1)}`: Invalid value"),
    "invalid: first group member is missing the spreading annotation": (
        wl(ps("leader", group="g"), member("workers", 1, "g", VALID)), ON, f"{at(0)}`: Invalid value"),
    "invalid: later group member is missing the spreading annotation": (
        wl(member("leader", 1, "g", VALID), ps("workers", group="g")), ON, f"{at(1)}`: Invalid value"),
}


@pytest.mark.parametrize("name", list(CREATE))
def test_create(name: str) -> None:
    doc, gates, want = CREATE[name]
    got = refusal("Workload", "CREATE", copy.deepcopy(doc), None, gates)
    if want is None:
        assert got is None
    else:
        assert got is not None and got.startswith(f"Workload ns/w: {want}"), got


def _invalid() -> dict[str, Any]:
    return wl(ps("main", spreading=INVALID))


def _valid() -> dict[str, Any]:
    return wl(ps("main", spreading=VALID))


UPDATE = {
    "reject changing a valid spreading annotation to invalid": (_valid(), _invalid(), [at(0)]),
    "exempt an unchanged invalid spreading annotation": (
        _invalid(), wl(ps("main", spreading=INVALID), queue="q2"), []),
    "reject a different invalid annotation including equivalent invalid quantities": (
        wl(ps("main", spreading=SHARE_ONE)), wl(ps("main", spreading=SHARE_ONE_MILLI)),
        [f"{at(0)}.rules[0].maxShareAllowingPlacement"]),
    "reject absent spreading becoming a present empty annotation": (
        wl(ps("main")), wl(ps("main", spreading="")), [at(0)]),
    "reject removing required topology while spreading remains": (
        _valid(), wl(ps("main", spreading=VALID, topology=None)), [at(0)]),
    "reject a required topology change while the annotation stays invalid": (
        _invalid(), wl(ps("main", spreading=INVALID, topology="rack")), [at(0)]),
    "accept a required topology change when spreading stays valid": (
        _valid(), wl(ps("main", spreading=VALID, topology="rack")), []),
    "accept an equivalent rewrite of a valid annotation": (
        _valid(), wl(ps("main", spreading=EQUIVALENT)), []),
    "reject a membership change that introduces group disagreement": (
        wl(member("a1", 1, "g1", VALID), member("a2", 2, "g1", VALID), member("b1", 1, "g2", OTHER),
           member("b2", 2, "g2", OTHER)),
        wl(member("a1", 1, "g1", VALID), member("a2", 2, "g2", VALID), member("b1", 1, "g2", OTHER),
           member("b2", 2, "g1", OTHER)),
        [at(3), at(2)]),
    "repair one group while an unchanged invalid group remains": (
        wl(member("a1", 1, "g1", VALID), member("a2", 2, "g1", OTHER), member("b1", 1, "g2", VALID),
           member("b2", 2, "g2", OTHER)),
        wl(member("a1", 1, "g1", VALID), member("a2", 2, "g1", VALID), member("b1", 1, "g2", VALID),
           member("b2", 2, "g2", OTHER)),
        []),
    "membership change with identical malformed annotations does not force annotation validity": (
        wl(*(member(n, c, g, INVALID) for n, c, g in (("a1", 1, "g1"), ("a2", 2, "g1"), ("b1", 1, "g2"),
                                                       ("b2", 2, "g2")))),
        wl(*(member(n, c, g, INVALID) for n, c, g in (("a1", 1, "g1"), ("a2", 2, "g2"), ("b1", 1, "g2"),
                                                       ("b2", 2, "g1")))),
        []),
    "reorder named PodSets without changing spreading inputs": (
        wl(ps("extra", topology=None), ps("main", spreading=INVALID)),
        wl(ps("main", spreading=INVALID), ps("extra", topology=None)), []),
    "rename a PodSet carrying invalid spreading": (_invalid(), wl(ps("other", spreading=INVALID)), [at(0)]),
    "adding an unannotated standalone PodSet does not revalidate old spreading errors": (
        _invalid(), wl(ps("main", spreading=INVALID), ps("extra", topology=None)), []),
    "reject removing spreading from only one member of a pair": (
        wl(member("leader", 1, "g", VALID), member("workers", 2, "g", VALID)),
        wl(member("leader", 1, "g", VALID), ps("workers", 2, group="g")), [at(1)]),
    "accept removing spreading from all members of a pair together": (
        wl(member("leader", 1, "g", VALID), member("workers", 2, "g", VALID)),
        wl(ps("leader", 1, group="g"), ps("workers", 2, group="g")), []),
}


@pytest.mark.parametrize("name", list(UPDATE))
def test_update(name: str) -> None:
    old, new, fields = UPDATE[name]
    got = refusal("Workload", "UPDATE", copy.deepcopy(new), copy.deepcopy(old), ON)
    if not fields:
        assert got is None
        return
    assert got is not None, name
    positions = [got.find(f) for f in fields]
    assert all(p >= 0 for p in positions) and positions == sorted(positions), got


def test_gate_off_invalid_spreading_updates_remain_unvalidated() -> None:
    before = wl(ps("main"))
    assert refusal("Workload", "UPDATE", _invalid(), before, OFF) is None


def test_exemption_does_not_skip_other_workload_validation() -> None:
    """Kueue's "exemption does not skip other Workload validation": the unchanged invalid annotation is
    exempt, two pod sets with minCount are not (PartialAdmission on, as Kueue's default)."""
    new = wl(ps("main", 2, INVALID), ps("other", 2, topology=None))
    for pod_set in new["spec"]["podSets"]:
        pod_set["minCount"] = 1
    got = refusal("Workload", "UPDATE", new, _invalid(), {**ON, "PartialAdmission": True})
    assert got is not None and got.startswith("Workload ns/w: field `spec.podSets`: Invalid value: 2: at "
                                              "most one podSet can use minCount"), got
