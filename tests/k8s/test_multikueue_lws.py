"""The MultiKueue connector's LeaderWorkerSet adapter (Kueue's ``leaderworkerset`` MultiKueue adapter), against fake
clients: the one copy of the set made for the worker its groups run on (the manager's set's UID on it, no status
mirrored back), its replicas read into the log, a group's copies held back until the group may go, and the set's
copy deleted with a group's copies."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
from fixtures.multikueue_states import LWS, MK_CONFIG, WorkerApi, apply, lws_state, quota_released

from connectors.k8s import manifests
from connectors.k8s.multikueue import MultiKueueConnector
from connectors.k8s.multikueue_adapters import ADAPTERS
from connectors.k8s.multikueue_worker import Worker
from connectors.k8s.resources import LEADER_WORKER_SETS
from events import objects as o
from events import schema as ev
from kueue_es.scheduler import settle

START = 1_704_067_200_000
ORIGIN = "kueue.x-k8s.io/multikueue-origin"
ORIGIN_UID = "kueue.x-k8s.io/multikueue-origin-uid"
MANAGER_LWS = {"apiVersion": LWS[0], "kind": LWS[1],
               "metadata": {"name": "lws", "namespace": "default", "uid": "manager-lws-uid", "resourceVersion": "7",
                            "labels": {"kueue.x-k8s.io/queue-name": "lq"},
                            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "a": "b"}},
               "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 3}},
               "status": {"readyReplicas": 1}}
ADAPTER = ADAPTERS[LEADER_WORKER_SETS.api_version, LEADER_WORKER_SETS.kind]


class Api(WorkerApi):
    """An apiserver: the set it answers reads with (a Workload for a Workload's); creations, deletions and status
    patches recorded."""

    def __init__(self, lws: dict[str, Any] | None = None) -> None:
        super().__init__(lws)
        self.patches: list[str] = []

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        if resource.kind == "Workload":
            return msgspec.json.encode({"metadata": {"name": name, "namespace": namespace}, "spec": {}})
        return await super().get(resource, name, namespace)

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "") -> bytes:
        self.patches.append(f"{resource.kind}/{subresource}:{namespace}/{name}")
        return b"{}"


def _connector(state: Any, manager: Api, worker: Api) -> MultiKueueConnector:
    journal = SimpleNamespace(mirror=SimpleNamespace(state=state, workloads={}))
    mk = MultiKueueConnector(manager, journal, append=None)  # type: ignore[arg-type]
    mk.workers["worker1"] = Worker("worker1", b"kubeconfig", client=worker, connected=True)  # type: ignore[arg-type]
    return mk


def _admitted_on(state: Any, key: str, cluster: str, t: int) -> None:
    apply(state, ev.RemoteWorkloadObserved(time=t, key=key, cluster=cluster, conditions=[
        o.Condition(type="Admitted", status="True", reason="Admitted", last_transition_time="2024-01-01T00:00:01Z")]))
    settle(state, MK_CONFIG, now=t)


def test_the_copy_carries_the_manager_sets_uid_for_the_worker_to_name_its_workloads_from() -> None:
    """Kueue's LWS adapter copies the set's labels, annotations and spec, adding the origin label and the manager's
    set's UID; no prebuilt Workload (one copy serves every group), no status."""
    c = ADAPTER.make_copy(MANAGER_LWS, {"metadata": {"name": "lws-0"}}, "mk-origin")
    assert c == {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                 "metadata": {"name": "lws", "namespace": "default",
                              "labels": {"kueue.x-k8s.io/queue-name": "lq", ORIGIN: "mk-origin"},
                              "annotations": {"a": "b", ORIGIN_UID: "manager-lws-uid"}},
                 "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 3}}}


@pytest.mark.asyncio
async def test_the_sets_replicas_are_read_into_the_log_until_its_workload_is_on_a_worker(tmp_path: Path) -> None:
    state = lws_state(tmp_path, 0, 1)
    settle(state, MK_CONFIG, now=START)
    mk = _connector(state, Api(MANAGER_LWS), Api())
    keys = ["default/lws-0", "default/lws-1"]
    observed = await mk._observe_owners(START, keys)
    assert [(e.key, e.replicas) for e in observed] == [("default/lws-0", 2), ("default/lws-1", 2)]
    apply(state, *observed)
    assert await mk._observe_owners(START, keys) == [], "unchanged: nothing appended again"
    mk.client = Api({**MANAGER_LWS, "spec": {}})  # type: ignore[assignment]
    assert [e.replicas for e in await mk._observe_owners(START, keys)] == [1, 1], "replicas default to 1"


@pytest.mark.asyncio
@pytest.mark.parametrize("replicas", [-1, 1_000_001])
async def test_replicas_out_of_kueues_bounds_are_a_failed_read_tried_again(tmp_path: Path, replicas: int) -> None:
    """Kueue's LWS adapter refuses such a count ("invalid LeaderWorkerSet replicas") and its reconcile is tried
    again: nothing is appended, so nothing is dispatched, and the read is retried after a backoff."""
    state = lws_state(tmp_path, 0)
    settle(state, MK_CONFIG, now=START)
    mk = _connector(state, Api({**MANAGER_LWS, "spec": {"replicas": replicas}}), Api())
    assert await mk._observe_owners(START, ["default/lws-0"]) == []
    assert mk._owners_unread["default/lws-0"].failures == 1


@pytest.mark.asyncio
async def test_a_group_is_copied_once_all_may_go_and_the_set_once_to_their_worker(tmp_path: Path) -> None:
    """The second group's Workload is not copied until the first one's worker is known; then only there. The set
    is copied once, for both, and its status is not mirrored to the manager's set."""
    state = _group_of_two(tmp_path)
    manager, worker = Api(MANAGER_LWS), Api()
    mk = _connector(state, manager, worker)
    await mk.sync_copies("multikueue")
    assert [c["metadata"]["name"] for c in worker.created] == ["lws-0"]
    _admitted_on(state, "default/lws-0", "worker1", START + 1000)
    assert state.workloads["default/lws-1"].nominated == ("worker1",)
    mk._all_moved = True
    await mk.sync_copies("multikueue")
    assert [(c["kind"], c["metadata"]["name"]) for c in worker.created] == [
        ("Workload", "lws-0"), ("LeaderWorkerSet", "lws"), ("Workload", "lws-1")]
    _admitted_on(state, "default/lws-1", "worker1", START + 2000)
    mk.workers["worker1"].owners[LWS[1]]["default/lws"]["status"] = {"readyReplicas": 2}
    mk._all_moved = True
    await mk.sync_copies("multikueue")
    assert [c["kind"] for c in worker.created].count("LeaderWorkerSet") == 1
    assert manager.patches == [], "a LeaderWorkerSet's status is not mirrored"


def _group_of_two(tmp_path: Path) -> Any:
    """Groups 0 and 1 of the set, its replicas read: group 0 nominated, group 1 waiting for it."""
    state = lws_state(tmp_path, 0, 1)
    apply(state, *(ev.OwnerObserved(time=START, key=f"default/lws-{i}", replicas=2) for i in (0, 1)))
    settle(state, MK_CONFIG, now=START)
    return state


@pytest.mark.asyncio
async def test_a_group_waiting_for_its_first_is_neither_copied_nor_are_its_copies_deleted(tmp_path: Path) -> None:
    """Kueue's controller returns before it touches a waiting group's copies: nominations an external dispatcher
    wrote make none, and one left on a worker stays."""
    state = _group_of_two(tmp_path)
    apply(state, ev.ClustersNominated(time=START, cycle=9, input=0, key="default/lws-1", clusters=["worker1"]))
    worker = Api()
    mk = _connector(state, Api(MANAGER_LWS), worker)
    await mk.sync_copies("multikueue")
    assert [c["metadata"]["name"] for c in worker.created] == ["lws-0"]
    mk.workers["worker1"].workloads["default/lws-1"] = {"metadata": {"name": "lws-1", "namespace": "default"}}
    mk.workers["worker1"].moved.add("default/lws-1")
    await mk.sync_copies("multikueue")
    assert worker.deleted == []


@pytest.mark.asyncio
async def test_a_group_is_copied_to_the_worker_its_first_runs_on_before_its_nomination_is_written(
        tmp_path: Path) -> None:
    state = _group_of_two(tmp_path)
    apply(state, ev.WorkerClusterAssigned(time=START, cycle=9, input=0, key="default/lws-0", cluster="worker1"))
    assert state.workloads["default/lws-1"].nominated == ()
    worker = Api()
    mk = _connector(state, Api(MANAGER_LWS), worker)
    await mk.sync_copies("multikueue")
    assert [c["metadata"]["name"] for c in worker.created if c["kind"] == "Workload"] == ["lws-1"]


@pytest.mark.asyncio
async def test_the_sets_copy_goes_with_any_of_its_groups_copies(tmp_path: Path) -> None:
    """Kueue's LWS adapter deletes the set's copy whenever it removes a group's remote objects (one of them
    evicted on the manager here), once it has checked that it is this manager's."""
    state = _group_of_two(tmp_path)
    _admitted_on(state, "default/lws-0", "worker1", START + 1000)
    _admitted_on(state, "default/lws-1", "worker1", START + 1000)
    copy = {"metadata": {"name": "lws", "namespace": "default", "labels": {ORIGIN: "multikueue"}}}
    worker = Api(copy)
    mk = _connector(state, Api(MANAGER_LWS), worker)
    w = mk.workers["worker1"]
    for i in (0, 1):
        w.workloads[f"default/lws-{i}"] = {"metadata": {"name": f"lws-{i}", "namespace": "default"}}
    w.owners[LWS[1]] = {"default/lws": copy}
    apply(state, ev.WorkloadEvicted(time=START + 3000, cycle=9, input=0, key="default/lws-1",
                                    reason="DeactivatedDueToAdmissionCheck", message="evicted"))
    quota_released(state, "default/lws-1")
    await mk.sync_copies("multikueue")
    assert worker.deleted == ["LeaderWorkerSet:default/lws", "Workload:default/lws-1"]


def test_the_manager_writes_no_leaderworkerset_status() -> None:
    rules = manifests.cluster_role()["rules"]
    assert not [r for r in rules if "leaderworkersets/status" in r["resources"]]
