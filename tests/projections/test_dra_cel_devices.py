"""Requests with CEL selectors matched against the cluster's devices, as Kueue's claim charge does: each such request
of a claim needs as many devices (of every ResourceSlice, whatever its pool, when some such request's class has no
counter or capacity sources) satisfying its class's selectors and its own as its count, a device counted for one
request only; else the workload is inadmissible with Kueue's errors (all of the claim's, bracketed)."""

from __future__ import annotations

import msgspec
from fixtures.eventgen import cluster_queue, delete, local_queue, namespace, upsert

from events import objects as o
from events import schema as ev
from projections.cluster import ClusterState
from projections.dra import DraView, claim_charge, counters_of, workload_problem
from projections.workloads import _BY_SPEC, pod_set_info

DRIVER = "gpu.example.com"
A100 = f'device.attributes["{DRIVER}"].model == "a100"'
AT = ".template.spec.resourceClaims[0].devices.requests"


def _device(name: str, model: str = "a100") -> o.Device:
    return msgspec.convert({"name": name, "attributes": {"model": {"string": model}}}, o.Device)


def _spec(*requests: tuple[str, int, tuple[str, ...]]) -> o.ResourceClaimSpec:
    return msgspec.convert({"devices": {"requests": [
        {"name": f"r{i}", "exactly": {"deviceClassName": dc, "count": count,
                                      "selectors": [{"cel": {"expression": e}} for e in selectors]}}
        for i, (dc, count, selectors) in enumerate(requests)]}}, o.ResourceClaimSpec)


CLAIMS = [msgspec.convert({"name": "rc", "resourceClaimTemplateName": "t"}, o.PodResourceClaim)]


def _view(spec: o.ResourceClaimSpec, devices: tuple[o.Device, ...] | None, classes: dict | None = None,
          **more: object) -> DraView:
    known = {"gpu": ()} if classes is None else classes
    return DraView(reject=False, mapping=(("gpu", "example.com/gpus"), ("gpu-slice", "example.com/gpu-memory")),
                   templates=(("t", spec),), class_selectors=tuple(sorted(known.items())),
                   slice_devices=None if devices is None else tuple((DRIVER, d) for d in devices), **more)


def test_a_request_fewer_devices_match_than_it_asks_for_is_refused() -> None:
    devices = (_device("g0"), _device("g1"), _device("h0", "h100"))
    assert claim_charge("main", CLAIMS, _view(_spec(("gpu", 2, (A100,))), devices)) == (
        (("example.com/gpus", 2),), "")
    assert claim_charge("main", CLAIMS, _view(_spec(("gpu", 3, (A100,))), devices)) == ((), (
        f"{AT}[0].exactly.selectors: Internal error: ResourceClaimTemplate t: insufficient matching devices for CEL "
        "selector in DeviceClass gpu: 2 device(s) match in the cluster but 3 requested"))


def test_the_class_selectors_choose_too_and_a_device_serves_one_request() -> None:
    devices = (_device("g0"), _device("h0", "h100"))
    spec = _spec(("gpu", 1, (A100,)), ("gpu", 1, ("true",)))
    assert claim_charge("main", CLAIMS, _view(spec, devices))[1] == ""
    only_a100 = _view(spec, devices, classes={"gpu": (A100,)})
    assert claim_charge("main", CLAIMS, only_a100)[1] == (
        f"{AT}[1].exactly.selectors: Internal error: ResourceClaimTemplate t: insufficient matching devices for CEL "
        "selector in DeviceClass gpu: 0 device(s) match in the cluster but 1 requested")


def test_a_missing_class_and_a_failing_selector_are_all_said_bracketed() -> None:
    spec = _spec(("nope", 1, (A100,)), ("gpu", 1, ('device.attributes["x.io"].model == "a"',)))
    _, error = claim_charge("main", CLAIMS, _view(spec, (_device("g0"),)))
    first, second = error.split("\n")
    assert first == (f"{AT}[0]: Internal error: ResourceClaimTemplate t: failed to get DeviceClass nope: "
                     'deviceclasses.resource.k8s.io "nope" not found')
    assert second.startswith(f"{AT}[1].exactly.selectors: Invalid value: null: ResourceClaimTemplate t: CEL "
                             "evaluation failed for DeviceClass gpu: ")

    class PS(msgspec.Struct):
        dra_error: str

    assert workload_problem((PS(error),)) == f"[spec.podSets[0]{first}, spec.podSets[0]{second}]"


def test_without_known_devices_the_selectors_are_only_compiled() -> None:
    assert claim_charge("main", CLAIMS, _view(_spec(("gpu", 3, (A100,))), None)) == (
        (("example.com/gpus", 3),), "")


def test_classes_with_sources_are_matched_against_their_drivers_devices_only() -> None:
    source = {"counter": {"name": "memory", "driver": "other.example.com",
                          "deviceSelector": {"cel": {"expression": "true"}}}}
    document = {"resources": {"deviceClassMappings": [
        {"name": "example.com/gpu-memory", "deviceClassNames": ["gpu-slice"], "sources": [source]}]}}
    spec = _spec(("gpu-slice", 1, (A100,)))
    view = _view(spec, (_device("g0"),), classes={"gpu-slice": ()}, counters=counters_of(document))
    assert "0 device(s) match in the cluster but 1 requested" in claim_charge("main", CLAIMS, view)[1]


def _fold(*events: ev.Event, tmpl: o.ResourceClaimTemplate | None = None) -> ClusterState:
    state = ClusterState()
    tmpl = tmpl or msgspec.convert({"metadata": {"name": "t", "namespace": "team"}, "spec": {"spec": {"devices": {
        "requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "selectors": [{"cel": {"expression": A100}}]}}]
    }}}}, o.ResourceClaimTemplate)
    document = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                "resources": {"deviceClassMappings": [{"name": "example.com/gpus", "deviceClassNames": ["gpu"]}]}}
    wl = msgspec.convert({
        "metadata": {"name": "w", "namespace": "team", "uid": "uid-w"},
        "spec": {"queueName": "lq0", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "containers": [{"name": "c"}], "resourceClaims": [{"name": "rc", "resourceClaimTemplateName": "t"}]}}}]}},
        o.Workload)
    base = [ev.ConfigRecorded(time=1, document=document), upsert(namespace("team"), 1),
            upsert(cluster_queue("cq"), 1), upsert(local_queue("team", "lq0", "cq"), 1), upsert(tmpl, 1),
            upsert(msgspec.convert({"metadata": {"name": "gpu"}}, o.DeviceClass), 1), upsert(wl, 2)]
    for i, e in enumerate([*base, *events]):
        state.apply(ev.Record(i, e))
    return state


def test_the_fold_charges_a_selecting_claim_anew_as_slices_and_classes_come_and_go() -> None:
    state = _fold()
    assert "0 device(s) match in the cluster but 1 requested" in workload_problem(state.workloads["team/w"].pod_sets)
    slice_ = msgspec.convert({"metadata": {"name": "s0"}, "spec": {
        "driver": DRIVER, "pool": {"name": "p", "generation": 1, "resourceSliceCount": 2},
        "devices": [{"name": "g0", "attributes": {"model": {"string": "a100"}}}]}}, o.ResourceSlice)
    state.apply(ev.Record(state.offset + 1, upsert(slice_, 3)))  # an incomplete pool's devices count here
    assert workload_problem(state.workloads["team/w"].pod_sets) == ""
    assert state.workloads["team/w"].pod_sets[0].dra_requests == (("example.com/gpus", 1),)
    state.apply(ev.Record(state.offset + 1, delete("DeviceClass", "gpu", 4)))
    assert "failed to get DeviceClass gpu" in workload_problem(state.workloads["team/w"].pod_sets)


def _pod_set() -> o.PodSet:
    return msgspec.convert({"name": "main", "count": 1, "template": {"spec": {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        "resourceClaims": [{"name": "rc", "resourceClaimTemplateName": "t"}]}}}, o.PodSet)


def test_the_pod_set_memo_keys_on_a_digest_of_the_devices_not_on_all_of_them() -> None:
    """A pod set with claims is memoised on its namespace's view: the key holds a digest of the cluster's devices,
    so it does not grow with them (it is kept for every such pod set, and encoded at each upsert), yet views
    differing only in their devices are told apart."""
    spec = _spec(("gpu", 2, (A100,)))
    many = _view(spec, tuple(_device(f"g{i}") for i in range(2000)))
    _BY_SPEC.clear()
    assert pod_set_info(_pod_set(), dra=many).dra_error == ""
    assert max(len(k) for k in _BY_SPEC) < 2000
    few = _view(spec, (_device("g0"), _device("g1")))
    short = _view(spec, (_device("g0"), _device("h0", "h100")))
    assert pod_set_info(_pod_set(), dra=few).dra_error == ""
    assert "insufficient matching devices" in pod_set_info(_pod_set(), dra=short).dra_error


def test_whether_templates_select_is_asked_anew_after_a_template_changes() -> None:
    """The fold remembers whether some template has CEL selectors (asked on every DeviceClass and ResourceSlice
    event); a template gaining selectors after the answer was taken must make the next slice count again."""
    selecting = _fold().claim_templates["team/t"]
    plain = msgspec.convert({"metadata": {"name": "t", "namespace": "team"}, "spec": {"spec": {"devices": {
        "requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}}}}, o.ResourceClaimTemplate)
    state = _fold(tmpl=plain)  # its DeviceClass event asks: no template selects

    def slice_of(model: str, generation: int) -> o.ResourceSlice:
        return msgspec.convert({"metadata": {"name": "s0"}, "spec": {
            "driver": DRIVER, "pool": {"name": "p", "generation": generation, "resourceSliceCount": 1},
            "devices": [{"name": "g0", "attributes": {"model": {"string": model}}}]}}, o.ResourceSlice)

    for event in (upsert(slice_of("h100", 1), 4), upsert(selecting, 5)):
        state.apply(ev.Record(state.offset + 1, event))
    assert "0 device(s) match in the cluster but 1 requested" in workload_problem(state.workloads["team/w"].pod_sets)
    state.apply(ev.Record(state.offset + 1, upsert(slice_of("a100", 2), 6)))
    assert workload_problem(state.workloads["team/w"].pod_sets) == ""
