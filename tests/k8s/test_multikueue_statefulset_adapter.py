"""The MultiKueue connector's StatefulSet adapter (Kueue's ``statefulset`` MultiKueue adapter), against fake clients:
the copy of the set (Kueue's labels and the manager's set's UID on it), the pod group's Workload matched to the set
holding its pods, no status mirrored back, the set's copy deleted with its Workload's copies, and the adapter built
only with the ``statefulset`` framework."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
from fixtures.multikueue_states import KEY, START, WorkerApi, apply, dispatched_state

from connectors.k8s.multikueue import MultiKueueConnector
from connectors.k8s.multikueue_adapters import ADAPTERS
from connectors.k8s.multikueue_worker import Worker
from connectors.k8s.statefulset_multikueue import KIND, holding_statefulset, statefulset_copy
from events import schema as ev

ORIGIN = "kueue.x-k8s.io/multikueue-origin"
ORIGIN_UID = "kueue.x-k8s.io/multikueue-origin-uid"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
PARENT = "kueue.x-k8s.io/pod-suspending-parent"
MANAGER_STS = {"apiVersion": "apps/v1", "kind": "StatefulSet",
               "metadata": {"name": "web", "namespace": "default", "uid": "manager-sts-uid", "resourceVersion": "7",
                            "labels": {"kueue.x-k8s.io/queue-name": "lq"}, "annotations": {"a": "b"},
                            "finalizers": ["x"], "ownerReferences": [{"kind": "Thing", "name": "t"}]},
               "spec": {"replicas": 2, "serviceName": "web", "template": {"metadata": {"labels": {"app": "web"}}}},
               "status": {"replicas": 2, "readyReplicas": 1}}


def _pod(name: str, *, parent: str | None = "statefulset", controller: tuple[str, str] = KIND) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default",
                         "annotations": {PARENT: parent} if parent else {},
                         "labels": {"kueue.x-k8s.io/pod-group-name": "job-a"},
                         "ownerReferences": [{"apiVersion": controller[0], "kind": controller[1], "name": "web",
                                              "uid": "manager-sts-uid", "controller": True}]},
            "spec": {"containers": [{"name": "c"}]}}


def test_the_copy_is_the_sets_metadata_and_spec_with_kueues_labels_and_the_manager_sets_uid() -> None:
    """Kueue's adapter copies name, namespace, labels, annotations and spec only (no status, finalizers, owners or
    resourceVersion), adding the origin label, the prebuilt Workload's name and the manager's set's UID."""
    assert statefulset_copy(MANAGER_STS, {"metadata": {"name": "job-a"}}, "mk-origin") == {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "web", "namespace": "default",
                     "labels": {"kueue.x-k8s.io/queue-name": "lq", ORIGIN: "mk-origin", PREBUILT: "job-a"},
                     "annotations": {"a": "b", ORIGIN_UID: "manager-sts-uid"}},
        "spec": {"replicas": 2, "serviceName": "web", "template": {"metadata": {"labels": {"app": "web"}}}}}


def test_a_pod_is_held_by_the_statefulset_controlling_it_when_kueues_webhook_marked_it() -> None:
    assert holding_statefulset(_pod("web-0")) == "web"
    assert holding_statefulset(_pod("web-0", parent=None)) is None, "not marked by the StatefulSet webhook"
    assert holding_statefulset(_pod("web-0", parent="deployment")) is None
    assert holding_statefulset(_pod("web-0", controller=("apps/v1", "ReplicaSet"))) is None
    orphan = _pod("web-0")
    orphan["metadata"]["ownerReferences"] = []
    assert holding_statefulset(orphan) is None, "an orphan's set is gone: nothing to copy"


class Api(WorkerApi):
    """An apiserver answering reads by kind (the manager's set, its pods, a Workload); status patches recorded."""

    def __init__(self, objects: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.objects = objects or {}
        self.status_patches: list[str] = []

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        if resource.kind == "Workload":
            return msgspec.json.encode({"metadata": {"name": name, "namespace": namespace}, "spec": {}})
        return msgspec.json.encode(self.objects[resource.kind, name])

    async def list(self, resource: Any, label_selector: str = "", namespace: str = "") -> Any:
        items = [msgspec.json.encode(v) for (kind, _), v in sorted(self.objects.items()) if kind == resource.kind]
        return SimpleNamespace(items=items, metadata=SimpleNamespace(resource_version="1"))

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "") -> bytes:
        if subresource:
            self.status_patches.append(f"{resource.kind}:{namespace}/{name}")
            return b"{}"
        return await super().patch(resource, name, body, namespace)


def _connector(state: Any, manager: Api, worker: Api) -> MultiKueueConnector:
    journal = SimpleNamespace(mirror=SimpleNamespace(state=state, workloads={}))
    mk = MultiKueueConnector(manager, journal, append=None)  # type: ignore[arg-type]
    mk.workers["worker1"] = Worker("worker1", b"kubeconfig", client=worker, connected=True)  # type: ignore[arg-type]
    return mk


def _manager() -> Api:
    """The manager: StatefulSet ``web`` and its pods ``a`` (the Workload's owner) and ``web-1``."""
    return Api({("StatefulSet", "web"): MANAGER_STS, ("Pod", "a"): _pod("a"), ("Pod", "web-1"): _pod("web-1")})


def _frameworks(state: Any, *frameworks: str) -> None:
    apply(state, ev.ConfigRecorded(time=START, document={
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "integrations": {"frameworks": ["batch/job", *frameworks]}}, writer="test", id="frameworks"))


@pytest.mark.asyncio
async def test_a_pod_groups_workload_held_by_a_statefulset_runs_on_one_copy_of_the_set(tmp_path: Path) -> None:
    """The group's Workload, admitted on worker1, gets the set copied there, not its pods (Kueue's Workload is the
    set's); the copy's status is not mirrored to the manager's set."""
    state = dispatched_state(tmp_path, "v1", "Pod")
    manager, worker = _manager(), Api()
    mk = _connector(state, manager, worker)
    mk.workers["worker1"].workloads[KEY] = {"metadata": {"name": "job-a", "namespace": "default"}}
    await mk.sync_copies("multikueue")
    assert [(c["kind"], c["metadata"]["name"]) for c in worker.created] == [("StatefulSet", "web")]
    made = worker.created[0]["metadata"]
    assert (made["annotations"][PREBUILT], made["labels"][ORIGIN], made["annotations"][ORIGIN_UID]) == (
        "job-a", "multikueue", "manager-sts-uid"), "the prebuilt Workload named in an annotation (the gate on)"
    assert PREBUILT not in made["labels"]
    mk.workers["worker1"].owners["StatefulSet"]["default/web"]["status"] = {"readyReplicas": 2}
    mk._all_moved = True
    await mk.sync_copies("multikueue")
    assert len(worker.created) == 1, "one copy"
    assert manager.status_patches == [], "a StatefulSet's status is not mirrored"


@pytest.mark.asyncio
async def test_without_the_statefulset_framework_the_groups_pods_are_copied(tmp_path: Path) -> None:
    """No StatefulSet adapter is built: the Pod adapter copies the group's pods, as for any pod group."""
    state = dispatched_state(tmp_path, "v1", "Pod")
    _frameworks(state, "pod")
    worker = Api()
    mk = _connector(state, _manager(), worker)
    mk.workers["worker1"].workloads[KEY] = {"metadata": {"name": "job-a", "namespace": "default"}}
    await mk.sync_copies("multikueue")
    assert [(c["kind"], c["metadata"]["name"]) for c in worker.created] == [("Pod", "a"), ("Pod", "web-1")]


@pytest.mark.asyncio
async def test_the_sets_copy_is_deleted_with_its_workloads_copy(tmp_path: Path) -> None:
    """The Workload finished: its copies are deleted, the set's first (found by its prebuilt Workload's name and
    this origin), with no status read back for it."""
    state = dispatched_state(tmp_path, "v1", "Pod", finished=True)
    manager, worker = _manager(), Api()
    mk = _connector(state, manager, worker)
    w = mk.workers["worker1"]
    w.workloads[KEY] = {"metadata": {"name": "job-a", "namespace": "default"}}
    w.owners["StatefulSet"] = {"default/web": statefulset_copy(MANAGER_STS, {"metadata": {"name": "job-a"}},
                                                               "multikueue")}
    await mk.sync_copies("multikueue")
    assert worker.deleted == ["StatefulSet:default/web", "Workload:default/job-a"]
    assert manager.status_patches == []


def test_the_adapter_takes_every_set_as_multikueues_and_mirrors_nothing() -> None:
    adapter = ADAPTERS[KIND]
    assert (adapter.managed_by_at, adapter.mirrors_status, adapter.in_log) == ((), False, False)
