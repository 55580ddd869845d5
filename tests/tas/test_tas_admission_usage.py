"""What an admission charges on TAS flavors: net domains, Fits, charging across flavors sharing hostnames, and the
wire form of a placement."""

from __future__ import annotations

from fixtures.tasbuild import admitted_workload_obj, flavor_obj, node_obj, topology_obj, upsert

from events import schema as ev
from kueue_es.scheduler.tas import Placement, net_domains
from projections.cluster import ClusterState
from projections.topology import tas_snapshots

HOST = "kubernetes.io/hostname"


def state() -> ClusterState:
    s = ClusterState()
    events = [upsert(topology_obj("hosts", ["hostname"])), upsert(topology_obj("racks", ["rack", "hostname"])),
              upsert(topology_obj("blocks", ["block", "rack"])),
              upsert(flavor_obj("a", "hosts")), upsert(flavor_obj("b", "racks")), upsert(flavor_obj("c", "blocks"))]
    events += [upsert(node_obj({"name": f"h{i}", "labels": {"block": "b1", "rack": f"r{i % 2}", "hostname": f"h{i}"},
                                "allocatable": {"cpu": 4, "pods": 4}})) for i in range(3)]
    for i, e in enumerate(events):
        s.apply(ev.Record(i, e))
    return s


def test_charging_a_hostname_flavor_charges_every_flavor_sharing_the_hosts() -> None:
    snaps = tas_snapshots(state())
    snaps.charge("a", [(("h1",), 2)], {"cpu": 1000})
    assert snaps["a"].leaf_remaining("h1") == {"cpu": 2000, "pods": 2}
    assert snaps["b"].leaf_remaining("h1") == {"cpu": 2000, "pods": 2}
    assert snaps["c"].leaf_remaining("b1,r1") == {"cpu": 4000, "pods": 4}, "a block/rack flavor does not share"
    snaps.charge("a", [(("h1",), 2)], {"cpu": 1000}, sign=-1)
    assert snaps["b"].leaf_remaining("h1") == {"cpu": 4000, "pods": 4}


def test_without_overlapping_flavors_charging_a_hostname_flavor_charges_it_alone() -> None:
    """TASHandleOverlappingFlavors off: each flavor keeps its own usage, whatever nodes it shares."""
    snaps = tas_snapshots(state(), overlapping_flavors=False).fork()
    snaps.charge("a", [(("h1",), 2)], {"cpu": 1000})
    assert snaps["a"].leaf_remaining("h1") == {"cpu": 2000, "pods": 2}
    assert snaps["b"].leaf_remaining("h1") == {"cpu": 4000, "pods": 4}
    snaps.charge_usage([("b", "h0", (("cpu", 3000), ("pods", 1)))])
    assert snaps["b"].leaf_remaining("h0") == {"cpu": 1000, "pods": 3}
    assert snaps["a"].leaf_remaining("h0") == {"cpu": 4000, "pods": 4}


def test_admitted_usage_on_another_hostname_flavor_counts_only_with_overlapping_flavors() -> None:
    s = state()
    wl = admitted_workload_obj({"name": "on-b", "flavor": "b", "requests": {"cpu": 1}, "domains": [["h2", 3]]},
                               ["rack", "hostname"])
    s.apply(ev.Record(100, upsert(wl)))
    assert tas_snapshots(s)["a"].leaf_remaining("h2") == {"cpu": 1000, "pods": 1}
    off = tas_snapshots(s, overlapping_flavors=False)
    assert off["a"].leaf_remaining("h2") == {"cpu": 4000, "pods": 4}, "flavor b's usage is b's alone"
    assert off["b"].leaf_remaining("h2") == {"cpu": 1000, "pods": 1}
    assert tas_snapshots(s)["a"].leaf_remaining("h2") == {"cpu": 1000, "pods": 1}, "the memo tells the two apart"


def test_fits_checks_every_domain_and_refuses_unknown_ones() -> None:
    snap = tas_snapshots(state())["a"]
    assert snap.fits([(("h0",), 4), (("h2",), 1)], {"cpu": 1000})
    assert not snap.fits([(("h0",), 5)], {"cpu": 1000})
    assert not snap.fits([(("h0",), 1), (("gone",), 1)], {"cpu": 1000})


def test_net_domains_are_what_the_new_assignment_adds() -> None:
    held = Placement((HOST,), ((("h0",), 2), (("h1",), 1)))
    new = Placement((HOST,), ((("h0",), 2), (("h1",), 2), (("h2",), 1)))
    assert net_domains(new, held) == ((("h1",), 1), (("h2",), 1))
    assert net_domains(new, None) == new.domains


def test_placement_wire_form_round_trips() -> None:
    p = Placement((HOST,), ((("h0",), 2), (("h1",), 1), (("h2",), 1)))
    ta = p.encode()
    assert ta.levels == [HOST]
    assert Placement.decode(ta) == p
    assert Placement.decode(Placement((HOST,), ()).encode()) == Placement((HOST,), ())
