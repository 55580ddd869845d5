"""A worker whose watch is cut once opened (a connection reset, a read timeout, a 410 Gone) is reconnected, as Kueue
reconnects a remote client whose watch ended: its cluster stays Active, its nominations stay, and nothing is read,
written or deleted there until it is listed again; only a relist, or a watch, that fails reports it lost. A
connection that fails is tried again after Kueue's growing backoff, shown in the cluster's Active message."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import msgspec
import pytest
from fixtures.multikueue_states import MK_CONFIG
from test_multikueue_connector import (
    KEY,
    START,
    IdleWorker,
    SecretsManager,
    _appending,
    _close,
    _connector,
    _kubeconfig,
    _passes,
    _secret,
    _state,
)

from connectors.k8s import multikueue_connection, multikueue_kubeconfigs, multikueue_observe
from connectors.k8s.client import ListMeta, RawList
from connectors.k8s.errors import Forbidden, Gone, KubeError, Unavailable
from connectors.k8s.multikueue import MultiKueueConnector
from connectors.k8s.multikueue_worker import Worker
from events import schema as ev
from events.timefmt import format_time, parse_time
from kueue_es.scheduler import settle
from projections.admissionchecks import MultiKueueWorld, cluster_active

NOW = parse_time("2026-08-02T10:00:00Z")
"""The connector's wall clock, for the next connection attempt its messages show."""
ATTEMPT_1 = "; connection attempts: 1, next connection attempt: 2026-08-02T10:00:05Z"

COPY = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "job-a", "namespace": "default", "uid": "copy-1", "resourceVersion": "5",
                     "labels": {"kueue.x-k8s.io/multikueue-origin": "multikueue"}}}


class BlinkingWorker(IdleWorker):
    """A worker holding the copy of ``default/job-a``, whose first Workload watch ends on ``cut`` once opened, or
    before the worker answered it (``opens`` false); the relist that follows waits for ``relist`` to be set, then
    answers as the worker does or fails with ``relist_error``."""

    def __init__(self, cut: KubeError, relist_error: KubeError | None = None, opens: bool = True) -> None:
        super().__init__()
        self.cut: KubeError | None = cut
        self.opens = opens
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

    async def watch(self, resource: Any, rv: str, *, on_open: Any = None, **_: Any):
        if resource.kind == "Workload" and self.cut is not None:
            cut, self.cut = self.cut, None
            if self.opens and on_open is not None:
                on_open()
            raise cut
        if on_open is not None:
            on_open()
        await asyncio.Event().wait()
        yield  # pragma: no cover

    async def delete(self, resource: Any, name: str, namespace: str = "") -> bytes:
        self.deleted.append(f"{resource.kind}:{namespace}/{name}")
        return b"{}"


@pytest.fixture(autouse=True)
def _wall_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(multikueue_observe, "_now", lambda: NOW)
    monkeypatch.setattr(multikueue_connection, "_now", lambda: NOW)


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


async def _until_lost(state: Any, worker: BlinkingWorker, clock: Any = None) -> list[ev.AnyEvent]:
    """worker1 connected, watched (``clock`` the connector's, if given) until it is taken for lost, then a pass:
    what was appended. Not tried again meanwhile (the backoff's 5 s)."""
    mk = _connector(state, {"worker1": worker})
    if clock is not None:
        mk.clock = clock
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
    appended = await _until_lost(state, worker)
    assert [(e.key, e.reason, e.message) for e in _lost(appended)] == [
        ("worker1", "ClientConnectionFailed", f"workloads.kueue.x-k8s.io is forbidden{ATTEMPT_1}")]
    assert "worker1" not in state.workloads[KEY].nominated


@pytest.mark.asyncio
@pytest.mark.parametrize("refused", [Unavailable("watch workloads: 503 Service Unavailable"),
                                     Gone("too large resource version: 7, current: 6", 410)], ids=["503", "gone"])
async def test_a_watch_the_worker_will_not_open_reports_it_lost(tmp_path: Path, refused: KubeError) -> None:
    """A watch the worker does not open (it fails before the worker answered it) is a failed connection, not a
    cut: reported lost, and tried again after the backoff — a worker whose lists work and whose watches never open
    is not listed over and over unreported (review-2 M1)."""
    state = _state(tmp_path)
    worker = BlinkingWorker(refused, opens=False)
    worker.relist.set()
    appended = await _until_lost(state, worker)
    assert [(e.key, e.reason, e.message) for e in _lost(appended)] == [
        ("worker1", "ClientConnectionFailed", f"{refused}{ATTEMPT_1}")]
    assert worker.lists == 1, "not listed again before the backoff is over"
    assert "worker1" not in state.workloads[KEY].nominated


@pytest.mark.asyncio
async def test_a_watch_failing_long_after_the_list_without_opening_reports_the_worker_lost(tmp_path: Path) -> None:
    """What makes a failed connection is the watch the worker did not answer, not how soon it failed: one failing
    long after the list (a 429 or a 503 answered late, a connection reset before any answer) is a failed attempt,
    as Kueue counts a watch it could not establish — not a reconnect repeated forever, never reported."""
    state = _state(tmp_path)
    refused = Unavailable("watch workloads: 503 Service Unavailable")
    worker = BlinkingWorker(refused, opens=False)
    worker.relist.set()
    ticks = iter(range(0, 10**9, 10**4))
    appended = await _until_lost(state, worker, lambda: float(next(ticks)))  # long between the list and the failure
    assert [(e.key, e.reason, e.message) for e in _lost(appended)] == [
        ("worker1", "ClientConnectionFailed", f"{refused}{ATTEMPT_1}")]
    assert worker.lists == 1


class FlakyWorker(IdleWorker):
    """A worker that refuses its next ``refusals`` Workload watches (503, before answering them), and cuts the open
    Workload watch once ``cut`` is set; ``lists`` counts its Workload lists."""

    def __init__(self, refusals: int = 0) -> None:
        super().__init__()
        self.refusals = refusals
        self.cut = asyncio.Event()
        self.lists = 0

    async def list(self, resource: Any, **kw: Any) -> Any:
        self.lists += resource.kind == "Workload"
        return await super().list(resource, **kw)

    async def watch(self, resource: Any, rv: str, *, on_open: Any = None, **_: Any):
        if resource.kind == "Workload" and self.refusals:
            self.refusals -= 1
            raise Unavailable("watch workloads: 503 Service Unavailable")
        if on_open is not None:
            on_open()
        if resource.kind == "Workload":
            await self.cut.wait()
            self.cut.clear()
            raise Unavailable("watch workloads: connection reset by peer")
        await asyncio.Event().wait()
        yield  # pragma: no cover


class Backoff:
    """The connector's waits between connection attempts, recorded and not waited, with the worker's message at
    each; one past ``most`` waits for good."""

    def __init__(self, w: Any, most: int) -> None:
        self.w, self.most = w, most
        self.waits: list[float] = []
        self.messages: list[str] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.messages.append(self.w.message)
        if len(self.waits) > self.most:
            await asyncio.Event().wait()


def _backing_off(state: Any, worker: Any, *, most: int) -> tuple[MultiKueueConnector, Worker, Backoff, list[Any]]:
    """A connector to ``worker`` (as worker1), not connected yet, whose waits between attempts ``Backoff`` records
    (``most``: how many before it waits for good); and what it appends."""
    mk = _connector(state, {"worker1": worker})
    appended = _appending(mk)
    w = mk.workers["worker1"]
    w.connected = False
    mk.wait = backoff = Backoff(w, most=most)
    return mk, w, backoff, appended


async def _watching(mk: Any, w: Any, until: Any) -> None:
    """The worker watched, with passes, until ``until()``."""
    task = asyncio.create_task(mk._watch_worker(w, "multikueue"))
    try:
        await _until(until)
        await _pass(mk)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _next_attempt(n: int, after_s: int, error: str = "watch workloads: 503 Service Unavailable") -> str:
    return f"{error}; connection attempts: {n}, next connection attempt: {format_time(NOW + after_s * 1000)}"


@pytest.mark.asyncio
async def test_failed_connections_in_a_row_back_off_as_kueue_and_show_it_in_the_active_message(
        tmp_path: Path) -> None:
    """Kueue tries a worker again after 5 s doubling with each failed attempt in a row, at most 320 s (its
    ``retryAfter``), and its MultiKueueCluster's Active message (Kueue #13726) adds the attempts and the next
    one's time (RFC 3339, UTC) to the error."""
    state = _state(tmp_path)
    worker = FlakyWorker(refusals=100)
    mk, w, backoff, appended = _backing_off(state, worker, most=9)
    await _watching(mk, w, lambda: len(backoff.waits) > 9)
    expected = [5, 10, 20, 40, 80, 160, 320, 320, 320, 320]
    assert backoff.waits == expected
    assert backoff.messages == [_next_attempt(n, s) for n, s in enumerate(expected, 1)]
    assert worker.lists == 10, "listed once for each attempt, none between"
    world = MultiKueueWorld(state.multikueue_configs, state.multikueue_clusters, state.cluster_links)
    assert cluster_active("worker1", world) == ("False", "ClientConnectionFailed", _next_attempt(10, 320))
    assert [e.message for e in _lost(appended)] == [_next_attempt(10, 320)]


@pytest.mark.asyncio
async def test_a_connection_whose_watches_all_opened_starts_the_backoff_again(tmp_path: Path) -> None:
    """Kueue forgets a worker's failed attempts once all its watches are established: after three failures the
    worker connects (reported Active, no attempts left); its watch cut later is a reconnect, and the relist whose
    watch is refused then is the first failed attempt again, retried after 5 s."""
    state = _state(tmp_path)
    worker = FlakyWorker(refusals=3)
    mk, w, backoff, appended = _backing_off(state, worker, most=3)
    task = asyncio.create_task(mk._watch_worker(w, "multikueue"))
    try:
        await _until(lambda: w.connected)
        assert backoff.waits == [5, 10, 20]
        assert w.attempts == 0
        await _pass(mk)
        assert state.cluster_links["worker1"].connected and _lost(appended) == []
        worker.refusals = 1
        worker.cut.set()
        await _until(lambda: len(backoff.waits) == 4)
        await _pass(mk)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert backoff.waits == [5, 10, 20, 5]
    assert _lost(appended)[-1].message == _next_attempt(1, 5)


@pytest.mark.asyncio
async def test_a_worker_whose_watches_keep_opening_and_being_cut_is_never_reported_lost(tmp_path: Path) -> None:
    """Kueue counts a connection as made once its watches are established, whatever comes after: a watch that
    opened and was cut at once, again and again, is each time a reconnect (listed again at once, no backoff), its
    cluster kept Active — as Kueue's, whose every reconnect succeeds. (What a failed attempt is: a watch the worker
    did not open, above.)"""
    state = _state(tmp_path)
    worker = FlakyWorker()
    mk, w, backoff, appended = _backing_off(state, worker, most=0)
    task = asyncio.create_task(mk._watch_worker(w, "multikueue"))
    try:
        for _ in range(20):
            await _until(lambda: w.connected)
            await _pass(mk)
            worker.cut.set()
            await _until(lambda: not w.connected)
            await _pass(mk)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert worker.lists >= 20 and backoff.waits == []
    assert _lost(appended) == [] and w.attempts == 0
    assert "worker1" in state.workloads[KEY].nominated


@pytest.mark.asyncio
async def test_a_kubeconfig_no_client_comes_of_is_a_failed_attempt_tried_again_after_the_backoff(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kueue counts a client it could not build (a kubeconfig it took, whose client the library will not make: CA
    data that is no certificate) as a failed connection attempt: reported with the attempts and the next one's
    time, and built again after the backoff, as any attempt; once a client comes, the worker connects."""
    state = _state(tmp_path)
    refusals = [2]

    async def client_from(kubeconfig: bytes) -> Any:
        if refusals[0]:
            refusals[0] -= 1
            raise ValueError("unable to load root certificates")
        return IdleWorker()

    monkeypatch.setattr(multikueue_kubeconfigs, "client_from", client_from)
    mk = _connector(state, {})
    secrets = {"worker1-secret": _secret("worker1-secret", _kubeconfig("w1"))}
    mk.client = SecretsManager(state, secrets)  # type: ignore[assignment]
    appended = _appending(mk)
    waits: list[tuple[float, str]] = []

    async def wait(seconds: float) -> None:
        waits.append((seconds, mk.workers["worker1"].message))

    mk.wait = wait
    try:
        await _passes(mk, 3)
    finally:
        await _close(mk)
    error = "ValueError: unable to load root certificates"
    assert waits == [(5, _next_attempt(1, 5, error)), (10, _next_attempt(2, 10, error))]
    assert mk.workers["worker1"].connected and mk.workers["worker1"].attempts == 0
    assert state.cluster_links["worker1"].connected
    assert all(e.message.startswith(error + "; connection attempts: ") for e in _lost(appended) if e.key == "worker1")


class SilentWorker(IdleWorker):
    """A worker that answers its lists but never its Workload watch (a hung apiserver, a proxy holding the
    request): that watch waits for good, never opened. ``watching`` counts those asked for, ``stopped`` those
    stopped."""

    def __init__(self) -> None:
        super().__init__()
        self.watching = self.stopped = 0

    async def watch(self, resource: Any, rv: str, *, on_open: Any = None, **_: Any):
        if resource.kind != "Workload":
            if on_open is not None:
                on_open()
            await asyncio.Event().wait()
        self.watching += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.stopped += 1
            raise
        yield  # pragma: no cover


@pytest.mark.asyncio
async def test_a_watch_the_worker_never_answers_times_out_after_kueues_growing_establish_timeout(
        tmp_path: Path) -> None:
    """Kueue gives a worker's watches 1 minute to be established, doubling with each failed attempt in a row, at
    most 10 minutes (#11206), not the client's read timeout: a watch not answered by then is stopped and the
    attempt failed ("watch establishment timed out"), tried again after the reconnect backoff."""
    state = _state(tmp_path)
    worker = SilentWorker()
    mk, w, backoff, _ = _backing_off(state, worker, most=6)
    timeouts: list[float] = []

    async def establishing(seconds: float) -> None:  # each attempt's time to open its watches runs out at once
        timeouts.append(seconds)

    mk.establish_wait = establishing
    await _watching(mk, w, lambda: len(backoff.waits) > 6)
    assert timeouts == [60, 120, 240, 480, 600, 600, 600]
    expected = [5, 10, 20, 40, 80, 160, 320]
    assert backoff.waits == expected
    assert backoff.messages == [_next_attempt(n, s, "watch establishment timed out") for n, s in enumerate(expected, 1)]
    assert worker.stopped == worker.watching == 7, "each watch not answered stopped, none left behind"
    assert not w.connected and w.attempts == 7
