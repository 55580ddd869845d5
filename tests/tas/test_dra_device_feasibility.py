"""KueueDRADeviceFeasibility and KueueDRAIntegrationDeviceTaints: TAS places a pod set's pods only on nodes whose
DRA devices (the ResourceSlices they reach) can serve the claims each pod makes from its ResourceClaimTemplates.

The YAML scenarios ``tests/scheduler/scenarios/tas-dra-device-*`` (each with a ``-gate-off`` twin) show it through
the scheduling cycle; these tests pin the placement, the allocation rules and the not-fit message.
"""

from __future__ import annotations

from typing import Any

from fixtures.tasbuild import flavor_obj, node_obj, topology_obj, upsert

from events import schema as ev
from kueue_es.scheduler.tas import NoPlacement, Placement, PodSetRequest, TASOptions, place
from kueue_es.scheduler.tasplace import device_world
from projections.cluster import ClusterState
from projections.topology import tas_snapshots

DRIVER = "gpu.example.com"
A100 = 'device.attributes["gpu.example.com"].model == "a100"'


def _slice(node: str | None, devices: list[dict[str, Any]], name: str = "", **spec: Any) -> dict[str, Any]:
    name = name or f"{node}-gpus"
    where: dict[str, Any] = {"nodeName": node} if node else {}
    return {"kind": "ResourceSlice", "metadata": {"name": name, "uid": f"u-{name}"},
            "spec": {"driver": DRIVER, "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices, **where, **spec}}


def _gpu(name: str = "gpu-0", **kw: Any) -> dict[str, Any]:
    return {"name": name, **kw}


def _template(name: str, *requests: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "ResourceClaimTemplate", "metadata": {"name": name, "namespace": "default", "uid": f"u-{name}"},
            "spec": {"spec": {"devices": {"requests": list(requests)}}}}


def _exactly(count: int = 1, cls: str = DRIVER, **kw: Any) -> dict[str, Any]:
    return {"name": "gpu", "exactly": {"deviceClassName": cls, "count": count, **kw}}


def _class(name: str = DRIVER, selectors: list[str] | None = None) -> dict[str, Any]:
    return {"kind": "DeviceClass", "metadata": {"name": name, "uid": f"u-{name}"},
            "spec": {"selectors": [{"cel": {"expression": e}} for e in selectors or []]}}


def _state(*objects: dict[str, Any], levels: tuple[str, ...] = ("hostname",),
           nodes: dict[str, dict[str, str]] | None = None) -> ClusterState:
    state = ClusterState()
    events: list[ev.Event] = [upsert(topology_obj("default", list(levels))), upsert(flavor_obj("tas", "default"))]
    for n, labels in (nodes or {"x1": {}, "x2": {}}).items():
        events.append(upsert(node_obj({"name": n, "labels": {"hostname": n, **labels},
                                       "allocatable": {"cpu": 1, "pods": 10}})))
    events += [upsert(_class()), upsert(_template("gpu-template", _exactly()))]
    events += [upsert(obj) for obj in objects]
    for i, e in enumerate(events):
        state.apply(ev.Record(i, e))
    return state


def _place(state: ClusterState, *, gate: bool = True, taints: bool = False, template: str = "gpu-template",
           count: int = 1, level: str = "kubernetes.io/hostname"):
    from events import objects as o  # noqa: PLC0415

    req = PodSetRequest(name="main", count=count, requests=(("cpu", 1000),), claims=(f"default/{template}",),
                        topology=o.PodSetTopologyRequest(required=level))
    options = TASOptions(devices=device_world(state, taints) if gate else None)
    return place(tas_snapshots(state)["tas"], req, options=options)


def _nodes(found) -> list[str]:
    assert isinstance(found, Placement), found
    return [values[-1] for values, _ in found.domains]


def test_a_node_without_the_devices_is_skipped_only_under_the_gate() -> None:
    state = _state(_slice("x2", [_gpu()]))
    assert _nodes(_place(state)) == ["x2"]
    assert _nodes(_place(state, gate=False)) == ["x1"], "off, devices are not looked at"


def test_no_node_with_devices_says_so_in_the_not_fit_message() -> None:
    state = _state()
    found = _place(state)
    assert isinstance(found, NoPlacement)
    assert found.message == ('topology "default" doesn\'t allow to fit any of 1 pod(s). '
                             "Total nodes: 2; excluded: draNoFit: 2")
    assert isinstance(_place(state, gate=False), Placement)


def test_every_device_of_a_request_count_must_be_on_one_node() -> None:
    state = _state(_slice("x1", [_gpu()]), _slice("x2", [_gpu("a"), _gpu("b")]),
                   _template("two", _exactly(count=2)))
    assert _nodes(_place(state, template="two")) == ["x2"]


def test_one_pod_per_node_is_checked_not_all_the_pods_placed_there() -> None:
    state = _state(_slice("x1", [_gpu()]), nodes={"x1": {}})
    state.apply(ev.Record(99, upsert(node_obj({"name": "x1", "labels": {"hostname": "x1"},
                                               "allocatable": {"cpu": 2, "pods": 10}}))))
    assert [c for _, c in _place(state, count=2).domains] == [2]


def test_the_requests_of_a_claim_take_distinct_devices_searched_in_any_order() -> None:
    attrs = {"model": {"string": "a100"}}
    # The first request could take either device, the second only gpu-0: the search gives gpu-1 to the first.
    other = {"model": {"string": "t4"}}
    state = _state(_slice("x1", [_gpu("gpu-0", attributes=attrs), _gpu("gpu-1", attributes=other)]),
                   _slice("x2", [_gpu("gpu-0", attributes=other)]),
                   _template("pair", _exactly(), {"name": "b", "exactly": {
                       "deviceClassName": DRIVER, "selectors": [{"cel": {"expression": A100}}]}}))
    assert _nodes(_place(state, template="pair")) == ["x1"]
    state.apply(ev.Record(100, upsert(_slice("x1", [_gpu("gpu-0", attributes=attrs), _gpu("gpu-1", attributes=attrs)]))))
    assert _nodes(_place(state, template="pair")) == ["x1"]
    state.apply(ev.Record(101, upsert(_slice("x1", [_gpu("gpu-0", attributes=attrs)]))))
    assert isinstance(_place(state, template="pair"), NoPlacement)


def test_the_device_class_selectors_and_a_missing_class_decide_too() -> None:
    state = _state(_slice("x1", [_gpu(attributes={"model": {"string": "a100"}})]),
                   _slice("x2", [_gpu(attributes={"model": {"string": "h100"}})]),
                   _class("h100", ['device.attributes["gpu.example.com"].model == "h100"']),
                   _template("h100", _exactly(cls="h100")), _template("missing", _exactly(cls="nope")))
    assert _nodes(_place(state, template="h100")) == ["x2"]
    missing = _place(state, template="missing")
    assert isinstance(missing, NoPlacement) and missing.message.endswith("excluded: draNoFit: 2")


def test_slices_for_all_nodes_or_selected_nodes_are_reached_by_those_nodes() -> None:
    selector = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]}
    state = _state(_slice(None, [_gpu()], name="zoned", nodeSelector=selector),
                   nodes={"x1": {"zone": "a"}, "x2": {"zone": "b"}})
    assert _nodes(_place(state)) == ["x2"]
    state.apply(ev.Record(100, upsert(_slice(None, [_gpu()], name="everywhere", allNodes=True))))
    assert _nodes(_place(state)) == ["x1"]


def test_below_another_lowest_level_each_node_is_checked_on_its_own() -> None:
    state = _state(_slice("x2", [_gpu()]), levels=("rack",), nodes={"x1": {"rack": "r1"}, "x2": {"rack": "r2"}})
    assert _nodes(_place(state, level="cloud.com/topology-rack")) == ["r2"]
    assert _nodes(_place(state, gate=False, level="cloud.com/topology-rack")) == ["r1"]


def _tainted(effect: str) -> dict[str, Any]:
    return _slice("x1", [_gpu(taints=[{"key": "example.com/maintenance", "effect": effect}])])


def test_an_untolerated_device_taint_skips_the_device_only_under_the_taints_gate() -> None:
    state = _state(_tainted("NoSchedule"), _slice("x2", [_gpu()]))
    assert _nodes(_place(state, taints=True)) == ["x2"]
    assert _nodes(_place(state, taints=False)) == ["x1"], "off, device taints are ignored"


def test_a_tolerated_taint_and_a_none_taint_do_not_skip_the_device() -> None:
    tolerant = _template("tolerant", _exactly(tolerations=[{"key": "example.com/maintenance", "operator": "Exists",
                                                            "effect": "NoExecute"}]))
    state = _state(_tainted("NoExecute"), _slice("x2", [_gpu()]), tolerant)
    assert _nodes(_place(state, taints=True, template="tolerant")) == ["x1"]
    assert _nodes(_place(state, taints=True)) == ["x2"]
    state = _state(_tainted("None"), _slice("x2", [_gpu()]))
    assert _nodes(_place(state, taints=True)) == ["x1"]


def test_a_first_available_request_takes_the_first_alternative_that_fits() -> None:
    alternatives = {"name": "gpu", "firstAvailable": [
        {"name": "big", "deviceClassName": DRIVER, "count": 2},
        {"name": "small", "deviceClassName": DRIVER, "count": 1,
         "tolerations": [{"key": "example.com/maintenance", "operator": "Exists"}]}]}
    state = _state(_tainted("NoSchedule"), _template("either", alternatives))
    assert _nodes(_place(state, taints=True, template="either")) == ["x1"]


def _claim(name: str, *results: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "ResourceClaim", "metadata": {"name": name, "namespace": "default", "uid": f"u-{name}"},
            "status": {"allocation": {"devices": {"results": list(results)}}}}


def _held(node: str, **kw: Any) -> dict[str, Any]:
    return {"request": "gpu", "driver": DRIVER, "pool": f"{node}-gpus", "device": "gpu-0", **kw}


def test_a_device_an_existing_claim_holds_is_taken() -> None:
    state = _state(_slice("x1", [_gpu()]), _slice("x2", [_gpu()]), _claim("running", _held("x1")))
    assert _nodes(_place(state)) == ["x2"]
    state.apply(ev.Record(100, ev.ObjectDeleted(time=1, kind="ResourceClaim", key="default/running", uid="")))
    assert _nodes(_place(state)) == ["x1"], "deleted, the claim frees its device"


def test_a_shared_or_admin_access_allocation_leaves_the_device_free() -> None:
    state = _state(_slice("x1", [_gpu()]), _slice("x2", [_gpu()]),
                   _claim("shared", _held("x1", shareID="11111111-2222-3333-4444-555555555555")),
                   _claim("admin", _held("x1", adminAccess=True)))
    assert _nodes(_place(state)) == ["x1"]


def test_an_admin_access_request_may_take_a_held_device() -> None:
    admin = _template("admin", _exactly(adminAccess=True))
    state = _state(_slice("x1", [_gpu()]), _claim("running", _held("x1")), admin)
    assert _nodes(_place(state, template="admin")) == ["x1"]
    assert isinstance(_place(state), NoPlacement)


def _rule(name: str, effect: str = "NoSchedule", **selector: str) -> dict[str, Any]:
    return {"kind": "DeviceTaintRule", "metadata": {"name": name, "uid": f"u-{name}"},
            "spec": {"deviceSelector": selector, "taint": {"key": "example.com/maintenance", "effect": effect}}}


def test_a_device_taint_rule_taints_the_devices_it_selects_under_the_taints_gate() -> None:
    devices = (_slice("x1", [_gpu()]), _slice("x2", [_gpu()]))
    state = _state(*devices, _rule("maintenance", driver=DRIVER, pool="x1-gpus"))
    assert _nodes(_place(state, taints=True)) == ["x2"]
    assert _nodes(_place(state, taints=False)) == ["x1"], "off, rules are ignored"
    state = _state(*devices, _rule("everywhere", driver=DRIVER))
    refused = _place(state, taints=True)
    assert isinstance(refused, NoPlacement) and refused.message.endswith("excluded: draNoFit: 2")
    state = _state(*devices, _rule("other", device="gpu-1"), _rule("soft", effect="None"))
    assert _nodes(_place(state, taints=True)) == ["x1"], "a rule selecting no device of x1, or a None taint"
    tolerant = _template("tolerant", _exactly(tolerations=[{"key": "example.com/maintenance",
                                                            "effect": "NoSchedule"}]))
    state = _state(*devices, _rule("everywhere"), tolerant)
    assert _nodes(_place(state, taints=True, template="tolerant")) == ["x1"]


def test_the_cycles_devices_are_built_only_when_a_placement_checks_claims() -> None:
    """Under the gate, the cycle's TAS options hold the devices unbuilt: a placement of a pod set without claims (or
    a cycle with no TAS entry) never builds them, the first one checking claims does, once."""
    from events import objects as o  # noqa: PLC0415
    from kueue_es.scheduler.config import load_config  # noqa: PLC0415
    from kueue_es.scheduler.tasplace import tas_options  # noqa: PLC0415

    state = _state(_slice("x2", [_gpu()]))
    reads = []

    class Watched:
        def __getattr__(self, name: str) -> Any:
            if name == "resource_slices":
                reads.append(name)
            return getattr(state, name)

    config = load_config({"featureGates": {"KueueDRAIntegration": True, "KueueDRADeviceFeasibility": True}})
    options = tas_options(config, Watched())
    assert reads == []
    snap = tas_snapshots(state)["tas"]
    topology = o.PodSetTopologyRequest(required="kubernetes.io/hostname")
    plain = PodSetRequest(name="main", count=1, requests=(("cpu", 1000),), topology=topology)
    assert _nodes(place(snap, plain, options=options)) == ["x1"]
    assert reads == []
    claiming = PodSetRequest(name="main", count=1, requests=(("cpu", 1000),), claims=("default/gpu-template",),
                             topology=topology)
    assert _nodes(place(snap, claiming, options=options)) == ["x2"]
    assert _nodes(place(snap, claiming, options=options)) == ["x2"]
    assert reads == ["resource_slices"]
