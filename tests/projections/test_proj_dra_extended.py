"""KueueDRAIntegrationExtendedResource (projections.dra): a container's request of an extended resource that a
DeviceClass serves (``spec.extendedResourceName``) is charged as a DRA device, after the cases of Kueue's pkg/dra
extended-resource tests; and the fold charges pending workloads anew when the DeviceClasses or the gate change."""

from __future__ import annotations

import msgspec
from fixtures.eventgen import cluster_queue, delete, limit_range, local_queue, namespace, upsert

from events import objects as o
from events import schema as ev
from projections import snapshot
from projections.audit import AuditTrail
from projections.cluster import ClusterState
from projections.dra import (
    DraView,
    extended_charge,
    extended_on,
    is_extended_resource_name,
    serving_classes,
    workload_problem,
)
from projections.request_rules import ResourceTransformation, compile_rules
from projections.workloads import pod_set_info

GPU = "example.com/gpu"
SERVED = ((GPU, "gpu.example.com"),)


def _class(name: str, resource: str | None = GPU, created: str | None = "2024-01-01T00:00:00Z") -> o.DeviceClass:
    return o.DeviceClass(api_version="resource.k8s.io/v1", metadata=o.ObjectMeta(name=name, creation_timestamp=created),
                         spec=o.DeviceClassSpec(extended_resource_name=resource))


def _pod(containers: list[dict], init: list[dict] | None = None) -> o.PodSpec:
    return msgspec.convert({"containers": containers, "initContainers": init or []}, o.PodSpec)


def _c(requests: dict | None = None, limits: dict | None = None, sidecar: bool = False) -> dict:
    c: dict = {"name": "c", "resources": {"requests": requests or {}, "limits": limits or {}}}
    if sidecar:
        c["restartPolicy"] = "Always"
    return c


def _view(mapping: tuple = (), served: tuple = SERVED) -> DraView:
    return DraView(reject=False, mapping=mapping, extended=served)


def test_extended_resource_names_are_kubernetes_ones() -> None:
    assert is_extended_resource_name("nvidia.com/gpu") and is_extended_resource_name(GPU)
    for name in ("cpu", "memory", "hugepages-2Mi", "custom-resource", "kubernetes.io/x", "requests.example.com/x"):
        assert not is_extended_resource_name(name), name


def test_the_class_serving_a_resource_is_the_latest_created_then_the_first_by_name() -> None:
    assert serving_classes([_class("b", created="2024-01-01T00:02:00Z"), _class("a")]) == ((GPU, "b"),)
    assert serving_classes([_class("b"), _class("a", created="2024-01-01T00:00:00.5Z")]) == ((GPU, "a"),), \
        "created in the same second: a tie"
    assert serving_classes([_class("plain", resource=None), _class("z", created=None), _class("y")]) == ((GPU, "y"),)


def test_the_pod_total_is_charged_under_the_mapped_resource_or_its_own_name() -> None:
    spec = _pod([_c({GPU: "1", "cpu": "1"}), _c(limits={GPU: "2"})])
    assert extended_charge(spec, _view()) == ((GPU,), ((GPU, 3),), "")
    assert extended_charge(spec, _view(mapping=(("gpu.example.com", "example.com/gpus"),))) == (
        (GPU,), (("example.com/gpus", 3),), "")
    assert extended_charge(_pod([_c({"example.com/other": "4"})]), _view()) == ((), (), ""), "no class serves it"
    assert extended_charge(_pod([_c({GPU: "0"})]), _view()) == ((), (), ""), "nothing asked: nothing replaced"


def test_sidecars_add_and_other_init_containers_are_maxed() -> None:
    spec = _pod([_c({GPU: "1"})], init=[_c({GPU: "1"}, sidecar=True), _c({GPU: "5"})])
    assert extended_charge(spec, _view())[1] == ((GPU, 6),), "the init container runs beside the sidecar: 5 + 1"
    assert extended_charge(_pod([_c({GPU: "1"})], init=[_c({GPU: "1"})]), _view())[1] == ((GPU, 1),)


def test_a_quantity_that_is_not_whole_is_refused_with_the_field_and_value_as_kubernetes_writes_them() -> None:
    assert extended_charge(_pod([_c({"cpu": "1"}), _c({GPU: "1.5"})]), _view()) == (
        (), (), '.template.spec.containers[1].resources.requests.example.com/gpu: Invalid value: "1500m": '
                'extended resource quantity must be an integer')
    assert extended_charge(_pod([_c()], init=[_c({GPU: "500m"})]), _view())[2].startswith(
        ".template.spec.initContainers[0].resources.requests.example.com/gpu: Invalid value: \"500m\"")
    assert extended_charge(_pod([_c({"example.com/other": "500m"})]), _view()) == ((), (), ""), "not served: allowed"


def test_every_fraction_is_listed_as_kueue_aggregates_its_field_errors() -> None:
    """Kueue checks each container's quantity (so two halves cannot pass as one whole), by resource, init containers
    first, across all pod sets, and says them all: in brackets when more than one, each once."""
    other = "example.com/fpga"
    view = _view(served=((other, "fpga.example.com"), *SERVED))
    spec = _pod([_c({GPU: "500m", other: "1.5"}), _c({GPU: "500m"})], init=[_c({GPU: "250m"})])
    at = ".template.spec.{}.resources.requests.{}: Invalid value: \"{}\": extended resource quantity must be an integer"
    assert extended_charge(spec, view)[2].split("\n") == [
        at.format("containers[0]", other, "1500m"), at.format("initContainers[0]", GPU, "250m"),
        at.format("containers[0]", GPU, "500m"), at.format("containers[1]", GPU, "500m")]

    def ps(pod: o.PodSpec) -> o.PodSet:
        return pod_set_info(o.PodSet(name="p", count=1, template=o.PodTemplateSpec(spec=pod)), dra=_view())
    halves = ps(_pod([_c({GPU: "500m"}), _c({GPU: "500m"})]))
    fraction = ps(_pod([_c({GPU: "1.5"})]))
    assert workload_problem((halves, ps(_pod([_c({GPU: "1"})])), fraction)) == (
        '[spec.podSets[0].template.spec.containers[0].resources.requests.example.com/gpu: Invalid value: "500m": '
        "extended resource quantity must be an integer, "
        'spec.podSets[0].template.spec.containers[1].resources.requests.example.com/gpu: Invalid value: "500m": '
        "extended resource quantity must be an integer, "
        'spec.podSets[2].template.spec.containers[0].resources.requests.example.com/gpu: Invalid value: "1500m": '
        "extended resource quantity must be an integer]")
    assert workload_problem((fraction,)) == (
        'spec.podSets[0].template.spec.containers[0].resources.requests.example.com/gpu: Invalid value: "1500m": '
        "extended resource quantity must be an integer"), "one error: no brackets"


def test_a_quantity_or_a_pod_total_past_int64_is_refused_as_kueue_words_it() -> None:
    at = ".template.spec.{}.resources.requests.example.com/gpu: Invalid value: \"{}\": {}"
    assert extended_charge(_pod([_c({GPU: "10E"})]), _view())[2] == at.format(
        "containers[0]", "10E", "extended resource quantity must be an integer")
    assert extended_charge(_pod([_c({GPU: "1"}), _c({GPU: "9e18"}), _c({GPU: "9e18"})]), _view())[2] == at.format(
        "containers[0]", "18000000000000000001", "total extended resource quantity overflows int64")
    assert extended_charge(_pod([_c({GPU: "9e18"})], init=[_c({GPU: "9e18"})]), _view()) == (
        (GPU,), ((GPU, 9 * 10**18),), ""), "an init container's request is maxed, not added"


def test_the_device_charge_replaces_the_request_after_the_rules_and_is_not_placed() -> None:
    """Kueue drops the served resource from what the rules left and adds the device charge: a transformation of it
    keeps its outputs. Topology placement counts the pod spec's requests, not the rules' outputs (#12006), and
    leaves the device out."""
    rules = compile_rules([], [ResourceTransformation(input=GPU, outputs={"example.com/credits": "2"})], "test")
    ps = o.PodSet(name="main", count=2, template=o.PodTemplateSpec(spec=_pod([_c({GPU: "1", "cpu": "1"})])))
    view = _view(mapping=(("gpu.example.com", "example.com/gpus"),))
    info = pod_set_info(ps, rules=rules, dra=view)
    assert info.requests == (("cpu", 1000), ("example.com/credits", 2), ("example.com/gpus", 1))
    assert info.dra_requests == (("example.com/gpus", 1),)
    assert info.placement_requests == (("cpu", 1000),)
    assert pod_set_info(ps, rules=rules).requests == (("cpu", 1000), ("example.com/credits", 2), (GPU, 1))


def test_a_claim_error_is_said_before_an_extended_resource_one() -> None:
    """Kueue charges claims first and looks at extended resources only once every pod set's claims are charged."""
    def ps(error: str) -> o.PodSet:
        return msgspec.structs.replace(pod_set_info(o.PodSet(name="p", count=1)), dra_error=error)
    extended = ".template.spec.containers[0].resources.requests.example.com/gpu: x"
    claims = ".template.spec.resourceClaims[0]: y"
    assert workload_problem((ps(extended), ps(claims))) == "spec.podSets[1]" + claims
    assert workload_problem((ps(extended), ps(""))) == "spec.podSets[0]" + extended


def test_the_gate_needs_the_dra_gate() -> None:
    assert extended_on(None)
    assert not extended_on({"featureGates": {"KueueDRAIntegrationExtendedResource": False}})
    assert not extended_on({"featureGates": {"KueueDRAIntegration": False,
                                             "KueueDRAIntegrationExtendedResource": False}})


def _gpu_workload() -> o.Workload:
    return msgspec.convert({
        "metadata": {"name": "w", "namespace": "team", "uid": "uid-w"},
        "spec": {"queueName": "lq0", "podSets": [{"name": "main", "count": 2, "template": {"spec": {
            "containers": [_c({"cpu": "1", GPU: "1"})]}}}]}}, o.Workload)


def _document(gate: bool) -> dict:
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "featureGates": {"KueueDRAIntegrationExtendedResource": gate},
            "resources": {"deviceClassMappings": [{"name": "example.com/gpus", "deviceClassNames": ["gpu.example.com"]}]}}


def _fold(*events: ev.Event) -> ClusterState:
    state = ClusterState()
    base = [ev.ConfigRecorded(time=1, document=_document(True)), upsert(namespace("team"), 1),
            upsert(cluster_queue("cq"), 1), upsert(local_queue("team", "lq0", "cq"), 1)]
    for i, e in enumerate([*base, *events]):
        state.apply(ev.Record(i, e))
    return state


def _requests(state: ClusterState) -> tuple:
    return state.workloads["team/w"].pod_sets[0].requests


def test_a_device_class_coming_or_going_charges_a_pending_workload_anew() -> None:
    wl = upsert(_gpu_workload(), 2)
    assert _requests(_fold(wl)) == (("cpu", 1000), (GPU, 1))
    state = _fold(wl, upsert(_class("gpu.example.com"), 3))
    assert _requests(state) == (("cpu", 1000), ("example.com/gpus", 1))
    assert "team/w" in state.touched
    assert _requests(_fold(upsert(_class("gpu.example.com"), 2), wl)) == (("cpu", 1000), ("example.com/gpus", 1))
    gone = _fold(upsert(_class("gpu.example.com"), 2), wl, delete("DeviceClass", "gpu.example.com", 3))
    assert _requests(gone) == (("cpu", 1000), (GPU, 1))


def test_a_configuration_turning_the_gate_off_charges_the_request_as_an_ordinary_one() -> None:
    state = _fold(upsert(_class("gpu.example.com"), 2), upsert(_gpu_workload(), 2),
                  ev.ConfigRecorded(time=3, document=_document(False)))
    assert _requests(state) == (("cpu", 1000), (GPU, 1))
    state.apply(ev.Record(state.offset + 1, ev.ConfigRecorded(time=4, document=_document(True))))
    assert _requests(state) == (("cpu", 1000), ("example.com/gpus", 1))


def test_a_snapshot_keeps_the_device_classes() -> None:
    state = _fold(upsert(_class("gpu.example.com"), 2), upsert(_gpu_workload(), 2))
    restored = snapshot.decode(snapshot.encode(state))
    assert restored.device_classes == state.device_classes
    assert snapshot.digest(restored) == snapshot.digest(state)
    restored.apply(ev.Record(state.offset + 1, delete("DeviceClass", "gpu.example.com", 3)))
    assert _requests(restored) == (("cpu", 1000), (GPU, 1))


def _workload(*containers: dict) -> o.Workload:
    return msgspec.convert({"metadata": {"name": "w", "namespace": "team", "uid": "uid-w"}, "spec": {
        "queueName": "lq0", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "containers": list(containers)}}}]}}, o.Workload)


def test_only_a_request_in_the_template_makes_kueue_charge_served_resources_as_devices() -> None:
    """Kueue's workload controller looks for served extended resources only when a container of the template
    requests one (not zero) — before it applies LimitRange defaults and limits as missing requests: a default or a
    limit alone leaves the resource an ordinary request. Once it looks, the adjusted pods are charged."""
    gpu_class = upsert(_class("gpu.example.com"), 2)
    defaults = upsert(limit_range("team", "lr", default={GPU: "1"}), 2)
    plain = upsert(_workload(_c({"cpu": "1"})), 3)
    assert _requests(_fold(defaults, gpu_class, plain)) == (("cpu", 1000), (GPU, 1))
    assert _requests(_fold(plain, gpu_class, defaults)) == (("cpu", 1000), (GPU, 1)), "the LimitRange came last"
    assert _requests(_fold(defaults, plain, gpu_class)) == (("cpu", 1000), (GPU, 1)), "the DeviceClass came last"
    limited = upsert(_workload(_c({"cpu": "1"}, limits={GPU: "2"})), 3)
    assert _requests(_fold(gpu_class, limited)) == (("cpu", 1000), (GPU, 2))
    zero = upsert(_workload(_c({"cpu": "1", GPU: "0"}, limits={GPU: "2"})), 3)
    assert _requests(_fold(gpu_class, zero)) == (("cpu", 1000), (GPU, 0)), "a zero request is no request"
    asked = upsert(_workload(_c({"cpu": "1", GPU: "1"}), _c(limits={GPU: "2"})), 3)
    assert _requests(_fold(gpu_class, asked)) == (("cpu", 1000), ("example.com/gpus", 3)), \
        "one request: the limits of the adjusted pod are charged as devices too"
    assert _requests(_fold(defaults, gpu_class, upsert(_workload(_c({"cpu": "1", GPU: "1"}), _c()), 3))) == (
        ("cpu", 1000), ("example.com/gpus", 2)), "and so are the LimitRange's defaults"


def test_the_audit_does_not_refuse_a_fractional_limit_that_no_request_names() -> None:
    """Kueue never looks at (so never refuses) a served resource the template only limits."""
    trail = AuditTrail()
    events = [ev.ConfigRecorded(time=1, document=_document(True)), upsert(namespace("team"), 1),
              upsert(cluster_queue("cq"), 1), upsert(local_queue("team", "lq0", "cq"), 1),
              upsert(_class("gpu.example.com"), 2), upsert(_workload(_c({"cpu": "1"}, limits={GPU: "500m"})), 3)]
    for i, e in enumerate(events):
        trail.apply(ev.Record(i, e))
    assert [s.step for s in trail.timeline("team/w")] == ["Submitted", "Queued"]


def test_the_overhead_and_rule_outputs_under_a_served_name_are_charged_beside_the_devices() -> None:
    """Kueue v0.20 (#14154): only the containers' requests of a served resource become the device charge; the pod
    overhead's share of it and a transformation's output under its name stay charged, and add up with the device
    charge when that is under the same name. Sidecars' requests count with the containers'."""
    def pod_set(overhead: dict) -> o.PodSet:
        spec = msgspec.convert({"containers": [_c({GPU: "1", "cpu": "1"})], "overhead": overhead,
                                "initContainers": [_c({GPU: "1"}, sidecar=True)]}, o.PodSpec)
        return o.PodSet(name="main", count=1, template=o.PodTemplateSpec(spec=spec))

    rules = compile_rules([], [ResourceTransformation(input="cpu", outputs={GPU: "3"})], "test")
    assert pod_set_info(pod_set({GPU: "1"}), dra=_view()).requests == (("cpu", 1000), (GPU, 3)), "2 devices + 1"
    assert pod_set_info(pod_set({}), rules=rules, dra=_view()).requests == (("cpu", 1000), (GPU, 5)), "2 + 3"
    mapped = _view(mapping=(("gpu.example.com", "example.com/gpus"),))
    assert pod_set_info(pod_set({GPU: "1"}), dra=mapped).requests == (("cpu", 1000), (GPU, 1), ("example.com/gpus", 2))
    assert pod_set_info(pod_set({}), rules=rules, dra=mapped).requests == (
        ("cpu", 1000), (GPU, 3), ("example.com/gpus", 2))
