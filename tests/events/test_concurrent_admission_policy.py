"""A ClusterQueue's ``spec.concurrentAdmissionPolicy`` (``ConcurrentAdmission``, alpha, off): its shape as the
CRD holds it (always), the webhook's rules under the gate, its immutability on update, and the field kept
through the log's codec."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from events import objects as o
from events.errors import InvalidInput
from events.field_errors import CEL_NOT_CHECKED
from events.manifests import Checks, decode_object
from events.update_rules import validate_update

ON = Checks(concurrent_admission=True)
OFF = Checks(on_flavors=False)
WHERE = "ClusterQueue cq"


def _cq(policy: dict[str, Any] | None = None, *, groups: int = 1, flavors: int = 2,
        strategy: str = "BestEffortFIFO") -> dict[str, Any]:
    spec: dict[str, Any] = {"queueingStrategy": strategy, "resourceGroups": [
        {"coveredResources": [f"r{g}"], "flavors": [
            {"name": f"f{g}-{f}", "resources": [{"name": f"r{g}", "nominalQuota": 1}]} for f in range(flavors)]}
        for g in range(groups)]}
    if policy is not None:
        spec["concurrentAdmissionPolicy"] = policy
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": spec}


TRY = {"migration": {"mode": "TryPreferredFlavors"}}


def _refused(doc: dict[str, Any], checks: Checks = ON) -> str:
    with pytest.raises(InvalidInput) as refused:
        decode_object(doc, WHERE, checks=checks)
    return str(refused.value)


def test_the_policy_is_read_with_its_mode_and_constraint() -> None:
    policy = {"migration": {"mode": "RetainFirstAdmission",
                            "constraints": {"lastAcceptableFlavorName": "f0-0"}}}
    cq = decode_object(_cq(policy), WHERE, checks=ON)
    assert isinstance(cq, o.ClusterQueue)
    p = cq.spec.concurrent_admission_policy
    assert p is not None and p.migration.mode == "RetainFirstAdmission"
    assert p.migration.constraints is not None and p.migration.constraints.last_acceptable_flavor_name == "f0-0"


def test_a_mode_left_out_is_try_preferred_flavors() -> None:
    cq = decode_object(_cq({"migration": {}}), WHERE, checks=ON)
    assert isinstance(cq, o.ClusterQueue) and cq.spec.concurrent_admission_policy is not None
    assert cq.spec.concurrent_admission_policy.migration.mode == "TryPreferredFlavors"


@pytest.mark.parametrize(("doc", "message"), [
    (_cq(TRY, groups=2), "field `spec.resourceGroups`: Invalid value: 2: must have exactly one ResourceGroup when "
     "ConcurrentAdmissionPolicy is defined"),
    (_cq(TRY, groups=0), "field `spec.resourceGroups`: Invalid value: 0: must have exactly one ResourceGroup when "
     "ConcurrentAdmissionPolicy is defined"),
    (_cq(TRY, flavors=33), "field `spec.resourceGroups[0].flavors`: Invalid value: 33: cannot have more than 32 "
     "resource flavors in the ResourceGroup when ConcurrentAdmissionPolicy is defined"),
    (_cq(TRY, strategy="StrictFIFO"), 'field `spec.queueingStrategy`: Invalid value: "StrictFIFO": StrictFIFO '
     "queueing strategy cannot be used when ConcurrentAdmissionPolicy is defined"),
])
def test_the_webhook_rules_hold_under_the_gate_only(doc: dict[str, Any], message: str) -> None:
    assert _refused(doc) == f"{WHERE}: {message}"
    decode_object(doc, WHERE, checks=Checks())  # the gate's default, off: the webhook does not look


def test_the_rules_are_for_a_queue_with_a_policy() -> None:
    decode_object(_cq(None, groups=2), WHERE, checks=ON)
    decode_object(_cq(None, strategy="StrictFIFO"), WHERE, checks=ON)
    decode_object(_cq(TRY, flavors=32), WHERE, checks=ON)
    last = {"migration": {"mode": "TryPreferredFlavors", "constraints": {"lastAcceptableFlavorName": "elsewhere"}}}
    decode_object(_cq(last), WHERE, checks=ON)  # Kueue does not ask it to name one of the queue's flavors


STRICT = 'field `spec.queueingStrategy`: Invalid value: "StrictFIFO": StrictFIFO queueing strategy cannot be used ' \
    "when ConcurrentAdmissionPolicy is defined"


@pytest.mark.parametrize(("doc", "first"), [
    (_cq(TRY, groups=2, strategy="StrictFIFO"), "field `spec.resourceGroups`: Invalid value: 2: must have exactly "
     "one ResourceGroup when ConcurrentAdmissionPolicy is defined"),
    (_cq(TRY, flavors=33, strategy="StrictFIFO"), "field `spec.resourceGroups[0].flavors`: Invalid value: 33: "
     "cannot have more than 32 resource flavors in the ResourceGroup when ConcurrentAdmissionPolicy is defined"),
])
def test_every_broken_rule_is_refused_in_one_aggregated_message(doc: dict[str, Any], first: str) -> None:
    assert _refused(doc) == f"{WHERE}: [{first}, {STRICT}]"


@pytest.mark.parametrize("checks", [ON, Checks()])
def test_the_crd_refuses_an_unknown_mode_or_a_bad_flavor_name_whatever_the_gate(checks: Checks) -> None:
    assert _refused(_cq({"migration": {"mode": "Sometimes"}}), checks) == (
        f'{WHERE}: [field `spec.concurrentAdmissionPolicy.migration.mode`: Unsupported value: "Sometimes": '
        f'supported values: "TryPreferredFlavors", "RetainFirstAdmission", {CEL_NOT_CHECKED}]')
    bad = {"migration": {"mode": "TryPreferredFlavors", "constraints": {"lastAcceptableFlavorName": "Not_A_Name"}}}
    assert "field `spec.concurrentAdmissionPolicy.migration.constraints.lastAcceptableFlavorName`" in _refused(
        _cq(bad), checks)


@pytest.mark.parametrize(("old", "new"), [
    (None, TRY),
    (TRY, None),
    (TRY, {"migration": {"mode": "RetainFirstAdmission"}}),
])
def test_the_policy_is_immutable(old: dict | None, new: dict | None) -> None:
    old_doc, new_doc = _cq(old), _cq(new)
    with pytest.raises(InvalidInput) as refused:
        validate_update(old_doc, new_doc, decode_object(old_doc, WHERE), decode_object(new_doc, WHERE), WHERE)
    assert str(refused.value) == f"{WHERE}: field `spec.concurrentAdmissionPolicy`: field is immutable"


def test_an_update_s_broken_rules_are_refused_together() -> None:
    """With ``RejectUpdatesToCQWithInvalidOnFlavors`` off an update may keep a bad ``onFlavors`` entry, not change
    one; a changed entry and a changed policy are refused in one message, the entry first (Kueue's order)."""
    old_doc, new_doc = _cq(None), _cq(TRY)
    new_doc["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "ac", "onFlavors": ["x", "y"]}]}
    with pytest.raises(InvalidInput) as refused:
        validate_update(old_doc, new_doc, decode_object(old_doc, WHERE), decode_object(new_doc, WHERE, checks=OFF),
                        WHERE, on_flavors_gate=False)
    at = "field `spec.admissionChecksStrategy.admissionChecks[0]"
    supported = 'supported values: "f0-0", "f0-1"'
    assert str(refused.value) == (
        f'{WHERE}: [{at}.onFlavors[0]`: Unsupported value: "x": {supported}, '
        f'{at}.onFlavors[1]`: Unsupported value: "y": {supported}, '
        "field `spec.concurrentAdmissionPolicy`: field is immutable]")


def test_an_update_keeping_the_policy_is_taken() -> None:
    old_doc, new_doc = _cq(TRY), _cq(TRY, flavors=3)
    validate_update(old_doc, new_doc, decode_object(old_doc, WHERE), decode_object(new_doc, WHERE), WHERE)


def test_the_policy_is_kept_through_the_logs_codec() -> None:
    policy = {"migration": {"mode": "RetainFirstAdmission", "constraints": {"lastAcceptableFlavorName": "f0-1"}}}
    cq = decode_object(_cq(policy), WHERE, checks=ON)
    assert isinstance(cq, o.ClusterQueue)
    back = msgspec.msgpack.decode(msgspec.msgpack.encode(cq), type=o.ClusterQueue)
    assert back == cq
    assert msgspec.to_builtins(back)["spec"]["concurrentAdmissionPolicy"] == policy
