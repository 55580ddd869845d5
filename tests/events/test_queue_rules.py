"""A ClusterQueue's and a Cohort's resource groups (``events.quota_rules``): every rule broken is reported in one
message, as the apiserver lists its schema's errors and Kueue's webhook its own, the schema's first and alone;
Kueue's limit on flavor-resource combinations; the watch holds a stored queue only to what the projections need."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from events import objects as o
from events.errors import InvalidInput
from events.manifests import check_foldable, decode_object

V1B2 = "kueue.x-k8s.io/v1beta2"


def _queue(*groups: dict[str, Any], kind: str = "ClusterQueue", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": V1B2, "kind": kind, "metadata": {"name": "cq"}, "spec": {"resourceGroups": list(groups),
                                                                                   **spec}}


def _group(covered: list[str], *flavors: tuple[str, list[tuple[str, Any]]]) -> dict[str, Any]:
    return {"coveredResources": covered, "flavors": [
        {"name": name, "resources": [{"name": r, "nominalQuota": q} for r, q in quotas]} for name, quotas in flavors]}


def _refusal(doc: dict[str, Any]) -> str:
    with pytest.raises(InvalidInput) as refused:
        decode_object(doc, f"{doc['kind']} cq")
    return str(refused.value)


def test_the_rules_the_projections_need_are_refused_together_in_kueue_s_order() -> None:
    """A flavor in two groups, a quota not named as its covered resource, a negative quota: Kueue's webhook
    reports them all (per group: its resources' quotas, then its flavors' names), with its other rules."""
    doc = _queue(_group(["cpu", "memory"], ("a", [("cpu", 1), ("mem", 1)])),
                 _group(["gpu"], ("a", [("gpu", -2)])), fairSharing={"weight": "1n"})
    g = "field `spec.resourceGroups"
    assert _refusal(doc) == (
        f'ClusterQueue cq: [{g}[0].flavors[0].resources[1].name`: Invalid value: "mem": must match the name in '
        f'coveredResources, {g}[1].flavors[0].resources[0].nominalQuota`: Invalid value: "-2": must be greater '
        f'than or equal to 0, {g}[1].flavors[0].name`: Duplicate value: "a", '
        'field `spec.fairSharing`: Invalid value: "1n": When not 0, weight must be > 10e-9]')
    doc["kind"] = "Cohort"  # Kueue's validateCohort checks the weight first
    assert _refusal(doc).startswith('Cohort cq: [field `spec.fairSharing`: Invalid value: "1n": When not 0, '
                                    f'weight must be > 10e-9, {g}[0].flavors[0].resources[1].name`: '
                                    'Invalid value: "mem"')


def test_every_schema_rule_broken_is_listed_and_refused_before_the_webhook_s() -> None:
    """As the apiserver lists every schema error (and calls no webhook then): a quota that is no quantity, a flavor
    twice in a group, an unknown enum value, a name that is no DNS subdomain, all in one message."""
    doc = _queue(_group(["cpu"], ("a", [("cpu", "lots")]), ("a", [("cpu", 1)]), ("B", [("cpu", 1)])),
                 queueingStrategy="Random", fairSharing={"weight": "1n"})
    message = _refusal(doc)
    g = "field `spec.resourceGroups[0].flavors"
    assert message.startswith(f"ClusterQueue cq: [{g}[0].resources[0].nominalQuota`: ")
    assert f'{g}[1]`: Duplicate value: map[string]interface {{}}{{"name":"a"}}' in message
    assert ('field `spec.queueingStrategy`: Unsupported value: "Random": supported values: "StrictFIFO", '
            '"BestEffortFIFO"') in message
    assert (f'{g}[2].name`: Invalid value: "B": spec.resourceGroups[0].flavors[2].name in body '
            'should match') in message
    assert "weight" not in message  # the webhook's rule: not reached


def test_the_cel_rule_on_a_group_s_resource_count_is_listed_unless_an_enum_value_blocks_it() -> None:
    doc = _queue(_group(["cpu", "memory"], ("a", [("cpu", 1)])), _group(["gpu"], ("b", [("gpu", "x")])))
    assert _refusal(doc).endswith(
        'field `spec.resourceGroups[0]`: Invalid value: "object": flavors must have the same number of resources '
        "as the coveredResources]")
    doc["spec"]["stopPolicy"] = "Pause"
    assert "same number of resources" not in _refusal(doc)


def test_a_group_holds_at_most_512_flavor_resource_combinations() -> None:
    covered = [f"r{i}" for i in range(26)]
    flavors = [(f"f{j}", [(r, 1) for r in covered]) for j in range(20)]  # 520 quotas
    doc = _queue(_group(covered, *flavors))
    assert _refusal(doc) == (
        "ClusterQueue cq: field `spec.resourceGroups[0]`: Invalid value: 520: number of flavor-resource combinations "
        "in a resourceGroup must be ≤ 512, got 520")
    decode_object(_queue(_group(covered, *flavors[:19])), "ClusterQueue cq")  # 494: taken
    doc["spec"]["fairSharing"] = {"weight": "1n"}
    assert _refusal(doc).startswith("ClusterQueue cq: [field `spec.fairSharing`")  # the size limits come last


def test_the_watch_refuses_a_stored_queue_only_for_what_the_projections_need_all_of_it_at_once() -> None:
    doc = _queue(_group(["cpu"], ("a", [("cpu", 1)])), _group(["memory"], ("a", [("mem", 1)])))
    doc["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = 1  # no cohort: webhook only
    cq = msgspec.convert(doc, o.KueueObject, strict=False)
    with pytest.raises(InvalidInput) as refused:
        check_foldable(cq, "ClusterQueue cq")
    assert str(refused.value) == (
        'ClusterQueue cq: [field `spec.resourceGroups[1].flavors[0].resources[0].name`: Invalid value: "mem": must '
        'match the name in coveredResources, field `spec.resourceGroups[1].flavors[0].name`: Duplicate value: "a"]')
    doc["spec"]["resourceGroups"].pop()
    check_foldable(msgspec.convert(doc, o.KueueObject, strict=False), "ClusterQueue cq")


def test_a_borrowing_limit_without_a_cohort_is_the_crd_s_rule_listed_with_its_others() -> None:
    """The ClusterQueue CRD's CEL rule on the spec (before its groups'): with the schema's errors, not the
    webhook's; a Cohort has no such rule (its webhook's, under a parent)."""
    doc = _queue(_group(["cpu", "memory"], ("a", [("cpu", 1)])), fairSharing={"weight": "1n"})
    doc["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = 1
    assert _refusal(doc) == (
        'ClusterQueue cq: [field `spec`: Invalid value: "object": borrowingLimit must be nil when cohort is empty, '
        'field `spec.resourceGroups[0]`: Invalid value: "object": flavors must have the same number of resources as '
        "the coveredResources]")
    doc["spec"]["cohortName"] = "co"
    assert "borrowingLimit" not in _refusal(doc)
    doc["spec"]["cohortName"] = ""
    doc["kind"] = "Cohort"
    assert "borrowingLimit" not in _refusal(doc)
