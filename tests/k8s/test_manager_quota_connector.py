"""MultiKueueManagerQuotaAutomation's connector against fake clients: a worker's queues listed and appended as
``WorkerQueuesObserved``, the manager ClusterQueue's summed quota patched into its spec (once per version), and
nothing read or written with the gate off or no config asking for it."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import msgspec
from fixtures.eventgen import T0, fold, local_queue, meta, records, upsert

from connectors.k8s.client import RawList
from connectors.k8s.errors import Conflict
from connectors.k8s.manager_quota import ManagerQuotaConnector, cluster_queues
from events import objects as o
from events import schema as ev

ON = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
      "featureGates": {"MultiKueueManagerQuotaAutomation": True}}


def _cq(name: str, cpu: str, rv: str = "1") -> o.ClusterQueue:
    return o.ClusterQueue(metadata=meta(name, uid=f"uid-{name}", resource_version=rv), spec=o.ClusterQueueSpec(
        resource_groups=[o.ResourceGroup(covered_resources=["cpu"], flavors=[
            o.FlavorQuotas(name="default", resources=[o.ResourceQuota(name="cpu", nominal_quota=cpu)])])],
        namespace_selector=o.LabelSelector(),
        admission_checks_strategy=o.AdmissionChecksStrategy(admission_checks=[o.AdmissionCheckStrategyRule(name="ac1")])))


def _state(document: dict | None = ON, mode: str | None = "Automated"):
    ac = o.AdmissionCheck(metadata=meta("ac1"), spec=o.AdmissionCheckSpec(
        controller_name="kueue.x-k8s.io/multikueue", parameters=o.AdmissionCheckParameters(
            api_group="kueue.x-k8s.io", kind="MultiKueueConfig", name="config1")))
    cfg = o.MultiKueueConfig(metadata=meta("config1"),
                             spec=o.MultiKueueConfigSpec(clusters=["worker1", "worker2"], quota_management=mode))
    base: list[ev.AnyEvent] = [ev.ConfigRecorded(time=T0, document=document, writer="test")] if document else []
    base += [upsert(x, T0) for x in (_cq("cq1", "0"), ac, cfg, local_queue("ns", "lq1", "cq1"))]
    base += [ev.MultiKueueClusterObserved(time=T0, key=w, connected=True) for w in ("worker1", "worker2")]
    return fold(records([base]))


def _raw(objs: list[dict]) -> RawList:
    return RawList(items=[msgspec.Raw(msgspec.json.encode(x)) for x in objs])


class Worker:
    def __init__(self, cpu: str) -> None:
        self.cpu = cpu
        self.lists = 0

    async def list(self, resource: Any, **_: Any) -> RawList:
        self.lists += 1
        if resource.kind == "LocalQueue":
            return _raw([{"metadata": {"name": "lq1", "namespace": "ns"}, "spec": {"clusterQueue": "w-cq"}},
                         {"metadata": {"name": "other", "namespace": "ns"}, "spec": {"clusterQueue": "w-other"}}])
        return _raw([
            {"metadata": {"name": "w-cq"}, "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": "x", "resources": [{"name": "cpu", "nominalQuota": self.cpu}]}]}]}},
            {"metadata": {"name": "w-other"}, "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": "x", "resources": [{"name": "cpu", "nominalQuota": "100"}]}]}]}}])


class Manager:
    def __init__(self, conflict: bool = False) -> None:
        self.patches: list[tuple[str, dict]] = []
        self.conflict = conflict

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", **_: Any) -> bytes:
        if self.conflict:
            raise Conflict("changed", 409, "Conflict")
        self.patches.append((name, body))
        return b"{}"


def _connector(state, manager: Manager, workers: dict[str, Worker]) -> ManagerQuotaConnector:
    async def append(events):
        for e in events:
            state.apply(ev.Record(state.offset + 1, e))
    mk = SimpleNamespace(workers={n: SimpleNamespace(connected=True, client=c) for n, c in workers.items()},
                         client=manager, state=state, append=append)
    return ManagerQuotaConnector(mk)  # type: ignore[arg-type]


def test_the_workers_queues_are_appended_and_the_summed_quota_written_once_per_version():
    state, manager = _state(), Manager()
    workers = {"worker1": Worker("10"), "worker2": Worker("5500m")}
    c = _connector(state, manager, workers)
    asyncio.run(c.sync())
    seen = state.worker_queues["worker1"]
    assert seen.local_queues == {"ns/lq1": "w-cq", "ns/other": "w-other"}
    assert sorted(seen.cluster_queues) == ["w-cq", "w-other"]
    assert manager.patches == [("cq1", {
        "metadata": {"uid": "uid-cq1", "resourceVersion": "1"},
        "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "15500m"}]}]}]}})]
    offset = state.offset
    asyncio.run(c.sync())
    assert state.offset == offset  # nothing changed on the workers: nothing appended
    assert len(manager.patches) == 1  # not written again until the log shows another version
    state.apply(ev.Record(state.offset + 1, upsert(_cq("cq1", "15500m", rv="2"), T0)))
    workers["worker2"].cpu = "6"
    asyncio.run(c.sync())
    assert manager.patches[-1][1]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == "16"
    assert manager.patches[-1][1]["metadata"]["resourceVersion"] == "2"


def test_a_conflict_is_tried_again_on_the_next_pass():
    state = _state()
    c = _connector(state, Manager(conflict=True), {"worker1": Worker("10"), "worker2": Worker("1")})
    asyncio.run(c.sync())
    c.multikueue.client = manager = Manager()
    asyncio.run(c.sync())
    assert [name for name, _ in manager.patches] == ["cq1"]


def test_nothing_is_read_or_written_with_the_gate_off_or_no_automated_config():
    for state in (_state(document=None), _state(mode="Manual")):
        manager, worker = Manager(), Worker("10")
        asyncio.run(_connector(state, manager, {"worker1": worker}).sync())
        assert (worker.lists, manager.patches, state.worker_queues) == (0, [], {})


def test_a_worker_cluster_queue_whose_quotas_do_not_parse_is_left_out():
    bad = {"metadata": {"name": "bad"}, "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
        {"name": "x", "resources": [{"name": "cpu", "nominalQuota": "lots"}]}]}]}}
    good = {"metadata": {"name": "good"}, "spec": {}}
    assert cluster_queues(_raw([bad, good]).items) == {"good": []}
