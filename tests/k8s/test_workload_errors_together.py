"""A Workload update is refused for all of its field errors at once, as Kueue's ``ValidateWorkloadUpdate`` returns
its whole error list: the new object's own (its webhook rules, the gated ones, the reclaimable counts' bound),
then the update's; what the projections need of the object (every check broken) stops it before, as the CRD's
schema does (:mod:`connectors.k8s.validating`, :mod:`events.manifests`, :mod:`events.update_rules`)."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest
from test_validating_review import _message, _review, wl

from events import objects as o
from events.errors import InvalidInput
from events.manifests import UNGATED, Checks, validate_gated, validate_object

NEGATIVE = ("field `spec.podSets[0].template.spec.containers[0].resources.requests[cpu]`: Invalid value: \"-1\": "
            "must be greater than or equal to 0")
ABOVE = "field `status.reclaimablePods[main].count`: Invalid value: 5: should be less or equal to 4"
IMMUTABLE = "field `spec.podSets.0`: field is immutable"
GATE = "kueue.x-k8s.io/admission-gated-by"


def held(count: int = 4, reclaimable: int = 2) -> dict[str, Any]:
    doc = wl(count=count, reserved=True)
    doc["status"]["reclaimablePods"] = [{"name": "main", "count": reclaimable}]
    return doc


def container(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["podSets"][0]["template"]["spec"]["containers"][0]


def broken_three_ways(before: dict[str, Any]) -> dict[str, Any]:
    """A gated check broken (a negative request), the reclaimable bound, and the update's pod sets."""
    after = copy.deepcopy(before)
    after["status"]["reclaimablePods"][0]["count"] = 5
    container(after)["resources"]["requests"]["cpu"] = "-1"
    container(after)["image"] = "other"
    return after


def test_an_update_is_refused_for_its_gated_bound_and_update_errors_together_in_kueues_order() -> None:
    before = held()
    assert _message(_review("Workload", broken_three_ways(before), before)) == (
        f"Workload team/w: [{NEGATIVE}, {ABOVE}, {IMMUTABLE}]")


def test_with_the_gate_off_its_check_drops_out_and_the_rest_stay_together() -> None:
    before = held()
    off = {"WorkloadValidateResourcesAreNonNegative": False}
    assert _message(_review("Workload", broken_three_ways(before), before, off)) == (
        f"Workload team/w: [{ABOVE}, {IMMUTABLE}]")


def test_the_bound_joins_the_objects_own_webhook_errors() -> None:
    before = held()
    container(before)["resources"]["limits"] = {"pods": "1"}
    after = copy.deepcopy(before)
    after["status"]["reclaimablePods"][0]["count"] = 5
    assert _message(_review("Workload", after, before)) == (
        "Workload team/w: [field `spec.podSets[0].template.spec.containers[0].resources.limits[pods]`: Invalid "
        f'value: "pods": the key is reserved for internal kueue use, {ABOVE}]')


def test_an_admission_gates_format_and_its_addition_are_refused_together() -> None:
    before = wl()
    after = copy.deepcopy(before)
    after["metadata"]["annotations"] = {GATE: "x.io/a,,x.io/b"}
    assert _message(_review("Workload", after, before, {"AdmissionGatedBy": True})) == (
        f'Workload team/w: [field `metadata.annotations[{GATE}]`: Invalid value: "x.io/a,,x.io/b": cannot contain empty gate '
        f"names, field `metadata.annotations[{GATE}]`: Forbidden: cannot add admission gate after creation]")


@pytest.mark.parametrize("old", [True, False])
def test_what_the_projections_need_is_refused_every_check_together_before_the_rest(old: bool) -> None:
    before = held()
    after = broken_three_ways(before)
    after["spec"]["maximumExecutionTimeSeconds"] = 0
    after["status"]["conditions"][0]["lastTransitionTime"] = "yesterday"
    assert _message(_review("Workload", after, before if old else None)) == (
        "Workload team/w: [field `status.conditions[0].lastTransitionTime`: not an RFC 3339 time: 'yesterday', "
        "field `spec.maximumExecutionTimeSeconds` must be >= 1, not 0]")


def test_the_gated_checks_of_an_imported_workload_are_refused_together() -> None:
    doc = held()
    container(doc)["resources"]["requests"]["cpu"] = "-1"
    doc["metadata"]["annotations"] = {GATE: "x.io/a,x.io/a"}
    view = msgspec.convert(doc, o.KueueObject, strict=False)
    validate_object(view, "w", checks=UNGATED)
    with pytest.raises(InvalidInput) as refused:
        validate_gated(view, "w", Checks())
    assert str(refused.value) == (
        f'w: [{NEGATIVE}, field `metadata.annotations[{GATE}]`: Invalid value: "x.io/a,x.io/a": duplicate gate name: x.io/a]')
