"""Kueue v0.20 (#13738, #13622): a TAS ResourceFlavor's nodeLabels and tolerations may change (the webhook
side: tests/k8s/test_validating_review.py). The fold already behaves as Kueue then does: a workload holding
quota keeps its reservation, its topology assignment and the usage charged for it, and the new spec is what
placement reads from then on."""

from __future__ import annotations

from fixtures.tasbuild import T0, admitted_workload_obj, flavor_obj, node_obj, topology_obj, upsert

from events import schema as ev
from projections.cluster import ClusterState
from projections.topology import tas_snapshots

HOSTS = ("h0", "h1")


def test_relabelling_a_tas_flavor_keeps_admitted_usage_and_moves_its_node_set() -> None:
    events: list[ev.Event] = [upsert(topology_obj("default", ["hostname"])),
                              upsert(flavor_obj("tas", "default", {"pool": "a"}))]
    events += [upsert(node_obj({"name": h, "labels": {"hostname": h, "pool": p}, "allocatable": {"cpu": 2, "pods": 10}}))
               for h, p in zip(HOSTS, ("a", "b"), strict=True)]
    events.append(upsert(admitted_workload_obj({"name": "running", "requests": {"cpu": 1}, "domains": [["h0", 1]]},
                                               ["hostname"])))
    state = ClusterState()
    for i, e in enumerate(events):
        state.apply(ev.Record(i, e))
    wl = state.workloads["test-ns/running"]
    admission = wl.admission
    assert wl.reserving and state.tas.usage == {"tas": {"h0": {"cpu": 1000, "pods": 1}}}
    assert list(tas_snapshots(state)["tas"].tree.ids[-1]) == ["h0"]
    relabelled = flavor_obj("tas", "default", {"pool": "b"}, [{"key": "k", "operator": "Exists"}])
    state.apply(ev.Record(len(events), upsert(relabelled, T0 + 1)))
    assert wl.reserving and wl.admission is admission
    assert state.tas.usage == {"tas": {"h0": {"cpu": 1000, "pods": 1}}}
    snap = tas_snapshots(state)["tas"]
    assert list(snap.tree.ids[-1]) == ["h1"], "placement reads the new node set"
    assert [t.key for t in snap.tolerations] == ["k"]


def test_new_topology_levels_keep_admitted_usage_when_hostname_stays_lowest() -> None:
    """Kueue v0.20 (#13910): the usage of a workload admitted under the old levels stays charged, on its host."""
    events: list[ev.Event] = [upsert(topology_obj("default", ["hostname"])), upsert(flavor_obj("tas", "default"))]
    events += [upsert(node_obj({"name": h, "labels": {"rack": "r0", "hostname": h}, "allocatable": {"cpu": 2, "pods": 10}}))
               for h in HOSTS]
    events.append(upsert(admitted_workload_obj({"name": "running", "requests": {"cpu": 2}, "domains": [["h0", 1]]},
                                               ["hostname"])))
    state = ClusterState()
    for i, e in enumerate(events):
        state.apply(ev.Record(i, e))
    state.apply(ev.Record(len(events), upsert(topology_obj("default", ["rack", "hostname"]), T0 + 1)))
    snap = tas_snapshots(state)["tas"]
    assert snap.tree.depth == 2
    assert snap.leaf_remaining("h0") == {"pods": 9} and snap.leaf_remaining("h1") == {"cpu": 2000, "pods": 10}
