"""An elastic Job's new slice placed from the old slice's placement (ElasticJobsViaWorkloadSlicesWithTAS).

``place_workload(..., previous=...)`` keeps the pods the old slice runs and places only the extra ones (scale-up),
cuts the old placement from its end (scale-down) or keeps it (same count); a stale old placement, or a pod-set
group whose leader has none, is placed anew. A property checks on random clusters that a scale-up, when it
fits, keeps every running pod where it is and stays within the nodes' room.
"""

from __future__ import annotations

from typing import Any

from fixtures.tasbuild import label, rack_events
from hypothesis import given, settings
from hypothesis import strategies as st

from events import objects as o
from events import schema as ev
from kueue_es.scheduler.tas import Placement, PodSetRequest, place_workload
from kueue_es.scheduler.tas.elastic import merge, truncate, usable
from projections.cluster import ClusterState
from projections.topology import HOSTNAME, tas_snapshots

LEVELS = ["rack", "hostname"]


def snapshots(cpus: dict[str, list[int]], used: dict[str, int] | None = None):
    """rack -> per-host CPUs (hosts named h<rack index><host index>); ``used``: host -> CPUs another TAS workload
    already holds there (charged on the snapshot)."""
    state = ClusterState()
    for i, e in enumerate(rack_events(cpus, LEVELS)):
        state.apply(ev.Record(i, e))
    snaps = tas_snapshots(state)
    for host, cpu in sorted((used or {}).items()):
        snaps.charge("tas", [((host,), cpu)], {"cpu": 1000, "pods": 1})
    return snaps


def request(name: str, count: int, *, group: str | None = None, required: str | None = None) -> PodSetRequest:
    return PodSetRequest(name=name, count=count, requests=(("cpu", 1000),),
                         topology=o.PodSetTopologyRequest(unconstrained=None if required else True,
                                                          required=required, pod_set_group_name=group))


def placed(*domains: tuple[str, int]) -> Placement:
    return Placement((HOSTNAME,), tuple(((h,), c) for h, c in domains))


def domains(placement: Any) -> list[tuple[str, int]]:
    return [(v[-1], c) for v, c in placement.domains]


def test_scale_up_keeps_the_running_pods_and_places_only_the_new_ones() -> None:
    """h00 is full with the old slice's 2 pods: they stay there, and the 2 new pods go where there is room."""
    snaps = snapshots({"r1": [2, 3]})
    found = place_workload(snaps, [("tas", request("main", 4))], previous={"main": placed(("h00", 2))})
    assert found.ok
    assert domains(found.placements["main"]) == [("h00", 2), ("h01", 2)]


def test_without_a_previous_placement_the_pod_set_is_placed_anew() -> None:
    snaps = snapshots({"r1": [2, 4]})
    fresh = place_workload(snaps, [("tas", request("main", 4))])
    assert domains(fresh.placements["main"]) == [("h01", 4)]
    kept = place_workload(snaps, [("tas", request("main", 4))], previous={"main": placed(("h00", 2))})
    assert domains(kept.placements["main"]) == [("h00", 2), ("h01", 2)]
    other = place_workload(snaps, [("tas", request("main", 4))], previous={"other": placed(("h00", 2))})
    assert domains(other.placements["main"]) == [("h01", 4)], "only a pod set's own previous placement counts"


def test_the_merged_placement_is_in_level_value_order_and_sums_a_shared_host() -> None:
    snaps = snapshots({"r1": [4], "r2": [4]})
    found = place_workload(snaps, [("tas", request("main", 5))], previous={"main": placed(("h10", 3))})
    assert found.ok
    assert domains(found.placements["main"]) == [("h00", 2), ("h10", 3)], "h00 before h10, though placed after"
    grown = place_workload(snaps, [("tas", request("main", 4))], previous={"main": placed(("h10", 3))})
    assert domains(grown.placements["main"]) == [("h10", 4)], "the extra pod joins the old ones on h10"


def test_scale_down_cuts_the_previous_placement_from_its_end() -> None:
    snaps = snapshots({"r1": [4, 4]})
    found = place_workload(snaps, [("tas", request("main", 3))], previous={"main": placed(("h00", 2), ("h01", 2))})
    assert domains(found.placements["main"]) == [("h00", 2), ("h01", 1)]
    assert truncate(placed(("h00", 2), ("h01", 2)).domains, 1) == ((("h00",), 1),)


def test_the_same_count_keeps_the_previous_placement_whatever_is_free() -> None:
    """Even on nodes now fuller than the old slice's pods allow (another workload took the room meanwhile), the
    running pods are not moved."""
    snaps = snapshots({"r1": [2, 8]}, used={"h00": 2})
    found = place_workload(snaps, [("tas", request("main", 2))], previous={"main": placed(("h00", 2))})
    assert domains(found.placements["main"]) == [("h00", 2)]


def test_a_stale_previous_placement_is_placed_anew() -> None:
    """A node of the old placement is gone (deleted, not Ready, cordoned): the whole pod set is placed afresh."""
    snaps = snapshots({"r1": [2, 4]})
    found = place_workload(snaps, [("tas", request("main", 3))], previous={"main": placed(("gone", 2))})
    assert domains(found.placements["main"]) == [("h01", 3)]
    assert not usable(snaps["tas"], placed(("gone", 2)))
    assert not usable(snaps["tas"], Placement((label("rack"), HOSTNAME), ((("r1", "h00"), 2),))), "other levels"
    assert usable(snaps["tas"], placed(("h00", 2)))


def test_the_new_pods_that_do_not_fit_fail_the_pod_set() -> None:
    snaps = snapshots({"r1": [2, 1]})
    found = place_workload(snaps, [("tas", request("main", 4))], previous={"main": placed(("h00", 2))})
    assert not found.ok and found.failed == "main"
    assert "allows to fit only 1 out of 2 pod(s)" in found.message
    empty = place_workload(snaps, [("tas", request("main", 4))], simulate_empty=True,
                           previous={"main": placed(("h00", 2))})
    assert not empty.ok, "the running pods stay taken on an otherwise empty topology"


def test_a_group_keeps_its_leader_and_places_only_the_new_workers() -> None:
    """Kueue #13574: the leader's pod runs on, so its placement is kept as it is, and its room is taken before the
    extra workers are placed (they need not join it)."""
    snaps = snapshots({"r1": [3, 4]})
    group = [("tas", request("leader", 1, group="g")), ("tas", request("workers", 4, group="g"))]
    before = {"leader": placed(("h00", 1)), "workers": placed(("h00", 2))}
    found = place_workload(snaps, group, previous=before)
    assert found.ok
    assert domains(found.placements["leader"]) == [("h00", 1)]
    assert domains(found.placements["workers"]) == [("h00", 2), ("h01", 2)]


def test_a_group_scaled_down_keeps_its_leader() -> None:
    """Kueue #12436: same count or fewer workers, the leader's placement is kept (and counted) too."""
    snaps = snapshots({"r1": [3, 4]})
    group = [("tas", request("leader", 1, group="g")), ("tas", request("workers", 2, group="g"))]
    found = place_workload(snaps, group, previous={"leader": placed(("h01", 1)), "workers": placed(("h00", 3))})
    assert domains(found.placements["leader"]) == [("h01", 1)]
    assert domains(found.placements["workers"]) == [("h00", 2)]


def test_a_group_whose_leader_has_no_previous_placement_is_placed_anew_as_a_whole() -> None:
    snaps = snapshots({"r1": [3, 4]})
    group = [("tas", request("leader", 1, group="g")), ("tas", request("workers", 3, group="g"))]
    anew = place_workload(snaps, group)
    found = place_workload(snaps, group, previous={"workers": placed(("h00", 2))})
    assert found.placements == anew.placements


def test_merge_sums_and_orders_by_leaf() -> None:
    tree = snapshots({"r1": [1, 1], "r2": [1]})["tas"].tree
    assert merge(tree, [(("h10",), 1), (("h00",), 1)], [(("h00",), 2)]) == ((("h00",), 3), (("h10",), 1))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=4), st.data())
def test_a_scale_up_keeps_every_running_pod_within_the_nodes_room(cpus: list[int], data: st.DataObject) -> None:
    hosts = [f"h0{i}" for i in range(len(cpus))]
    before = {h: data.draw(st.integers(0, c)) for h, c in zip(hosts, cpus, strict=True)}
    running = sum(before.values())
    if running == 0:
        return
    count = running + data.draw(st.integers(1, 6))
    snaps = snapshots({"r1": cpus})
    previous = placed(*((h, c) for h, c in before.items() if c))
    found = place_workload(snaps, [("tas", request("main", count))], previous={"main": previous})
    room = sum(cpus)
    assert found.ok == (count <= room)
    if found.ok:
        got = dict(domains(found.placements["main"]))
        assert sum(got.values()) == count
        assert all(got.get(h, 0) >= c for h, c in before.items()), "a running pod was moved"
        assert all(got.get(h, 0) <= c for h, c in zip(hosts, cpus, strict=True)), "a node holds more than it has"
