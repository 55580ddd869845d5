"""A MultiKueue copy whose spec drifted from its manager Workload's is deleted, as Kueue's MultiKueue workload
reconciler does (pkg/controller/admissionchecks/multikueue/workload.go, ``reconcileGroup`` step 5 and
``isRemoteSpecOutOfSync``: ``equality.Semantic.DeepEqual`` of the two specs, the preemption gates left out; a
priority change or an elastic scale-down is written to the copy in place instead). Where the copy is still to be
(a nominated worker) it is made anew once seen gone; the workload's own worker's is not, and its check goes Retry.

Kueue's cases (workload_test.go TestWlReconcile): "reserving remote is kept when another worker's remote is out of
sync" (the out-of-sync copy of worker2, ``PodSets(MakePodSet("different-name", 1))``, is deleted; worker1's
admitted copy kept), "reachable reserving remote that is gone is not misreported as out of sync ..." and "worker-lost
grace applies when the reserving worker is unreachable even if another worker's remote is out of sync"."""

from __future__ import annotations

import copy
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
from fixtures import fastyaml
from test_multikueue_connector import KEY, SCENARIO, START, ManagerClient, _state

from connectors.k8s.json_patch import merge_patched
from connectors.k8s.multikueue import MultiKueueConnector
from connectors.k8s.multikueue_adapters import workload_copy
from connectors.k8s.multikueue_drift import spec_drifted
from connectors.k8s.multikueue_worker import Worker
from events import objects as o
from events import schema as ev
from events.template_digest import stamped_from_document

ORIGIN = "multikueue"
MANAGER_DOC: dict[str, Any] = fastyaml.safe_load(SCENARIO.read_text())["objects"][-1]


def _manager(doc: dict[str, Any] = MANAGER_DOC) -> o.Workload:
    """The manager's stored Workload as the watch decodes it (its templates' digests stamped)."""
    return stamped_from_document(msgspec.convert(doc, o.Workload, strict=False), doc)


def _copy(uid: str = "c1", **edit: Any) -> dict[str, Any]:
    """The copy Kueue makes of the manager's Workload (``cloneForCreate``: its spec, the MultiKueue preemption gate
    on), with a uid and version as the worker's apiserver gives it, ``edit`` applied to its spec."""
    body = workload_copy(copy.deepcopy(MANAGER_DOC), ORIGIN, gated=True)
    body["metadata"].update(uid=uid, resourceVersion="5")
    body["spec"].update(edit)
    return body


def _pod_set(**template_edit: Any) -> list[dict[str, Any]]:
    ps = copy.deepcopy(MANAGER_DOC["spec"]["podSets"])
    container = ps[0]["template"]["spec"]["containers"][0]
    container.update(template_edit)
    return ps


@pytest.mark.parametrize(("edit", "drifted"), [
    pytest.param({}, False, id="in sync (cloneForCreate's copy, its MultiKueue gate aside)"),
    pytest.param({"preemptionGates": []}, False, id="isRemoteSpecOutOfSync: preemption gates are not compared"),
    pytest.param({"podSets": [{"name": "different-name", "count": 1, "template": MANAGER_DOC["spec"]["podSets"][0][
        "template"]}]}, True, id="reserving remote is kept when another worker's remote is out of sync: podSet name"),
    pytest.param({"podSets": [{**MANAGER_DOC["spec"]["podSets"][0], "count": 2}]}, True, id="podSet count"),
    pytest.param({"queueName": "other"}, True, id="queueName"),
    pytest.param({"active": False}, True, id="active"),
    pytest.param({"maximumExecutionTimeSeconds": 60}, True, id="maximumExecutionTimeSeconds"),
    pytest.param({"podSets": _pod_set(image="other")}, True, id="a template field (image)"),
    pytest.param({"podSets": _pod_set(resources={"requests": {"cpu": "1000m"}})}, False,
                 id="Semantic: a quantity by value (1 is 1000m)"),
    pytest.param({"podSets": _pod_set(env=[], resources={"requests": {"cpu": "1"}, "limits": {}})}, False,
                 id="Semantic: an empty list or map is none"),
])
def test_a_copys_spec_is_compared_as_kueue_compares_it(edit: dict[str, Any], drifted: bool) -> None:
    assert spec_drifted(_manager(), _copy(**edit)) is drifted


def test_a_template_one_side_has_no_digest_of_is_not_called_drifted() -> None:
    """A manager Workload from a log written before template digests: its templates are not compared (a copy is
    deleted only on a certain difference), its other fields still are."""
    manager = _manager()
    bare = msgspec.structs.replace(manager, spec=msgspec.structs.replace(manager.spec, pod_sets=[
        msgspec.structs.replace(ps, template=msgspec.structs.replace(ps.template, digest=None))
        for ps in manager.spec.pod_sets]))
    assert not spec_drifted(bare, _copy(podSets=_pod_set(image="other")))
    assert spec_drifted(bare, _copy(queueName="other"))


class WorkerApi:
    """A worker's apiserver holding ``copy`` (or no copy): creations, patches (applied) and deletions recorded."""

    def __init__(self, held: dict[str, Any] | None) -> None:
        self.held = held
        self.created: list[str] = []
        self.patched: list[dict[str, Any]] = []
        self.deleted: list[str] = []

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        return msgspec.json.encode({"metadata": {"name": name, "namespace": namespace}})

    async def create(self, resource: Any, body: dict[str, Any], namespace: str) -> bytes:
        self.created.append(f"{resource.kind}:{namespace}/{body['metadata']['name']}")
        return msgspec.json.encode({**body, "metadata": {**body["metadata"], "uid": "new", "resourceVersion": "9"}})

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "") -> bytes:
        self.patched.append(body)
        self.held = merge_patched(self.held or {}, {**body, "metadata": {"resourceVersion": "6"}})
        return msgspec.json.encode(self.held)

    async def delete(self, resource: Any, name: str, namespace: str = "") -> bytes:
        self.deleted.append(f"{resource.kind}:{namespace}/{name}")
        return b"{}"


def _connector(state, copies: dict[str, dict[str, Any]]) -> tuple[MultiKueueConnector, dict[str, WorkerApi]]:
    """The connector, the manager's Workload stored as :data:`MANAGER_DOC`, each worker holding its copy."""
    journal = SimpleNamespace(mirror=SimpleNamespace(state=state, workloads={KEY: _manager()}))
    mk = MultiKueueConnector(ManagerClient(state), journal, append=None)  # type: ignore[arg-type]
    apis = {}
    for name in ("worker1", "worker2"):
        apis[name] = WorkerApi(copies.get(name))
        w = mk.workers[name] = Worker(name, b"kubeconfig", client=apis[name], connected=True)  # type: ignore[arg-type]
        if name in copies:
            w.workloads[KEY] = copies[name]
        w.moved.add(KEY)
    return mk, apis


def _admitted(raw: dict[str, Any]) -> dict[str, Any]:
    return {**raw, "status": {"conditions": [
        {"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": "2024-01-01T00:00:05Z"}
        for t in ("QuotaReserved", "Admitted")]}}


@pytest.mark.asyncio
async def test_a_nominated_workers_drifted_copy_is_deleted_then_made_anew(tmp_path: Path) -> None:
    """The check Pending, both workers nominated: worker2's copy, out of sync, is deleted (Kueue's step 5) and made
    again from the manager's spec once the worker shows it gone (step 8 creates the missing copy); worker1's, in
    sync, is left."""
    state = _state(tmp_path)
    assert state.workloads[KEY].nominated == ("worker1", "worker2")
    mk, apis = _connector(state, {"worker1": _copy("c1"), "worker2": _copy("c2", queueName="other")})
    await mk.sync_copies(ORIGIN)
    assert apis["worker2"].deleted == ["Workload:default/job-a"] and apis["worker2"].created == []
    assert apis["worker1"].deleted == [] and apis["worker1"].created == [] and apis["worker1"].patched == []
    assert mk.stats.copies_deleted == 1

    # seen again before its DELETED: not deleted again, nothing written to it, none made over it
    mk.workers["worker2"].moved.add(KEY)
    await mk.sync_copies(ORIGIN)
    assert apis["worker2"].deleted == ["Workload:default/job-a"] and apis["worker2"].created == []
    assert apis["worker2"].patched == []

    # its DELETED shown: made anew
    w2 = mk.workers["worker2"]
    del w2.workloads[KEY]
    w2.gone("Workload", KEY, "c2")
    w2.moved.add(KEY)
    await mk.sync_copies(ORIGIN)
    assert apis["worker2"].created == ["Workload:default/job-a"]


@pytest.mark.asyncio
async def test_the_workloads_own_workers_drifted_copy_is_deleted_and_not_made_anew(tmp_path: Path) -> None:
    """The workload admitted on worker1, whose copy drifted: deleted (Kueue's step 5; its check then goes Retry,
    step 6a), and no copy is made there again while the workload is on that worker."""
    state = _state(tmp_path)
    state.apply(ev.Record(state.offset + 1, ev.WorkerClusterAssigned(time=START, cycle=1, input=0, key=KEY,
                                                                     cluster="worker1")))
    mk, apis = _connector(state, {"worker1": _admitted(_copy("c1", active=False))})
    await mk.sync_copies(ORIGIN)
    assert apis["worker1"].deleted == ["Workload:default/job-a"]
    w1 = mk.workers["worker1"]
    del w1.workloads[KEY]
    w1.gone("Workload", KEY, "c1")
    w1.moved.add(KEY)
    await mk.sync_copies(ORIGIN)
    assert apis["worker1"].created == []


@pytest.mark.asyncio
async def test_the_reserving_copy_is_kept_when_another_workers_copy_is_out_of_sync(tmp_path: Path) -> None:
    """Kueue's "reserving remote is kept when another worker's remote is out of sync": worker2's out-of-sync copy is
    deleted, worker1's admitted one (in sync) is kept."""
    state = _state(tmp_path)
    state.apply(ev.Record(state.offset + 1, ev.WorkerClusterAssigned(time=START, cycle=1, input=0, key=KEY,
                                                                     cluster="worker1")))
    other = _copy("c2", podSets=[{"name": "different-name", "count": 1}])
    mk, apis = _connector(state, {"worker1": _admitted(_copy("c1")), "worker2": other})
    await mk.sync_copies(ORIGIN)
    assert apis["worker2"].deleted == ["Workload:default/job-a"]
    assert "Workload:default/job-a" not in apis["worker1"].deleted


@pytest.mark.asyncio
async def test_a_copy_differing_only_in_priority_is_updated_in_place_not_deleted(tmp_path: Path) -> None:
    """Kueue's step 5 writes a changed priority to the copy (``PriorityChanged``) instead of deleting it."""
    doc = copy.deepcopy(MANAGER_DOC)
    doc["spec"].update(priorityClassRef={"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"},
                       priority=100)
    state = _state(tmp_path)
    mk, apis = _connector(state, {"worker1": _copy("c1", priorityClassRef=doc["spec"]["priorityClassRef"],
                                                   priority=10)})
    mk.journal.mirror.workloads[KEY] = _manager(doc)

    async def manager_get(resource: Any, name: str, namespace: str = "") -> bytes:
        return msgspec.json.encode(doc)

    mk.client.get = manager_get  # type: ignore[method-assign]
    wl = state.workloads[KEY]
    wl.priority, wl.priority_class = 100 + wl.boost, "high"  # as the log holds it once the manager's shows it
    await mk.sync_copies(ORIGIN)
    assert apis["worker1"].deleted == []
    assert [p["spec"]["priority"] for p in apis["worker1"].patched] == [100]


@pytest.mark.asyncio
async def test_no_copy_is_deleted_for_drift_while_one_shows_finished(tmp_path: Path) -> None:
    """Kueue's step 3 (a copy Finished: the workload finishes) comes before step 5: nothing is deleted for drift."""
    state = _state(tmp_path)
    finished = {"type": "Finished", "status": "True", "reason": "Succeeded", "message": "",
                "lastTransitionTime": "2024-01-01T00:00:05Z"}
    state.apply(ev.Record(state.offset + 1, ev.RemoteWorkloadObserved(
        time=START, key=KEY, uid=state.workloads[KEY].uid, cluster="worker1",
        conditions=[o.Condition(**{k: v for k, v in finished.items() if k != "lastTransitionTime"},
                                last_transition_time=finished["lastTransitionTime"])])))
    mk, apis = _connector(state, {"worker2": _copy("c2", queueName="other")})
    await mk.sync_copies(ORIGIN)
    assert apis["worker2"].deleted == []


@pytest.mark.asyncio
async def test_a_copy_is_not_deleted_for_drift_while_the_manager_deactivation_is_not_decided_yet(
        tmp_path: Path) -> None:
    """The manager's Workload set ``active: false`` while its copy is admitted on worker1, the scheduler's eviction
    not in the log yet: the copy is left for the documented flow (:func:`stopping`, the DeactivationTarget once the
    eviction comes), not deleted for drift in the window before it (ro-diff-b M2)."""
    state = _state(tmp_path)
    state.apply(ev.Record(state.offset + 1, ev.WorkerClusterAssigned(time=START, cycle=1, input=0, key=KEY,
                                                                     cluster="worker1")))
    doc = copy.deepcopy(MANAGER_DOC)
    doc["spec"]["active"] = False
    mk, apis = _connector(state, {"worker1": _admitted(_copy("c1"))})
    mk.journal.mirror.workloads[KEY] = _manager(doc)
    state.workloads[KEY].active = False
    await mk.sync_copies(ORIGIN)
    assert apis["worker1"].deleted == []


WPC = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}


def _priority_moved(state, mk: MultiKueueConnector) -> tuple[dict[str, Any], dict[str, Any]]:
    """The log (and its mirror) hold the manager's Workload at priority 100 on class ``high``, the manager's
    apiserver already at 200 (a second change the fold has not reached): (the folded, the newer) documents."""
    folded = copy.deepcopy(MANAGER_DOC)
    folded["spec"].update(priorityClassRef=WPC, priority=100)
    newer = copy.deepcopy(folded)
    newer["spec"]["priority"] = 200
    mk.journal.mirror.workloads[KEY] = _manager(folded)

    async def manager_get(resource: Any, name: str, namespace: str = "") -> bytes:
        return msgspec.json.encode(newer)

    mk.client.get = manager_get  # type: ignore[method-assign]
    wl = state.workloads[KEY]
    wl.priority, wl.priority_class = 100 + wl.boost, "high"
    return folded, newer


@pytest.mark.asyncio
async def test_a_priority_synced_from_a_newer_manager_than_the_mirror_does_not_delete_the_copy(
        tmp_path: Path) -> None:
    """ro-diff-b H1: the copy on worker1 (admitted) is given the manager's priority as its apiserver holds it now
    (200), the log still at 100. The pass that wrote it in place does not go on to the drift check (Kueue's step 5
    ``continue``s after an in-place update), which would compare the copy with the older version."""
    state = _state(tmp_path)
    state.apply(ev.Record(state.offset + 1, ev.WorkerClusterAssigned(time=START, cycle=1, input=0, key=KEY,
                                                                     cluster="worker1")))
    mk, apis = _connector(state, {"worker1": _admitted(_copy("c1", priorityClassRef=WPC, priority=10))})
    _priority_moved(state, mk)
    await mk.sync_copies(ORIGIN)
    assert [p["spec"]["priority"] for p in apis["worker1"].patched] == [200]
    assert apis["worker1"].deleted == []
