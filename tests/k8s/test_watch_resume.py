"""A watch cut mid-stream (a reset connection, a read timeout, a 5xx) is started again after the last event it
handled, as client-go's reflector resumes from its last synced resourceVersion — for the log's watcher and for
the integrations' informers. Resumed from where the cut watch *started*, the apiserver would replay what was
already handled, and the log would take objects back to older versions (``a@12, a@11, a@12``) and deleted ones back
to life. An event is past only once handled: one whose handling failed comes again."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any

import msgspec
import pytest
from fixtures.eventgen import meta, upsert

from connectors.k8s import succeeded_pods
from connectors.k8s.client import ListMeta, RawList, WatchEvent
from connectors.k8s.errors import Forbidden, Unavailable
from connectors.k8s.journal import LocalJournal
from connectors.k8s.list_watch import Informer
from connectors.k8s.mirror import Mirror
from connectors.k8s.resources import Resource
from connectors.k8s.watch import Watcher
from events import objects as o
from events import schema as ev
from events.log import MemoryLog
from tests.projections.test_proj_pods_scheduled import ON, Log, at

CUT = Unavailable("watch: connection reset by peer")


def _ns(name: str, rv: str, **labels: str) -> msgspec.Raw:
    return msgspec.Raw(msgspec.json.encode({"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": name, "uid": f"u-{name}", "resourceVersion": rv, "labels": labels}}))


class _Apiserver:
    """Lists ``items`` at resourceVersion 10; a watch from ``rv`` delivers the ``history`` events after ``rv`` (as
    the watch cache would), the first watch then cut, every later one then idle (:attr:`caught_up` set: all it
    delivered was handled) until cancelled. ``reads``: the answers of Pod reads, in turn (an exception is raised)."""

    def __init__(self, items: list[msgspec.Raw], history: list[tuple[str, msgspec.Raw]], reads: list[Any] = ()):
        self.items, self.history, self.reads = items, history, list(reads)
        self.watches: list[str] = []
        self.caught_up = asyncio.Event()

    async def list(self, resource: Resource, **_: Any) -> RawList:
        return RawList(metadata=ListMeta(resource_version="10"), items=self.items)

    async def watch(self, resource: Resource, rv: str, *, on_open: Any = None, **_: Any):
        self.watches.append(rv)
        if on_open is not None:
            on_open()
        for kind, raw in self.history:
            if int(msgspec.json.decode(raw)["metadata"]["resourceVersion"]) > int(rv):
                yield WatchEvent(type=kind, object=raw)
        if len(self.watches) == 1:
            raise CUT
        self.caught_up.set()
        await asyncio.Event().wait()

    async def get(self, resource: Resource, name: str, namespace: str = "", **_: Any) -> bytes:
        answer = self.reads.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


async def _until_caught_up(api: _Apiserver, run: Coroutine[Any, Any, None]) -> None:
    task = asyncio.create_task(run)
    try:
        async with asyncio.timeout(30):  # a guard only: the fake says when it has nothing more to deliver
            await api.caught_up.wait()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _written(journal: LocalJournal) -> list[str]:
    out = []
    async for batch in journal.log.read_batches(0):
        for r in batch:
            e = r.event
            if isinstance(e, ev.ObjectUpserted):
                phase = f" {e.obj.status.phase}" if isinstance(e.obj, o.Pod) else ""
                out.append(f"up {e.key}@{e.resource_version}{phase}")
            elif isinstance(e, ev.ObjectDeleted):
                out.append(f"del {e.key}")
    return out


# --- the log's watcher ----------------------------------------------------------------------------------------------

@pytest.mark.asyncio
async def test_a_cut_watch_resumes_after_its_last_event_and_the_log_never_goes_back() -> None:
    api = _Apiserver([_ns("a", "5"), _ns("b", "6")],
                     [("MODIFIED", _ns("a", "11", step="1")), ("MODIFIED", _ns("a", "12", step="2")),
                      ("DELETED", _ns("b", "13"))])
    journal = LocalJournal(MemoryLog(), Mirror())
    watcher = Watcher(api, journal.mirror, journal.append, kinds=["Namespace"], backoff_s=0.001)  # type: ignore[arg-type]
    await _until_caught_up(api, watcher.run())
    assert api.watches == ["10", "13"], "resumed from the last event delivered, not from the cut watch's start"
    assert await _written(journal) == ["up a@5", "up b@6", "up a@11", "up a@12", "del b"], "nothing replayed"
    assert watcher.resume_from == {"Namespace": "13"}


@pytest.mark.asyncio
async def test_a_bookmark_moves_the_resume_point() -> None:
    bookmark = msgspec.Raw(b'{"kind": "Namespace", "metadata": {"resourceVersion": "20"}}')
    api = _Apiserver([_ns("a", "5")], [("MODIFIED", _ns("a", "11", step="1")), ("BOOKMARK", bookmark)])
    journal = LocalJournal(MemoryLog(), Mirror())
    watcher = Watcher(api, journal.mirror, journal.append, kinds=["Namespace"], backoff_s=0.001)  # type: ignore[arg-type]
    await _until_caught_up(api, watcher.run())
    assert api.watches == ["10", "20"]
    assert await _written(journal) == ["up a@5", "up a@11"]


class _Mirrored(Log):
    """The pods-scheduled fixture's log folded into a connector's mirror (so the watcher knows what it holds)."""

    def __init__(self) -> None:
        self.mirror = Mirror()
        super().__init__(ON)

    def observe(self, *events: ev.AnyEvent) -> None:
        for e in events:
            self.mirror.apply(ev.Record(self.offset, e))
            self.offset += 1


def _pod(phase: str, rv: str) -> o.Pod:
    m = meta("p0", "ns", uid="u-p0", resource_version=rv, annotations={"kueue.x-k8s.io/workload": "w1"},
             labels={"kueue.x-k8s.io/podset": "main"})
    return o.Pod(metadata=m, spec=o.PodSpec(node_name="n1"),
                 status=o.PodStatus(phase=phase, conditions=[o.Condition(type="PodScheduled", status="True")]))


@pytest.mark.asyncio
async def test_an_event_whose_handling_failed_is_not_past_and_comes_again() -> None:
    """A Pod of a Workload waiting for its pods' scheduling leaves the watch (succeeded, deleted: alike); the read
    that tells which fails with the connection: the watch resumes before that event, and its second delivery,
    read then, keeps the Pod as succeeded."""
    fixture = _Mirrored()
    fixture.admit(at(1))
    running = _pod("Running", "5")
    fixture.observe(upsert(running, at(3)))
    mirror = fixture.mirror
    assert mirror.inventory["Pod"]["ns/p0"] == ("u-p0", "5")
    left = msgspec.json.encode(_pod("Succeeded", "11"))
    api = _Apiserver([msgspec.Raw(msgspec.json.encode(running))], [("DELETED", msgspec.Raw(left))],
                     reads=[Unavailable("read: connection reset by peer"), left])
    journal = LocalJournal(MemoryLog(), mirror)
    watcher = Watcher(api, mirror, journal.append, kinds=["Pod"], backoff_s=0.001)  # type: ignore[arg-type]
    await _until_caught_up(api, watcher.run())
    assert api.watches == ["10", "10"], "the failed event was not past"
    assert await _written(journal) == ["up ns/p0@11 Succeeded"]


@pytest.mark.asyncio
async def test_an_event_whose_handling_keeps_failing_does_not_hold_back_its_kind_for_ever() -> None:
    """The read a leaving Pod needs is forbidden every time: after ``READ_ATTEMPTS`` tries its leaving is a
    deletion, and the Pod events after it are handled."""
    fixture = _Mirrored()
    fixture.admit(at(1))
    running = _pod("Running", "5")
    fixture.observe(upsert(running, at(3)))
    left = msgspec.json.encode(_pod("Succeeded", "11"))
    later = msgspec.structs.replace(running, metadata=msgspec.structs.replace(
        running.metadata, name="p1", uid="u-p1", resource_version="12"))
    forbidden = Forbidden('pods "p0" is forbidden', 403, "Forbidden")
    api = _Apiserver([msgspec.Raw(msgspec.json.encode(running))],
                     [("DELETED", msgspec.Raw(left)), ("ADDED", msgspec.Raw(msgspec.json.encode(later)))],
                     reads=[forbidden] * succeeded_pods.READ_ATTEMPTS)
    journal = LocalJournal(MemoryLog(), fixture.mirror)
    watcher = Watcher(api, fixture.mirror, journal.append, kinds=["Pod"], backoff_s=0.001)  # type: ignore[arg-type]
    await _until_caught_up(api, watcher.run())
    assert api.watches == ["10"] * succeeded_pods.READ_ATTEMPTS
    assert await _written(journal) == ["del ns/p0", "up ns/p1@12 Running"]


# --- the integrations' informer --------------------------------------------------------------------------------------

class _Thing(msgspec.Struct, frozen=True):
    metadata: o.ObjectMeta

    @property
    def key(self) -> str:
        return self.metadata.name


class _Log:
    def warning(self, message: str, **_: Any) -> None:
        pass


@pytest.mark.asyncio
async def test_an_informers_cut_watch_resumes_after_its_last_event() -> None:
    api = _Apiserver([_ns("a", "5"), _ns("b", "6")],
                     [("MODIFIED", _ns("a", "11", step="1")), ("MODIFIED", _ns("a", "12", step="2")),
                      ("DELETED", _ns("b", "13"))])
    changes: list[set[str]] = []
    deleted: list[str] = []
    informer = Informer(api, Resource("Namespace", "", "v1", "namespaces", False),  # type: ignore[arg-type]
                        msgspec.json.Decoder(_Thing).decode, changes.append, what="things", log=_Log(),
                        backoff_s=0.001, on_deleted=lambda t: deleted.append(t.metadata.uid))
    await _until_caught_up(api, informer.run())
    assert api.watches == ["10", "13"]
    assert changes == [{"a", "b"}, {"a"}, {"a"}, {"b"}], "a taken back to 11 and b's deletion told twice: a replay"
    assert deleted == ["u-b"] and informer.known["a"].metadata.resource_version == "12"

