"""Pod-set groups (a LeaderWorkerSet's leader and workers) placed in one joint TAS run (§2.7 rule 25).

Fixed cases pin Kueue's choices (which member leads, which domain takes the leader, the failure's pod set); a property checks on random clusters that a group placement, when there is one,
holds exactly one leader and every worker, within the nodes' room and the required domain.
"""

from __future__ import annotations

from typing import Any

from fixtures.tasbuild import label, rack_snapshots
from hypothesis import given, settings
from hypothesis import strategies as st

from events import objects as o
from kueue_es.scheduler.tas import PodSetRequest, TASOptions, place_workload
from kueue_es.scheduler.tas.group import fill_group_counts
from kueue_es.scheduler.tas.workload import leader_and_workers

LEVELS = ["rack", "hostname"]
RACK = label("rack")


def snapshots(cpus: dict[str, list[int]]):
    """rack -> per-host CPUs (hosts named h<rack index><host index>)."""
    return rack_snapshots(cpus, LEVELS)


def member(name: str, count: int, cpu: int, *, required: str | None = RACK, preferred: str | None = None,
           unconstrained: bool | None = None, group: str | None = "g") -> PodSetRequest:
    return PodSetRequest(name=name, count=count, requests=(("cpu", cpu * 1000),) if cpu else (),
                         topology=o.PodSetTopologyRequest(required=required, preferred=preferred,
                                                          unconstrained=unconstrained, pod_set_group_name=group))


def domains(placement: Any) -> list[tuple[str, int]]:
    return [(v[-1], c) for v, c in placement.domains]


def test_the_smaller_count_leads_and_the_second_member_on_a_tie() -> None:
    a, b = member("a", 1, 1), member("b", 4, 1)
    assert leader_and_workers([a, b]) == (a, b)
    assert leader_and_workers([b, a]) == (a, b)
    c = member("c", 1, 1)
    assert leader_and_workers([a, c]) == (c, a), "equal counts: the second member leads, as Kueue picks"


def test_with_leader_counts_ignore_children_that_cannot_take_the_leader() -> None:
    """A rack's room for workers beside the leader is lost only where the leader can go: a full host that cannot
    take the leader loses nothing, yet does not make the rack lose nothing (Kueue's fixed aggregation)."""
    snaps = snapshots({"r1": [2, 0]})
    snap = snaps["tas"]
    per_pod = (("cpu", 1000), ("pods", 1))
    gc = fill_group_counts(snap, per_pod, per_pod, assumed=None, simulate_empty=False, excluded={}, within=None,
                           slice_size=1, slice_level=1, inner=None)
    assert gc.leader[1] == [1, 0] and gc.pods_wl[1] == [1, 0]
    assert gc.base.pods[0] == [2] and gc.pods_wl[0] == [1] and gc.leader[0] == [1]


def test_leader_goes_where_the_joint_run_puts_it() -> None:
    snaps = snapshots({"r1": [4, 4], "r2": [4, 2]})
    found = place_workload(snaps, [("tas", member("leader", 1, 1)), ("tas", member("worker", 3, 1))])
    assert found.ok
    assert domains(found.placements["leader"]) == [("h10", 1)]
    assert domains(found.placements["worker"]) == [("h10", 3)]


def test_the_leader_moves_where_the_with_leader_counts_assumed_it() -> None:
    """Kueue's walk gives the leader to the roomiest host (h01), which then holds no worker beside it, and strands
    the worker; the rack's with-leader count assumed the leader on h00, where it costs no worker."""
    snaps = snapshots({"r1": [1, 2]})
    found = place_workload(snaps, [("tas", member("worker", 1, 2)), ("tas", member("leader", 1, 1))])
    assert found.ok
    assert domains(found.placements["leader"]) == [("h00", 1)]
    assert domains(found.placements["worker"]) == [("h01", 1)]


def test_a_group_failure_names_its_first_member() -> None:
    snaps = snapshots({"r1": [4, 4], "r2": [4, 2]})
    found = place_workload(snaps, [("tas", member("worker", 8, 1)), ("tas", member("leader", 1, 1))])
    assert found.failed == "worker"
    assert found.message == 'topology "default" allows to fit only 8 out of 8 pod(s)'
    assert found.placements == {}


AFFINITY = TASOptions(node_affinity_preferred=True)


def preferring(req: PodSetRequest, host: str) -> PodSetRequest:
    """``req`` preferring (weight 10) the node named ``host``."""
    term = o.PreferredSchedulingTerm(weight=10, preference=o.NodeSelectorTerm(match_expressions=(
        o.NodeSelectorRequirement(key=label("hostname"), operator="In", values=(host,)),)))
    return PodSetRequest(name=req.name, count=req.count, requests=req.requests, topology=req.topology,
                         preferred_terms=(term,))


def test_preferred_affinity_keeps_a_group_best_fit_in_the_first_score_tier() -> None:
    """The workers prefer h00: it comes first below the rack, and best fit looks no further than its score tier,
    so the group stays on h00 although h01 is the tighter host (where it goes with the gate off)."""
    snaps = snapshots({"r1": [8, 4]})
    reqs = [("tas", member("leader", 1, 1)), ("tas", preferring(member("worker", 3, 1), "h00"))]
    found = place_workload(snaps, reqs, options=AFFINITY)
    assert domains(found.placements["leader"]) == [("h00", 1)]
    assert domains(found.placements["worker"]) == [("h00", 3)]
    off = place_workload(snaps, reqs)
    assert domains(off.placements["worker"]) == [("h01", 3)]


def test_a_required_group_scans_past_a_preferred_rack_too_small_for_it() -> None:
    """Rack r1 holds the preferred node and so leads the order, but takes only the leader and one worker; a
    required request then takes the first rack after it that holds the whole group, as Kueue's scan does."""
    snaps = snapshots({"r1": [2], "r2": [4]})
    reqs = [("tas", member("leader", 1, 1)), ("tas", preferring(member("worker", 3, 1), "h00"))]
    found = place_workload(snaps, reqs, options=AFFINITY)
    assert found.ok, found.message
    assert domains(found.placements["leader"]) == [("h10", 1)]
    assert domains(found.placements["worker"]) == [("h10", 3)]


clusters = st.dictionaries(st.sampled_from(["r1", "r2", "r3"]), st.lists(st.integers(0, 5), min_size=1, max_size=3),
                           min_size=1)


@settings(max_examples=150, deadline=None)
@given(cpus=clusters, workers=st.integers(1, 12), worker_cpu=st.integers(0, 2), leader_cpu=st.integers(0, 3),
       mode=st.sampled_from(["required", "preferred", "preferred-host", "unconstrained"]), balanced=st.booleans())
def test_a_group_placement_holds_one_leader_and_every_worker(cpus: dict[str, list[int]], workers: int,
                                                             worker_cpu: int, leader_cpu: int, mode: str,
                                                             balanced: bool) -> None:
    """Also under TASBalancedPlacement, whose leader-aware spread places a group wherever the joint search can."""
    snaps = snapshots(cpus)
    level: dict[str, Any] = {"required": {"required": RACK}, "preferred": {"required": None, "preferred": RACK},
                             "preferred-host": {"required": None, "preferred": label("hostname")},
                             "unconstrained": {"required": None, "unconstrained": True}}[mode]
    leader, worker = member("leader", 1, leader_cpu, **level), member("worker", workers, worker_cpu, **level)
    found = place_workload(snaps, [("tas", leader), ("tas", worker)], options=TASOptions(balanced=balanced))
    if balanced:
        assert found.ok == place_workload(snaps, [("tas", leader), ("tas", worker)]).ok
    if not found.ok:
        assert found.failed == "leader" and found.message
        return
    lead, work = domains(found.placements["leader"]), domains(found.placements["worker"])
    assert len(lead) == 1 and lead[0][1] == 1
    assert sum(c for _, c in work) == workers
    room = {f"h{r}{h}": cpu for r, (_, hosts) in enumerate(sorted(cpus.items())) for h, cpu in enumerate(hosts)}
    used = {host: c * worker_cpu for host, c in work}
    used[lead[0][0]] = used.get(lead[0][0], 0) + leader_cpu
    assert all(used[h] <= room[h] for h in used), (used, room)
    if mode == "required":
        racks = {h[:2] for h in used}
        assert len(racks) == 1, f"a required rack holds the whole group: {sorted(used)}"


def test_a_group_that_is_not_a_leader_and_its_workers_is_placed_member_by_member() -> None:
    """Kueue's job webhooks refuse such a group (#7061), its Workload API does not (a Workload created or
    imported as is). Kueue v0.20 places the first two members and leaves the rest with no topology assignment;
    kueue-es places each member alone, so each that asks for a topology has one."""
    snaps = snapshots({"r1": [8, 8]})
    three = place_workload(snaps, [("tas", member("solo", 1, 1, group=None)), ("tas", member("a", 1, 1)),
                                   ("tas", member("b", 2, 1)), ("tas", member("c", 3, 1))])
    assert three.ok and list(three.placements) == ["solo", "a", "b", "c"]
    assert [three.placements[n].count for n in ("a", "b", "c")] == [1, 2, 3]
    no_leader = place_workload(snaps, [("tas", member("a", 2, 1)), ("tas", member("b", 3, 1))])
    assert no_leader.ok and list(no_leader.placements) == ["a", "b"]
    alone = place_workload(snaps, [("tas", member("a", 2, 1)), ("tas", member("b", 0, 1))])
    assert alone.ok and list(alone.placements) == ["a"], "a member without pods leaves a group of one, placed"
