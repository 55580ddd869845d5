"""TASPartialSlices on random racks: whenever a pod set whose count is not a multiple of its slice size is placed,
every pod is placed, within the hosts' room, every slice-level domain holds whole slices but the one listed last,
which holds whole slices and the partial one (Kueue's ``assignmentSliceAligned``), and a required rack is kept.
The gate's fixed cases are ``cases/partial_slices.yaml``."""

from __future__ import annotations

from fixtures.tasbuild import HOSTNAME, assert_slices_aligned, label, rack_snapshots
from hypothesis import given, settings
from hypothesis import strategies as st

from events import objects as o
from kueue_es.scheduler.tas import NoPlacement, PodSetRequest, TASOptions, place_workload

LEVELS = ["rack", "hostname"]
RACK = label("rack")


def snapshots(cpus: dict[str, list[int]]):
    """rack -> per-host CPUs (hosts named h<rack index><host index>)."""
    return rack_snapshots(cpus, LEVELS)


racks = st.dictionaries(st.sampled_from(["r1", "r2", "r3", "r4"]), st.lists(st.integers(0, 5), min_size=1, max_size=4),
                        min_size=1)


@settings(max_examples=300, deadline=None)
@given(cpus=racks, count=st.integers(2, 20), size=st.integers(2, 5), by_rack=st.booleans(),
       mode=st.sampled_from(["required", "preferred", "slice-only"]))
def test_a_placed_partial_slice_keeps_every_slice_in_one_domain(cpus, count, size, by_rack, mode) -> None:
    size = min(size, count)
    topo = o.PodSetTopologyRequest(required=RACK if mode == "required" else None,
                                   preferred=RACK if mode == "preferred" else None,
                                   pod_set_slice_required_topology=RACK if by_rack else HOSTNAME,
                                   pod_set_slice_size=size)
    req = PodSetRequest(name="ps", count=count, requests=(("cpu", 1000),), topology=topo)
    snaps = snapshots(cpus)
    on = place_workload(snaps, [("tas", req)], options=TASOptions())
    off = place_workload(snaps, [("tas", req)], options=TASOptions(partial_slices=False))
    if on.failed is not None:
        return
    assert off.failed is None, "the whole slices alone fit where they fit with the partial one"
    placement = on.placements["ps"]
    assert not isinstance(placement, NoPlacement)
    hosts = {f"h{r}{h}": (rack, cpu) for r, (rack, row) in enumerate(sorted(cpus.items())) for h, cpu in enumerate(row)}
    assert sum(c for _, c in placement.domains) == count
    for (host,), c in placement.domains:
        assert 0 < c <= hosts[host][1], (host, c)
    assert_slices_aligned([hosts[host][0] if by_rack else host for (host,), _ in placement.domains],
                          [c for _, c in placement.domains], size, count)
    if mode == "required":
        assert len({hosts[host][0] for (host,), _ in placement.domains}) == 1
    assert sum(c for _, c in off.placements["ps"].domains) == count - count % size
