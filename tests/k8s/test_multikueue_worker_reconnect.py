"""A worker whose watch is cut (a connection reset, a read timeout, a 410 Gone) is reconnected, as Kueue reconnects
a remote client whose watch ended: its cluster stays Active, its nominations stay, and nothing is read, written or
deleted there until it is listed again; only a relist that fails reports it lost."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import msgspec
import pytest
from fixtures.multikueue_states import MK_CONFIG
from test_multikueue_connector import KEY, START, IdleWorker, _appending, _connector, _state

from connectors.k8s.client import ListMeta, RawList
from connectors.k8s.errors import Forbidden, Gone, KubeError, Unavailable
from events import schema as ev
from kueue_es.scheduler import settle

COPY = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "job-a", "namespace": "default", "uid": "copy-1", "resourceVersion": "5",
                     "labels": {"kueue.x-k8s.io/multikueue-origin": "multikueue"}}}


class BlinkingWorker(IdleWorker):
    """A worker holding the copy of ``default/job-a``, whose first Workload watch ends on ``cut``; the relist that
    follows waits for ``relist`` to be set, then answers as the worker does or fails with ``relist_error``."""

    def __init__(self, cut: KubeError, relist_error: KubeError | None = None) -> None:
        super().__init__()
        self.cut: KubeError | None = cut
        self.relist_error = relist_error
        self.relist = asyncio.Event()
        self.lists = 0
        self.relisting = asyncio.Event()
        self.deleted: list[str] = []

    async def list(self, resource: Any, **_: Any) -> Any:
        if resource.kind != "Workload":
            return RawList()
        self.lists += 1
        if self.lists > 1:
            self.relisting.set()
            await self.relist.wait()
            if self.relist_error is not None:
                raise self.relist_error
        return RawList(metadata=ListMeta(resource_version="7"), items=[msgspec.Raw(msgspec.json.encode(COPY))])

    async def watch(self, resource: Any, rv: str, **_: Any):
        if resource.kind == "Workload" and self.cut is not None:
            cut, self.cut = self.cut, None
            raise cut
        await asyncio.Event().wait()
        yield  # pragma: no cover

    async def delete(self, resource: Any, name: str, namespace: str = "") -> bytes:
        self.deleted.append(f"{resource.kind}:{namespace}/{name}")
        return b"{}"


async def _until(condition: Any) -> None:
    for _ in range(10_000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("never came")


async def _pass(mk: Any) -> None:
    """A pass's observations, the scheduler's decisions on them, then its copies."""
    keys = mk._pass_keys()
    await mk._observe(keys)
    settle(mk.state, MK_CONFIG, now=START + 1000)
    await mk.sync_copies("multikueue", keys)


def _lost(appended: list[ev.AnyEvent]) -> list[ev.MultiKueueClusterObserved]:
    return [e for e in appended if isinstance(e, ev.MultiKueueClusterObserved) and not e.connected]


@pytest.mark.asyncio
@pytest.mark.parametrize("cut", [Unavailable("watch workloads: connection reset"),
                                 Gone("too old resource version: 5 (7)", 410)], ids=["reset", "gone"])
async def test_a_cut_watch_keeps_the_worker_its_nominations_and_its_copy(tmp_path: Path, cut: KubeError) -> None:
    state = _state(tmp_path)
    assert state.workloads[KEY].nominated == ("worker1", "worker2")
    worker = BlinkingWorker(cut)
    mk = _connector(state, {"worker1": worker})
    mk.retry_s = 0.001
    ticks = iter(range(0, 10**9, 10**4))
    mk.clock = lambda: float(next(ticks))  # the cut long after the connection: a reconnect
    appended = _appending(mk)
    w = mk.workers["worker1"]
    w.connected = False
    task = asyncio.create_task(mk._watch_worker(w, "multikueue"))
    try:
        await _until(worker.relisting.is_set)  # cut, and being listed again
        assert not w.connected
        await _pass(mk)
        assert _lost(appended) == [], "a cut watch is a reconnect, not a lost worker"
        assert state.workloads[KEY].nominated == ("worker1", "worker2")
        assert worker.deleted == [] and worker.created == [], "nothing done there while it reconnects"
        worker.relist.set()
        await _until(lambda: w.connected)
        await _pass(mk)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert _lost(appended) == []
    assert state.workloads[KEY].nominated == ("worker1", "worker2")
    assert worker.deleted == [] and worker.created == [], "its copy kept: never deleted and made again"
    assert w.workloads[KEY]["metadata"]["uid"] == "copy-1"


async def _until_lost(state: Any, worker: BlinkingWorker, clock: Any) -> list[ev.AnyEvent]:
    """worker1 connected, watched (``clock`` the connector's) until it is taken for lost, then a pass: what was
    appended. Not tried again meanwhile (``retry_s`` an hour)."""
    mk = _connector(state, {"worker1": worker})
    mk.retry_s, mk.clock = 3600.0, clock
    appended = _appending(mk)
    w = mk.workers["worker1"]
    w.connected = False
    task = asyncio.create_task(mk._watch_worker(w, "multikueue"))
    try:
        await _until(lambda: w.reason == "ClientConnectionFailed")
        await _pass(mk)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return appended


@pytest.mark.asyncio
async def test_a_cut_watch_whose_relist_fails_reports_the_worker_lost(tmp_path: Path) -> None:
    """The reconnect failing is what Kueue reports on the cluster (Active False, ClientConnectionFailed, the
    error): the worker leaves the nominations then."""
    state = _state(tmp_path)
    worker = BlinkingWorker(Unavailable("watch workloads: connection reset"),
                            relist_error=Forbidden('workloads.kueue.x-k8s.io is forbidden', 403))
    worker.relist.set()
    ticks = iter(range(0, 10**9, 10**4))
    appended = await _until_lost(state, worker, lambda: float(next(ticks)))  # the cut long after the connection
    assert [(e.key, e.reason, e.message) for e in _lost(appended)] == [
        ("worker1", "ClientConnectionFailed", "workloads.kueue.x-k8s.io is forbidden")]
    assert "worker1" not in state.workloads[KEY].nominated


@pytest.mark.asyncio
@pytest.mark.parametrize("refused", [Unavailable("watch workloads: 503 Service Unavailable"),
                                     Gone("too large resource version: 7, current: 6", 410)], ids=["503", "gone"])
async def test_a_watch_the_worker_will_not_open_reports_it_lost(tmp_path: Path, refused: KubeError) -> None:
    """A watch that fails as soon as the worker is listed (within ``retry_s``) is a failed connection, not a cut:
    reported lost as before, and tried again after ``retry_s`` — a worker whose lists work and whose watches never
    open is not listed over and over unreported (review-2 M1)."""
    state = _state(tmp_path)
    worker = BlinkingWorker(refused)
    worker.relist.set()
    appended = await _until_lost(state, worker, lambda: 0.0)  # no time between the list and the failure
    assert [(e.key, e.reason, e.message) for e in _lost(appended)] == [("worker1", "ClientConnectionFailed", str(refused))]
    assert worker.lists == 1, "not listed again before retry_s"
    assert "worker1" not in state.workloads[KEY].nominated
