"""SchedulerLibraryIntegration: the scheduler's NodePorts filter in TAS placement, and what it reads.

The YAML scenarios ``tests/scheduler/scenarios/tas-scheduler-library-*`` (each with a ``-gate-off`` twin) show the
placements that differ; these tests pin the Kubernetes host-port rules, the fold's record of which bound pods hold
which ports, and the two ways Kueue's simulator lets a workload's pods go (every workload assumed gone, the targets
of a preemption simulation).
"""

from __future__ import annotations

from typing import Any

import msgspec
from fixtures.tasbuild import flavor_obj, node_obj, pod_obj, topology_obj, upsert

from connectors.k8s.trim import pod_view
from events import objects as o
from events import schema as ev
from events import tas_assignment
from kueue_es.scheduler.tas import NodePorts, NoPlacement, PodSetRequest, TASOptions, place
from kueue_es.scheduler.tasplace import node_ports, without_victims
from projections.assumed_ports import holders_by_node
from projections.cluster import ClusterState
from projections.host_ports import conflict, host_ports
from projections.topology import tas_snapshots
from projections.workloads import PodSetInfo, WorkloadInfo


def _spec(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None) -> o.PodSpec:
    return msgspec.convert({"containers": containers, "initContainers": init or []}, o.PodSpec)


def _port(port: int, **kw: Any) -> dict[str, Any]:
    return {"containerPort": port, "hostPort": port, **kw}


def test_a_pods_host_ports_are_its_containers_and_sidecars_with_defaults_filled_in() -> None:
    spec = _spec([{"name": "a", "ports": [_port(80), {"containerPort": 9090}, _port(53, protocol="UDP")]}],
                 init=[{"name": "side", "restartPolicy": "Always", "ports": [_port(81, hostIP="10.0.0.1")]},
                       {"name": "once", "ports": [_port(82)]}])
    assert host_ports(spec) == (("TCP", 80, "0.0.0.0"), ("TCP", 81, "10.0.0.1"), ("UDP", 53, "0.0.0.0"))


def test_host_ports_conflict_on_protocol_and_port_with_a_wildcard_or_the_same_ip() -> None:
    any80 = ("TCP", 80, "0.0.0.0")
    assert conflict((any80,), (("TCP", 80, "10.0.0.1"),))
    assert conflict((("TCP", 80, "10.0.0.1"),), (any80,))
    assert conflict((("TCP", 80, "10.0.0.1"),), (("TCP", 80, "10.0.0.1"),))
    assert not conflict((("TCP", 80, "10.0.0.1"),), (("TCP", 80, "10.0.0.2"),))
    assert not conflict((any80,), (("UDP", 80, "0.0.0.0"),))
    assert not conflict((any80,), (("TCP", 81, "0.0.0.0"),))
    assert not conflict((("TCP", 80, "::"),), (("TCP", 80, "10.0.0.1"),)), "'::' is no wildcard to the scheduler"


def _pod(name: str, node: str, port: int, owner: str = "", phase: str = "Running") -> dict[str, Any]:
    pod = pod_obj({"name": name, "node": node, "phase": phase,
                   "annotations": {"kueue.x-k8s.io/workload": owner} if owner else {}})
    pod["spec"]["containers"][0]["ports"] = [_port(port)]
    return pod


def _state(*pods: dict[str, Any]) -> ClusterState:
    state = ClusterState()
    events = [upsert(topology_obj("default", ["hostname"])), upsert(flavor_obj("tas", "default"))]
    events += [upsert(node_obj({"name": n, "labels": {"hostname": n}, "allocatable": {"cpu": 4, "pods": 10}}))
               for n in ("n1", "n2")]
    events += [upsert(p) for p in pods]
    for i, e in enumerate(events):
        state.apply(ev.Record(i, e))
    return state


def test_the_fold_keeps_the_host_ports_of_bound_running_pods_by_node_with_their_owner() -> None:
    state = _state(_pod("a", "n1", 80, owner="w"), _pod("b", "", 81), _pod("c", "n2", 82, phase="Succeeded"),
                   pod_obj({"name": "d", "node": "n2"}))
    assert node_ports(state) == {"n1": (("test-ns/w", (("TCP", 80, "0.0.0.0"),)),)}
    state.apply(ev.Record(99, ev.ObjectDeleted(time=1, kind="Pod", key="test-ns/a", uid="")))
    assert node_ports(state) == {}


def _place(state: ClusterState, library: NodePorts | None, simulate_empty: bool = False):
    req = PodSetRequest(name="main", count=1, requests=(("cpu", 1000),), host_ports=(("TCP", 80, "0.0.0.0"),),
                        topology=o.PodSetTopologyRequest(required="kubernetes.io/hostname"))
    return place(tas_snapshots(state)["tas"], req, simulate_empty=simulate_empty,
                 options=TASOptions(library=library))


def test_a_node_whose_port_is_held_is_refused_unless_its_workload_is_gone() -> None:
    state = _state(_pod("a", "n1", 80, owner="w"), _pod("b", "n2", 80))
    holders = node_ports(state)
    refused = _place(state, NodePorts(holders=holders))
    assert isinstance(refused, NoPlacement)
    assert refused.message.endswith("Total nodes: 2; excluded: schedulerLibraryNoFit: 2")
    assert _place(state, None).domains, "without the gate ports are not looked at"
    # every workload assumed gone: n1's holder belongs to one, n2's to none
    assert _place(state, NodePorts(holders=holders), simulate_empty=True).domains == ((("n1",), 1),)
    # the preemption simulation of w releases its pods' ports only
    released = without_victims(TASOptions(library=NodePorts(holders=holders)),
                               [WorkloadInfo(key="test-ns/w", uid="", namespace="test-ns", name="w", queue_name="",
                                             created=0, priority=0, priority_class="", pod_sets=())])
    assert released.library is not None and released.library.released == frozenset({"test-ns/w"})
    assert _place(state, released.library).domains == ((("n1",), 1),)


def test_the_log_keeps_a_pods_host_ports_and_no_other_port() -> None:
    pod = msgspec.convert(_pod("a", "n1", 80), o.Pod)
    pod = msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, containers=[
        msgspec.structs.replace(pod.spec.containers[0], ports=[*pod.spec.containers[0].ports,
                                                               o.ContainerPort(container_port=9090)])]))
    kept = pod_view(pod)
    assert kept is not None
    assert [p.host_port for p in kept.spec.containers[0].ports] == [80]


def _holding(name: str, levels: list[str], nodes: list[str], port: int | None) -> WorkloadInfo:
    """A workload of one pod set (its pods asking for ``port``) holding quota with a topology assignment of one pod
    on each of ``nodes`` (their domains' values: one per level, the last the node)."""
    domains = [o.TopologyDomainAssignment(values=[*(["r1"] * (len(levels) - 1)), n], count=1) for n in nodes]
    psa = o.PodSetAssignment(name="main", count=len(nodes), topology_assignment=tas_assignment.encode(levels, domains))
    ports = (("TCP", port, "0.0.0.0"),) if port else ()
    ps = PodSetInfo(name="main", count=len(nodes), min_count=None, requests=(), host_ports=ports)
    return WorkloadInfo(key=f"test-ns/{name}", uid="", namespace="test-ns", name=name, queue_name="", created=0,
                        priority=0, priority_class="", pod_sets=(ps,),
                        admission=o.Admission(cluster_queue="cq", pod_set_assignments=[psa]))


def test_a_workload_holding_quota_holds_its_ports_on_its_assigned_nodes_in_place_of_its_pods() -> None:
    """Kueue's virtual pods: a workload with a hostname-level assignment holds its pod sets' ports on the assigned
    nodes, pods or not (its bound pod on n1 no longer counts there); a rack-level assignment makes none, and the
    workload's bound pods count as they are; a pod of no workload always does."""
    state = _state(_pod("a", "n1", 80, owner="w"), _pod("b", "n1", 81, owner="rack"), _pod("c", "n2", 82))
    wls = {"test-ns/w": _holding("w", ["kubernetes.io/hostname"], ["n2"], 80),
           "test-ns/rack": _holding("rack", ["rack"], ["r1"], 81),
           "test-ns/quiet": _holding("quiet", ["rack", "kubernetes.io/hostname"], ["n1"], None)}
    got = holders_by_node(state.tas.host_ports, wls, ["test-ns/w", "test-ns/rack", "test-ns/quiet"])
    assert got == {"n1": (("test-ns/rack", (("TCP", 81, "0.0.0.0"),)),),
                   "n2": (("", (("TCP", 82, "0.0.0.0"),)), ("test-ns/w", (("TCP", 80, "0.0.0.0"),)))}
    # not holding quota: only its bound pods count
    assert holders_by_node(state.tas.host_ports, wls, [])["n1"] == (
        ("test-ns/w", (("TCP", 80, "0.0.0.0"),)), ("test-ns/rack", (("TCP", 81, "0.0.0.0"),)))
