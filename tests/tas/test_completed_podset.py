"""Kueue v0.20 (#15219): under the ReclaimablePods gate, a pod set whose pods have all finished (reclaimable)
frees the topology domains it was assigned, so a pending workload can take them while the rest of its
workload still runs. A pod set with pods left, or the gate off, keeps its domains."""

from __future__ import annotations

from typing import Any

import msgspec
from fixtures.tasbuild import T0, flavor_obj, node_obj, topology_obj, upsert

from events import objects as o
from events import schema as ev
from events import tas_assignment
from projections.cluster import ClusterState
from projections.topology import tas_snapshots

HOST = "kubernetes.io/hostname"
KEY = "test-ns/two-sets"


def _pod_set(name: str, count: int, host: str) -> tuple[dict[str, Any], dict[str, Any]]:
    ta = tas_assignment.encode([HOST], [o.TopologyDomainAssignment(values=[host], count=count)])
    spec = {"name": name, "count": count, "template": {"spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}
    psa = {"name": name, "flavors": {"cpu": "tas"}, "count": count, "resourceUsage": {"cpu": f"{count}"},
           "topologyAssignment": msgspec.to_builtins(ta)}
    return spec, psa


def _state(gate: bool = True) -> tuple[ClusterState, int]:
    launcher, launcher_psa = _pod_set("launcher", 1, "h0")
    workers, workers_psa = _pod_set("workers", 2, "h1")
    wl = {
        "kind": "Workload",
        "metadata": {"name": "two-sets", "namespace": "test-ns", "uid": "uid-two-sets",
                     "creationTimestamp": "2024-01-01T00:00:00Z"},
        "spec": {"queueName": "lq", "podSets": [launcher, workers]},
        "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [launcher_psa, workers_psa]},
                   "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                                   "lastTransitionTime": "2024-01-01T00:00:00Z"}]},
    }
    events: list[ev.Event] = [ev.ConfigRecorded(time=T0, document={"featureGates": {"ReclaimablePods": gate}}),
                              upsert(topology_obj("default", [HOST])), upsert(flavor_obj("tas", "default"))]
    events += [upsert(node_obj({"name": h, "labels": {"hostname": h}, "allocatable": {"cpu": 2, "pods": 10}}))
               for h in ("h0", "h1")]
    events.append(upsert(wl))
    state = ClusterState()
    for i, e in enumerate(events):
        state.apply(ev.Record(i, e))
    return state, len(events)


def _reclaim(state: ClusterState, at: int, **counts: int) -> None:
    pods = [o.ReclaimablePod(name=n, count=c) for n, c in sorted(counts.items())]
    state.apply(ev.Record(at, ev.ReclaimablePodsChanged(time=T0 + 1, key=KEY, reclaimable_pods=pods)))


def test_a_completed_pod_set_frees_its_domains() -> None:
    state, at = _state()
    snap = tas_snapshots(state)["tas"]
    assert snap.leaf_remaining("h0") == {"cpu": 1000, "pods": 9}
    _reclaim(state, at, launcher=1)
    assert state.tas.usage == {"tas": {"h1": {"cpu": 2000, "pods": 2}}}, "the launcher's host is free"
    assert tas_snapshots(state)["tas"].leaf_remaining("h0") == {"cpu": 2000, "pods": 10}


def test_a_pod_set_with_pods_left_keeps_its_domains() -> None:
    state, at = _state()
    _reclaim(state, at, workers=1)
    assert state.tas.usage["tas"]["h1"] == {"cpu": 2000, "pods": 2}


def test_without_the_reclaimable_pods_gate_a_completed_pod_set_keeps_its_domains() -> None:
    state, at = _state(gate=False)
    _reclaim(state, at, launcher=1)
    assert state.tas.usage["tas"]["h0"] == {"cpu": 1000, "pods": 1}
