"""What the manager holds of a worker's owner copies (Jobs and the other adapters' kinds) when its watches lag
behind its own deletes, as it holds its Workload copies: a copy it deleted is held until the watch shows it deleted
(not the readmitted workload's copy, its old status not mirrored, no copy made over it); a late DELETED takes away
only the copy it is about; a copy held is not deleted nor counted again; and what was mirrored is remembered per
copy (by uid) and forgotten with it. Fake worker clients whose watches deliver only what a test releases, followed by
the connector's own watch loop."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from pathlib import Path
from typing import Any

import msgspec
import pytest
from fixtures.multikueue_states import quota_released
from test_multikueue_connector import KEY, START, RecordingManager, _appending, _connector
from test_multikueue_worker_view import ORIGIN, RecordingWorker, _copy, _fresh, _pass

from connectors.k8s.client import RawList, WatchEvent
from connectors.k8s.errors import NotFound
from connectors.k8s.multikueue import MultiKueueConnector
from connectors.k8s.multikueue_adapters import ADAPTERS, JOBS
from connectors.k8s.multikueue_worker import WORKLOADS, Worker
from events import schema as ev

JOB = "default/a"
SELECTOR = f"kueue.x-k8s.io/multikueue-origin={ORIGIN}"


class LaggingWorker(RecordingWorker):
    """A worker whose Workload and Job watches show only the events a test releases (:meth:`deliver`); its writes
    are recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.events: dict[str, asyncio.Queue[tuple[str, dict[str, Any]]]] = {
            "Workload": asyncio.Queue(), "Job": asyncio.Queue()}
        self.jobs: dict[str, dict[str, Any]] = {}
        """What a read of a Job answers, by name (NotFound for another)."""

    async def deliver(self, kind: str, *events: tuple[str, dict[str, Any]]) -> None:
        """The watch of ``kind`` shows ``events``; returns once the connector took them in."""
        for e in events:
            self.events[kind].put_nowait(e)
        await self.events[kind].join()

    async def list(self, resource: Any, **_: Any) -> RawList:
        return RawList()

    async def watch(self, resource: Any, rv: str, **_: Any):
        if resource.kind not in self.events:
            await asyncio.Event().wait()
        while True:
            kind, obj = await self.events[resource.kind].get()
            yield WatchEvent(type=kind, object=msgspec.Raw(msgspec.json.encode(obj)))
            self.events[resource.kind].task_done()

    async def create(self, resource: Any, body: dict[str, Any], namespace: str) -> bytes:
        await super().create(resource, body, namespace)
        return msgspec.json.encode({**body, "metadata": {**body["metadata"], "uid": f"copy-{len(self.created)}",
                                                         "resourceVersion": f"{100 + len(self.created)}"}})

    async def get(self, resource: Any, name: str, namespace: str = "") -> bytes:
        if resource.kind != "Job" or name not in self.jobs:
            raise NotFound(f'{resource.plural} "{name}" not found', 404)
        return msgspec.json.encode(self.jobs[name])



def _job(uid: str, rv: str, **status: Any) -> dict[str, Any]:
    """The worker's copy of the manager's Job ``default/a``, made for the workload ``default/job-a``."""
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "a", "namespace": "default", "uid": uid, "resourceVersion": rv,
                         "labels": {"kueue.x-k8s.io/multikueue-origin": ORIGIN,
                                    "kueue.x-k8s.io/prebuilt-workload-name": "job-a"}},
            "spec": {"suspend": False}, "status": status}


def _gone(obj: dict[str, Any], rv: str) -> tuple[str, dict[str, Any]]:
    return "DELETED", {**obj, "metadata": {**obj["metadata"], "resourceVersion": rv}}


@contextlib.asynccontextmanager
async def _watching(mk: MultiKueueConnector, w: Worker, rv: str):
    """The connector's watches of ``w``'s Workload and Job copies, from ``rv``, running meanwhile."""
    tasks = [asyncio.create_task(mk._follow(w, WORKLOADS, w.workloads, rv, SELECTOR)),
             asyncio.create_task(mk._follow(w, JOBS, w.owners.setdefault("Job", {}), rv, SELECTOR))]
    try:
        await asyncio.sleep(0)
        yield
    finally:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _evicted(tmp_path: Path):
    state = _fresh(tmp_path, "evicted")
    state.apply(ev.Record(state.offset + 1, ev.WorkloadEvicted(
        time=START, cycle=9, input=0, key=KEY, uid=state.workloads[KEY].uid, reason="AdmissionCheck",
        message="evicted")))
    quota_released(state, KEY)
    return state


def _running_on_worker1(tmp_path: Path, name: str):
    """The workload admitted again and running on worker1 (its Job started on the manager)."""
    state = _fresh(tmp_path, name)
    job = state.jobs[JOB]
    started = msgspec.structs.replace(job, spec=msgspec.structs.replace(job.spec, suspend=False))
    for e in (ev.ObjectUpserted(time=START, key=JOB, obj=started),
              ev.WorkerClusterAssigned(time=START, cycle=1, input=0, key=KEY, cluster="worker1")):
        state.apply(ev.Record(state.offset + 1, e))
    return state


@pytest.mark.asyncio
async def test_an_owner_copy_the_manager_deleted_is_not_the_readmitted_run_s_until_its_watch_shows_it_gone(
        tmp_path: Path) -> None:
    """The manager deletes the evicted workload's copies on worker1 (the Job's, then the Workload's). The Job
    watch lags: it still brings the old Job copy's last version (Failed) after the delete, while the Workload
    watch is ahead and the workload, admitted again, has its new Workload copy there. The old Job copy is not the
    new run's: its Failed status is not mirrored onto the manager's Job, and no Job copy is made over it until the
    watch shows it deleted; then the new one is made."""
    worker = LaggingWorker()
    mk = _connector(_evicted(tmp_path), {"worker1": worker})
    manager = RecordingManager(mk.state)
    mk.client = manager  # type: ignore[assignment]
    _appending(mk)
    w = mk.workers["worker1"]
    old_wl = _copy("old-wl", "40")
    w.workloads[KEY] = old_wl
    w.owners["Job"] = {JOB: _job("old-job", "39", active=1)}
    async with _watching(mk, w, "40"):
        await _pass(mk)
        assert worker.deleted == ["Job:default/a", "Workload:default/job-a"]
        failed = _job("old-job", "41", failed=1, conditions=[{"type": "Failed", "status": "True"}])
        await worker.deliver("Job", ("MODIFIED", failed))  # shown after the delete: the watch lags
        await worker.deliver("Workload", _gone(old_wl, "42"))

        mk.state = _running_on_worker1(tmp_path, "readmitted")
        w.workloads[KEY] = _copy("new-wl", "50")  # the new copy, admitted there (that watch is ahead)
        await _pass(mk)
        assert manager.patches == [], "the old run's status is not the new run's"
        assert worker.created == [], "no Job copy made over the one going away"

        await worker.deliver("Job", _gone(failed, "43"))
        await _pass(mk)
        assert worker.created == ["Job:default/a"]
        assert w.owners["Job"][JOB]["metadata"]["uid"] == "copy-1"


@pytest.mark.asyncio
@pytest.mark.parametrize(("version", "held"), [("45", True), ("35", False)])
async def test_an_owner_copy_deleted_before_its_watch_showed_it_is_held_only_if_the_watch_is_to_show_it(
        tmp_path: Path, version: str, held: bool) -> None:
    """The evicted workload's Workload copy names its Job copy (an owner reference), which the Job watch has not
    shown: the copy is read, deleted, and held if its version is past the watch's (the watch is to bring it, then
    its DELETED: a new copy waits for that); one whose version the watch passed without it is gone already, not
    held (a new copy is made at once)."""
    worker = LaggingWorker()
    mk = _connector(_evicted(tmp_path), {"worker1": worker})
    mk.client = RecordingManager(mk.state)  # type: ignore[assignment]
    _appending(mk)
    w = mk.workers["worker1"]
    old_wl = _copy("old-wl", "40", ownerReferences=[{"apiVersion": "batch/v1", "kind": "Job", "name": "a"}])
    w.workloads[KEY] = old_wl
    worker.jobs["a"] = _job("old-job", version, active=1)
    async with _watching(mk, w, "40"):
        await _pass(mk)
        assert worker.deleted == ["Job:default/a", "Workload:default/job-a"]
        await worker.deliver("Workload", _gone(old_wl, "46"))
        mk.state = _running_on_worker1(tmp_path, "readmitted")
        w.workloads[KEY] = _copy("new-wl", "50")
        await _pass(mk)
        assert worker.created == ([] if held else ["Job:default/a"])
        if held:
            await worker.deliver("Job", ("MODIFIED", worker.jobs["a"]), _gone(worker.jobs["a"], "47"))
            assert w.owners["Job"] == {}, "its last version shown, then its deletion"
            await _pass(mk)
            assert worker.created == ["Job:default/a"]


@pytest.mark.asyncio
async def test_a_listing_forgets_what_was_held_and_mirrored_of_the_copies_it_no_longer_holds(tmp_path: Path) -> None:
    """The watch, cut, lists again: of the copies the listing no longer holds (deleted meanwhile: the watch from
    after the listing will not show it), nothing stays held or remembered as mirrored."""
    worker = LaggingWorker()
    mk = _connector(_fresh(tmp_path, "s"), {"worker1": worker})
    w = mk.workers["worker1"]
    w.owners["Job"] = {JOB: _job("listed", "5")}
    w.deleted_owners["Job"] = {JOB: "listed", "default/b": "gone"}
    w.mirrored = {("Job", JOB): ("listed", "5"), ("Job", "default/b"): ("gone", "3"),
                  ("JobSet", "default/c"): ("other-kind", "1")}
    async with _watching(mk, w, "8"):
        assert w.deleted_owners["Job"] == {JOB: "listed"}
        assert w.mirrored == {("Job", JOB): ("listed", "5"), ("JobSet", "default/c"): ("other-kind", "1")}


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["Workload", "Job"])
async def test_a_late_deleted_of_an_old_copy_does_not_take_away_its_newer_namesake(tmp_path: Path, kind: str) -> None:
    """The manager holds a newer copy of that name (a create's answer, kept ahead of the watch); the watch, lagging,
    then shows the old copy deleted. That DELETED is about the old copy only: the newer one stays held (else the
    next pass takes it for gone: a Workload copy observed absent, an owner's copy made again and refused)."""
    worker = LaggingWorker()
    mk = _connector(_fresh(tmp_path, "s"), {"worker1": worker})
    w = mk.workers["worker1"]
    key, old, new = ((KEY, _copy("old", "50"), _copy("new", "60")) if kind == "Workload"
                     else (JOB, _job("old", "50"), _job("new", "60")))
    cache = w.workloads if kind == "Workload" else w.owners.setdefault("Job", {})
    async with _watching(mk, w, "40"):
        cache[key] = new
        await worker.deliver(kind, _gone(old, "55"))
    assert cache[key]["metadata"]["uid"] == "new"


@pytest.mark.asyncio
async def test_a_copy_held_deleted_is_not_deleted_nor_counted_again_but_a_finalizer_put_back_is_taken_off(
        tmp_path: Path) -> None:
    """The evicted workload's copies are deleted once; while the Workload copy is going away (its watch shows it
    terminating, then a finalizer put back on it) the passes that look at it delete neither copy again nor count
    them again: only the finalizer put back is taken off, so that it goes."""
    worker = LaggingWorker()
    mk = _connector(_evicted(tmp_path), {"worker1": worker})
    _appending(mk)
    w = mk.workers["worker1"]
    admitted = _copy("old", "40", finalizers=["kueue.x-k8s.io/resource-in-use"])
    w.workloads[KEY] = admitted
    w.owners["Job"] = {JOB: _job("old-job", "39", active=1)}
    async with _watching(mk, w, "40"):
        await _pass(mk)
        assert worker.patched == ["Workload:default/job-a"], "its finalizers taken off"
        dying = copy.deepcopy(admitted)
        dying["metadata"].update(resourceVersion="41", deletionTimestamp="2024-01-01T00:00:01Z", finalizers=None)
        await worker.deliver("Workload", ("MODIFIED", dying))
        await worker.deliver("Job", ("MODIFIED", _job("old-job", "42", active=0)))
        await _pass(mk)
        put_back = copy.deepcopy(dying)
        put_back["metadata"].update(resourceVersion="43", finalizers=["kueue.x-k8s.io/resource-in-use"])
        await worker.deliver("Workload", ("MODIFIED", put_back))
        await _pass(mk)
        assert worker.deleted == ["Job:default/a", "Workload:default/job-a"], "each deleted once"
        assert mk.stats.copies_deleted == 1
        assert worker.patched == ["Workload:default/job-a"] * 2, "the finalizer put back taken off again"

        await worker.deliver("Job", _gone(_job("old-job", "42"), "44"))
        await worker.deliver("Workload", _gone(put_back, "45"))
        await _pass(mk)
        assert (w.workloads, w.owners["Job"], w.deleted) == ({}, {}, {})
        assert mk.stats.copies_deleted == 1


@pytest.mark.asyncio
async def test_a_new_copy_of_the_same_version_has_its_status_mirrored_and_what_was_mirrored_goes_with_the_copy(
        tmp_path: Path) -> None:
    """What was mirrored to the manager's owner is remembered per copy, by uid and resourceVersion: another copy of
    that name at the same version (a worker whose apiserver was replaced: versions of another etcd) is mirrored
    all the same. The memo is forgotten with the copy, once its watch shows it deleted."""
    worker = LaggingWorker()
    mk = _connector(_running_on_worker1(tmp_path, "running"), {"worker1": worker})
    manager = RecordingManager(mk.state)
    mk.client = manager  # type: ignore[assignment]
    w = mk.workers["worker1"]
    adapter = ADAPTERS["batch/v1", "Job"]
    first, second = _job("first", "9", active=1), _job("second", "9", active=2)
    w.owners["Job"] = {JOB: first}
    async with _watching(mk, w, "8"):
        assert await mk._mirror_status(w, adapter, JOB, first)
        assert await mk._mirror_status(w, adapter, JOB, first)
        assert [p["status"]["active"] for p in manager.patches] == [1], "the same version written once"
        assert await mk._mirror_status(w, adapter, JOB, second)
        assert [p["status"]["active"] for p in manager.patches] == [1, 2]

        w.owners["Job"][JOB] = second
        await worker.deliver("Job", _gone(second, "10"))
    assert w.mirrored == {}
