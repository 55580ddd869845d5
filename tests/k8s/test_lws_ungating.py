"""The ungater places a LeaderWorkerSet group's workers by their worker index (Kueue's topology ungater: in a
PodSet group the workers' indexes start after the leader's pods)."""

from __future__ import annotations

import msgspec
import pytest

from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.ungater import Ungater
from events import objects as o
from events import schema as ev
from events.log import MemoryLog
from events.tas_assignment import encode
from projections.workloads import ADMITTED

HOST, RACK = "kubernetes.io/hostname", "cloud.example.com/rack"
WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
GATE = {"name": "kueue.x-k8s.io/topology"}


class _Recorder:
    """A client that records each pod's node selector and answers a new resourceVersion."""

    def __init__(self) -> None:
        self.placed: dict[str, str] = {}

    async def patch(self, resource, name, body, namespace):
        self.placed[name] = body["spec"]["nodeSelector"][HOST]
        return msgspec.json.encode({"metadata": {"resourceVersion": "9"}})


def _pod(name: str, pod_set: str, index: int) -> o.Pod:
    # names run against the ranks, so name order would place them otherwise
    return o.Pod(metadata=o.ObjectMeta(name=name, namespace="ns", uid=f"u-{name}", resource_version="1",
                                       labels={"kueue.x-k8s.io/podset": pod_set, WORKER_INDEX: str(index)},
                                       annotations={"kueue.x-k8s.io/workload": "wl"}),
                 spec=o.PodSpec(scheduling_gates=[GATE]))


@pytest.mark.asyncio
async def test_a_groups_workers_are_placed_by_worker_index_after_the_leader() -> None:
    group = {"podSetGroupName": "g", "required": RACK}
    wl = o.Workload(metadata=o.ObjectMeta(name="wl", namespace="ns", uid="u", resource_version="1"),
                    spec=o.WorkloadSpec(queue_name="lq", pod_sets=[
                        msgspec.convert({"name": "leader", "count": 1, "topologyRequest": group}, o.PodSet),
                        msgspec.convert({"name": "worker", "count": 3,
                                         "topologyRequest": {**group, "podIndexLabel": WORKER_INDEX}}, o.PodSet)]))
    pods = [_pod("lead", "leader", 0), _pod("w-a", "worker", 3), _pod("w-b", "worker", 2), _pod("w-c", "worker", 1)]
    journal = LocalJournal(MemoryLog(), Mirror())
    await journal.append([ev.ObjectUpserted(time=1, key="ns/wl", uid="u", obj=wl)]
                         + [ev.ObjectUpserted(time=1, key=f"ns/{p.metadata.name}", uid=p.metadata.uid, obj=p)
                            for p in pods])
    info = journal.mirror.state.workloads["ns/wl"]

    def psa(name: str, domains: list[tuple[str, int]]) -> o.PodSetAssignment:
        ta = encode([HOST], [o.TopologyDomainAssignment(values=[v], count=c) for v, c in domains])
        return o.PodSetAssignment(name=name, count=sum(c for _, c in domains), topology_assignment=ta)

    info.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[
        psa("leader", [("n1", 1)]), psa("worker", [("n1", 1), ("n2", 2)])])
    info.phase = ADMITTED
    client = _Recorder()
    await Ungater(client, journal).sync("ns/wl")  # type: ignore[arg-type]
    assert client.placed == {"lead": "n1", "w-c": "n1", "w-b": "n2", "w-a": "n2"}


@pytest.mark.asyncio
async def test_an_unreadable_pod_index_offset_ungates_no_pod_set_of_the_workload() -> None:
    """Kueue's ungater reads each pod set's pod-index offset before patching any pod: one it cannot parse fails the
    workload's whole pass, so the other pod sets stay gated too (retried when a pod changes)."""
    wl = o.Workload(metadata=o.ObjectMeta(name="wl", namespace="ns", uid="u", resource_version="1"),
                    spec=o.WorkloadSpec(queue_name="lq", pod_sets=[
                        msgspec.convert({"name": name, "count": 1,
                                         "topologyRequest": {"required": RACK, "podIndexLabel": WORKER_INDEX}},
                                        o.PodSet) for name in ("launcher", "worker")]))
    bad = _pod("w", "worker", 1)
    bad = msgspec.structs.replace(bad, metadata=msgspec.structs.replace(
        bad.metadata, annotations={**bad.metadata.annotations, "kueue.x-k8s.io/pod-index-offset": "one"}))
    pods = [_pod("l", "launcher", 0), bad]
    journal = LocalJournal(MemoryLog(), Mirror())
    await journal.append([ev.ObjectUpserted(time=1, key="ns/wl", uid="u", obj=wl)]
                         + [ev.ObjectUpserted(time=1, key=f"ns/{p.metadata.name}", uid=p.metadata.uid, obj=p)
                            for p in pods])
    info = journal.mirror.state.workloads["ns/wl"]
    ta = encode([HOST], [o.TopologyDomainAssignment(values=["n1"], count=1)])
    info.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[
        o.PodSetAssignment(name=name, count=1, topology_assignment=ta) for name in ("launcher", "worker")])
    info.phase = ADMITTED
    client = _Recorder()
    await Ungater(client, journal).sync("ns/wl")  # type: ignore[arg-type]
    assert client.placed == {}
