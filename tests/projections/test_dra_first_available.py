"""``firstAvailable`` (prioritized list) requests of a claim template, as Kueue charges them under
KueueDRAIntegrationPrioritizedList (alpha, off): refused with the gate off; with it on, a request whose alternatives
all name classes mapped to the same logical resource is charged the largest count among them (whichever one
kube-scheduler allocates costs no more), and every other form is refused with Kueue's field error (after
Kueue's pkg/dra prioritized_list_test.go)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from fixtures.dra_views import claiming_workload
from fixtures.eventgen import cluster_queue, local_queue, namespace, upsert

from events import objects as o
from events import schema as ev
from projections import gates
from projections.cluster import ClusterState
from projections.dra import DraView, claim_charge, prioritized_on, workload_problem

AT = ".template.spec.resourceClaims[0].devices.requests[0]"
CLAIMS = [msgspec.convert({"name": "rc", "resourceClaimTemplateName": "t"}, o.PodResourceClaim)]
MAPPING = (("a100.example.com", "example.com/gpu"), ("h100.example.com", "example.com/gpu"),
           ("mig.example.com", "example.com/gpu"), ("tpu.example.com", "example.com/tpu"))


def _spec(*alternatives: dict[str, Any], exactly: dict[str, Any] | None = None) -> o.ResourceClaimSpec:
    requests: list[dict[str, Any]] = [{"name": "gpu", "firstAvailable": list(alternatives)}]
    if exactly is not None:
        requests.append({"name": "more", "exactly": exactly})
    return msgspec.convert({"devices": {"requests": requests}}, o.ResourceClaimSpec)


def _charge(spec: o.ResourceClaimSpec, prioritized: bool = True, **more: Any) -> tuple[Any, str]:
    view = DraView(reject=False, mapping=MAPPING, templates=(("t", spec),), prioritized=prioritized, **more)
    return claim_charge("main", CLAIMS, view)


def test_with_the_gate_off_a_first_available_request_is_refused() -> None:
    spec = _spec({"name": "a", "deviceClassName": "a100.example.com"})
    assert _charge(spec, prioritized=False) == ((), f"{AT}: Invalid value: null: ResourceClaimTemplate t: "
                                                    "FirstAvailable device selection is not supported")


def test_alternatives_of_one_count_under_one_resource_are_charged_that_count_once() -> None:
    spec = _spec({"name": "big", "deviceClassName": "h100.example.com", "count": 2},
                 {"name": "small", "deviceClassName": "a100.example.com", "count": 2},
                 exactly={"deviceClassName": "tpu.example.com", "count": 3})
    assert _charge(spec) == ((("example.com/gpu", 2), ("example.com/tpu", 3)), "")
    defaulted = _spec({"name": "a", "deviceClassName": "a100.example.com", "allocationMode": "ExactCount"},
                      {"name": "b", "deviceClassName": "mig.example.com"})  # the API server's default: one device
    assert _charge(defaulted) == ((("example.com/gpu", 1),), "")
    with_exactly = _spec({"name": "a", "deviceClassName": "a100.example.com"},
                         exactly={"deviceClassName": "h100.example.com", "count": 2})
    assert _charge(with_exactly) == ((("example.com/gpu", 3),), ""), "summed with the exactly requests"


def test_the_largest_count_among_the_alternatives_is_the_charge_whatever_their_order() -> None:
    # Kueue's "the largest count among the alternatives is the charge", "and the order of the alternatives
    # does not decide it", "an unset count does not lose to a larger sibling"
    small, big = {"name": "a", "deviceClassName": "a100.example.com"}, {
        "name": "h", "deviceClassName": "h100.example.com", "count": 3}
    assert _charge(_spec(small, big)) == ((("example.com/gpu", 3),), "")
    assert _charge(_spec(big, small)) == ((("example.com/gpu", 3),), "")
    # read as one device, as Kueue does
    zero = {"name": "z", "deviceClassName": "a100.example.com", "count": 0}
    assert _charge(_spec(zero)) == ((("example.com/gpu", 1),), "")


def test_independent_requests_add_their_own_maxima_up_to_a_bounded_amount() -> None:
    def requests(*counts: tuple[int, int]) -> o.ResourceClaimSpec:
        return msgspec.convert({"devices": {"requests": [
            {"name": f"r{i}", "firstAvailable": [
                {"name": "a", "deviceClassName": "a100.example.com", "count": a},
                {"name": "h", "deviceClassName": "h100.example.com", "count": h}]}
            for i, (a, h) in enumerate(counts)]}}, o.ResourceClaimSpec)

    assert _charge(requests((1, 3), (2, 5))) == ((("example.com/gpu", 8),), "")
    top = 2**63 - 1
    assert _charge(requests((top - 2, 1), (1, 1))) == ((("example.com/gpu", top - 1),), "")
    assert _charge(requests((top - 1, 1), (1, 1))) == ((), (
        ".template.spec.resourceClaims[0].devices.requests[1]: Invalid value: 1: ResourceClaimTemplate t: "
        "the counts charged to logical resource example.com/gpu do not add up to a bounded quota amount"))


@pytest.mark.parametrize(("alternatives", "error"), [
    ((), f"{AT}.firstAvailable: Required value: ResourceClaimTemplate t: must list at least one alternative"),
    (({"name": "a", "deviceClassName": "a100.example.com"}, {"name": "b", "deviceClassName": "tpu.example.com"}),
     f'{AT}.firstAvailable[1].deviceClassName: Invalid value: "tpu.example.com": ResourceClaimTemplate t: every '
     'alternative must map to "example.com/gpu", this one maps to "example.com/tpu"'),
    (({"name": "a", "deviceClassName": "unmapped.example.com"},),
     f'{AT}.firstAvailable[0].deviceClassName: Not found: "unmapped.example.com": ResourceClaimTemplate t: '),
    (({"name": "a", "deviceClassName": "a100.example.com", "allocationMode": "All"},),
     f'{AT}.firstAvailable[0].allocationMode: Unsupported value: "All": ResourceClaimTemplate t: supported '
     'values: "ExactCount"'),
    (({"name": "a", "deviceClassName": "a100.example.com", "count": -1},),
     f"{AT}.firstAvailable[0].count: Invalid value: -1: ResourceClaimTemplate t: must not be negative"),
    (({"name": "a"},), f"{AT}.firstAvailable[0].deviceClassName: Required value: ResourceClaimTemplate t: "),
    (({"name": "a", "deviceClassName": "a100.example.com", "selectors": [{"cel": {"expression": "1 +"}}]},),
     None),
])
def test_what_kueue_does_not_charge_is_refused_with_its_field_error(alternatives: tuple, error: str | None) -> None:
    charged, found = _charge(_spec(*alternatives))
    assert charged == ()
    if error is None:  # a selector that does not compile: the parser's detail
        assert found.startswith(f"{AT}.firstAvailable[0].selectors: Invalid value: null: ResourceClaimTemplate t: "
                                f'{AT[len(".template.spec.resourceClaims[0]."):]}.firstAvailable[0].selectors[0]'
                                '.cel.expression: Invalid value: "1 +": CEL compilation failed: ')
    else:
        assert found == error


def test_a_class_charged_by_counters_or_capacities_is_no_alternative() -> None:
    spec = _spec({"name": "a", "deviceClassName": "a100.example.com"})
    message = (f'{AT}.firstAvailable[0].deviceClassName: Invalid value: "a100.example.com": ResourceClaimTemplate t: '
               "a counter-backed or capacity-backed DeviceClass is not supported for firstAvailable")
    assert _charge(spec, counters=(("a100.example.com", ()),)) == ((), message)
    assert _charge(spec, capacities=(("a100.example.com", ()),)) == ((), message)


def test_the_alternatives_are_not_matched_against_devices() -> None:
    spec = _spec({"name": "a", "deviceClassName": "a100.example.com",
                  "selectors": [{"cel": {"expression": 'device.driver == "nowhere"'}}]})
    assert _charge(spec, slice_devices=(), class_selectors=(("a100.example.com", ()),)) == (
        (("example.com/gpu", 1),), "")


def test_the_gate_is_alpha_off_and_needs_the_dra_gate() -> None:
    assert gates.GATES[gates.KUEUE_DRA_INTEGRATION_PRIORITIZED_LIST] == (gates.ALPHA, False)
    assert not prioritized_on(None)
    assert prioritized_on({"featureGates": {"KueueDRAIntegrationPrioritizedList": True}})
    assert not prioritized_on({"featureGates": {"KueueDRAIntegrationPrioritizedList": True,
                                                "KueueDRAIntegration": False}})


def test_the_fold_charges_pending_claims_anew_when_a_configuration_turns_the_gate_on() -> None:
    def config(on: bool) -> ev.ConfigRecorded:
        return ev.ConfigRecorded(time=1, document={
            "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "featureGates": {"KueueDRAIntegrationPrioritizedList": on},
            "resources": {"deviceClassMappings": [{"name": "example.com/gpu",
                                                   "deviceClassNames": ["a100.example.com", "h100.example.com"]}]}})

    template = msgspec.convert({"metadata": {"name": "t", "namespace": "team"}, "spec": {"spec": {"devices": {
        "requests": [{"name": "gpu", "firstAvailable": [{"name": "h", "deviceClassName": "h100.example.com"},
                                                        {"name": "a", "deviceClassName": "a100.example.com"}]}]}}}},
        o.ResourceClaimTemplate)
    state = ClusterState()
    events = [config(False), upsert(namespace("team"), 1), upsert(cluster_queue("cq"), 1),
              upsert(local_queue("team", "lq0", "cq"), 1), upsert(template, 1), upsert(claiming_workload(), 2)]
    for i, e in enumerate(events):
        state.apply(ev.Record(i, e))
    assert "FirstAvailable device selection is not supported" in workload_problem(state.workloads["team/w"].pod_sets)
    state.apply(ev.Record(state.offset + 1, config(True)))
    assert workload_problem(state.workloads["team/w"].pod_sets) == ""
    assert state.workloads["team/w"].pod_sets[0].dra_requests == (("example.com/gpu", 1),)
