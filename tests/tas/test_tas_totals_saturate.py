"""A TAS domain's requests are its pods' scaled up by its pod count in Kueue's int64 arithmetic, which saturates at
MaxInt64 (v0.20, #14100): a total past it is charged as MaxInt64, never as a larger (or wrapped) number."""

from __future__ import annotations

from fixtures.tasbuild import admitted_workload_obj, flavor_obj, topology_obj, upsert

from events import schema as ev
from events.quantity import MAX_INT64
from kueue_es.scheduler.tas.request import Placement, add_assumed
from projections.cluster import ClusterState
from projections.topology import workload_tas_usage

LEVELS = ["block", "rack", "hostname"]
HUGE = 5 * 10**18  # one pod's requests: over half of MaxInt64 (about 9.22e18)


def test_an_admitted_domains_total_saturates_at_max_int64() -> None:
    state = ClusterState()
    events = [upsert(topology_obj("default", LEVELS)), upsert(flavor_obj("tas", "default")),
              upsert(admitted_workload_obj({"name": "w", "requests": {"example.com/x": str(HUGE), "cpu": "1"},
                                            "flavor": "tas", "domains": [["h0", 3], ["h1", 1]]}, LEVELS))]
    for i, e in enumerate(events):
        state.apply(ev.Record(i, e))
    wl = state.workloads["test-ns/w"]
    usage = {domain: dict(amounts) for _, domain, amounts in workload_tas_usage(wl)}
    assert usage["h0"]["example.com/x"] == MAX_INT64, "3 pods: 1.5e19 saturates"
    assert usage["h1"]["example.com/x"] == HUGE
    assert usage["h0"]["cpu"] == 3000 and usage["h0"]["pods"] == 3


def test_usage_assumed_within_a_computation_saturates_too() -> None:
    assumed: dict[str, dict[str, int]] = {}
    per_pod = {"example.com/x": HUGE, "pods": 1}
    add_assumed(assumed, Placement(("hostname",), ((("h0",), 2),)), per_pod)
    assert assumed["h0"] == {"example.com/x": MAX_INT64, "pods": 2}
    add_assumed(assumed, Placement(("hostname",), ((("h0",), 1),)), per_pod)
    assert assumed["h0"] == {"example.com/x": MAX_INT64, "pods": 3}
