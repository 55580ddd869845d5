"""What the manager holds of a worker's copies when its watch of the worker lags behind its own writes: a copy it
deleted is not taken for the workload's new one while the watch still brings that copy's last versions, and a
write's late answer does not bring back a copy the watch already showed deleted. Fake worker clients whose
Workload watch delivers only what a test releases, followed by the connector's own watch loop."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from pathlib import Path
from typing import Any

import msgspec
import pytest
from fixtures.multikueue_states import MK_CONFIG, quota_released
from test_multikueue_connector import KEY, START, WorkerClient, _appending, _connector, _state

from connectors.k8s.client import RawList, WatchEvent
from connectors.k8s.multikueue import MultiKueueConnector
from connectors.k8s.multikueue_worker import WORKLOADS, Worker
from events import schema as ev
from kueue_es.scheduler import settle

ORIGIN = "multikueue"


class RecordingWorker(WorkerClient):
    """A worker whose patches and deletes are recorded (``Kind:namespace/name``) and answered empty."""

    def __init__(self) -> None:
        super().__init__()
        self.patched: list[str] = []
        self.deleted: list[str] = []

    async def patch(self, resource: Any, name: str, body: Any, namespace: str = "", subresource: str = "") -> bytes:
        self.patched.append(f"{resource.kind}:{namespace}/{name}")
        return b"{}"

    async def delete(self, resource: Any, name: str, namespace: str = "") -> bytes:
        self.deleted.append(f"{resource.kind}:{namespace}/{name}")
        return b"{}"


class LaggingWorker(RecordingWorker):
    """A worker whose Workload watch shows only the events a test releases (:meth:`deliver`), as late as it likes;
    its writes are recorded, and ``answering`` runs before a create's answer is read."""

    def __init__(self) -> None:
        super().__init__()
        self.events: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()
        self.answering: Any = None

    async def deliver(self, *events: tuple[str, dict[str, Any]]) -> None:
        """The watch shows ``events``; returns once the connector took them in."""
        for e in events:
            self.events.put_nowait(e)
        await self.events.join()

    async def list(self, resource: Any, **_: Any) -> RawList:
        return RawList()

    async def watch(self, resource: Any, rv: str, *, on_open: Any = None, **_: Any):
        if on_open is not None:
            on_open()
        if resource.kind != "Workload":
            await asyncio.Event().wait()
        while True:
            kind, obj = await self.events.get()
            yield WatchEvent(type=kind, object=msgspec.Raw(msgspec.json.encode(obj)))
            self.events.task_done()

    async def create(self, resource: Any, body: dict[str, Any], namespace: str) -> bytes:
        await super().create(resource, body, namespace)
        answer = {**body, "metadata": {**body["metadata"], "uid": f"copy-{len(self.created)}",
                                                   "resourceVersion": f"{10 * len(self.created) + 1}"}}
        if self.answering is not None:
            await self.answering(answer)
        return msgspec.json.encode(answer)


def _fresh(tmp_path: Path, name: str):
    """A state of its own (its objects file in a directory of its own)."""
    (tmp_path / name).mkdir()
    return _state(tmp_path / name)


def _copy(uid: str, rv: str, *, admitted: bool = True, **meta: Any) -> dict[str, Any]:
    """The worker's copy of ``default/job-a``, admitted there (as before the manager evicted the workload)."""
    conds = [{"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}
             for t in (("QuotaReserved", "Admitted") if admitted else ())]
    return {"metadata": {"name": "job-a", "namespace": "default", "uid": uid, "resourceVersion": rv,
                         "labels": {"kueue.x-k8s.io/multikueue-origin": ORIGIN}, **meta},
            "status": {"conditions": conds}}


@contextlib.asynccontextmanager
async def _watching(mk: MultiKueueConnector, w: Worker, rv: str):
    """The connector's watch of ``w``'s Workload copies, from ``rv``, running meanwhile."""
    task = asyncio.create_task(mk._follow(w, WORKLOADS, w.workloads, rv, f"kueue.x-k8s.io/multikueue-origin={ORIGIN}"))
    try:
        await asyncio.sleep(0)
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _pass(mk: MultiKueueConnector) -> None:
    """One pass over the workers' copies, as :meth:`MultiKueueConnector.sync` runs it, looking at the workload."""
    for w in mk.workers.values():
        w.moved.add(KEY)
    keys = mk._pass_keys()
    await mk._observe(keys)
    await mk.sync_copies(ORIGIN, keys)


def _reported(appended: list[ev.AnyEvent], cluster: str) -> list[ev.RemoteWorkloadObserved]:
    return [e for e in appended if isinstance(e, ev.RemoteWorkloadObserved) and e.cluster == cluster]


@pytest.mark.asyncio
async def test_a_copy_the_manager_deleted_is_not_the_readmitted_workload_s_until_its_watch_shows_it_gone(
        tmp_path: Path) -> None:
    """The manager deletes the evicted workload's copy (admitted on worker1); its watch, lagging, still brings that
    copy's last version (finalizers removed, Admitted as before) after the delete. The workload, readmitted
    meanwhile (the log forgot its copies) and nominated to worker1 again, must not take that copy's Admitted for
    its new copy's (Kueue reads its copies from the worker, where that one is gone): nothing is reported of it and
    no copy is made over it until the watch shows it deleted; then the new copy is made."""
    evicted = _fresh(tmp_path, "evicted")
    wl = evicted.workloads[KEY]
    evicted.apply(ev.Record(evicted.offset + 1, ev.WorkloadEvicted(
        time=START, cycle=9, input=0, key=KEY, uid=wl.uid, reason="AdmissionCheck", message="evicted")))
    quota_released(evicted, KEY)
    worker = LaggingWorker()
    mk = _connector(evicted, {"worker1": worker})
    appended = _appending(mk)
    w = mk.workers["worker1"]
    admitted = _copy("old", "40", finalizers=["kueue.x-k8s.io/resource-in-use"])
    w.workloads[KEY] = admitted
    async with _watching(mk, w, "40"):
        await _pass(mk)
        assert worker.deleted == ["Workload:default/job-a"]
        dying = copy.deepcopy(admitted)
        dying["metadata"].update(resourceVersion="41", finalizers=None)
        await worker.deliver(("MODIFIED", dying))  # the finalizers' removal, shown after the delete

        mk.state = readmitted = _fresh(tmp_path, "readmitted")
        assert "worker1" in readmitted.workloads[KEY].nominated and not readmitted.workloads[KEY].remotes
        await _pass(mk)
        assert _reported(appended, "worker1") == []
        assert worker.created == [], "no copy made over the one going away"
        assert worker.deleted == ["Workload:default/job-a"], "deleted once"
        settle(readmitted, MK_CONFIG, now=START + 1000)
        assert not readmitted.workloads[KEY].cluster_name

        await worker.deliver(("DELETED", {**dying, "metadata": {**dying["metadata"], "resourceVersion": "42"}}))
        await _pass(mk)
        assert worker.created == ["Workload:default/job-a"]
        assert w.deleted == {}


@pytest.mark.asyncio
async def test_a_copy_going_away_is_not_taken_for_the_new_copy_of_a_workload_that_knows_none(tmp_path: Path) -> None:
    """A copy being deleted on worker1 (its deletionTimestamp set, a finalizer holding it; Admitted from before) is
    not reported as the copy of a workload whose log knows none there: its Admitted would have the workload assigned
    to a worker whose copy is going away. No copy is made over it either, until it is gone."""
    state = _state(tmp_path)
    assert "worker1" in state.workloads[KEY].nominated and not state.workloads[KEY].remotes
    worker = WorkerClient()
    mk = _connector(state, {"worker1": worker})
    appended = _appending(mk)
    mk.workers["worker1"].workloads[KEY] = _copy("old", "40", deletionTimestamp="2024-01-01T00:00:05Z",
                                                  finalizers=["kueue.x-k8s.io/resource-in-use"])
    await _pass(mk)
    assert _reported(appended, "worker1") == []
    assert worker.created == []
    settle(state, MK_CONFIG, now=START + 1000)
    assert not state.workloads[KEY].cluster_name


@pytest.mark.asyncio
async def test_a_copy_going_away_is_still_reported_for_the_workload_whose_copy_it_is(tmp_path: Path) -> None:
    """The copy the log knows, being deleted on its worker (a finalizer holding it), is reported as it shows until
    it is gone, as Kueue reads it from the worker meanwhile."""
    state = _state(tmp_path)
    state.apply(ev.Record(state.offset + 1, ev.RemoteWorkloadObserved(time=START, key=KEY, uid=state.workloads[KEY].uid,
                                                                     cluster="worker1", conditions=[])))
    mk = _connector(state, {"worker1": WorkerClient()})
    appended = _appending(mk)
    mk.workers["worker1"].workloads[KEY] = _copy("old", "40", deletionTimestamp="2024-01-01T00:00:05Z",
                                                  finalizers=["kueue.x-k8s.io/resource-in-use"])
    await _pass(mk)
    assert [sorted(c.type for c in e.conditions) for e in _reported(appended, "worker1")] == [
        ["Admitted", "QuotaReserved"]]


@pytest.mark.asyncio
async def test_a_create_answer_read_after_its_watch_showed_the_copy_made_and_deleted_is_not_kept(
        tmp_path: Path) -> None:
    """The manager creates the copy on worker1 and reads the answer late: meanwhile its watch showed the copy made
    and deleted there (by someone else). Kept, the answer would stand for a copy no event will take away: the
    workload would never get one there again. It is not kept, and the next pass makes the copy anew."""
    state = _state(tmp_path)
    worker = LaggingWorker()
    mk = _connector(state, {"worker1": worker})
    _appending(mk)
    w = mk.workers["worker1"]

    async def made_and_deleted(answer: dict[str, Any]) -> None:
        worker.answering = None
        gone = {**answer, "metadata": {**answer["metadata"], "resourceVersion": "12"}}
        await worker.deliver(("ADDED", answer), ("DELETED", gone))

    worker.answering = made_and_deleted
    async with _watching(mk, w, "10"):
        await _pass(mk)
        assert worker.created == ["Workload:default/job-a"]
        assert KEY not in w.workloads
        await _pass(mk)
        assert worker.created == ["Workload:default/job-a"] * 2
        assert w.workloads[KEY]["metadata"]["uid"] == "copy-2"
