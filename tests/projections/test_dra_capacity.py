"""Capacity sources of ``deviceClassMappings`` (KueueDRAIntegrationConsumableCapacity): a claim of a class with a
capacity source is charged, under the mapping's resource, the capacity its request takes of the devices matching
the source's, the class's and the request's CEL selectors — what ``capacity.requests`` asks (else the device's
policy default, else its whole capacity) rounded up to the device's request policy, the largest among them, times
the count — not its count of devices (Kueue's pkg/dra capacity); the errors Kueue leaves the workload inadmissible
with; the fold charging pending workloads anew as slices and templates change."""

from __future__ import annotations

import msgspec
from fixtures.dra_views import CLAIMS, claim_spec, claiming_workload, source_view
from fixtures.eventgen import cluster_queue, local_queue, namespace, upsert

from events import objects as o
from events import schema as ev
from projections import snapshot
from projections.cluster import ClusterState
from projections.dra import (
    CAPACITIES,
    COUNTERS,
    CapacitySource,
    DraView,
    capacities_of,
    capacity_charge_of,
    claim_charge,
    counters_of,
    extended_charge,
    workload_problem,
)

DRIVER = "gpu.example.com"
GI = 2**30


def _document(gate: bool = True, selector: str = f'device.driver == "{DRIVER}"') -> dict:
    source = {"capacity": {"name": "memory", "driver": DRIVER, "deviceSelector": {"cel": {"expression": selector}}}}
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "featureGates": {"KueueDRAIntegrationConsumableCapacity": gate},
            "resources": {"deviceClassMappings": [
                {"name": "example.com/gpu-memory", "deviceClassNames": ["shared-gpu"], "sources": [source]},
                {"name": "example.com/gpus", "deviceClassNames": ["gpu"]}]}}


def _device(name: str, memory: str | None = "40Gi", policy: dict | None = None) -> dict:
    d: dict = {"name": name, "attributes": {"model": {"string": "a100"}}}
    if memory is not None:
        d["capacity"] = {"memory": {"value": memory, **({"requestPolicy": policy} if policy else {})}}
    return d


def _template(count: int = 1, memory: str | None = None) -> o.ResourceClaimSpec:
    asked = {"capacity": {"requests": {"memory": memory}}} if memory is not None else {}
    return claim_spec("shared-gpu", count, **asked)


def _view(devices: tuple[dict, ...], template: o.ResourceClaimSpec | None = None,
          document: dict | None = None, class_selectors: tuple[str, ...] | None = ()) -> DraView:
    return source_view("shared-gpu", "example.com/gpu-memory", template or _template(), devices, DRIVER, class_selectors,
                       capacities=capacities_of(document or _document()))


def test_capacity_sources_are_read_only_with_their_gate() -> None:
    source = CapacitySource("example.com/gpu-memory", DRIVER, "memory", f'device.driver == "{DRIVER}"')
    assert capacities_of(_document()) == (("shared-gpu", (source,)),)
    assert not capacities_of(_document(gate=False))


def test_a_class_with_a_capacity_source_is_charged_the_capacity_asked_not_its_count() -> None:
    view = _view((_device("g0"), _device("g1")), _template(count=2, memory="10Gi"))
    assert claim_charge("main", CLAIMS, view) == ((), "")
    assert capacity_charge_of(CLAIMS, view) == ((("example.com/gpu-memory", 2 * 10 * GI),), "")


def test_without_a_request_the_policy_default_else_the_whole_capacity_is_charged() -> None:
    defaulted = _view((_device("g0", policy={"default": "4Gi"}), _device("g1", "8Gi", policy={"default": "2Gi"})))
    assert capacity_charge_of(CLAIMS, defaulted)[0] == (("example.com/gpu-memory", 4 * GI),)
    assert capacity_charge_of(CLAIMS, _view((_device("g0", "8Gi"),)))[0] == (("example.com/gpu-memory", 8 * GI),)


def test_the_request_is_rounded_up_to_each_devices_policy_and_the_largest_charged() -> None:
    values = {"validValues": ["5Gi", "10Gi", "20Gi"]}
    steps = {"validRange": {"min": "1Gi", "step": "4Gi", "max": "40Gi"}}
    view = _view((_device("g0", policy=values), _device("g1", policy=steps)), _template(memory="6Gi"))
    assert capacity_charge_of(CLAIMS, view)[0] == (("example.com/gpu-memory", 10 * GI),)  # 10Gi; 1Gi + 2 x 4Gi


def test_no_device_with_the_capacity_or_none_taking_the_request_leaves_it_inadmissible() -> None:
    at = ".template.spec.resourceClaims[0].devices.requests[0]"
    assert capacity_charge_of(CLAIMS, _view((_device("g0", None),))) == ((), CAPACITIES + (
        f'{at}: Internal error: matched devices have no capacity dimension "memory"'))
    small = _view((_device("g0", policy={"validValues": ["1Gi"]}),), _template(memory="2Gi"))
    assert capacity_charge_of(CLAIMS, small) == ((), CAPACITIES + (
        f"{at}: Invalid value: null: capacity request cannot be satisfied by any matched device's RequestPolicy "
        'for dimension "memory"'))
    few = _view((_device("g0"),), _template(count=2))
    assert capacity_charge_of(CLAIMS, few) == ((), CAPACITIES + (
        f"{at}: Internal error: insufficient matching devices for capacity driver: 1 device(s) match but 2 "
        "requested"))
    other = _view((_device("g0"),), document=_document(selector='device.driver == "other.example.com"'))
    assert "0 device(s) match but 1 requested" in capacity_charge_of(CLAIMS, other)[1]


def test_a_missing_class_is_a_kueue_internal_error() -> None:
    _, error = capacity_charge_of(CLAIMS, _view((_device("g0"),), class_selectors=None))
    assert error == CAPACITIES + (".template.spec.resourceClaims[0].devices.requests[0]: Internal error: failed to "
                                  'get DeviceClass shared-gpu: deviceclasses.resource.k8s.io "shared-gpu" not found')


def test_a_capacity_error_is_said_after_every_pod_sets_counter_error() -> None:
    class PS(msgspec.Struct):
        dra_error: str

    capacity = CAPACITIES + ".template.spec.resourceClaims[0].devices.requests[0]: Internal error: c"
    counter = COUNTERS + ".template.spec.resourceClaims[0].devices.requests[0]: Internal error: x"
    assert workload_problem((PS(capacity), PS(counter))) == (
        "spec.podSets[1].template.spec.resourceClaims[0].devices.requests[0]: Internal error: x")
    assert workload_problem((PS(""), PS(capacity))) == (
        "spec.podSets[1].template.spec.resourceClaims[0].devices.requests[0]: Internal error: c")


def _claim_template(memory: str) -> o.ResourceClaimTemplate:
    return msgspec.convert({"metadata": {"name": "t", "namespace": "team"}, "spec": {"spec": {"devices": {
        "requests": [{"name": "r", "exactly": {"deviceClassName": "shared-gpu",
                                               "capacity": {"requests": {"memory": memory}}}}]}}}},
        o.ResourceClaimTemplate)


def _slice(*devices: dict) -> o.ResourceSlice:
    return msgspec.convert({"metadata": {"name": "s0"}, "spec": {
        "driver": DRIVER, "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
        "devices": list(devices)}}, o.ResourceSlice)


def _fold(*events: ev.Event, document: dict | None = None) -> ClusterState:
    state = ClusterState()
    base = [ev.ConfigRecorded(time=1, document=document or _document()), upsert(namespace("team"), 1),
            upsert(cluster_queue("cq"), 1), upsert(local_queue("team", "lq0", "cq"), 1),
            upsert(_claim_template("3Gi"), 1), upsert(msgspec.convert({"metadata": {"name": "shared-gpu"}},
                                                                      o.DeviceClass), 1)]
    for i, e in enumerate([*base, *events]):
        state.apply(ev.Record(i, e))
    return state


def _pod_set(state: ClusterState):
    return state.workloads["team/w"].pod_sets[0]


def test_the_fold_charges_a_pending_workload_its_capacity_anew_as_slices_and_templates_change() -> None:
    state = _fold(upsert(claiming_workload(), 2))
    assert "insufficient matching devices for capacity driver" in workload_problem(state.workloads["team/w"].pod_sets)
    state.apply(ev.Record(state.offset + 1, upsert(_slice(_device("g0", policy={"validValues": ["4Gi", "8Gi"]})), 3)))
    assert workload_problem(state.workloads["team/w"].pod_sets) == ""
    assert _pod_set(state).dra_requests == (("example.com/gpu-memory", 4 * GI),)
    assert dict(_pod_set(state).requests)["example.com/gpu-memory"] == 4 * GI
    state.apply(ev.Record(state.offset + 1, upsert(_claim_template("5Gi"), 4)))
    assert _pod_set(state).dra_requests == (("example.com/gpu-memory", 8 * GI),)
    restored = snapshot.decode(snapshot.encode(state))
    assert snapshot.digest(restored) == snapshot.digest(state)
    assert restored.claim_templates["team/t"].spec.spec.devices.requests[0].exactly.capacity.requests == {
        "memory": "5Gi"}


def test_with_the_gate_off_the_class_is_charged_by_count() -> None:
    document = _document(gate=False)
    document["resources"]["deviceClassMappings"][0].pop("sources")
    state = _fold(upsert(claiming_workload(), 2), document=document)
    assert _pod_set(state).dra_requests == (("example.com/gpu-memory", 1),)


def _pod(*containers: dict) -> o.PodSpec:
    return msgspec.convert({"containers": list(containers)}, o.PodSpec)


def test_an_extended_resource_served_by_a_class_with_sources_is_refused() -> None:
    """Kueue charges counter and capacity sources only through ResourceClaimTemplates: an extended resource whose
    serving class's mapping gives any is refused, at the first container asking for it."""
    spec = _pod({"name": "a", "resources": {"requests": {"cpu": "1"}}},
                {"name": "b", "resources": {"requests": {"example.com/gpu": "1"}}})
    view = msgspec.structs.replace(_view(()), extended=(("example.com/gpu", "shared-gpu"),))
    assert extended_charge(spec, view) == ((), (), (
        '.template.spec.containers[1]: Invalid value: "example.com/gpu": extended resource example.com/gpu resolves '
        "to DeviceClass shared-gpu with capacity sources configured; use ResourceClaimTemplates with "
        "capacity.requests for capacity-based quota"))
    counted = DraView(reject=False, mapping=(("shared-gpu", "example.com/gpu-memory"),),
                      extended=(("example.com/gpu", "shared-gpu"),), counters=counters_of(_counter_document()))
    assert extended_charge(spec, counted)[2].endswith(
        "resolves to DeviceClass shared-gpu with counters configured; use ResourceClaimTemplates with CEL selectors "
        "for counter-based quota")
    plain = msgspec.structs.replace(view, capacities=())
    assert extended_charge(spec, plain) == (("example.com/gpu",), (("example.com/gpu-memory", 1),), "")


def _counter_document() -> dict:
    source = {"counter": {"name": "memory", "driver": DRIVER,
                          "deviceSelector": {"cel": {"expression": "true"}}}}
    return {"resources": {"deviceClassMappings": [
        {"name": "example.com/gpu-memory", "deviceClassNames": ["shared-gpu"], "sources": [source]}]}}


def test_the_fold_refuses_an_extended_resource_of_a_class_with_capacity_sources() -> None:
    dc = msgspec.convert({"metadata": {"name": "shared-gpu"}, "spec": {"extendedResourceName": "example.com/gpu"}},
                         o.DeviceClass)
    wl = msgspec.convert({
        "metadata": {"name": "w", "namespace": "team", "uid": "uid-w"},
        "spec": {"queueName": "lq0", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "containers": [{"name": "c", "resources": {"requests": {"example.com/gpu": "2"}}}]}}}]}}, o.Workload)
    state = _fold(upsert(dc, 2), upsert(wl, 2))
    assert workload_problem(state.workloads["team/w"].pod_sets) == (
        'spec.podSets[0].template.spec.containers[0]: Invalid value: "example.com/gpu": extended resource '
        "example.com/gpu resolves to DeviceClass shared-gpu with capacity sources configured; use "
        "ResourceClaimTemplates with capacity.requests for capacity-based quota")
