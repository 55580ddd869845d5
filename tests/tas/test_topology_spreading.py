"""Topology spreading (Kueue's alpha gate TASTopologySpreading, v0.20): the ``kueue.x-k8s.io/podset-topology-spreading``
annotation read (:mod:`events.topology_spreading`), the occupancy it counts and the placement it steers
(:mod:`kueue_es.scheduler.tas.spreading`)."""

from __future__ import annotations

import json
from decimal import Decimal

import msgspec
import pytest
from fixtures.tasbuild import admitted_workload_obj, flavor_obj, node_obj, topology_obj, upsert

from events import objects as o
from events import schema as ev
from events import topology_spreading as ts
from kueue_es.scheduler.tas import NoPlacement, Placement, PodSetRequest, place
from kueue_es.scheduler.tas.spreading import SpreadingMemo, group_key, occupancy
from projections.cluster import ClusterState
from projections.topology import tas_snapshots

LEVELS = ["block", "rack", "hostname"]
RACK = "cloud.com/topology-rack"
BLOCK = "cloud.com/topology-block"
HOSTNAME = "kubernetes.io/hostname"
APP = [{"key": "app", "operator": "In", "values": ["svc"]}]


def annotation(*rules: tuple[str, str, str], selectors=APP) -> str:
    doc: dict = {"rules": [{"topologyKey": k, "maxShareAllowingPlacement": s, "enforcementMode": m}
                           for k, s, m in rules]}
    if selectors is not None:
        doc["workloadLabelSelectors"] = selectors
    return json.dumps(doc)


# --- reading the annotation -----------------------------------------------------------------------------------------


def test_parse_defaults_and_share():
    spec = ts.parse('{"rules":[{"topologyKey":"zone","maxShareAllowingPlacement":"0.45"}]}')
    assert spec.selectors is None
    assert spec.rules == (ts.Rule("zone", Decimal("0.45"), "Required"),)
    assert spec.rules[0].share_milli == 450
    assert spec.selector("uid-1") == (ts.Requirement("kueue.x-k8s.io/job-uid", "In", ("uid-1",)),)
    assert spec.selector(None) is None  # no job UID: the omitted selector matches nothing
    assert ts.parse('{"rules":[{"topologyKey":"z","maxShareAllowingPlacement":"45e-2"}]}').rules[0].share_milli == 450
    assert ts.parse('{"rules":[{"topologyKey":"z","maxShareAllowingPlacement":0.4501}]}').rules[0].share_milli == 451


def test_exceeds_is_strict_and_never_at_zero_total():
    rule = ts.Rule("z", Decimal("0.34"))
    assert not rule.exceeds(0, 0)
    assert rule.exceeds(1, 1)
    assert rule.exceeds(1, 2)
    assert not rule.exceeds(1, 3)  # 33% <= 34%
    assert not ts.Rule("z", Decimal("0.5")).exceeds(1, 2)  # at the share: still allowed


@pytest.mark.parametrize(("value", "want"), [
    ('{"rules":[]}', ['field `A`: Invalid value: "{\\"rules\\":[]}": topology spreading rules must contain between '
                      '1 and 2 entries: got 0']),
    (annotation(("zone", "0.5", "Required"), ("zone", "1.5", "Soft"), selectors=[
        {"key": "a", "operator": "NotIn", "values": ["x"]}, {"key": "b", "operator": "In", "values": ["y"]}]),
     ["field `A.workloadLabelSelectors`: Too many: 2: must have at most 1 items",
      'field `A.workloadLabelSelectors[0].operator`: Unsupported value: "NotIn": supported values: "In"',
      'field `A.rules[1].maxShareAllowingPlacement`: Invalid value: "1500m": must be greater than 0 and less than 1',
      'field `A.rules[1].enforcementMode`: Unsupported value: "Soft": supported values: "Required", "Preferred"',
      'field `A.rules[1].topologyKey`: Duplicate value: "zone (also at index 0)"']),
    (annotation(("zone", "0", "Required")),
     ['field `A.rules[0].maxShareAllowingPlacement`: Invalid value: "0": must be greater than 0 and less than 1']),
])
def test_annotation_errors(value, want):
    assert ts.annotation_errors(value, "A") == want


def test_annotation_errors_bad_json_and_selector():
    (err,) = ts.annotation_errors("{x", "A")
    assert err.startswith('field `A`: Invalid value: "{x": must be a valid JSON object: failed to parse topology '
                          "spreading annotation")
    (err,) = ts.annotation_errors(annotation(("zone", "0.5", "Required"),
                                             selectors=[{"key": "_bad_", "operator": "In", "values": ["x"]}]), "A")
    assert err.startswith("field `A.workloadLabelSelectors`: Invalid value: ")
    assert "topology spreading workloadLabelSelectors is not a valid label selector" in err
    assert ts.annotation_errors(annotation(("zone", "0.45", "Preferred"), selectors=None), "A") == []


# --- placement -------------------------------------------------------------------------------------------------------


def _state(racks: dict[str, tuple[str, list[int]]], admitted: list[dict]) -> ClusterState:
    """racks: rack -> (block, per-host CPUs); admitted: {name, labels, domains: [[host, count]], namespace?}."""
    events: list[ev.Event] = [upsert(topology_obj("default", LEVELS)), upsert(flavor_obj("tas", "default"))]
    for rack, (block, hosts) in sorted(racks.items()):
        for h, cpu in enumerate(hosts):
            events.append(upsert(node_obj({"name": f"{rack}-h{h}", "labels": {"block": block, "rack": rack,
                                                                                "hostname": f"{rack}-h{h}"},
                                           "allocatable": {"cpu": cpu, "pods": 110}})))
    for w in admitted:
        obj = admitted_workload_obj({"name": w["name"], "requests": {"cpu": 1}, "domains": w["domains"]}, LEVELS)
        obj["metadata"]["labels"] = w.get("labels", {"app": "svc"})
        obj["metadata"]["namespace"] = w.get("namespace", "test-ns")
        events.append(upsert(obj))
    state = ClusterState()
    for i, e in enumerate(events):
        state.apply(ev.Record(i, e))
    return state


def _place(state: ClusterState, value: str | None, count: int = 2, required: str = RACK,
           namespace: str = "test-ns"):
    snap = tas_snapshots(state)["tas"]
    topo = o.PodSetTopologyRequest(required=required)
    occ = None
    if value is not None:
        occ = occupancy(snap.tree, "tas", ts.parse(value), group_key("main", topo), namespace, None,
                        state.workloads.values())
    req = PodSetRequest(name="main", count=count, requests=(("cpu", 1000),), topology=topo, spreading=occ)
    return place(snap, req)


def _racks(res) -> list[str]:
    assert isinstance(res, Placement), res
    return sorted({v[0].split("-")[0] for v, _ in res.domains})


RACKS = {"r1": ("b1", [3]), "r2": ("b1", [4]), "r3": ("b2", [4])}


def test_required_rule_bans_a_domain_over_its_share():
    state = _state(RACKS, [{"name": "w1", "domains": [["r1-h0", 1]]}])
    assert _racks(_place(state, None)) == ["r1"]  # BestFit: the tightest rack
    # r1 holds the only matching workload (100% > 50%): the next group goes elsewhere
    assert _racks(_place(state, annotation((RACK, "0.5", "Required")))) == ["r2"]


def test_preferred_rule_ranks_but_does_not_ban():
    state = _state({"r1": ("b1", [4]), "r2": ("b1", [1])}, [{"name": "w1", "domains": [["r1-h0", 1]]}])
    assert _racks(_place(state, annotation((RACK, "0.5", "Preferred")))) == ["r1"]  # only r1 holds 2 pods
    res = _place(state, annotation((RACK, "0.5", "Required")))
    assert isinstance(res, NoPlacement)
    assert res.message == 'topology "default" allows to fit only 1 out of 2 pod(s)'


def test_only_matching_workloads_of_the_namespace_count():
    state = _state({**RACKS, "r1": ("b1", [4])}, [{"name": "w1", "domains": [["r1-h0", 1]], "labels": {"app": "other"}},
                           {"name": "w2", "domains": [["r1-h0", 1]], "namespace": "elsewhere"}])
    assert _racks(_place(state, annotation((RACK, "0.5", "Required")))) == ["r1"]


def test_used_domain_under_the_share_goes_before_an_unused_one():
    state = _state({"r1": ("b1", [8]), "r2": ("b1", [8]), "r3": ("b1", [2])},
                   [{"name": "w1", "domains": [["r1-h0", 1]]}, {"name": "w2", "domains": [["r2-h0", 1]]}])
    assert _racks(_place(state, None)) == ["r3"]  # the tightest
    # r1 and r2 hold 50% each (<= 60%): reused before the unused r3; best fit stays among them
    assert _racks(_place(state, annotation((RACK, "0.6", "Required")))) == ["r1"]


def test_share_is_of_the_parent_domain():
    # b1 holds r1 (2 workloads) and r2 (1), b2's r3 holds 3: r2 is 1/3 of b1 (<= 40%), r1 2/3 (over)
    state = _state({"r1": ("b1", [8]), "r2": ("b1", [8]), "r3": ("b2", [2])},
                   [{"name": "a", "domains": [["r1-h0", 1]]}, {"name": "b", "domains": [["r1-h0", 1]]},
                    {"name": "c", "domains": [["r2-h0", 1]]}, {"name": "d", "domains": [["r3-h0", 1]]},
                    {"name": "e", "domains": [["r3-h0", 1]]}, {"name": "f", "domains": [["r3-h0", 1]]}])
    assert _racks(_place(state, annotation((RACK, "0.4", "Required")))) == ["r2"]
    # a block rule too: b1 and b2 hold 3 of 6 each (50% <= 50%), still both allowed
    assert _racks(_place(state, annotation((BLOCK, "0.5", "Required"), (RACK, "0.4", "Required")))) == ["r2"]
    # at 40% both blocks are over: nothing left
    res = _place(state, annotation((BLOCK, "0.4", "Required"), (RACK, "0.4", "Required")))
    assert res == NoPlacement(f"topology spreading excludes all topology domains at level: {RACK}")


def test_rule_below_the_requested_level_fails():
    state = _state(RACKS, [])
    res = _place(state, annotation((HOSTNAME, "0.5", "Required")))
    assert res == NoPlacement(f"topology spreading level {HOSTNAME} is below the podset topology {RACK}")


def test_rule_of_a_level_the_topology_lacks_is_skipped():
    state = _state(RACKS, [{"name": "w1", "domains": [["r1-h0", 1]]}])
    assert _racks(_place(state, annotation(("topology.kubernetes.io/zone", "0.5", "Required")))) == ["r1"]


def test_preferred_over_the_share_least_occupied_first():
    # every rack over 30%; r2 (1 of 3) is the least occupied, and preferred over the tighter r1 (2 of 3)
    state = _state({"r1": ("b1", [4]), "r2": ("b1", [8])},
                   [{"name": "a", "domains": [["r1-h0", 1]]}, {"name": "b", "domains": [["r1-h0", 1]]},
                    {"name": "c", "domains": [["r2-h0", 1]]}])
    assert _racks(_place(state, annotation((RACK, "0.3", "Preferred")))) == ["r2"]
    assert _racks(_place(state, None)) == ["r1"]


def test_pod_set_group_counts_by_group_name_and_spreads_the_group():
    from kueue_es.scheduler.tas.place import place_group

    state = _state(RACKS, [{"name": "w1", "domains": [["r1-h0", 1]]}])
    wl = state.workloads["test-ns/w1"]
    snap = tas_snapshots(state)["tas"]
    spec = ts.parse(annotation((RACK, "0.5", "Required")))
    topo = o.PodSetTopologyRequest(required=RACK, pod_set_group_name="g")
    # w1's pod set "main" is in no group: it does not count for group "g"
    occ = occupancy(snap.tree, "tas", spec, group_key("workers", topo), "test-ns", None, [wl])
    assert occ.total == 0
    grouped = msgspec.structs.replace(wl, pod_sets=tuple(
        msgspec.structs.replace(ps, topology=topo) for ps in wl.pod_sets))
    occ = occupancy(snap.tree, "tas", spec, group_key("workers", topo), "test-ns", None, [grouped])
    assert occ.total == 1
    leader = PodSetRequest(name="leader", count=1, requests=(("cpu", 1000),), topology=topo)
    workers = PodSetRequest(name="workers", count=1, requests=(("cpu", 1000),), topology=topo)
    plain = place_group(snap, workers, leader)
    assert not isinstance(plain, NoPlacement)
    assert {_racks(p)[0] for p in plain} == {"r1"}
    spread = place_group(snap, msgspec.structs.replace(workers, spreading=occ), leader)
    assert not isinstance(spread, NoPlacement)
    assert {_racks(p)[0] for p in spread} == {"r2"}


def test_a_pod_set_with_a_partial_slice_is_spread_too():
    state = _state({"r1": ("b1", [4]), "r2": ("b1", [8]), "r3": ("b2", [8])},
                   [{"name": "w1", "domains": [["r1-h0", 1]]}])
    snap = tas_snapshots(state)["tas"]
    topo = o.PodSetTopologyRequest(required=RACK, pod_set_slice_required_topology=HOSTNAME, pod_set_slice_size=2)
    req = PodSetRequest(name="main", count=3, requests=(("cpu", 1000),), topology=topo)
    assert _racks(place(snap, req)) == ["r1"]  # one whole slice and the partial one: the tightest rack
    occ = occupancy(snap.tree, "tas", ts.parse(annotation((RACK, "0.5", "Required"))), group_key("main", topo),
                    "test-ns", None, state.workloads.values())
    assert _racks(place(snap, msgspec.structs.replace(req, spreading=occ))) == ["r2"]
    # a Preferred rule over the share in every rack that holds it leaves the tightest
    small = _state({"r1": ("b1", [4]), "r2": ("b1", [2])}, [{"name": "w1", "domains": [["r1-h0", 1]]}])
    snap = tas_snapshots(small)["tas"]
    occ = occupancy(snap.tree, "tas", ts.parse(annotation((RACK, "0.5", "Preferred"))), group_key("main", topo),
                    "test-ns", None, small.workloads.values())
    assert _racks(place(snap, msgspec.structs.replace(req, spreading=occ))) == ["r1"]
    occ = msgspec.structs.replace(occ, rules=(ts.Rule(RACK, Decimal("0.5")),))
    res = place(snap, msgspec.structs.replace(req, spreading=occ))
    assert res == NoPlacement('topology "default" allows to fit only 1 out of 2 slice(s)')


def test_the_cycle_counts_its_queues_workloads_but_the_placed_one_and_preemption_targets():
    from types import SimpleNamespace

    from kueue_es.scheduler.tas import TASOptions
    from kueue_es.scheduler.tasplace import with_spreading

    state = _state(RACKS, [{"name": "w1", "domains": [["r1-h0", 1]]}, {"name": "w2", "domains": [["r2-h0", 1]]}])
    w1, w2 = state.workloads["test-ns/w1"], state.workloads["test-ns/w2"]
    value = annotation((RACK, "0.5", "Required"))
    placed = msgspec.structs.replace(w2, pod_sets=tuple(msgspec.structs.replace(ps, spreading=value)
                                                        for ps in w2.pod_sets))

    def ctx(gate: bool):
        topology = SimpleNamespace(options=TASOptions(spreading=gate), snapshots=tas_snapshots(state), admitted={},
                                   spreading_memo=SpreadingMemo())
        return SimpleNamespace(topology=topology, reserving_in=lambda cq: [w1, w2] if cq == "cq" else [])

    req = PodSetRequest(name="main", count=1, requests=(("cpu", 1000),),
                        topology=o.PodSetTopologyRequest(required=RACK))
    info = SimpleNamespace(name="cq")
    ((_, got),) = with_spreading(ctx(True), placed, info, [("tas", req)])
    assert got.spreading is not None and got.spreading.total == 1  # w1 only: w2 is the one placed
    ((_, got),) = with_spreading(ctx(True), placed, info, [("tas", req)], {"test-ns/w1"})
    assert got.spreading is not None and got.spreading.total == 0  # a preemption target does not count
    ((_, got),) = with_spreading(ctx(False), placed, info, [("tas", req)])
    assert got.spreading is None  # gate off: the annotation is not read


def _grouped(state: ClusterState, topo: o.PodSetTopologyRequest) -> list:
    """The state's workloads with their pod sets in pod-set group ``topo`` names (as an LWS group's are)."""
    return [msgspec.structs.replace(w, pod_sets=tuple(msgspec.structs.replace(ps, topology=topo) for ps in w.pod_sets))
            for w in state.workloads.values()]


def test_a_group_whose_workers_end_in_a_partial_slice_is_spread_too():
    """A LeaderWorkerSet group (a leader and 3 workers sliced by 2 per rack: a whole slice and a partial one) is
    placed by the partial-slice search, which honours the group's spreading rules like the whole-slice one."""
    from kueue_es.scheduler.tas.place import place_group

    topo = o.PodSetTopologyRequest(required=RACK, pod_set_group_name="g", pod_set_slice_required_topology=RACK,
                                   pod_set_slice_size=2)
    leader = PodSetRequest(name="leader", count=1, requests=(("cpu", 1000),), topology=topo)
    workers = PodSetRequest(name="workers", count=3, requests=(("cpu", 1000),), topology=topo)

    def racks(state: ClusterState, value: str | None) -> list[str] | NoPlacement:
        snap = tas_snapshots(state)["tas"]
        occ = None if value is None else occupancy(snap.tree, "tas", ts.parse(value), group_key("workers", topo),
                                                   "test-ns", None, _grouped(state, topo))
        res = place_group(snap, msgspec.structs.replace(workers, spreading=occ), leader)
        if isinstance(res, NoPlacement):
            return res
        return sorted({r for p in res for r in _racks(p)})

    racks8 = {"r1": ("b1", [5]), "r2": ("b1", [8]), "r3": ("b2", [8])}
    state = _state(racks8, [{"name": "w1", "domains": [["r1-h0", 1]]}])
    assert racks(state, None) == ["r1"]  # the tightest rack holding the leader, the whole and the partial slice
    assert racks(state, annotation((RACK, "0.5", "Required"))) == ["r2"]  # r1 holds the group's only one
    assert racks(state, annotation((RACK, "0.5", "Preferred"))) == ["r2"]
    crowded = _state(racks8, [{"name": f"w{i}", "domains": [[f"r{i}-h0", 1]]} for i in (1, 2, 3)])
    assert racks(crowded, annotation((RACK, "0.3", "Required"))) == NoPlacement(
        f"topology spreading excludes all topology domains at level: {RACK}")


def test_a_cycle_parses_each_annotation_and_decodes_each_assignment_once(monkeypatch):
    """The cycle's SpreadingMemo: however many placements read the same annotation and the same other workloads,
    the annotation is parsed and each assignment decoded once, and the counts stay the same."""
    from types import SimpleNamespace

    from events import tas_assignment
    from kueue_es.scheduler.tas import TASOptions
    from kueue_es.scheduler.tasplace import with_spreading

    state = _state(RACKS, [{"name": "w1", "domains": [["r1-h0", 1]]}, {"name": "w2", "domains": [["r2-h0", 1]]}])
    w1, w2 = state.workloads["test-ns/w1"], state.workloads["test-ns/w2"]
    value = annotation((RACK, "0.5", "Required"))
    placed = msgspec.structs.replace(w2, key="test-ns/new", pod_sets=tuple(
        msgspec.structs.replace(ps, spreading=value) for ps in w2.pod_sets))
    calls = {"parse": 0, "decode": 0}

    def counting(name, real):
        def wrapped(*args, **kwargs):
            calls[name] += 1
            return real(*args, **kwargs)
        return wrapped

    monkeypatch.setattr(ts, "parse", counting("parse", ts.parse))
    monkeypatch.setattr(tas_assignment, "decode", counting("decode", tas_assignment.decode))
    topology = SimpleNamespace(options=TASOptions(spreading=True), snapshots=tas_snapshots(state), admitted={},
                               spreading_memo=SpreadingMemo())
    ctx = SimpleNamespace(topology=topology, reserving_in=lambda cq: [w1, w2])
    req = PodSetRequest(name="main", count=1, requests=(("cpu", 1000),),
                        topology=o.PodSetTopologyRequest(required=RACK))
    seen = [with_spreading(ctx, placed, SimpleNamespace(name="cq"), [("tas", req)])[0][1].spreading
            for _ in range(3)]
    assert seen[0] is not None and seen[0].total == 2 and seen[0] == seen[1] == seen[2]
    assert calls == {"parse": 1, "decode": 2}


def test_only_a_required_request_is_spread():
    """Kueue v0.20 resolves a pod set's spreading rules only for a required topology request (its Workload webhook
    refuses the annotation on any other); a preferred or unconstrained request whose pod set still carries it (one
    staged while the gate was off) is placed as if it had none."""
    state = _state(RACKS, [{"name": "w1", "domains": [["r1-h0", 1]]}])
    snap = tas_snapshots(state)["tas"]
    spec = ts.parse(annotation((RACK, "0.5", "Required")))
    for topo in (o.PodSetTopologyRequest(preferred=RACK), o.PodSetTopologyRequest(unconstrained=True)):
        occ = occupancy(snap.tree, "tas", spec, group_key("main", topo), "test-ns", None, state.workloads.values())
        assert occ.total == 1
        req = PodSetRequest(name="main", count=2, requests=(("cpu", 1000),), topology=topo)
        assert place(snap, msgspec.structs.replace(req, spreading=occ)) == place(snap, req)
    assert _racks(_place(state, annotation((RACK, "0.5", "Required")))) == ["r2"]  # a required one is


def test_a_required_request_also_unconstrained_takes_the_first_ranked_domain_that_fits():
    """A Workload's topology request may name a required level and be unconstrained too (only the job webhooks
    refuse two topology annotations): Kueue then spreads it (required) and picks LeastFreeCapacity's way
    (unconstrained, TASProfileMixed): the first domain of the ranked order that fits, not BestFit's tightest. With
    a partial slice the two differ: the order reads whole slices, the fit the slices beside the partial one."""
    # 2 whole slices of 3 pods and a partial one of 2; each rack holds 3 whole slices. rx (11 pods) comes first
    # in LeastFreeCapacity's order and holds all 3 beside the partial one; ry (12 pods, 4 on each host) only 2.
    state = _state({"rx": ("b1", [3, 3, 5]), "ry": ("b2", [4, 4, 4])}, [])
    snap = tas_snapshots(state)["tas"]
    both = o.PodSetTopologyRequest(required=RACK, unconstrained=True, pod_set_slice_required_topology=HOSTNAME,
                                   pod_set_slice_size=3)
    req = PodSetRequest(name="main", count=8, requests=(("cpu", 1000),), topology=both)

    def spread(value: str, workloads) -> PodSetRequest:
        occ = occupancy(snap.tree, "tas", ts.parse(value), group_key("main", both), "test-ns", None, workloads)
        return msgspec.structs.replace(req, spreading=occ)

    assert _racks(place(snap, req)) == ["rx"]
    assert _racks(place(snap, spread(annotation((RACK, "0.5", "Required")), []))) == ["rx"]
    bestfit = msgspec.structs.replace(req, topology=msgspec.structs.replace(both, unconstrained=None))
    assert _racks(place(snap, bestfit)) == ["ry"]  # BestFit: the fewest slices to spare beside the partial one
    # rx holds the group's only workload (its capacity left as it was): banned by a Required rule, ranked last by
    # a Preferred one
    taken = _state({"rx": ("b1", [3, 3, 5]), "ry": ("b2", [4, 4, 4])}, [{"name": "w1", "domains": [["rx-h0", 1]]}])
    workloads = list(taken.workloads.values())
    assert _racks(place(snap, spread(annotation((RACK, "0.5", "Required")), workloads))) == ["ry"]
    assert _racks(place(snap, spread(annotation((RACK, "0.5", "Preferred")), workloads))) == ["ry"]
    # nothing fits: LeastFreeCapacity reports the pods of the last ranked domain, the banned one left out
    big = msgspec.structs.replace(spread(annotation((RACK, "0.5", "Required")), workloads), count=14)
    assert place(snap, big) == NoPlacement('topology "default" allows to fit only 12 out of 5 slice(s)')
