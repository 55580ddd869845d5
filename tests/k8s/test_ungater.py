"""The ungater's I/O side: which workloads it looks at, what it patches, and that it never patches a pod twice."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from connectors.k8s.errors import Conflict
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.ungater import Ungater
from events import objects as o
from events import schema as ev
from events.log import MemoryLog
from events.tas_assignment import encode
from projections.workloads import ADMITTED, RESERVED

HOST = "kubernetes.io/hostname"
GATE = {"name": "kueue.x-k8s.io/topology"}


class FakePods:
    def __init__(self) -> None:
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.conflict = False

    async def patch(self, resource, name: str, body: Any, namespace: str = "", subresource: str = "") -> bytes:
        if self.conflict:
            raise Conflict("changed", 409)
        self.patches.append((name, body))
        return msgspec.json.encode({"metadata": {"resourceVersion": "50"}})


def _pod(name: str, rv: str = "10", gated: bool = True, selector: dict[str, str] | None = None) -> o.Pod:
    return o.Pod(metadata=o.ObjectMeta(name=name, namespace="ns", uid=f"uid-{name}", resource_version=rv,
                                       labels={"kueue.x-k8s.io/podset": "main"},
                                       annotations={"kueue.x-k8s.io/workload": "wl"}),
                 spec=o.PodSpec(scheduling_gates=[GATE, {"name": "other"}] if gated else [{"name": "other"}],
                                node_selector=selector or {}))


async def _setup(phase: str = ADMITTED) -> tuple[LocalJournal, Ungater, FakePods]:
    journal = LocalJournal(MemoryLog(), Mirror())
    wl = o.Workload(metadata=o.ObjectMeta(name="wl", namespace="ns", uid="wl-uid", resource_version="1"),
                    spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(count=2)]))
    await journal.append([ev.ObjectUpserted(time=1, key="ns/wl", uid="wl-uid", obj=wl)])
    info = journal.mirror.state.workloads["ns/wl"]
    ta = encode([HOST], [o.TopologyDomainAssignment(values=["n1"], count=1),
                         o.TopologyDomainAssignment(values=["n2"], count=1)])
    info.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[
        o.PodSetAssignment(name="main", count=2, topology_assignment=ta)])
    info.phase = phase
    fake = FakePods()
    return journal, Ungater(fake, journal), fake  # type: ignore[arg-type]


async def _observe(journal: LocalJournal, *pods: o.Pod) -> None:
    await journal.append([ev.ObjectUpserted(time=2, key=p.key, uid=p.metadata.uid, obj=p) for p in pods])


@pytest.mark.asyncio
async def test_gated_pods_are_patched_once_until_the_log_shows_the_patch() -> None:
    journal, ungater, fake = await _setup()
    await _observe(journal, _pod("a"), _pod("b"))
    assert ungater._take() == {"ns/wl"}
    await ungater.sync("ns/wl")
    assert fake.patches == [
        ("a", {"metadata": {"uid": "uid-a", "resourceVersion": "10"},
               "spec": {"schedulingGates": [{"name": "other"}], "nodeSelector": {HOST: "n1"}}}),
        ("b", {"metadata": {"uid": "uid-b", "resourceVersion": "10"},
               "spec": {"schedulingGates": [{"name": "other"}], "nodeSelector": {HOST: "n2"}}})]
    # the log still shows the pods gated (the watch has not brought the patch yet): nothing again
    await ungater.sync("ns/wl")
    await _observe(journal, _pod("a", rv="11"))  # an older change of a arrives first
    await ungater.sync("ns/wl")
    assert len(fake.patches) == 2
    # the patched versions arrive; a third pod comes: only it is considered, and there is no free slot left
    await _observe(journal, _pod("a", rv="50", gated=False, selector={HOST: "n1"}),
                   _pod("b", rv="50", gated=False, selector={HOST: "n2"}), _pod("c"))
    await ungater.sync("ns/wl")
    assert len(fake.patches) == 2


@pytest.mark.asyncio
async def test_only_admitted_tas_workloads_and_a_conflict_waits_for_the_newer_pod() -> None:
    journal, ungater, fake = await _setup(phase=RESERVED)
    await _observe(journal, _pod("a"))
    await ungater.sync("ns/wl")
    assert fake.patches == [], "quota reserved only: the Job is not even running"
    journal, ungater, fake = await _setup()
    fake.conflict = True
    await _observe(journal, _pod("a"))
    await ungater.sync("ns/wl")
    assert ungater.stats.conflicts == 1 and not ungater._expected
    fake.conflict = False
    await _observe(journal, _pod("a", rv="12"))
    assert "ns/wl" in ungater._take()
    await ungater.sync("ns/wl")
    assert [name for name, _ in fake.patches] == ["a"]
