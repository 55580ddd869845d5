"""TASLeaderPodSetFeasibility (Kueue v0.20, #15447, beta, on): a pod-set group's leader is placed on a node its own
filters allow (:mod:`kueue_es.scheduler.tas.leader_nodes`), where the leaves are nodes (hostname lowest) and under
TASNodeFeasibilityForAllLevels (each node of a rack checked on its own). Off, it follows the workers' filters."""

from __future__ import annotations

import pytest
from fixtures.tasbuild import flavor_obj, label, node_obj, topology_obj, upsert

from events import objects as o
from events import schema as ev
from kueue_es.scheduler.config import load_config
from kueue_es.scheduler.tas import PodSetRequest, TASOptions, place_workload
from kueue_es.scheduler.tasplace import tas_options
from projections.cluster import ClusterState
from projections.topology import tas_snapshots

RACK = label("rack")
ON, OFF = TASOptions(), TASOptions(leader_feasibility=False)
HOSTNAME_LOWEST, RACK_ONLY = ["rack", "hostname"], ["rack"]


def snapshots(levels: list[str], nodes: list[tuple[str, int, str | None]]):
    """One rack ``r1``: nodes (name, cpu, the value of their ``role`` label or None)."""
    state = ClusterState()
    events = [upsert(topology_obj("default", levels)), upsert(flavor_obj("tas", "default"))]
    for name, cpu, role in nodes:
        labels = {"rack": "r1", "hostname": name, **({"role": role} if role else {})}
        events.append(upsert(node_obj({"name": name, "labels": labels, "allocatable": {"cpu": cpu, "pods": 110}})))
    for i, e in enumerate(events):
        state.apply(ev.Record(i, e))
    return tas_snapshots(state)


def member(name: str, count: int, role: str | None) -> PodSetRequest:
    return PodSetRequest(name=name, count=count, requests=(("cpu", 1000),),
                         node_selector=(("role", role),) if role else (),
                         topology=o.PodSetTopologyRequest(required=RACK, pod_set_group_name="g"))


def hosts(placement) -> list[tuple[str, int]]:
    return [(v[-1], c) for v, c in placement.domains]


LEADER_OWN_NODE = [("h00", 2, "worker"), ("h01", 1, "leader")]
"""The workers may use h00 only (2 cpu), the leader h01 only: the group fits only with the leader on h01."""


def test_the_leader_takes_a_node_only_its_own_selector_allows() -> None:
    snaps = snapshots(HOSTNAME_LOWEST, LEADER_OWN_NODE)
    group = [("tas", member("leader", 1, "leader")), ("tas", member("workers", 2, "worker"))]
    on = place_workload(snaps, group, options=ON)
    assert on.ok, on.message
    assert hosts(on.placements["leader"]) == [("h01", 1)] and hosts(on.placements["workers"]) == [("h00", 2)]
    off = place_workload(snaps, group, options=OFF)
    assert not off.ok, "off, the leader is held to the workers' nodes, where it leaves room for one worker"


def test_the_leader_is_not_put_on_a_node_its_own_selector_refuses() -> None:
    snaps = snapshots(HOSTNAME_LOWEST, [("h00", 4, None)])
    group = [("tas", member("leader", 1, "leader")), ("tas", member("workers", 2, None))]
    off = place_workload(snaps, group, options=OFF)
    assert off.ok and hosts(off.placements["leader"]) == [("h00", 1)], "off: on a node its pod cannot run on"
    on = place_workload(snaps, group, options=ON)
    assert not on.ok and on.failed == "leader"


@pytest.mark.parametrize(("options", "fits"), [(ON, True), (OFF, False)], ids=["on", "off"])
def test_per_node_under_a_rack_the_leader_uses_its_own_filter(options: TASOptions, fits: bool) -> None:
    """TASNodeFeasibilityForAllLevels: the rack's nodes are checked one by one, for the leader with its own
    selector; the assignment stays at the rack."""
    snaps = snapshots(RACK_ONLY, LEADER_OWN_NODE)
    group = [("tas", member("leader", 1, "leader")), ("tas", member("workers", 2, "worker"))]
    found = place_workload(snaps, group, options=options)
    assert found.ok is fits, found.message
    if fits:
        assert hosts(found.placements["leader"]) == [("r1", 1)] and hosts(found.placements["workers"]) == [("r1", 2)]
    refused = place_workload(snapshots(RACK_ONLY, [("h00", 4, None)]),
                             [("tas", member("leader", 1, "leader")), ("tas", member("workers", 2, None))],
                             options=options)
    assert refused.ok is not fits, "no node of the rack suits the leader's own selector"


def test_the_gate_is_read_from_the_configuration() -> None:
    assert tas_options(load_config({})).leader_feasibility
    assert not tas_options(load_config({"featureGates": {"TASLeaderPodSetFeasibility": False}})).leader_feasibility
