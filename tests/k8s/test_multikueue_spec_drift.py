"""A MultiKueue copy whose spec drifted from its manager Workload's is deleted, as Kueue's MultiKueue workload
reconciler does (pkg/controller/admissionchecks/multikueue/workload.go, ``reconcileGroup`` step 5 and
``isRemoteSpecOutOfSync``: ``equality.Semantic.DeepEqual`` of the two specs, the preemption gates left out; a
priority change or an elastic scale-down is written to the copy in place instead). Where the copy is still to
be (a nominated worker) it is made anew once seen gone; the workload's own worker's is not, and its check goes
Retry.

kueue-es judges a copy by the manager version it was written from (:mod:`connectors.k8s.multikueue_drift`),
not by how its worker stored it: a worker's CRD defaults and pruning, and a log lagging behind the version
written, call nothing drifted (ro-diff-b H1, H2).

Kueue's cases (workload_test.go TestWlReconcile): "reserving remote is kept when another worker's remote is
out of sync" (the out-of-sync copy of worker2, ``PodSets(MakePodSet("different-name", 1))``, is deleted;
worker1's admitted copy kept), "reachable reserving remote that is gone is not misreported as out of sync ..."
and "worker-lost grace applies when the reserving worker is unreachable even if another worker's remote is out
of sync"."""

from __future__ import annotations

import copy
from collections.abc import Callable
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
from connectors.k8s.multikueue_drift import MADE_FROM, copy_drifted, made_from, spec_digest
from connectors.k8s.multikueue_worker import Worker
from events import objects as o
from events import schema as ev
from events.template_digest import stamped_from_document
from kueue_es.scheduler.multikueue import check_of

ORIGIN = "multikueue"
MANAGER_UID = "manager-uid"
MANAGER_DOC: dict[str, Any] = fastyaml.safe_load(SCENARIO.read_text())["objects"][-1]
MANAGER_DOC["metadata"].update(uid=MANAGER_UID, generation=2)


def _manager(doc: dict[str, Any] = MANAGER_DOC) -> o.Workload:
    """The manager's stored Workload as the watch decodes it (its templates' digests stamped)."""
    return stamped_from_document(msgspec.convert(doc, o.Workload, strict=False), doc)


def _at(generation: int, **edit: Any) -> dict[str, Any]:
    """The manager's Workload at ``generation``, ``edit`` applied to its spec."""
    doc = copy.deepcopy(MANAGER_DOC)
    doc["metadata"]["generation"] = generation
    doc["spec"].update(edit)
    return doc


def _copy(uid: str = "c1", made: dict[str, Any] | None = None, **edit: Any) -> dict[str, Any]:
    """The copy of the manager's Workload (``cloneForCreate``: its spec, the MultiKueue preemption gate on),
    with a uid and version as the worker's apiserver gives it, ``edit`` applied to its spec; ``made``: the
    manager version kueue-es made it from (recorded on it, its spec that one's), else one it has no record of
    (made by Kueue's manager, or before kueue-es recorded it)."""
    body = workload_copy(copy.deepcopy(made or MANAGER_DOC), ORIGIN, gated=True)
    body["metadata"].update(uid=uid, resourceVersion="5")
    if made is not None:
        body["metadata"]["annotations"][MADE_FROM] = made_from(_manager(made))
    body["spec"].update(edit)
    return body


def _pod_set(**template_edit: Any) -> list[dict[str, Any]]:
    ps = copy.deepcopy(MANAGER_DOC["spec"]["podSets"])
    container = ps[0]["template"]["spec"]["containers"][0]
    container.update(template_edit)
    return ps


@pytest.mark.parametrize(("edit", "drifted"), [
    pytest.param({}, False, id="in sync"),
    pytest.param({"preemptionGates": [{"name": "g"}]}, False,
                 id="isRemoteSpecOutOfSync: preemption gates are not compared"),
    pytest.param({"podSets": [{"name": "different-name", "count": 1,
                               "template": MANAGER_DOC["spec"]["podSets"][0]["template"]}]}, True,
                 id="reserving remote is kept when another worker's remote is out of sync: podSet name"),
    pytest.param({"podSets": [{**MANAGER_DOC["spec"]["podSets"][0], "count": 2}]}, True, id="podSet count"),
    pytest.param({"podSets": [{**MANAGER_DOC["spec"]["podSets"][0], "minCount": 1}]}, True,
                 id="podSet minCount"),
    pytest.param({"queueName": "other"}, True, id="queueName"),
    pytest.param({"maximumExecutionTimeSeconds": 60}, True, id="maximumExecutionTimeSeconds"),
    pytest.param({"podSets": _pod_set(image="other")}, True, id="a template field (image)"),
    pytest.param({"podSets": _pod_set(resources={"requests": {"cpu": "1000m"}})}, False,
                 id="Semantic: a quantity by value (1 is 1000m)"),
    pytest.param({"podSets": _pod_set(env=[], resources={"requests": {"cpu": "1"}, "limits": {}})}, False,
                 id="Semantic: an empty list or map is none"),
    pytest.param({"priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                       "name": "p"}, "priority": 5}, False,
                 id="the priority: written to the copy in place"),
    pytest.param({"active": False}, False,
                 id="active: the deactivation flow (upstream #13793 leaves it out)"),
])
def test_a_manager_change_since_the_copy_was_made_is_compared_as_kueue_compares_it(
        edit: dict[str, Any], drifted: bool) -> None:
    """The copy made from generation 1, the manager's Workload now at 2 with ``edit``."""
    assert copy_drifted(_manager(_at(2, **edit)), _copy(made=_at(1))) is drifted


def test_a_copy_is_judged_by_what_it_was_made_from_not_by_how_its_worker_stored_it() -> None:
    """ro-diff-b H2: a Kueue worker's CRD defaults a gRPC probe's ``service`` and a port's ``protocol``,
    prunes fields its schema lacks, and its webhook may drop ``minCount``: none of that makes the copy
    drifted, even once the manager moved on in what is not compared (its priority)."""
    made = _at(1)
    stored = _copy(made=made)
    container = stored["spec"]["podSets"][0]["template"]["spec"]["containers"][0]
    container.update(readinessProbe={"grpc": {"port": 9000, "service": ""}}, ports=[{"containerPort": 80,
                                                                                     "protocol": "TCP"}])
    assert not copy_drifted(_manager(made), stored)
    assert not copy_drifted(_manager(_at(3, priority=7)), stored)
    assert copy_drifted(_manager(_at(3, queueName="other")), stored)


@pytest.mark.parametrize(("now", "record", "drifted"), [
    pytest.param(_at(2, queueName="other"), None, False,
                 id="no record (made by Kueue, or before kueue-es recorded)"),
    pytest.param(_at(1, queueName="other"), "made", False, id="the log not newer than the version written"),
    pytest.param(_at(0, queueName="other"), "made", False, id="the log older than the version written"),
    pytest.param({**_at(2, queueName="other"), "metadata": {**MANAGER_DOC["metadata"], "uid": "another"}},
                 "made", False, id="another manager Workload of that name"),
    pytest.param(_at(2, queueName="other"), "manager-uid/x/abc", False, id="a record not of that form"),
    pytest.param(_at(2, queueName="other"), "made", True, id="newer and differing"),
])
def test_what_a_copys_record_lets_be_called_drifted(now: dict[str, Any], record: str | None,
                                                    drifted: bool) -> None:
    body = _copy(made=_at(1))
    if record is None:
        del body["metadata"]["annotations"][MADE_FROM]
    elif record != "made":
        body["metadata"]["annotations"][MADE_FROM] = record
    assert copy_drifted(_manager(now), body) is drifted


def test_a_template_the_log_has_no_digest_of_calls_nothing_drifted() -> None:
    """A manager Workload from a log written before template digests: its compared spec is unknown, so no
    copy is called drifted on it, nor recorded from it."""
    manager = _manager(_at(2, queueName="other"))
    bare = msgspec.structs.replace(manager, spec=msgspec.structs.replace(manager.spec, pod_sets=[
        msgspec.structs.replace(ps, template=msgspec.structs.replace(ps.template, digest=None))
        for ps in manager.spec.pod_sets]))
    assert spec_digest(bare) is None and made_from(bare) is None
    assert not copy_drifted(bare, _copy(made=_at(1)))


class WorkerApi:
    """A worker's apiserver holding ``copy`` (or no copy): creations, patches (applied) and deletions
    recorded; ``stores`` turns a created copy into what the worker stores (its CRD's defaults and pruning)."""

    def __init__(self, held: dict[str, Any] | None,
                 stores: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> None:
        self.held = held
        self.stores = stores
        self.created: list[str] = []
        self.patched: list[dict[str, Any]] = []
        self.deleted: list[str] = []

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        return msgspec.json.encode({"metadata": {"name": name, "namespace": namespace}})

    async def create(self, resource: Any, body: dict[str, Any], namespace: str) -> bytes:
        self.created.append(f"{resource.kind}:{namespace}/{body['metadata']['name']}")
        stored = copy.deepcopy(body) if self.stores is None else self.stores(copy.deepcopy(body))
        self.held = {**stored, "metadata": {**stored["metadata"], "uid": "new", "resourceVersion": "9"}}
        return msgspec.json.encode(self.held)

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "",
                    subresource: str = "") -> bytes:
        self.patched.append(body)
        rv = str(int(((self.held or {}).get("metadata") or {}).get("resourceVersion") or "5") + 1)
        self.held = merge_patched(self.held or {}, {**body, "metadata": {**body.get("metadata", {}),
                                                                         "resourceVersion": rv}})
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
        w = mk.workers[name] = Worker(name, b"kubeconfig",
                                      client=apis[name],  # type: ignore[arg-type]
                                      connected=True)
        if name in copies:
            w.workloads[KEY] = copies[name]
        w.moved.add(KEY)
    return mk, apis


def _admitted(raw: dict[str, Any]) -> dict[str, Any]:
    return {**raw, "status": {"conditions": [
        {"type": t, "status": "True", "reason": t, "message": "",
         "lastTransitionTime": "2024-01-01T00:00:05Z"}
        for t in ("QuotaReserved", "Admitted")]}}


@pytest.mark.asyncio
async def test_a_nominated_workers_drifted_copy_is_deleted_then_made_anew(tmp_path: Path) -> None:
    """The check Pending, both workers nominated: worker2's copy, out of sync, is deleted (Kueue's step 5) and
    made again from the manager's spec once the worker shows it gone (step 8 creates the missing copy);
    worker1's, in sync, is left."""
    state = _state(tmp_path)
    assert state.workloads[KEY].nominated == ("worker1", "worker2")
    mk, apis = _connector(state, {"worker1": _copy("c1", made=MANAGER_DOC),
                                  "worker2": _copy("c2", made=_at(1, queueName="other"))})
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
    """The workload admitted on worker1, whose copy drifted: deleted (Kueue's step 5; its check then goes
    Retry, step 6a), and no copy is made there again while the workload is on that worker."""
    state = _state(tmp_path)
    state.apply(ev.Record(state.offset + 1, ev.WorkerClusterAssigned(time=START, cycle=1, input=0, key=KEY,
                                                                     cluster="worker1")))
    made = _at(1, maximumExecutionTimeSeconds=60)
    mk, apis = _connector(state, {"worker1": _admitted(_copy("c1", made=made))})
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
    """Kueue's "reserving remote is kept when another worker's remote is out of sync": worker2's out-of-sync
    copy is deleted, worker1's admitted one (in sync) is kept."""
    state = _state(tmp_path)
    state.apply(ev.Record(state.offset + 1, ev.WorkerClusterAssigned(time=START, cycle=1, input=0, key=KEY,
                                                                     cluster="worker1")))
    other = _copy("c2", made=_at(1, podSets=[{"name": "different-name", "count": 1}]))
    mk, apis = _connector(state, {"worker1": _admitted(_copy("c1", made=MANAGER_DOC)), "worker2": other})
    await mk.sync_copies(ORIGIN)
    assert apis["worker2"].deleted == ["Workload:default/job-a"]
    assert "Workload:default/job-a" not in apis["worker1"].deleted


@pytest.mark.asyncio
async def test_a_copy_differing_only_in_priority_is_updated_in_place_not_deleted(tmp_path: Path) -> None:
    """Kueue's step 5 writes a changed priority to the copy (``PriorityChanged``) instead of deleting it."""
    doc = copy.deepcopy(MANAGER_DOC)
    doc["spec"].update(priorityClassRef={"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                         "name": "high"},
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
    """Kueue's step 3 (a copy Finished: the workload finishes) comes before step 5: nothing is deleted for
    drift."""
    state = _state(tmp_path)
    finished = {"type": "Finished", "status": "True", "reason": "Succeeded", "message": "",
                "lastTransitionTime": "2024-01-01T00:00:05Z"}
    state.apply(ev.Record(state.offset + 1, ev.RemoteWorkloadObserved(
        time=START, key=KEY, uid=state.workloads[KEY].uid, cluster="worker1",
        conditions=[o.Condition(**{k: v for k, v in finished.items() if k != "lastTransitionTime"},
                                last_transition_time=finished["lastTransitionTime"])])))
    mk, apis = _connector(state, {"worker2": _copy("c2", made=_at(1, queueName="other"))})
    await mk.sync_copies(ORIGIN)
    assert apis["worker2"].deleted == []


@pytest.mark.asyncio
async def test_a_copy_is_not_deleted_for_drift_while_the_manager_deactivation_is_not_decided_yet(
        tmp_path: Path) -> None:
    """The manager's Workload set ``active: false`` while its copy is admitted on worker1, the scheduler's
    eviction not in the log yet: the copy is left for the documented flow (:func:`stopping`, the
    DeactivationTarget once the eviction comes), not deleted for drift in the window before it (ro-diff-b M2;
    the copy's record would call it drifted otherwise)."""
    state = _state(tmp_path)
    state.apply(ev.Record(state.offset + 1, ev.WorkerClusterAssigned(time=START, cycle=1, input=0, key=KEY,
                                                                     cluster="worker1")))
    doc = copy.deepcopy(MANAGER_DOC)
    doc["spec"]["active"] = False
    made = _at(1, maximumExecutionTimeSeconds=60)
    mk, apis = _connector(state, {"worker1": _admitted(_copy("c1", made=made))})
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
    """ro-diff-b H1: the copy on worker1 (admitted) is given the manager's priority as its apiserver holds it
    now (200), the log still at 100. The pass that wrote it in place does not go on to the drift check
    (Kueue's step 5 ``continue``s after an in-place update), which would compare the copy with the older
    version."""
    state = _state(tmp_path)
    state.apply(ev.Record(state.offset + 1, ev.WorkerClusterAssigned(time=START, cycle=1, input=0, key=KEY,
                                                                     cluster="worker1")))
    mk, apis = _connector(state, {"worker1": _admitted(_copy("c1", priorityClassRef=WPC, priority=10))})
    _priority_moved(state, mk)
    await mk.sync_copies(ORIGIN)
    assert [p["spec"]["priority"] for p in apis["worker1"].patched] == [200]
    assert apis["worker1"].deleted == []


def _manager_reads(mk: MultiKueueConnector, doc: dict[str, Any]) -> dict[str, Any]:
    """The manager's apiserver answers reads of its Workload with ``doc``."""
    held = {"doc": doc}

    async def manager_get(resource: Any, name: str, namespace: str = "") -> bytes:
        return msgspec.json.encode(held["doc"])

    mk.client.get = manager_get  # type: ignore[method-assign]
    return held


async def _pass(mk: MultiKueueConnector) -> None:
    for w in mk.workers.values():
        w.moved.add(KEY)
    await mk.sync_copies(ORIGIN)


def _kueue_worker_stores(body: dict[str, Any]) -> dict[str, Any]:
    """A Kueue worker's CRD defaults a gRPC probe's ``service`` (``default: ""``) in the embedded template."""
    for ps in body["spec"]["podSets"]:
        for c in ps["template"]["spec"]["containers"]:
            grpc = (c.get("readinessProbe") or {}).get("grpc")
            if grpc is not None:
                grpc.setdefault("service", "")
    return body


@pytest.mark.asyncio
async def test_a_copy_a_kueue_worker_stored_with_its_crd_defaults_is_not_deleted_and_made_again(
        tmp_path: Path) -> None:
    """ro-diff-b H2: the manager's template has a gRPC probe without ``service``; each nominated worker
    stores its copy with ``service: ""``. The copy is not called drifted on the next passes (it was an endless
    delete and create). Once the manager's Workload changes in what is compared, the copies are deleted as
    Kueue does."""
    doc = _at(2)
    container = doc["spec"]["podSets"][0]["template"]["spec"]["containers"][0]
    container["readinessProbe"] = {"grpc": {"port": 9000}}
    state = _state(tmp_path)
    mk, apis = _connector(state, {})
    for api in apis.values():
        api.stores = _kueue_worker_stores
    mk.journal.mirror.workloads[KEY] = _manager(doc)
    _manager_reads(mk, doc)
    await _pass(mk)
    assert [api.created for api in apis.values()] == [["Workload:default/job-a"]] * 2
    for _ in range(2):
        await _pass(mk)
    assert [api.deleted for api in apis.values()] == [[], []]

    moved = _at(3, queueName="other")
    moved["spec"]["podSets"] = doc["spec"]["podSets"]
    mk.journal.mirror.workloads[KEY] = _manager(moved)
    await _pass(mk)
    assert [api.deleted for api in apis.values()] == [["Workload:default/job-a"]] * 2


@pytest.mark.asyncio
async def test_a_copy_made_from_a_newer_manager_than_the_log_holds_is_not_deleted_meanwhile(
        tmp_path: Path) -> None:
    """ro-diff-b H1: the copy is made from the manager's Workload as read (generation 3, another queue), the
    log still at generation 2: it is not compared with the older version (no delete and create until the fold
    catches up), nor once the log reaches the version it was made from."""
    state = _state(tmp_path)
    mk, apis = _connector(state, {})
    _manager_reads(mk, _at(3, queueName="lq-b"))
    await _pass(mk)
    await _pass(mk)
    assert [api.created for api in apis.values()] == [["Workload:default/job-a"]] * 2
    assert [api.deleted for api in apis.values()] == [[], []]
    mk.journal.mirror.workloads[KEY] = _manager(_at(3, queueName="lq-b"))
    await _pass(mk)
    assert [api.deleted for api in apis.values()] == [[], []]


@pytest.mark.asyncio
async def test_a_copy_whose_priority_was_synced_from_a_newer_manager_is_not_deleted_on_the_next_pass(
        tmp_path: Path) -> None:
    """ro-diff-b H1, the pass after: the copy, made from generation 1 and given priority 200 from the
    manager's generation 3, is not compared with the log's generation 2 (priority 100) on the next pass
    either."""
    state = _state(tmp_path)
    state.apply(ev.Record(state.offset + 1, ev.WorkerClusterAssigned(time=START, cycle=1, input=0, key=KEY,
                                                                     cluster="worker1")))
    mk, apis = _connector(state, {})
    made = _at(1, priorityClassRef=WPC, priority=10)
    _manager_reads(mk, made)
    await mk._create_copy(mk.workers["worker1"], state.workloads[KEY], ORIGIN)
    held = mk.workers["worker1"].workloads[KEY]
    mk.workers["worker1"].workloads[KEY] = apis["worker1"].held = _admitted(held)
    folded, newer = _priority_moved(state, mk)
    folded["metadata"]["generation"], newer["metadata"]["generation"] = 2, 3
    mk.journal.mirror.workloads[KEY] = _manager(folded)
    await _pass(mk)
    assert [p["spec"]["priority"] for p in apis["worker1"].patched] == [200]
    await _pass(mk)
    assert apis["worker1"].deleted == []


def _counted(doc: dict[str, Any], count: int) -> dict[str, Any]:
    doc["spec"]["podSets"] = [{**MANAGER_DOC["spec"]["podSets"][0], "count": count}]
    return doc


@pytest.mark.asyncio
async def test_an_elastic_copy_scaled_down_from_a_newer_manager_is_not_deleted(tmp_path: Path) -> None:
    """ro-diff-b H1, an elastic scale-down: the log holds the scale-down to 3 pods (generation 2), the
    manager's apiserver a second one to 2 (generation 3). The copy, made at 4, takes 2 and records generation
    3: it is not compared with the log's 3 pods meanwhile (it was deleted as drifted), nor once the log holds
    generation 3; a later change that is compared still deletes it."""
    state = _state(tmp_path)
    state.apply(ev.Record(state.offset + 1, ev.WorkerClusterAssigned(time=START, cycle=1, input=0, key=KEY,
                                                                     cluster="worker1")))
    wl = state.workloads[KEY]
    wl.elastic = True
    wl.spec_pod_sets = tuple(msgspec.structs.replace(ps, count=3) for ps in wl.spec_sets)
    mk, apis = _connector(state, {})
    _manager_reads(mk, _counted(_at(1), 4))
    await mk._create_copy(mk.workers["worker1"], wl, ORIGIN)
    w1 = mk.workers["worker1"]
    w1.workloads[KEY] = apis["worker1"].held = _admitted(w1.workloads[KEY])
    mk.journal.mirror.workloads[KEY] = _manager(_counted(_at(2), 3))
    _manager_reads(mk, _counted(_at(3), 2))
    await _pass(mk)
    assert [[ps["count"] for ps in p["spec"]["podSets"]] for p in apis["worker1"].patched] == [[2]]
    await _pass(mk)
    assert apis["worker1"].deleted == []
    mk.journal.mirror.workloads[KEY] = _manager(_counted(_at(3), 2))
    wl.spec_pod_sets = tuple(msgspec.structs.replace(ps, count=2) for ps in wl.spec_sets)
    await _pass(mk)
    assert apis["worker1"].deleted == [] and len(apis["worker1"].patched) == 1
    mk.journal.mirror.workloads[KEY] = _manager(_counted(_at(4, maximumExecutionTimeSeconds=60), 2))
    await _pass(mk)
    assert "Workload:default/job-a" in apis["worker1"].deleted


def _showing(raw: dict[str, Any], type_: str, reason: str) -> dict[str, Any]:
    raw = copy.deepcopy(raw)
    raw.setdefault("status", {}).setdefault("conditions", []).append(
        {"type": type_, "status": "True", "reason": reason, "message": "",
         "lastTransitionTime": "2024-01-01T00:00:09Z"})
    return raw


@pytest.mark.asyncio
@pytest.mark.parametrize(("on", "type_", "reason"), [
    pytest.param("worker1", "Evicted", "Preempted",
                 id="step 4: the reserving copy shows Evicted, check Ready"),
    pytest.param("worker2", "Finished", "Succeeded", id="step 3: another worker's copy shows Finished"),
])
async def test_no_copy_is_deleted_for_drift_while_a_copy_shows_evicted_or_finished_before_the_log_does(
        tmp_path: Path, on: str, type_: str, reason: str) -> None:
    """ro-diff-b M1: Kueue reads its steps 3 and 4 from the copies it reads for step 5. A copy the worker's
    watch already shows Finished, or Evicted while the check is Ready, keeps the drifted copy of worker1 from
    being deleted before the log shows that condition (a following journal folds later, a watch moves between
    the passes' awaits)."""
    state = _state(tmp_path)
    state.apply(ev.Record(state.offset + 1, ev.WorkerClusterAssigned(time=START, cycle=1, input=0, key=KEY,
                                                                     cluster="worker1")))
    wl = state.workloads[KEY]
    check = next(name for name, st in wl.check_states.items() if st is check_of(state, wl))
    state.apply(ev.Record(state.offset + 1, ev.AdmissionCheckStateChanged(time=START, key=KEY, check=check,
                                                                           state="Ready")))
    assert check_of(state, state.workloads[KEY]).state == "Ready"
    made = _at(1, maximumExecutionTimeSeconds=60)
    copies = {"worker1": _admitted(_copy("c1", made=made)), "worker2": _copy("c2", made=MANAGER_DOC)}
    copies[on] = _showing(copies[on], type_, reason)
    mk, apis = _connector(state, copies)
    assert not (state.workloads[KEY].remotes or {})  # the log shows no copy's condition yet
    await mk.sync_copies(ORIGIN)
    assert apis["worker1"].deleted == []


def test_the_managers_digest_is_computed_once_per_version_it_is_compared_in(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """ro-diff-b L2: a pass looks at every copy of every moved workload, a relist at all of them. A copy's
    spec is not read at all (its record is); the manager's compared spec is digested once per version the
    log holds, not once per copy and pass."""
    from connectors.k8s import multikueue_drift

    calls: list[str] = []

    def counted(manager: o.Workload) -> str | None:
        calls.append(manager.metadata.name)
        return spec_digest(manager)

    manager = _manager(_at(2, queueName="other"))
    copies = [_copy(f"c{i}", made=_at(1)) for i in range(3)]
    monkeypatch.setattr(multikueue_drift, "spec_digest", counted)
    assert all(copy_drifted(manager, c) for c in copies + copies)
    assert len(calls) == 1
    assert copy_drifted(_manager(_at(3, queueName="other")), copies[0]) and len(calls) == 2
