"""The MultiKueue connector's adapters for RayJobs, RayClusters, RayServices, AppWrappers and TrainJobs (Kueue's
``rayjob``/``raycluster``/``rayservice``/``appwrapper``/``trainjob`` MultiKueue adapters), against fake clients: the
copy made for the worker, the owner's managedBy observed into the log, the copy's status mirrored to the manager's
owner (started or not), and the copies deleted once the workload finished there."""

from __future__ import annotations

import copy
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
from fixtures import fastyaml
from fixtures.multikueue_states import MK_CONFIG, WorkerApi, dispatched_state, with_frameworks

from connectors.k8s import manifests
from connectors.k8s.client import ListMeta, RawList
from connectors.k8s.framework_webhook import value_at
from connectors.k8s.multikueue import MultiKueueConnector
from connectors.k8s.multikueue_adapters import (
    ADAPTERS,
    adapter_of,
    rayservice_copy,
    suspended_copy,
    synced_owner,
)
from connectors.k8s.multikueue_worker import Worker
from connectors.k8s.resources import APPWRAPPERS, RAYCLUSTERS, RAYJOBS, RAYSERVICES, TRAINJOBS
from events import schema as ev
from kueue_es.scheduler import settle
from kueue_es.scheduler.config import DEFAULT, load_config
from kueue_es.scheduler.multikueue import REMOTE_SPEC_SYNC
from kueue_es.statefile import load_state

SCENARIO = Path(__file__).parents[1] / "scheduler" / "scenarios" / "multikueue-dispatch.yaml"
START = 1_704_067_200_000
KEY = "default/job-a"
KINDS = [RAYJOBS, RAYCLUSTERS, RAYSERVICES, APPWRAPPERS, TRAINJOBS]
SUSPEND_AT = {"RayService": ("spec", "rayClusterConfig", "suspend")}
"""Where a kind is suspended, when not at ``spec.suspend`` (its Kueue integration's flag)."""
ORIGIN = "kueue.x-k8s.io/multikueue-origin"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
MANAGER_WL = {"metadata": {"name": "job-a", "namespace": "default"}, "spec": {"queueName": "lq", "podSets": []}}


def _suspend_at(r: Any) -> tuple[str, ...]:
    return SUSPEND_AT.get(r.kind, ("spec", "suspend"))


def _spec(r: Any, suspend: bool, **fields: Any) -> dict[str, Any]:
    """A spec of kind ``r`` with ``fields``, suspended or not where its integration suspends it."""
    path = _suspend_at(r)[1:]
    flag: dict[str, Any] = {path[-1]: suspend}
    for key in reversed(path[:-1]):
        flag = {key: flag}
    return {**flag, **fields}


def _owner(r: Any, *, suspend: bool = False, status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": r.api_version, "kind": r.kind,
            "metadata": {"name": "a", "namespace": "default", "uid": "owner-uid", "resourceVersion": "4",
                         "labels": {"kueue.x-k8s.io/queue-name": "lq"},
                         "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "team": "x"}},
            "spec": _spec(r, suspend, managedBy="kueue.x-k8s.io/multikueue", entrypoint="python run.py"),
            "status": status or {}}


@pytest.mark.parametrize("r", KINDS, ids=lambda r: r.kind)
def test_the_copy_is_the_manager_one_suspended_for_the_worker_kueue(r: Any) -> None:
    """Kueue's adapters: metadata and spec as the manager's, Kueue's two labels added, managedBy dropped so that the
    worker's controller of the kind runs it; suspended as the manager's owner is when Kueue copies it."""
    manager = _owner(r)
    c = adapter_of(SimpleNamespace(owner=(r.api_version, r.kind, "a")), MK_CONFIG).make_copy(manager, MANAGER_WL, "mk-origin")
    assert (c["apiVersion"], c["kind"]) == (r.api_version, r.kind)
    assert c["metadata"] == {"name": "a", "namespace": "default", "annotations": {"team": "x"},
                             "labels": {"kueue.x-k8s.io/queue-name": "lq", ORIGIN: "mk-origin", PREBUILT: "job-a"}}
    assert c["spec"] == _spec(r, True, entrypoint="python run.py")
    assert "status" not in c
    assert manager["spec"] == _owner(r)["spec"]  # the manager's own object is left as it was
    made = rayservice_copy if r is RAYSERVICES else partial(suspended_copy, r)
    assert made(manager, MANAGER_WL, "mk-origin") == c


def test_a_rayservice_copy_is_suspended_at_its_cluster_config_whatever_the_manager_one() -> None:
    """The RayService integration suspends at ``spec.rayClusterConfig.suspend``: the copy of a RayService the
    manager's integration started (or one without the flag) is suspended there, its cluster config otherwise kept."""
    manager = _owner(RAYSERVICES)
    manager["spec"]["rayClusterConfig"]["headGroupSpec"] = {"template": {"spec": {"containers": []}}}
    c = rayservice_copy(manager, MANAGER_WL, "mk-origin")
    assert c["spec"]["rayClusterConfig"] == {"suspend": True, "headGroupSpec": {"template": {"spec": {
        "containers": []}}}}
    assert manager["spec"]["rayClusterConfig"]["suspend"] is False
    del manager["spec"]["rayClusterConfig"]
    assert rayservice_copy(manager, MANAGER_WL, "mk-origin")["spec"]["rayClusterConfig"] == {"suspend": True}


def _state(tmp_path: Path, r: Any, *, finished: bool = False):
    """The dispatch scenario's workload owned by an object of kind ``r``, handed to MultiKueue and run on worker1
    (``finished``: and finished there)."""
    state = dispatched_state(tmp_path, r.api_version, r.kind, finished=finished)
    assert state.workloads[KEY].owner == (r.api_version, r.kind, "a")
    return state


class Manager:
    """The manager's apiserver: its Workload and the owner ``owner``; status patches recorded."""

    def __init__(self, owner: dict[str, Any]) -> None:
        self.owner = owner
        self.patches: list[tuple[str, dict[str, Any]]] = []

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        return msgspec.json.encode(MANAGER_WL if resource.kind == "Workload" else self.owner)

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "") -> bytes:
        self.patches.append((f"{resource.kind}/{subresource}", body))
        return b"{}"


def _connector(state, manager: Manager, worker: WorkerApi) -> MultiKueueConnector:
    journal = SimpleNamespace(mirror=SimpleNamespace(state=state, workloads={}))
    mk = MultiKueueConnector(manager, journal, append=None)  # type: ignore[arg-type]
    mk.workers["worker1"] = Worker("worker1", b"kubeconfig", client=worker, connected=True)  # type: ignore[arg-type]
    return mk


@pytest.mark.asyncio
@pytest.mark.parametrize("r", KINDS, ids=lambda r: r.kind)
async def test_the_owner_managed_by_is_read_from_the_manager_into_the_log(tmp_path: Path, r: Any) -> None:
    """The log holds none of these kinds: the connector reads the owner's spec.managedBy for the adapter to decide."""
    objects = fastyaml.safe_load(SCENARIO.read_text())["objects"]
    for obj in objects:
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
            ref.update(apiVersion=r.api_version, kind=r.kind)
    path = tmp_path / "objects.yaml"
    path.write_text(fastyaml.safe_dump_all(objects))
    state = with_frameworks(load_state(str(path), None, START).state)
    state.apply(ev.Record(state.offset + 1, ev.MultiKueueClusterObserved(time=START, key="worker1", connected=True)))
    settle(state, MK_CONFIG, now=START)
    assert state.workloads[KEY].reserving and state.workloads[KEY].owner_managed_by is None
    owner = _owner(r)
    owner["spec"]["managedBy"] = "ray.io/kuberay-operator"
    mk = _connector(state, Manager(owner), WorkerApi())
    assert [(e.key, e.managed_by) for e in await mk._observe_owners(START, [KEY])] == [(KEY, "ray.io/kuberay-operator")]


@pytest.mark.asyncio
@pytest.mark.parametrize("r", KINDS, ids=lambda r: r.kind)
async def test_the_worker_that_runs_it_gets_the_copy_and_its_status_replaces_the_manager_one(
        tmp_path: Path, r: Any) -> None:
    """On its worker the owner is copied (suspended, for the worker's Kueue); the copy's status then replaces the
    manager owner's whole whenever it changes (a field only the manager's has is cleared)."""
    state = _state(tmp_path, r)
    manager = Manager(_owner(r, status={"observedGeneration": 1, "jobStatus": "PENDING"}))
    worker = WorkerApi()
    mk = _connector(state, manager, worker)
    mk.workers["worker1"].workloads[KEY] = {"metadata": {"name": "job-a", "namespace": "default"}}
    await mk.sync_copies("multikueue")
    assert [(c["kind"], value_at(c, _suspend_at(r)), c["metadata"]["annotations"][PREBUILT])
            for c in worker.created] == [(r.kind, True, "job-a")]
    running = copy.deepcopy(worker.created[0])
    running["metadata"]["resourceVersion"] = "2"
    running["status"] = {"jobStatus": "RUNNING", "conditions": [{"type": "Ready", "status": "True"}]}
    mk.workers["worker1"].owners[r.kind]["default/a"] = running
    mk.workers["worker1"].moved.add(KEY)  # as the worker's watch marks it
    await mk.sync_copies("multikueue")
    assert manager.patches == [(f"{r.kind}/status", {"status": {
        "observedGeneration": None, "jobStatus": "RUNNING", "conditions": [{"type": "Ready", "status": "True"}]}})]
    mk.workers["worker1"].moved.add(KEY)
    await mk.sync_copies("multikueue")
    assert len(manager.patches) == 1  # the copy unchanged: nothing written again


@pytest.mark.asyncio
@pytest.mark.parametrize("r", KINDS, ids=lambda r: r.kind)
async def test_the_status_is_mirrored_whether_the_manager_owner_is_started_or_not(tmp_path: Path, r: Any) -> None:
    """Kueue's Ray, AppWrapper and TrainJob adapters copy the status whenever the copy exists, whatever the
    manager's suspension."""
    state = _state(tmp_path, r)
    manager = Manager(_owner(r, suspend=True, status={"conditions": []}))
    mk = _connector(state, manager, WorkerApi())
    remote = {"metadata": {"name": "a", "namespace": "default", "resourceVersion": "3"},
              "status": {"conditions": [{"type": "Created", "status": "True"}]}}
    assert await mk._mirror_status(mk.workers["worker1"], ADAPTERS[r.api_version, r.kind], "default/a", remote)
    assert [body["status"] for _, body in manager.patches] == [remote["status"]]


@pytest.mark.asyncio
@pytest.mark.parametrize("r", KINDS, ids=lambda r: r.kind)
async def test_finished_on_its_worker_it_gets_the_final_status_and_its_copies_go(tmp_path: Path, r: Any) -> None:
    """As for a Job: the copy's last status, read on the worker from this manager's copy, reaches the manager's
    owner, then the owner's copy and the Workload's are deleted."""
    state = _state(tmp_path, r, finished=True)
    done = {"metadata": {"name": "a", "namespace": "default", "resourceVersion": "9",
                         "labels": {PREBUILT: "job-a", ORIGIN: "multikueue"}},
            "status": {"jobDeploymentStatus": "Complete", "phase": "Succeeded"}}
    manager = Manager(_owner(r, status={"jobDeploymentStatus": "Running"}))
    worker = WorkerApi(done)
    mk = _connector(state, manager, worker)
    mk.workers["worker1"].workloads[KEY] = {"metadata": {"name": "job-a", "namespace": "default"}}
    mk.workers["worker1"].owners.setdefault(r.kind, {})["default/a"] = {
        **done, "metadata": {**done["metadata"], "resourceVersion": "5"}, "status": {}}
    await mk.sync_copies("multikueue")
    assert [body["status"] for _, body in manager.patches] == [done["status"]]
    assert worker.deleted == [f"{r.kind}:default/a", "Workload:default/job-a"]


@pytest.mark.asyncio
@pytest.mark.parametrize("r", KINDS, ids=lambda r: r.kind)
async def test_finished_on_its_worker_before_the_manager_one_started_it_still_gets_the_final_status(
        tmp_path: Path, r: Any) -> None:
    """Kueue's adapters of these kinds copy the status whenever the copy exists, the manager's owner suspended or
    not: a workload finished on its worker before the manager's owner was started (which it never will be now)
    still shows the copy's last status before the copies go."""
    state = _state(tmp_path, r, finished=True)
    done = {"metadata": {"name": "a", "namespace": "default", "resourceVersion": "9",
                         "labels": {PREBUILT: "job-a", ORIGIN: "multikueue"}},
            "status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    manager = Manager(_owner(r, suspend=True))
    worker = WorkerApi(done)
    mk = _connector(state, manager, worker)
    mk.workers["worker1"].workloads[KEY] = {"metadata": {"name": "job-a", "namespace": "default"}}
    mk.workers["worker1"].owners.setdefault(r.kind, {})["default/a"] = {
        **done, "metadata": {**done["metadata"], "resourceVersion": "5"}, "status": {}}
    await mk.sync_copies("multikueue")
    assert [body["status"] for _, body in manager.patches] == [done["status"]]
    assert worker.deleted == [f"{r.kind}:default/a", "Workload:default/job-a"]


def test_a_trainjob_copy_leaves_out_the_overrides_kueue_wrote_at_the_manager_start() -> None:
    """Kueue's TrainJob adapter takes its own admission out of the copy so that the worker's Kueue writes its own:
    a TrainJob the manager's integration already started carries the manager's flavors' node selectors in the
    ``podTemplateOverrides`` entries Kueue labels with its pod set, which the copy does not; the user's stay."""
    users = {"targetJobs": [{"name": "node"}], "spec": {"serviceAccountName": "trainer"}}
    kueues = {"targetJobs": [{"name": "node"}], "metadata": {"labels": {"kueue.x-k8s.io/podset": "node"}},
              "spec": {"nodeSelector": {"manager-flavor": "on-demand"}}}
    manager = _owner(TRAINJOBS)
    manager["spec"]["podTemplateOverrides"] = [users, kueues]
    c = ADAPTERS[TRAINJOBS.api_version, TRAINJOBS.kind].make_copy(manager, MANAGER_WL, "mk-origin")
    assert c["spec"]["podTemplateOverrides"] == [users] and c["spec"]["suspend"] is True
    manager["spec"]["podTemplateOverrides"] = [kueues]
    assert "podTemplateOverrides" not in ADAPTERS[TRAINJOBS.api_version, TRAINJOBS.kind].make_copy(
        manager, MANAGER_WL, "mk-origin")["spec"]


def test_the_manager_may_write_the_status_of_each_kind() -> None:
    """The ClusterRole grants what mirroring a copy's status writes, from the adapter table (a RayService's too)."""
    rules = manifests.cluster_role()["rules"]
    for r in KINDS:
        assert {"apiGroups": [r.group], "resources": [f"{r.plural}/status"], "verbs": ["get", "patch"]} in rules, r.kind


class ListingManager(Manager):
    """:class:`Manager` that lists its owner too (the connector's informer of the manager's RayServices)."""

    async def list(self, resource: Any, *, label_selector: str = "", **_: Any) -> RawList:
        assert resource is RAYSERVICES
        return RawList(ListMeta(resource_version="10"), [msgspec.Raw(msgspec.json.encode(self.owner))])


def _serving(serve: str | None) -> dict[str, Any]:
    """The manager's RayService, started, serving ``serve`` (None: no serveConfigV2)."""
    owner = _owner(RAYSERVICES)
    if serve is not None:
        owner["spec"]["serveConfigV2"] = serve
    return owner


SERVING = load_config({"integrations": {"frameworks": ["batch/job", "ray.io/rayservice"]}})
"""A Configuration enabling the RayService framework (Kueue registers the RayService adapter only then)."""


async def _running_copy(tmp_path: Path, manager: ListingManager) -> tuple[MultiKueueConnector, WorkerApi]:
    """The connector with the RayService's copy running on worker1 (as the manager's serves now), its manager
    RayServices listed, one pass made."""
    copy_there = rayservice_copy(manager.owner, MANAGER_WL, "multikueue")
    copy_there["metadata"]["resourceVersion"] = "3"
    worker = WorkerApi(copy_there)
    mk = _connector(_state(tmp_path, RAYSERVICES), manager, worker)
    mk._config = lambda: SERVING  # type: ignore[method-assign]
    mk.workers["worker1"].workloads[KEY] = {"metadata": {"name": "job-a", "namespace": "default"}}
    mk.workers["worker1"].owners["RayService"] = {"default/a": copy_there}
    await mk.synced_owners["RayService"].relist()
    await mk.sync_copies("multikueue")
    return mk, worker


@pytest.mark.asyncio
async def test_a_serve_config_edited_on_the_manager_reaches_the_copy_on_its_worker(tmp_path: Path) -> None:
    """MultiKueueRemoteSpecSync (beta, on): Kueue's RayService adapter forwards the manager's ``serveConfigV2`` to
    the copy running on the workload's worker, in place (a merge patch of that field alone, conditioned on the
    copy's resourceVersion). The edit seen by the connector's watch of the manager's RayServices moves the
    workload at once; an unchanged one writes nothing."""
    manager = ListingManager(_serving("applications: []"))
    mk, worker = await _running_copy(tmp_path, manager)
    assert worker.patched == [] and not mk._moved  # the copy serves what the manager's does
    manager.owner = _serving("applications:\n- name: b\n")
    await mk.synced_owners["RayService"].relist()
    assert mk._moved == {KEY}  # the edit moves its workload, nothing else
    await mk.sync_copies("multikueue")
    assert worker.patched == [("RayService:default/a", {"spec": {"serveConfigV2": "applications:\n- name: b\n"},
                                                        "metadata": {"resourceVersion": "3"}})]
    there = mk.workers["worker1"].owners["RayService"]["default/a"]
    assert there["spec"]["serveConfigV2"] == "applications:\n- name: b\n"
    assert there["spec"]["rayClusterConfig"]["suspend"] is True  # the rest of the copy is the worker's Kueue's
    mk.workers["worker1"].moved.add(KEY)
    await mk.sync_copies("multikueue")
    assert len(worker.patched) == 1 and mk.stats.specs_synced == 1  # in step now: nothing written again
    manager.owner = _serving(None)  # removed on the manager: removed from the copy
    await mk.synced_owners["RayService"].relist()
    await mk.sync_copies("multikueue")
    assert worker.patched[-1][1]["spec"] == {"serveConfigV2": None}


@pytest.mark.asyncio
async def test_with_remote_spec_sync_off_the_copy_keeps_the_serve_config_it_was_made_with(tmp_path: Path) -> None:
    """MultiKueueRemoteSpecSync off: the manager's RayServices are not listed, and an edit is not forwarded."""
    manager = ListingManager(_serving("applications: []"))
    mk, worker = await _running_copy(tmp_path, manager)
    off = msgspec.structs.replace(SERVING, feature_gates={"MultiKueueRemoteSpecSync": False})
    mk._config = lambda: off  # type: ignore[method-assign]
    manager.owner = _serving("applications:\n- name: b\n")
    assert await mk.synced_owners["RayService"].relist() is None  # not listed while the gate is off
    mk.synced_owners["RayService"].known["default/a"] = synced_owner(
        REMOTE_SPEC_SYNC[RAYSERVICES.api_version, RAYSERVICES.kind], msgspec.json.encode(manager.owner))
    mk.workers["worker1"].moved.add(KEY)
    await mk.sync_copies("multikueue")
    assert worker.patched == []


@pytest.mark.asyncio
async def test_the_manager_rayservices_are_listed_only_with_their_framework_enabled(tmp_path: Path) -> None:
    """Kueue registers the RayService adapter, and so watches the manager's RayServices for it, only for an
    enabled framework: without ``ray.io/rayservice`` none is listed."""
    mk = _connector(_state(tmp_path, RAYSERVICES), ListingManager(_serving("a")), WorkerApi())
    assert "ray.io/rayservice" not in DEFAULT.frameworks
    mk._config = lambda: DEFAULT  # type: ignore[method-assign]
    assert await mk.synced_owners["RayService"].relist() is None and not mk.synced_owners["RayService"].known
    mk._config = lambda: SERVING  # type: ignore[method-assign]
    assert await mk.synced_owners["RayService"].relist() == "10"
    assert sorted(mk.synced_owners["RayService"].known) == ["default/a"]


@pytest.mark.asyncio
@pytest.mark.parametrize("r", [RAYJOBS, RAYCLUSTERS, APPWRAPPERS, TRAINJOBS], ids=lambda r: r.kind)
async def test_no_other_kind_is_watched_on_the_manager_for_its_spec(tmp_path: Path, r: Any) -> None:
    """Only the RayService adapter forwards spec edits: the connector watches no other kind on the manager, and
    another kind's copy on its worker is never patched."""
    mk = _connector(_state(tmp_path, r), Manager(_owner(r)), WorkerApi())
    assert sorted(mk.synced_owners) == ["RayService"]
    mk.workers["worker1"].workloads[KEY] = {"metadata": {"name": "job-a", "namespace": "default"}}
    mk.workers["worker1"].owners[r.kind] = {"default/a": {**_owner(r), "spec": {"entrypoint": "other"}}}
    await mk.sync_copies("multikueue")
    assert mk.workers["worker1"].client.patched == []  # type: ignore[union-attr]
