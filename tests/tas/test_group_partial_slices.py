"""TASPartialSlices in a pod-set group (a LeaderWorkerSet's leader and sliced workers, TASGroupedPodSetSlicing):
workers that are not a multiple of the slice size end in a last, partial slice within one slice-level domain,
beside the leader (Kueue v0.20, #15640: a 16-pod group of a leader and 15 workers fills four 4-host racks, one of
them with the leader and the last 3 workers). With the gate off only the whole slices are placed, as before.
Balanced placement (TASBalancedPlacement) leaves such a group to the search, as Kueue does."""

from __future__ import annotations

from typing import Any

from fixtures.tasbuild import assert_slices_aligned, label, rack_snapshots
from hypothesis import given, settings
from hypothesis import strategies as st

from events import objects as o
from kueue_es.scheduler.tas import PodSetRequest, TASOptions, place_workload

LEVELS = ["rack", "hostname"]
RACK, HOST = label("rack"), label("hostname")


def member(name: str, count: int, cpu: int, **topology: Any) -> PodSetRequest:
    return PodSetRequest(name=name, count=count, requests=(("cpu", cpu * 1000),) if cpu else (),
                         topology=o.PodSetTopologyRequest(pod_set_group_name="g", **topology))


def hosts(placement: Any) -> list[tuple[str, int]]:
    return [(v[-1], c) for v, c in placement.domains]


def _lws(workers: int, **topology: Any) -> list[tuple[str, PodSetRequest]]:
    return [("tas", member("leader", 1, 1, **topology)),
            ("tas", member("workers", workers, 1, pod_set_slice_required_topology=RACK, pod_set_slice_size=4,
                           **topology))]


def test_a_leader_and_fifteen_workers_fill_four_racks_of_four() -> None:
    snaps = rack_snapshots({f"r{i}": [1, 1, 1, 1] for i in range(4)}, LEVELS)
    found = place_workload(snaps, _lws(15))
    assert found.ok
    leader, workers = hosts(found.placements["leader"]), hosts(found.placements["workers"])
    assert leader == [("h00", 1)]
    assert sum(c for _, c in workers) == 15
    assert [h for h, _ in workers[-3:]] == ["h01", "h02", "h03"], "the partial slice, beside the leader, comes last"
    racks = [h[:2] for h, _ in workers[:-3]]
    assert all(racks.count(r) == 4 for r in set(racks)) and len(set(racks)) == 3


def test_gate_off_places_the_whole_slices_only() -> None:
    snaps = rack_snapshots({f"r{i}": [1, 1, 1, 1] for i in range(4)}, LEVELS)
    found = place_workload(snaps, _lws(15), options=TASOptions(partial_slices=False))
    assert found.ok
    assert sum(c for _, c in hosts(found.placements["workers"])) == 12


def test_a_preferred_group_under_balanced_placement_is_placed_by_the_search() -> None:
    snaps = rack_snapshots({"r0": [1, 1, 1, 1], "r1": [2, 2, 1, 1], "r2": [1, 1, 1, 1]}, LEVELS)
    workers = _lws(10, preferred=RACK)
    balanced = place_workload(snaps, workers, options=TASOptions(balanced=True))
    plain = place_workload(snaps, workers)
    assert balanced.ok and plain.ok
    assert {k: hosts(p) for k, p in balanced.placements.items()} == {k: hosts(p) for k, p in plain.placements.items()}
    assert sum(c for _, c in hosts(balanced.placements["workers"])) == 10


def test_the_partial_slice_needs_a_home_beside_the_whole_slices() -> None:
    """Racks of 4 and 3 one-CPU hosts hold a leader and 6 workers sliced by 4 (a whole slice, then 2 workers with
    the leader), not a leader and 7 workers (a whole slice, then 3 workers with the leader: 8 hosts), which the
    gate off admits with its whole slice alone."""
    snaps = rack_snapshots({"r0": [1, 1, 1, 1], "r1": [1, 1, 1]}, LEVELS)
    six = place_workload(snaps, _lws(6, preferred=RACK))
    assert six.ok and hosts(six.placements["workers"])[-2:] == [("h11", 1), ("h12", 1)]
    assert hosts(six.placements["leader"]) == [("h10", 1)]
    seven = place_workload(snaps, _lws(7, preferred=RACK))
    assert not seven.ok and seven.message == 'topology "default" allows to fit only 1 out of 2 slice(s)'
    assert place_workload(snaps, _lws(7, preferred=RACK), options=TASOptions(partial_slices=False)).ok


clusters = st.dictionaries(st.sampled_from(["r1", "r2", "r3", "r4"]),
                           st.lists(st.integers(0, 4), min_size=1, max_size=4), min_size=1)


@settings(max_examples=250, deadline=None)
@given(cpus=clusters, workers=st.integers(2, 16), size=st.integers(2, 4), by_rack=st.booleans(),
       leader_cpu=st.integers(0, 2), mode=st.sampled_from(["required", "preferred", "slice-only"]),
       balanced=st.booleans())
def test_a_group_with_a_partial_slice_keeps_every_slice_in_one_domain(cpus, workers, size, by_rack, leader_cpu,
                                                                        mode, balanced) -> None:
    size = min(size, workers)
    topology: dict[str, Any] = {"required": {"required": RACK}, "preferred": {"preferred": RACK},
                                "slice-only": {}}[mode]
    leader = member("leader", 1, leader_cpu, **topology)
    worker = member("workers", workers, 1, pod_set_slice_required_topology=RACK if by_rack else HOST,
                    pod_set_slice_size=size, **topology)
    snaps = rack_snapshots(cpus, LEVELS)
    found = place_workload(snaps, [("tas", leader), ("tas", worker)], options=TASOptions(balanced=balanced))
    if not found.ok:
        return
    room = {f"h{r}{h}": (rack, cpu) for r, (rack, row) in enumerate(sorted(cpus.items())) for h, cpu in enumerate(row)}
    lead, work = hosts(found.placements["leader"]), hosts(found.placements["workers"])
    assert len(lead) == 1 and lead[0][1] == 1
    assert sum(c for _, c in work) == workers
    used = {h: c for h, c in work}
    used[lead[0][0]] = used.get(lead[0][0], 0) + leader_cpu
    assert all(used[h] <= room[h][1] for h in used), (used, room)
    assert_slices_aligned([room[h][0] if by_rack else h for h, _ in work], [c for _, c in work], size, workers)
    if mode == "required":
        assert len({room[h][0] for h in used}) == 1
