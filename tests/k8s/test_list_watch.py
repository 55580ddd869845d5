"""The list-then-watch loop every informer of the connector runs (what it does after a watch ends, expires or
fails, told by the calls it makes), and the informer the integrations keep their own objects in."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import msgspec
import pytest

from connectors.k8s.client import ListMeta, RawList, WatchEvent
from connectors.k8s.errors import Gone, KubeError, NotFound, Unavailable
from connectors.k8s.list_watch import Informer, list_then_watch, retry_delay
from connectors.k8s.resources import Resource
from events import objects as o


class _Log:
    def __init__(self) -> None:
        self.warnings: list[tuple[str, float]] = []

    def warning(self, message: str, *, error: str, retry_in_s: float) -> None:
        self.warnings.append((message, retry_in_s))


class _Script:
    """A relist and a watch that do, call by call, what the test says, then stop the loop. A watch step is the
    resourceVersions it delivers, then (maybe) the error it ends with."""

    def __init__(self, lists: list[str | None | Exception], watches: list[list[str | Exception]]) -> None:
        self.lists, self.watches = lists, watches
        self.calls: list[str] = []

    async def relist(self) -> str | None:
        self.calls.append("list")
        return self._next(self.lists)

    async def watch(self, rv: str, delivered: Callable[[str], None]) -> None:
        self.calls.append(f"watch@{rv}")
        for step in self._next(self.watches):  # type: ignore[union-attr]
            if isinstance(step, Exception):
                raise step
            delivered(step)

    def _next(self, steps: list) -> str | None:
        if not steps:
            raise asyncio.CancelledError
        step = steps.pop(0)
        if isinstance(step, Exception):
            raise step
        return step


async def _run(script: _Script, log: _Log, gone: list[int], **kw: object) -> None:
    with pytest.raises(asyncio.CancelledError):
        await list_then_watch(script.relist, script.watch, log=log, what="things", backoff_s=0.001,
                              on_gone=lambda: gone.append(1), **kw)  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_a_watch_that_ends_resumes_where_it_stopped_and_one_that_expires_relists() -> None:
    script, log, gone = _Script(["10", "30"], [["20"], [Gone("expired")]]), _Log(), []
    await _run(script, log, gone)
    assert script.calls == ["list", "watch@10", "watch@20", "list", "watch@30"]
    assert gone == [1] and log.warnings == []


@pytest.mark.asyncio
async def test_a_failed_watch_is_retried_from_the_same_point_after_a_growing_delay() -> None:
    boom = KubeError("boom", 500)
    script, log, gone = _Script(["10"], [[boom], [boom], ["20"]]), _Log(), []
    await _run(script, log, gone)
    assert script.calls == ["list", "watch@10", "watch@10", "watch@10", "watch@20"]
    assert log.warnings == [("things watch failed, retrying", 0.001), ("things watch failed, retrying", 0.002)]
    assert gone == []


@pytest.mark.asyncio
async def test_a_kind_not_served_is_listed_again_and_a_resume_point_skips_the_first_list() -> None:
    script, log, gone = _Script([None, "10"], [["20"]]), _Log(), []
    await _run(script, log, gone, absent_retry_s=0)
    assert script.calls == ["list", "list", "watch@10", "watch@20"]
    resumed = _Script([], [["7"]])
    await _run(resumed, log, gone, resume_from="5")
    assert resumed.calls == ["watch@5", "watch@7"]


@pytest.mark.asyncio
async def test_a_watch_cut_mid_stream_resumes_from_the_last_event_it_delivered() -> None:
    """Not from where it started: the apiserver would replay 11 and 12, already handled (client-go's reflector
    resumes from its last synced resourceVersion the same way)."""
    cut = Unavailable("connection reset")
    script, log, gone = _Script(["10"], [["11", "12", cut], [], ["13", cut], ["14"]]), _Log(), []
    await _run(script, log, gone)
    assert script.calls == ["list", "watch@10", "watch@12", "watch@12", "watch@13", "watch@14"]
    assert gone == [] and len(log.warnings) == 2


def test_the_delay_doubles_and_is_capped_at_thirty_seconds() -> None:
    assert [retry_delay(1.0, n) for n in (1, 2, 3, 6, 7, 50)] == [1.0, 2.0, 4.0, 30.0, 30.0, 30.0]


@pytest.mark.asyncio
async def test_nothing_to_list_waits_on_the_callers_own_signal_when_given_one() -> None:
    script, log, gone, waited = _Script([None, None, "10"], []), _Log(), [], []

    async def absent() -> None:
        waited.append(len(script.calls))

    await _run(script, log, gone, absent=absent, absent_retry_s=3600)
    assert script.calls == ["list", "list", "list", "watch@10"] and waited == [1, 2]


# --- the informer -------------------------------------------------------------------------------------------------

class _Thing(msgspec.Struct, frozen=True):
    metadata: o.ObjectMeta

    @property
    def key(self) -> str:
        return f"{self.metadata.namespace}/{self.metadata.name}"


def _raw(name: str, uid: str, rv: str, **labels: str) -> msgspec.Raw:
    return msgspec.Raw(msgspec.json.encode({"metadata": {"name": name, "namespace": "ns", "uid": uid,
                                                         "resourceVersion": rv, "labels": labels}}))


class _Cluster:
    """A list and a watch of what the test says (NotFound for a list when ``served`` is False)."""

    def __init__(self, items: list[msgspec.Raw], events: list[tuple[str, msgspec.Raw]], served: bool = True) -> None:
        self.items, self.events, self.served = items, events, served

    async def list(self, resource: Resource, *, label_selector: str = "") -> RawList:
        if not self.served:
            raise NotFound("no such kind", 404)
        return RawList(metadata=ListMeta(resource_version="10"), items=self.items)

    async def watch(self, resource: Resource, rv: str, *, timeout_seconds: int, label_selector: str = ""):
        for kind, raw in self.events:
            yield WatchEvent(type=kind, object=raw)


def _informer(cluster: _Cluster, changes: list[set[str]], deleted: list[str], **kw: object) -> Informer[_Thing]:
    return Informer(cluster, Resource("Thing", "", "v1", "things", True), msgspec.json.Decoder(_Thing).decode,
                    changes.append, what="things", log=_Log(), on_deleted=lambda t: deleted.append(t.metadata.uid),
                    **kw)  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_the_informer_keeps_what_it_lists_and_watches_and_says_what_changed() -> None:
    a1, b1 = _raw("a", "u-a", "1"), _raw("b", "u-b", "2")
    cluster = _Cluster([a1, b1], [("MODIFIED", _raw("a", "u-a", "11", x="y")), ("MODIFIED", b1),
                                  ("DELETED", _raw("a", "u-old", "12")), ("DELETED", _raw("b", "u-b", "13")),
                                  ("ADDED", _raw("c", "u-c", "14"))])
    changes: list[set[str]] = []
    deleted: list[str] = []
    informer = _informer(cluster, changes, deleted)
    known = informer.known
    assert await informer.relist() == "10" and informer.synced.is_set()
    assert changes == [{"ns/a", "ns/b"}]
    delivered: list[str] = []
    await informer._watch("10", delivered.append)
    assert delivered == ["11", "2", "12", "13", "14"]
    assert changes[1:] == [{"ns/a"}, {"ns/a"}, {"ns/b"}, {"ns/c"}], "b's unchanged MODIFIED is no change"
    assert sorted(known) == ["ns/a", "ns/c"], "a deletion of another uid leaves the one known"
    assert known["ns/a"].metadata.labels == {"x": "y"} and deleted == ["u-old", "u-b"]
    assert informer.known is known, "one dict for the informer's life"
    cluster.items = [b1]
    await informer.relist()
    assert changes[-1] == {"ns/a", "ns/b", "ns/c"} and sorted(known) == ["ns/b"]


@pytest.mark.asyncio
async def test_an_optional_kind_not_served_lists_as_empty_and_a_required_one_fails() -> None:
    informer = _informer(_Cluster([], [], served=False), [], [], optional=True)
    assert await informer.relist() is None and informer.synced.is_set() and informer.known == {}
    with pytest.raises(NotFound):
        await _informer(_Cluster([], [], served=False), [], []).relist()


@pytest.mark.asyncio
async def test_a_relist_tells_of_each_object_deleted_while_no_watch_ran() -> None:
    """After a 410 Gone the watch that would have brought the deletions is lost: the relist is all that shows them,
    so the informer reports each known object it no longer lists (or lists under a new uid) as deleted."""
    cluster = _Cluster([_raw("a", "u-a", "1"), _raw("b", "u-b", "2"), _raw("c", "u-c", "3")], [])
    changes: list[set[str]] = []
    deleted: list[str] = []
    informer = _informer(cluster, changes, deleted)
    await informer.relist()
    assert deleted == []
    cluster.items = [_raw("a", "u-a", "1"), _raw("c", "u-c2", "4")]
    await informer.relist()
    assert sorted(deleted) == ["u-b", "u-c"], "b gone, c made anew under another uid"
    assert changes[-1] == {"ns/b", "ns/c"} and sorted(informer.known) == ["ns/a", "ns/c"]
