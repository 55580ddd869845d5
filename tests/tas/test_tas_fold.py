"""The topology projection is a fold: order-independent, incremental, and restorable.

* Placement does not depend on the order nodes, pods, workloads, the topology and the flavor were applied.
* Every placement is one the request allows: all its pods, within each leaf's room, in whole slices of every
  slice layer, inside one domain of a required level — with balanced placement on or off.
* The TAS usage kept incrementally (charged and released with quota, moved by TopologyAssigned) equals a
  recomputation from scratch after every event, and a snapshot restore rebuilds exactly the same.
"""

from __future__ import annotations

from typing import Any

import msgspec
from fixtures.tasbuild import (
    admitted_workload_obj,
    flavor_obj,
    label,
    node_obj,
    pod_obj,
    topology_obj,
    upsert,
)
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from events import objects as o
from events import schema as ev
from events import tas_assignment
from kueue_es.scheduler.tas import NoPlacement, Placement, PodSetRequest, TASOptions, place
from projections import snapshot
from projections.cluster import ClusterState
from projections.topology import TASFold, tas_snapshots, workload_tas_usage

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LEVELS = ["block", "rack", "hostname"]
HOST = "kubernetes.io/hostname"


# --- generators -----------------------------------------------------------------------------------------------


@st.composite
def clusters(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(1, 12))
    nodes = []
    for i in range(n):
        nodes.append({
            "name": f"n{i}",
            "labels": {"block": f"b{draw(st.integers(0, 1))}", "rack": f"r{draw(st.integers(0, 2))}", "hostname": f"h{i}"},
            "allocatable": {"cpu": draw(st.integers(0, 8)), "pods": draw(st.integers(0, 6))},
            "ready": draw(st.booleans()) or draw(st.booleans()),
            "unschedulable": draw(st.integers(0, 5)) == 0,
            "taints": [{"key": "k", "effect": "NoSchedule"}] if draw(st.integers(0, 5)) == 0 else [],
        })
    hosts = [f"h{i}" for i in range(n)] + ["gone"]
    pods = [{"name": f"p{i}", "node": draw(st.sampled_from(hosts[:-1] + [""])), "requests": {"cpu": draw(st.integers(0, 3))},
             "phase": draw(st.sampled_from(["Running", "Pending", "Succeeded"]))}
            for i in range(draw(st.integers(0, 5)))]
    # non-TAS pods name their node by node name (h<i> is the hostname of n<i>): map to node names
    for p in pods:
        if p["node"]:
            p["node"] = "n" + p["node"][1:]
    admitted = []
    for i in range(draw(st.integers(0, 4))):
        chosen = draw(st.lists(st.sampled_from(hosts), min_size=1, max_size=3, unique=True))
        admitted.append({"name": f"w{i}", "requests": {"cpu": draw(st.integers(1, 2))},
                         "domains": [[h, draw(st.integers(1, 3))] for h in sorted(chosen)]})
    return {"nodes": nodes, "pods": pods, "admitted": admitted}


def cluster_events(c: dict[str, Any]) -> list[ev.Event]:
    out: list[ev.Event] = [upsert(topology_obj("default", LEVELS)), upsert(flavor_obj("tas", "default"))]
    out += [upsert(node_obj(n)) for n in c["nodes"]]
    out += [upsert(pod_obj(p)) for p in c["pods"]]
    out += [upsert(admitted_workload_obj(w, LEVELS)) for w in c["admitted"]]
    return out


def fold(events: list[ev.Event]) -> ClusterState:
    state = ClusterState()
    for i, e in enumerate(events):
        state.apply(ev.Record(i, e))
    return state


REQUESTS = [
    PodSetRequest(name="req-rack", count=3, requests=(("cpu", 1000),),
                  topology=o.PodSetTopologyRequest(required=label("rack"))),
    PodSetRequest(name="pref-rack", count=5, requests=(("cpu", 1000),),
                  topology=o.PodSetTopologyRequest(preferred=label("rack"))),
    PodSetRequest(name="implied", count=4, requests=(("cpu", 1000),), implied=True),
    PodSetRequest(name="slices", count=4, requests=(("cpu", 1000),),
                  topology=o.PodSetTopologyRequest(required=label("block"), pod_set_slice_required_topology=HOST,
                                                   pod_set_slice_size=2)),
    PodSetRequest(name="layers", count=8, requests=(("cpu", 1000),),
                  topology=o.PodSetTopologyRequest(required=label("block"), podset_slice_required_topology_constraints=(
                      o.PodSetSliceRequiredTopologyConstraint(topology=label("rack"), size=4),
                      o.PodSetSliceRequiredTopologyConstraint(topology=HOST, size=2)))),
    PodSetRequest(name="pref-layers", count=4, requests=(("cpu", 1000),),
                  topology=o.PodSetTopologyRequest(preferred=label("block"), podset_slice_required_topology_constraints=(
                      o.PodSetSliceRequiredTopologyConstraint(topology=label("rack"), size=2),
                      o.PodSetSliceRequiredTopologyConstraint(topology=HOST, size=1)))),
    PodSetRequest(name="pref-host-slices", count=6, requests=(("cpu", 1000),),
                  topology=o.PodSetTopologyRequest(preferred=label("rack"), pod_set_slice_required_topology=HOST,
                                                   pod_set_slice_size=2)),
]
BALANCED = TASOptions(balanced=True)


def view(state: ClusterState) -> Any:
    """Everything placement reads, plus what it answers for a few requests."""
    snaps = tas_snapshots(state)
    out: dict[str, Any] = {}
    for name in snaps:
        s = snaps[name]
        out[name] = {
            "leaves": s.tree.values[-1],
            "free": {r: c for r, c in sorted(s.free.items())},
            "remaining": {r: c for r, c in sorted(s.remaining.items())},
            "placements": [msgspec.to_builtins(place(s, r)) for r in REQUESTS],
            "balanced": [msgspec.to_builtins(place(s, r, options=BALANCED)) for r in REQUESTS],
        }
    return out


# --- what a placement must be ---------------------------------------------------------------------------------


def _check(state: ClusterState, req: PodSetRequest, res: Placement) -> None:
    tree = tas_snapshots(state)["tas"].tree
    snap = tas_snapshots(state)["tas"]
    assert res.count == req.count, f"{req.name}: {res.count} of {req.count} pods placed"
    leaf = {tree.ids[-1][i]: i for i in range(tree.leaf_count)}
    fits = snap.pods_fitting(tuple(sorted(req.per_pod().items())), False)
    per_level: list[dict[tuple[str, ...], int]] = [{} for _ in tree.levels]
    for values, count in res.domains:
        i = leaf[values[-1]]
        assert 0 < count <= fits[i], f"{req.name}: {count} pods on {values} that holds {fits[i]}"
        full = tree.values[-1][i]
        for lvl in range(len(tree.levels)):
            key = full[: lvl + 1]
            per_level[lvl][key] = per_level[lvl].get(key, 0) + count
    topo = req.topology
    layers = [(lay.topology, lay.size) for lay in topo.podset_slice_required_topology_constraints] if topo else []
    if topo is not None and topo.pod_set_slice_required_topology is not None:
        layers = [(topo.pod_set_slice_required_topology, topo.pod_set_slice_size or 1)]
    for key, size in layers:
        lvl = tree.levels.index(key)
        assert all(c % size == 0 for c in per_level[lvl].values()), f"{req.name}: {key} not in slices of {size}"
    if topo is not None and topo.required is not None:
        assert len(per_level[tree.levels.index(topo.required)]) == 1, f"{req.name}: more than one {topo.required}"


@SETTINGS
@given(c=clusters())
def test_every_placement_is_one_the_request_allows(c: dict[str, Any]) -> None:
    state = fold(cluster_events(c))
    snap = tas_snapshots(state)["tas"]
    for req in REQUESTS:
        greedy, balanced = place(snap, req), place(snap, req, options=BALANCED)
        event(f"{req.name}: {'no fit' if isinstance(greedy, NoPlacement) else 'placed'}"
              f"{', balanced differently' if balanced != greedy else ''}")
        assert isinstance(greedy, NoPlacement) == isinstance(balanced, NoPlacement), "balancing never loses a fit"
        for res in (greedy, balanced):
            if isinstance(res, Placement):
                _check(state, req, res)


# --- order independence -------------------------------------------------------------------------------------------


@SETTINGS
@given(c=clusters(), data=st.data())
def test_placement_does_not_depend_on_the_order_events_were_applied(c: dict[str, Any], data: st.DataObject) -> None:
    events = cluster_events(c)
    permuted = data.draw(st.permutations(events), label="order")
    assert view(fold(permuted)) == view(fold(events))


def test_the_order_property_sees_a_difference_when_there_is_one() -> None:
    """Guard for the property above: a different cluster gives a different view."""
    base = {"nodes": [{"name": "n0", "labels": {"block": "b0", "rack": "r0", "hostname": "h0"},
                       "allocatable": {"cpu": 4, "pods": 6}}], "pods": [], "admitted": []}
    used = dict(base, admitted=[{"name": "w", "requests": {"cpu": 1}, "domains": [["h0", 3]]}])
    assert view(fold(cluster_events(base))) != view(fold(cluster_events(used)))


# --- incremental usage == recomputation ---------------------------------------------------------------------------


def recomputed(state: ClusterState) -> TASFold:
    """TAS usage and non-TAS pod usage from scratch."""
    fresh = TASFold()
    for key in sorted(state.pods):
        fresh.pod_changed(key, state.pods[key])
    for key in sorted(state.workloads):
        wl = state.workloads[key]
        if wl.reserving and wl.cluster_queue:
            fresh.charge(wl)
    return fresh


def check(state: ClusterState) -> None:
    fresh = recomputed(state)
    assert state.tas.usage == fresh.usage
    assert state.tas.node_usage == fresh.node_usage
    assert state.tas.charged == fresh.charged
    for key, wl in state.workloads.items():
        if wl.reserving:
            assert state.tas.charged.get(key, ()) == workload_tas_usage(wl)
        else:
            assert key not in state.tas.charged
    restored = snapshot.decode(snapshot.encode(state))
    assert restored.tas.usage == state.tas.usage
    assert restored.tas.node_usage == state.tas.node_usage
    assert view(restored) == view(state)


HOSTS = ["h0", "h1", "h2", "h3"]
NODES = [{"name": f"n{i}", "labels": {"block": "b0", "rack": f"r{i % 2}", "hostname": f"h{i}"},
          "allocatable": {"cpu": 8, "pods": 10}} for i in range(4)]


def assignment(domains: list[tuple[str, int]]) -> o.TopologyAssignment:
    return tas_assignment.encode([HOST], [o.TopologyDomainAssignment(values=[h], count=c) for h, c in domains])


def workload(name: str, cpu: int) -> dict[str, Any]:
    return {"kind": "Workload",
            "metadata": {"name": name, "namespace": "test-ns", "uid": f"uid-{name}", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 4, "template": {"spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}]}}}]}}


domains_st = st.lists(st.tuples(st.sampled_from(HOSTS), st.integers(1, 3)), min_size=1, max_size=3,
                      unique_by=lambda d: d[0])
WL = st.integers(0, 2)
ops_st = st.lists(st.one_of(
    st.tuples(st.just("create"), WL, st.integers(1, 3)),
    st.tuples(st.just("reserve"), WL, domains_st),
    st.tuples(st.just("reserve"), WL, domains_st),
    st.tuples(st.just("assign"), WL, domains_st),
    st.tuples(st.just("assign"), WL, domains_st),
    st.tuples(st.just("finish"), WL),
    st.tuples(st.just("evict"), WL),
    st.tuples(st.just("release"), WL),
    st.tuples(st.just("deactivate"), WL),
    st.tuples(st.just("delete"), WL),
    st.tuples(st.just("pod"), st.integers(0, 3), st.sampled_from(["n0", "n1", "n2", ""]), st.integers(0, 2),
              st.sampled_from(["Running", "Failed"])),
    st.tuples(st.just("delete-pod"), st.integers(0, 3)),
    st.tuples(st.just("node"), st.integers(0, 3), st.booleans()),
), min_size=3, max_size=40)


def op_event(op: tuple[Any, ...], t: int) -> ev.Event:
    kind, i = op[0], op[1]
    key = f"test-ns/w{i}"
    d = {"time": t, "cycle": t, "input": t}
    match kind:
        case "create":
            return upsert(workload(f"w{i}", op[2]), t)
        case "reserve":
            adm = o.Admission(cluster_queue="cq", pod_set_assignments=[o.PodSetAssignment(
                name="main", flavors={"cpu": "tas"}, count=4, topology_assignment=assignment(op[2]))])
            return ev.QuotaReserved(key=key, admission=adm, **d)
        case "assign":
            return ev.TopologyAssigned(key=key, pod_set="main", assignment=assignment(op[2]), **d)
        case "finish":
            return ev.WorkloadFinished(time=t, key=key)
        case "evict":
            return ev.WorkloadEvicted(key=key, reason="Preempted", message="", **d)
        case "release":
            return ev.WorkloadRequeued(key=key, status=True, reason="Preempted", release=True, **d)
        case "deactivate":
            return ev.WorkloadDeactivated(key=key, reason="Deactivated", message="", **d)
        case "delete":
            return ev.ObjectDeleted(time=t, key=key, kind="Workload")
        case "pod":
            return upsert(pod_obj({"name": f"p{i}", "node": op[2], "requests": {"cpu": op[3]}, "phase": op[4]}), t)
        case "delete-pod":
            return ev.ObjectDeleted(time=t, key=f"test-ns/p{i}", kind="Pod")
        case "node":
            spec = dict(NODES[i], ready=op[2])
            return upsert(node_obj(spec), t)
    raise AssertionError(kind)


@SETTINGS
@given(ops=ops_st)
def test_incremental_tas_usage_equals_recomputation_and_survives_restore(ops: list[tuple[Any, ...]]) -> None:
    events: list[ev.Event] = [upsert(topology_obj("default", LEVELS)), upsert(flavor_obj("tas", "default"))]
    events += [upsert(node_obj(n)) for n in NODES]
    events += [upsert(workload(f"w{i}", 1 + i)) for i in range(3)]
    state = fold(events)
    offset = len(events)
    reserving = 0
    for k, op in enumerate(ops):
        state.apply(ev.Record(offset, op_event(op, 2_000_000 + k)))
        offset += 1
        check(state)
        reserving += sum(1 for wl in state.workloads.values() if wl.reserving)
    event(f"checks with a reservation: {'some' if reserving else 'none'}")


def test_reserve_assign_and_release_move_usage() -> None:
    """A readable walk through the same paths with expected numbers."""
    state = fold([upsert(topology_obj("default", LEVELS)), upsert(flavor_obj("tas", "default"))]
                 + [upsert(node_obj(n)) for n in NODES] + [upsert(workload("w0", 2))])
    n = 10

    def apply(e: ev.Event) -> None:
        nonlocal n
        state.apply(ev.Record(n, e))
        n += 1

    apply(op_event(("reserve", 0, [("h0", 3), ("h1", 1)]), 100))
    assert state.tas.usage == {"tas": {"h0": {"cpu": 6000, "pods": 3}, "h1": {"cpu": 2000, "pods": 1}}}
    assert tas_snapshots(state)["tas"].leaf_remaining("h0") == {"cpu": 2000, "pods": 7}
    apply(op_event(("assign", 0, [("h2", 4)]), 101))
    assert state.tas.usage == {"tas": {"h2": {"cpu": 8000, "pods": 4}}}
    assert tas_snapshots(state)["tas"].leaf_remaining("h2") == {"pods": 6}
    apply(op_event(("evict", 0), 102))
    assert state.tas.usage, "an evicted workload holds its quota (and TAS usage) until it is released"
    apply(op_event(("release", 0), 103))
    assert state.tas.usage == {}
    assert tas_snapshots(state)["tas"].leaf_remaining("h2") == {"cpu": 8000, "pods": 10}


def test_topology_assigned_completes_a_delayed_request() -> None:
    state = fold([upsert(topology_obj("default", LEVELS)), upsert(flavor_obj("tas", "default"))]
                 + [upsert(node_obj(n)) for n in NODES] + [upsert(workload("w0", 1))])
    adm = o.Admission(cluster_queue="cq", pod_set_assignments=[o.PodSetAssignment(
        name="main", flavors={"cpu": "tas"}, count=4, delayed_topology_request="Pending")])
    state.apply(ev.Record(10, ev.QuotaReserved(time=1, key="test-ns/w0", cycle=1, input=9, admission=adm)))
    assert state.tas.usage == {}
    state.apply(ev.Record(11, op_event(("assign", 0, [("h3", 4)]), 2)))
    wl = state.workloads["test-ns/w0"]
    assert wl.admission is not None
    psa = wl.admission.pod_set_assignments[0]
    assert psa.topology_assignment == assignment([("h3", 4)])
    assert psa.delayed_topology_request == "Ready"
    assert state.tas.usage == {"tas": {"h3": {"cpu": 4000, "pods": 4}}}


def test_snapshots_are_memoised_until_something_they_read_changes() -> None:
    state = fold([upsert(topology_obj("default", LEVELS)), upsert(flavor_obj("tas", "default"))]
                 + [upsert(node_obj(n)) for n in NODES])
    first = tas_snapshots(state)
    again = tas_snapshots(state)
    assert first["tas"].tree is again["tas"].tree
    assert first["tas"].remaining is not again["tas"].remaining, "each call hands out its own fork"
    first["tas"].charge([(("h0",), 2)], {"cpu": 1000})
    assert tas_snapshots(state)["tas"].leaf_remaining("h0") == {"cpu": 8000, "pods": 10}, "forks do not leak back"
    state.apply(ev.Record(50, upsert(pod_obj({"name": "p", "node": "n0", "requests": {"cpu": 1}}))))
    after_pod = tas_snapshots(state)
    assert after_pod["tas"].tree is first["tas"].tree, "a pod does not rebuild the domain tree"
    assert after_pod["tas"].leaf_remaining("h0") == {"cpu": 7000, "pods": 9}
    state.apply(ev.Record(51, upsert(node_obj(dict(NODES[0], allocatable={"cpu": 2, "pods": 10})))))
    assert tas_snapshots(state)["tas"].tree is not first["tas"].tree
    assert isinstance(place(tas_snapshots(state)["tas"], PodSetRequest(
        name="x", count=2, requests=(("cpu", 1000),), topology=o.PodSetTopologyRequest(required=HOST))), NoPlacement) is False
