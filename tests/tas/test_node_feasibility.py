"""TASNodeFeasibilityForAllLevels (beta, on) beyond the case tables: pod-set groups, in-cycle usage, and the
cached node layer (:mod:`kueue_es.scheduler.tas.pernode`, :mod:`projections.tas_node_layer`)."""

from __future__ import annotations

from fixtures.tasbuild import label, node_obj, rack_events, upsert

from events import objects as o
from events import schema as ev
from kueue_es.scheduler.tas import PodSetRequest, TASOptions, place_workload
from projections.cluster import ClusterState
from projections.topology import tas_snapshots

RACK = label("rack")
ON, OFF = TASOptions(), TASOptions(node_feasibility=False)


def state_of(cpus: dict[str, list[int]]) -> ClusterState:
    """A rack-only topology: rack -> per-node CPUs (nodes h<rack index><node index>)."""
    state = ClusterState()
    for i, e in enumerate(rack_events(cpus, ["rack"])):
        state.apply(ev.Record(i, e))
    return state


def request(name: str, count: int, cpu: int, group: str | None = None) -> PodSetRequest:
    return PodSetRequest(name=name, count=count, requests=(("cpu", cpu * 1000),),
                         topology=o.PodSetTopologyRequest(required=RACK, pod_set_group_name=group))


def test_a_group_leader_needs_one_node_that_holds_it() -> None:
    """Rack r1 holds 4 cpu on two nodes of 2: a 3-cpu leader and one 1-cpu worker fit the rack as a whole (gate
    off) but no node takes the leader (gate on)."""
    snaps = tas_snapshots(state_of({"r1": [2, 2]}))
    reqs = [("tas", request("leader", 1, 3, "g")), ("tas", request("workers", 1, 1, "g"))]
    off = place_workload(snaps, reqs, options=OFF)
    assert off.ok and [c for _, c in off.placements["leader"].domains] == [1]
    on = place_workload(snaps, reqs, options=ON)
    assert not on.ok and on.failed == "leader"


def test_a_group_counts_workers_beside_the_leader_per_node() -> None:
    """Nodes of 2 and 2 cpu: a 1-cpu leader leaves 3 workers of 1 cpu room on the two nodes, not 4."""
    snaps = tas_snapshots(state_of({"r1": [2, 2]}))
    fits = place_workload(snaps, [("tas", request("leader", 1, 1, "g")), ("tas", request("workers", 3, 1, "g"))],
                          options=ON)
    assert fits.ok
    over = place_workload(snaps, [("tas", request("leader", 1, 2, "g")), ("tas", request("workers", 3, 1, "g"))],
                          options=ON)
    assert not over.ok


def test_non_tas_pods_use_their_own_node() -> None:
    """A bound non-TAS pod of 2 cpu on h00 leaves it no room for a 2-cpu pod; rack r1's other node is 1 cpu."""
    state = state_of({"r1": [2, 1]})
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
           "spec": {"nodeName": "h00", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
           "status": {"phase": "Running"}}
    before = place_workload(tas_snapshots(state), [("tas", request("main", 1, 2))], options=ON)
    assert before.ok
    state.apply(ev.Record(100, upsert(pod)))
    after = place_workload(tas_snapshots(state), [("tas", request("main", 1, 2))], options=ON)
    assert not after.ok and "Total nodes: 2" in after.message


def test_the_node_layer_follows_node_changes() -> None:
    state = state_of({"r1": [1]})
    assert not place_workload(tas_snapshots(state), [("tas", request("main", 1, 2))], options=ON).ok
    state.apply(ev.Record(100, upsert(node_obj({"name": "h01", "labels": {"rack": "r1", "hostname": "h01"},
                                                 "allocatable": {"cpu": 2, "pods": 110}}))))
    assert place_workload(tas_snapshots(state), [("tas", request("main", 1, 2))], options=ON).ok


def test_a_later_pod_set_sees_the_nodes_an_earlier_one_took() -> None:
    """Rack r1: nodes of 2, 1 and 1 cpu (4 in all). Two pod sets of one 2-cpu pod each: the first takes the only
    node that holds it, so the second fits no node, though the rack has 2 cpu left."""
    snaps = tas_snapshots(state_of({"r1": [2, 1, 1]}))
    res = place_workload(snaps, [("tas", request("a", 1, 2)), ("tas", request("b", 1, 2))], options=ON)
    assert not res.ok and res.failed == "b"
    assert res.message.endswith("Total nodes: 3; excluded: resource \"cpu\": 3")
    assert place_workload(snaps, [("tas", request("a", 1, 2)), ("tas", request("b", 1, 2))], options=OFF).ok


def test_an_earlier_pod_set_takes_the_tightest_nodes_first() -> None:
    """Nodes of 2 and 1 cpu: a 1-cpu pod goes to the 1-cpu node (Kueue's descent takes nodes by pods fitting,
    ascending), which leaves the 2-cpu node to a 2-cpu pod of the next pod set."""
    snaps = tas_snapshots(state_of({"r1": [2, 1]}))
    assert place_workload(snaps, [("tas", request("a", 1, 1)), ("tas", request("b", 1, 2))], options=ON).ok
    assert not place_workload(snaps, [("tas", request("a", 2, 1)), ("tas", request("b", 1, 2))], options=ON).ok


def test_the_node_layer_is_built_only_when_the_gate_asks_for_it(monkeypatch) -> None:
    """A topology without the hostname level: with TASNodeFeasibilityForAllLevels off, placing builds no per-node
    layer; on, one, shared by the placements of that state."""
    import projections.topology as topology

    built: list[int] = []
    real = topology.NodeLayer

    def counting(*args, **kwargs):
        built.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(topology, "NodeLayer", counting)
    state = state_of({"r1": [2, 2]})
    reqs = [("tas", request("main", 1, 1))]
    assert place_workload(tas_snapshots(state), reqs, options=OFF).ok
    assert built == []
    assert place_workload(tas_snapshots(state), reqs, options=ON).ok
    assert place_workload(tas_snapshots(state), reqs, options=ON).ok
    assert built == [1]
