"""The watcher against the real apiserver: every change exactly once, across watch expiry (410) and restarts.

* changes made while the watcher runs arrive as one event each, in order;
* changes made while it is down, followed by an apiserver restart (its watch cache restarts, so resuming from the
  old resourceVersion is 410 Gone), arrive through the relist as exactly the differences — deletions included,
  nothing for the objects that did not change;
* a restarted process (a mirror folded again from the log) relists without emitting anything;
* a watch cut by an apiserver restart while running loses nothing and duplicates nothing;
* a watch cut mid-stream (the connection reset) resumes after its last event: the apiserver replays nothing, no
  object goes back to an older version in the log;
* an object that the projections could not fold is skipped and reported; the watcher keeps going.
"""

from __future__ import annotations

import asyncio
import contextlib

import msgspec
import pytest
from kubehelp import KUEUE, cluster_queue, connect, create, eventually, job, namespace

from connectors.k8s import crds
from connectors.k8s.errors import Unavailable
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.resources import BY_KIND
from connectors.k8s.watch import Watcher
from events import schema as ev
from events.log import MemoryLog

pytestmark = pytest.mark.kube
JOBS = BY_KIND["Job"]


async def _records(log: MemoryLog) -> list[ev.Record]:
    return [r async for r in log.read()]


def _changes(records: list[ev.Record], ns: str) -> list[tuple[str, str, str]]:
    """(type, name, resourceVersion) of the Job events of namespace ``ns``."""
    out = []
    for r in records:
        e = r.event
        if isinstance(e, ev.ObjectUpserted | ev.ObjectDeleted) and e.key.startswith(f"{ns}/"):
            out.append((type(e).__name__, e.key.split("/", 1)[1], e.resource_version))
    return out


@contextlib.asynccontextmanager
async def _running(watcher: Watcher, resume: dict[str, str] | None = None):
    task = asyncio.create_task(watcher.run(resume=resume))
    try:
        await asyncio.wait_for(watcher.wait_synced(), 30)
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _watcher(kc, journal: LocalJournal, kinds=("Job",)) -> Watcher:
    return Watcher(kc, journal.mirror, journal.append, kinds=kinds, timeout_seconds=30, backoff_s=0.2)


@pytest.mark.asyncio
async def test_relist_after_410_emits_exactly_the_differences(kube_apiserver) -> None:
    async with await connect(kube_apiserver) as kc:
        ns = await namespace(kc, "watch")
        log = MemoryLog()
        journal = LocalJournal(log, Mirror())
        for name in ("a", "b", "d"):
            await create(kc, job(ns, name, "q"))

        watcher = _watcher(kc, journal)
        async with _running(watcher):
            first = _changes(await _records(log), ns)
            assert sorted(c[:2] for c in first) == [("ObjectUpserted", "a"), ("ObjectUpserted", "b"),
                                                   ("ObjectUpserted", "d")]
            await kc.patch(JOBS, "a", {"metadata": {"labels": {"x": "1"}}}, ns)
            await eventually(lambda: _count(log, ns, 4), what="the patch of a")
        resume = dict(watcher.resume_from)
        assert resume["Job"]

        # While nobody watches: change a, delete b, create c; d stays as it was.
        await kc.patch(JOBS, "a", {"metadata": {"labels": {"x": "2"}}}, ns)
        await kc.delete(JOBS, "b", ns)
        c = await create(kc, job(ns, "c", "q"))
        await kube_apiserver.arestart_apiserver()  # the old resourceVersion is now 410 Gone

        before = len(await _records(log))
        watcher2 = _watcher(kc, journal)
        async with _running(watcher2, resume=resume):
            await eventually(lambda: _count(log, ns, 7), what="the relist's changes")
            assert watcher2.stats.relists == {"Job": 1}, "resuming from the old resourceVersion must be 410"
            new = _changes((await _records(log))[before:], ns)
            assert sorted(x[:2] for x in new) == [("ObjectDeleted", "b"), ("ObjectUpserted", "a"),
                                                 ("ObjectUpserted", "c")]
            assert ("ObjectUpserted", "c", c["metadata"]["resourceVersion"]) in new
            # a change after the relist arrives once
            await kc.patch(JOBS, "d", {"metadata": {"labels": {"x": "1"}}}, ns)
            await eventually(lambda: _count(log, ns, 8), what="the patch of d")
            await asyncio.sleep(0.5)
            assert len(_changes(await _records(log), ns)) == 8

        # A restarted process: the mirror is folded again from the log; its relist emits nothing.
        mirror = Mirror()
        for r in await _records(log):
            mirror.apply(r)
        journal3 = LocalJournal(log, mirror)
        before = len(await _records(log))
        async with _running(_watcher(kc, journal3)):
            await asyncio.sleep(0.3)
            assert _changes((await _records(log))[before:], ns) == []


def _count_sync(records: list[ev.Record], ns: str) -> int:
    return len(_changes(records, ns))


async def _count(log: MemoryLog, ns: str, n: int) -> bool:
    got = _count_sync(await _records(log), ns)
    assert got <= n, f"more events than changes: {got} > {n}"
    return got == n


@pytest.mark.asyncio
async def test_watch_cut_by_an_apiserver_restart_loses_and_duplicates_nothing(kube_apiserver) -> None:
    async with await connect(kube_apiserver) as kc:
        ns = await namespace(kc, "cut")
        log = MemoryLog()
        journal = LocalJournal(log, Mirror())
        watcher = _watcher(kc, journal)
        async with _running(watcher):
            for i in range(3):
                await create(kc, job(ns, f"j{i}", "q"))
            await eventually(lambda: _count(log, ns, 3), what="3 jobs")
            await kube_apiserver.arestart_apiserver()
            await kc.patch(JOBS, "j0", {"metadata": {"labels": {"x": "1"}}}, ns)
            await kc.delete(JOBS, "j1", ns)
            await create(kc, job(ns, "j3", "q"))
            await eventually(lambda: _count(log, ns, 6), timeout=60, what="3 changes after the restart")
            await asyncio.sleep(0.5)
            assert await _count(log, ns, 6)
        changes = _changes(await _records(log), ns)
        assert [c[:2] for c in changes[3:]] == [("ObjectUpserted", "j0"), ("ObjectDeleted", "j1"),
                                                ("ObjectUpserted", "j3")]
        # the mirror agrees with the cluster
        inv = journal.mirror.inventory["Job"]
        assert sorted(k.split("/")[1] for k in inv if k.startswith(f"{ns}/")) == ["j0", "j2", "j3"]


def _namespace_of(raw) -> str:
    return msgspec.json.decode(raw).get("metadata", {}).get("namespace", "")


class _CutOnce:
    """The real client, but its first watch of Jobs is cut (as by a reset connection) once the watcher has handled
    ``after`` events of namespace ``ns``."""

    def __init__(self, kc, ns: str, after: int) -> None:
        self.kc, self.ns, self.after = kc, ns, after
        self.cut = False

    def __getattr__(self, name: str):
        return getattr(self.kc, name)

    async def watch(self, resource, rv, **kw):
        stream = self.kc.watch(resource, rv, **kw)
        async with contextlib.aclosing(stream):
            seen = 0
            async for e in stream:
                yield e  # returns once the watcher has handled e and asks for the next
                if not self.cut and resource is JOBS and _namespace_of(e.object) == self.ns:
                    seen += 1
                    if seen == self.after:
                        self.cut = True
                        raise Unavailable("watch: connection reset by peer")


@pytest.mark.asyncio
async def test_a_watch_cut_mid_stream_resumes_after_its_last_event(kube_apiserver) -> None:
    async with await connect(kube_apiserver) as kc:
        ns = await namespace(kc, "resume")
        log = MemoryLog()
        journal = LocalJournal(log, Mirror())
        cutter = _CutOnce(kc, ns, after=3)
        async with _running(_watcher(cutter, journal)):
            await create(kc, job(ns, "a", "q"))
            await kc.patch(JOBS, "a", {"metadata": {"labels": {"x": "1"}}}, ns)
            await kc.patch(JOBS, "a", {"metadata": {"labels": {"x": "2"}}}, ns)
            await eventually(lambda: cutter.cut, what="the watch cut after a's three versions")
            await create(kc, job(ns, "b", "q"))
            await eventually(lambda: _count(log, ns, 4), what="b after the cut")
        changes = _changes(await _records(log), ns)
        assert [c[:2] for c in changes] == [("ObjectUpserted", "a")] * 3 + [("ObjectUpserted", "b")], changes
        versions = [int(c[2]) for c in changes]
        assert versions == sorted(versions), f"a went back to an older version: {changes}"


@pytest.mark.asyncio
async def test_objects_the_projections_cannot_fold_are_skipped(kube_apiserver) -> None:
    async with await connect(kube_apiserver) as kc:
        await crds.install(kc)
        ns = await namespace(kc, "bad")
        log = MemoryLog()
        journal = LocalJournal(log, Mirror())
        watcher = _watcher(kc, journal, kinds=("Workload", "ClusterQueue"))
        async with _running(watcher):
            def wl(name: str, cpu: str) -> dict:
                return {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": name, "namespace": ns},
                        "spec": {"queueName": "q", "podSets": [{"count": 1, "template": {"spec": {
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}}]}}

            await create(kc, wl("bad", "lots"))
            await create(kc, wl("good", "1"))
            await eventually(lambda: _count(log, ns, 1), what="the good workload")
            assert "Workload " + f"{ns}/bad" in watcher.stats.skipped
            assert "lots" in watcher.stats.skipped["Workload " + f"{ns}/bad"]
            # ... and the watcher is still alive
            await create(kc, wl("good2", "2"))
            await eventually(lambda: _count(log, ns, 2), what="the second good workload")
            # a ClusterQueue listing a flavor twice is refused as Kueue's webhook would
            import secrets

            name = f"dup-{secrets.token_hex(3)}"
            doc = cluster_queue(name, {"f": {"cpu": 1}})
            doc["spec"]["resourceGroups"].append(dict(doc["spec"]["resourceGroups"][0]))
            await create(kc, doc)
            await eventually(lambda: (f"ClusterQueue {name}" in watcher.stats.skipped) or None,
                             what="the duplicate-flavor ClusterQueue to be skipped")
            assert name not in journal.mirror.state.cluster_queues
