"""MultiKueueManagerQuotaAutomation's connector against fake clients: a worker's queues listed once, then
watched, and appended as ``WorkerQueuesObserved`` when a change makes them differ from the log; relisted after 410
Gone; no longer watched once no Automated config lists the worker; the manager ClusterQueue's summed quota patched
into its spec (once per version); nothing read or written with the gate off or no config asking for it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import msgspec
from fixtures.eventgen import T0, fold, local_queue, meta, records, upsert

from connectors.k8s.client import ListMeta, RawList, WatchEvent
from connectors.k8s.errors import Conflict, Gone
from connectors.k8s.manager_quota import ManagerQuotaConnector, cluster_queues, decode_queue
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


def _raw(objs: list[dict], rv: str = "1") -> RawList:
    return RawList(metadata=ListMeta(resource_version=rv), items=[msgspec.Raw(msgspec.json.encode(x)) for x in objs])


def _worker_cq(name: str, cpu: str, rv: str = "1") -> dict:
    return {"metadata": {"name": name, "resourceVersion": rv}, "spec": {"resourceGroups": [{
        "coveredResources": ["cpu"], "flavors": [{"name": "x", "resources": [{"name": "cpu", "nominalQuota": cpu}]}]}]}}


class Worker:
    """A worker's apiserver: lists its queues, and streams what :meth:`send` is given to the open watch of a kind."""

    def __init__(self, cpu: str) -> None:
        self.cpu = cpu
        self.lists = 0
        self.watching: set[str] = set()
        self._events: dict[str, asyncio.Queue] = {}

    def _objects(self, kind: str) -> list[dict]:
        if kind == "LocalQueue":
            return [{"metadata": {"name": "lq1", "namespace": "ns"}, "spec": {"clusterQueue": "w-cq"}},
                    {"metadata": {"name": "other", "namespace": "ns"}, "spec": {"clusterQueue": "w-other"}}]
        return [_worker_cq("w-cq", self.cpu), _worker_cq("w-other", "100")]

    async def list(self, resource: Any, **_: Any) -> RawList:
        self.lists += 1
        return _raw(self._objects(resource.kind))

    def send(self, kind: str, item: tuple[str, dict] | Exception) -> None:
        self._events.setdefault(kind, asyncio.Queue()).put_nowait(item)

    async def watch(self, resource: Any, resource_version: str, **_: Any):
        queue = self._events.setdefault(resource.kind, asyncio.Queue())
        self.watching.add(resource.kind)
        try:
            while True:
                item = await queue.get()
                if isinstance(item, Exception):
                    raise item
                yield WatchEvent(type=item[0], object=msgspec.Raw(msgspec.json.encode(item[1])))
        finally:
            self.watching.discard(resource.kind)


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
                         client=manager, state=state, append=append, watch_timeout_s=30)
    return ManagerQuotaConnector(mk, backoff_s=0.01)  # type: ignore[arg-type]


def _two_workers(cpu1: str, cpu2: str) -> tuple[Any, Manager, dict[str, Worker], ManagerQuotaConnector]:
    state, manager = _state(), Manager()
    workers = {"worker1": Worker(cpu1), "worker2": Worker(cpu2)}
    return state, manager, workers, _connector(state, manager, workers)


async def _until(ok: Callable[[], bool]) -> None:
    async with asyncio.timeout(5):
        while not ok():
            await asyncio.sleep(0.001)


async def _synced(c: ManagerQuotaConnector) -> None:
    """One pass that starts the watches, then one once they listed."""
    await c.sync()
    await _until(lambda: all(w.synced for w in c.watched.values()))
    await c.sync()


def _quota(patch: tuple[str, dict]) -> str:
    return patch[1]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]


def test_the_workers_queues_are_listed_once_then_followed_by_their_watches():
    state, manager, workers, c = _two_workers("10", "5500m")

    async def main() -> None:
        await _synced(c)
        seen = state.worker_queues["worker1"]
        assert seen.local_queues == {"ns/lq1": "w-cq", "ns/other": "w-other"}
        assert sorted(seen.cluster_queues) == ["w-cq", "w-other"]
        assert manager.patches == [("cq1", {
            "metadata": {"uid": "uid-cq1", "resourceVersion": "1"},
            "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "15500m"}]}]}]}})]
        assert (c.lists, workers["worker1"].lists, workers["worker2"].lists) == (4, 2, 2)
        offset = state.offset
        await c.sync()
        assert state.offset == offset  # nothing changed on the workers: nothing appended
        assert len(manager.patches) == 1  # not written again until the log shows another version
        state.apply(ev.Record(state.offset + 1, upsert(_cq("cq1", "15500m", rv="2"), T0)))
        workers["worker2"].send("ClusterQueue", ("MODIFIED", _worker_cq("w-cq", "6", rv="2")))
        await _until(lambda: c.watched["worker2"].moved)
        await c.sync()
        assert _quota(manager.patches[-1]) == "16"
        assert manager.patches[-1][1]["metadata"]["resourceVersion"] == "2"
        assert c.lists == 4  # the change came by the watch: nothing listed again
        await c.close()
        assert workers["worker1"].watching == workers["worker2"].watching == set()

    asyncio.run(main())


def test_a_watch_gone_stale_lists_again():
    state, manager, workers, c = _two_workers("10", "2")

    async def main() -> None:
        await _synced(c)
        assert _quota(manager.patches[-1]) == "12"
        state.apply(ev.Record(state.offset + 1, upsert(_cq("cq1", "12", rv="2"), T0)))
        workers["worker1"].cpu = "20"  # changed while the watch was behind: only the list tells
        workers["worker1"].send("ClusterQueue", Gone("too old", 410, "Expired"))
        await _until(lambda: workers["worker1"].lists == 3 and c.watched["worker1"].moved)
        await c.sync()
        assert _quota(manager.patches[-1]) == "22"
        assert c.lists == 5
        await c.close()

    asyncio.run(main())


def test_a_worker_no_automated_config_lists_is_no_longer_watched_one_reached_anew_is_watched_afresh():
    state, manager, workers, c = _two_workers("10", "2")

    async def main() -> None:
        await _synced(c)
        assert workers["worker1"].watching == {"LocalQueue", "ClusterQueue"}
        cfg = o.MultiKueueConfig(metadata=meta("config1", resource_version="2"), spec=o.MultiKueueConfigSpec(
            clusters=["worker2"], quota_management="Automated"))
        state.apply(ev.Record(state.offset + 1, upsert(cfg, T0)))
        await c.sync()
        assert sorted(c.watched) == ["worker2"]
        assert workers["worker1"].watching == set()
        assert workers["worker2"].watching == {"LocalQueue", "ClusterQueue"}
        c.multikueue.workers["worker2"].client = reached_anew = Worker("3")  # another kubeconfig, another client
        await _synced(c)
        assert workers["worker2"].watching == set()
        assert (reached_anew.lists, reached_anew.watching) == (2, {"LocalQueue", "ClusterQueue"})
        assert state.worker_queues["worker2"].cluster_queues["w-cq"][0].flavors[0].resources[0].nominal_quota == "3"
        await c.close()

    asyncio.run(main())


def test_a_conflict_is_tried_again_on_the_next_pass():
    state = _state()
    c = _connector(state, Manager(conflict=True), {"worker1": Worker("10"), "worker2": Worker("1")})

    async def main() -> Manager:
        await _synced(c)
        c.multikueue.client = manager = Manager()
        await c.sync()
        await c.close()
        return manager

    assert [name for name, _ in asyncio.run(main()).patches] == ["cq1"]


def test_nothing_is_read_or_written_with_the_gate_off_or_no_automated_config():
    for state in (_state(document=None), _state(mode="Manual")):
        manager, worker = Manager(), Worker("10")
        c = _connector(state, manager, {"worker1": worker})
        asyncio.run(c.sync())
        assert (worker.lists, c.watched, manager.patches, state.worker_queues) == (0, {}, [], {})


def test_a_worker_cluster_queue_whose_quotas_do_not_parse_is_left_out():
    bad = {"metadata": {"name": "bad"}, "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
        {"name": "x", "resources": [{"name": "cpu", "nominalQuota": "lots"}]}]}]}}
    good = {"metadata": {"name": "good"}, "spec": {}}
    assert cluster_queues(map(decode_queue, _raw([bad, good]).items)) == {"good": []}
