"""Kueue v0.20 (#13383): a LeaderWorkerSet group's leader goes to a domain that leaves the workers room. The
changelog's case: a 1-CPU leader and four 2-CPU workers in one rack of 2-, 4- and 3-CPU hosts fit only with the
leader on the 3-CPU host. kueue-es's joint group placement already chose so; this pins it, in every host order."""

from __future__ import annotations

import pytest
from fixtures.tasbuild import label, rack_events

from events import objects as o
from events import schema as ev
from kueue_es.scheduler.tas import PodSetRequest, place_workload
from projections.cluster import ClusterState
from projections.topology import tas_snapshots


def _member(name: str, count: int, cpu: int) -> PodSetRequest:
    return PodSetRequest(name=name, count=count, requests=(("cpu", cpu * 1000),),
                         topology=o.PodSetTopologyRequest(required=label("rack"), pod_set_group_name="g"))


@pytest.mark.parametrize("cpus", [[2, 4, 3], [3, 4, 2], [4, 3, 2], [2, 3, 4]])
def test_the_leader_takes_the_host_that_leaves_the_workers_room(cpus: list[int]) -> None:
    state = ClusterState()
    for i, e in enumerate(rack_events({"r1": cpus}, ["rack", "hostname"])):
        state.apply(ev.Record(i, e))
    found = place_workload(tas_snapshots(state), [("tas", _member("leader", 1, 1)), ("tas", _member("worker", 4, 2))])
    assert found.ok
    three = f"h0{cpus.index(3)}"
    assert [(v[-1], c) for v, c in found.placements["leader"].domains] == [(three, 1)]
    workers = {v[-1]: c for v, c in found.placements["worker"].domains}
    assert sum(workers.values()) == 4
    assert all(2 * workers.get(f"h0{i}", 0) + (1 if f"h0{i}" == three else 0) <= cpu for i, cpu in enumerate(cpus))
