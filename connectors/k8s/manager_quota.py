"""MultiKueueManagerQuotaAutomation on a manager: the I/O of Kueue's MultiKueue ClusterQueue controller.

What is decided is decided by :mod:`projections.manager_quota` from the log; this module observes and applies:

* **observe.** Each worker some MultiKueueConfig asking for ``quotaManagement: Automated`` lists has, once the
  MultiKueue connector reached it (its client: :attr:`connectors.k8s.multikueue.MultiKueueConnector.workers`), its
  LocalQueues and ClusterQueues listed, then watched from the list's resourceVersion (an informer per kind,
  :class:`connectors.k8s.list_watch.Informer`: a watch the server ends is resumed where it stopped, one that fell
  behind, 410 Gone, is listed again, any other failure backed off), as Kueue keeps the worker's queues in its
  remote client's cache. What they are (which ClusterQueue each LocalQueue feeds, each ClusterQueue's
  ``spec.resourceGroups``) is appended as ``WorkerQueuesObserved`` whenever a change makes it differ from what the
  log holds. A ClusterQueue whose groups do not parse (a quantity the worker's apiserver would have refused) is
  left out. A worker is watched through the client it was reached with: a new client (another kubeconfig) is
  watched afresh; one no Automated config lists any more, or gone, is no longer watched; no worker is while the gate
  or MultiKueue is off.
* **apply.** A manager ClusterQueue whose quota is automated gets its single flavor's resources written into its
  ``spec.resourceGroups`` (a JSON merge patch conditioned on its uid and resourceVersion, as Kueue's ``Update``),
  when they differ from its spec in the log; the watch brings the ClusterQueue back, and the scheduler takes the
  quota from there. A conflict is tried again on the next pass, on the version the log then holds. The condition
  is written with the ClusterQueue's status (:class:`connectors.k8s.queues.QueueStatusWriter`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import msgspec
import structlog

from connectors.k8s.errors import Conflict, KubeError, NotFound
from connectors.k8s.follow_one import stopped
from connectors.k8s.list_watch import Informer
from connectors.k8s.multikueue import MultiKueueConnector
from connectors.k8s.resources import BY_KIND
from events import objects as o
from events import schema as ev
from events.quantity import QuantityError, to_int
from projections import manager_quota

log = structlog.get_logger("kueue_es.k8s.manager_quota")


class Queue(msgspec.Struct, forbid_unknown_fields=False):
    """A worker's LocalQueue or ClusterQueue, as far as the automation reads it."""

    metadata: o.ObjectMeta
    spec: dict[str, Any] = {}

    @property
    def key(self) -> str:
        m = self.metadata
        return f"{m.namespace}/{m.name}" if m.namespace else m.name


def decode_queue(raw: msgspec.Raw | bytes) -> Queue | None:
    """A queue as listed or watched; None (skipped) for one that does not decode."""
    try:
        return msgspec.json.decode(raw, type=Queue)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def local_queues(items: Iterable[Queue]) -> dict[str, str]:
    """``namespace/name`` -> ClusterQueue, of a worker's LocalQueues, by key."""
    return {lq.key: str(lq.spec.get("clusterQueue") or "") for lq in sorted(items, key=lambda q: q.key)}


def cluster_queues(items: Iterable[Queue]) -> dict[str, list[o.ResourceGroup]]:
    """ClusterQueue -> its ``spec.resourceGroups``, of a worker's ClusterQueues, by name (one whose groups do not
    parse left out)."""
    out: dict[str, list[o.ResourceGroup]] = {}
    for cq in sorted(items, key=lambda q: q.key):
        try:
            groups = msgspec.convert(cq.spec.get("resourceGroups") or [], list[o.ResourceGroup], strict=False)
            for rq in (rq for rg in groups for fq in rg.flavors for rq in fq.resources):
                to_int(rq.name, rq.nominal_quota)
        except (msgspec.ValidationError, QuantityError):
            log.info("worker ClusterQueue's quotas do not parse, left out", cluster_queue=cq.metadata.name)
            continue
        out[cq.metadata.name] = groups
    return out


def automated_workers(state: Any) -> list[str]:
    """The workers listed by a MultiKueueConfig asking for ``quotaManagement: Automated``, sorted."""
    return sorted({c for cfg in state.multikueue_configs.values()
                   if cfg.spec.quota_management == manager_quota.AUTOMATED for c in cfg.spec.clusters})


class _Counted(Informer[Queue]):
    """An informer that reports each list it makes (``listed``) and that it is synced (``moved``, as a change)."""

    def __init__(self, listed: Callable[[], None], *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.listed = listed

    async def relist(self) -> str | None:
        self.listed()
        rv = await super().relist()
        self.on_change(set())
        return rv


@dataclass
class WatchedWorker:
    """One worker's LocalQueues and ClusterQueues, listed and watched through the client it was reached with."""

    client: Any
    local: Informer[Queue]
    cluster: Informer[Queue]
    task: asyncio.Task | None = None
    moved: bool = True
    """Something changed there since its queues were last compared with the log."""

    @property
    def synced(self) -> bool:
        return self.local.synced.is_set() and self.cluster.synced.is_set()

    async def run(self) -> None:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.local.run())
            tg.create_task(self.cluster.run())


class ManagerQuotaConnector:
    def __init__(self, multikueue: MultiKueueConnector, *, period_s: float = 1.0, backoff_s: float = 1.0) -> None:
        """The manager's client, the journal and the appender are the MultiKueue connector's, whose workers'
        clients this reads through. ``period_s``: how often, at least, the workers to watch are looked at (a
        worker reached anew may not move the log); nothing is listed for it."""
        self.multikueue = multikueue
        self.period_s = period_s
        self.backoff_s = backoff_s
        self.writes = 0
        self.lists = 0
        """List requests made to the workers (each kind of each worker once, then again only after a 410 Gone or
        a failure): what shows that the workers' changes come by their watches."""
        self.watched: dict[str, WatchedWorker] = {}
        """Worker -> its queues' informers."""
        self._wake: Any = None
        self._written: dict[str, tuple[str, str]] = {}
        """ClusterQueue -> (uid, resourceVersion) it had when its quota was last written: not written again until
        the log shows another version of it."""

    async def run(self) -> None:
        self._wake = self.multikueue.journal.subscribe()
        try:
            while True:
                try:
                    await self.sync()
                except KubeError as exc:
                    log.warning("quota automation pass failed, will retry", error=str(exc))
                await self._wake.wait(self.period_s)
        finally:
            await self.close()

    async def sync(self) -> None:
        """One pass: the workers' watches started or stopped, what they show appended when it changed, the quotas
        written. Nothing while the gate or MultiKueue is off."""
        if not manager_quota.enabled(self.multikueue.state):
            await self.close()
            return
        await self.follow_workers()
        await self.observe()
        await self.apply()

    async def follow_workers(self) -> None:
        """Watch the queues of each worker an Automated config lists, once reached, through its client; stop
        watching one no longer listed, gone, or reached through another client."""
        wanted: dict[str, Any] = {}
        for name in automated_workers(self.multikueue.state):
            w = self.multikueue.workers.get(name)
            if w is not None and w.client is not None and (w.connected or name in self.watched):
                wanted[name] = w.client
        for name in sorted(self.watched):
            watched = self.watched[name]
            if watched.client is not wanted.get(name) or (watched.task is not None and watched.task.done()):
                await self._unwatch(name)
        for name in sorted(wanted.keys() - self.watched.keys()):
            self.watched[name] = watched = self._watcher(name, wanted[name])
            watched.task = asyncio.create_task(watched.run(), name=f"mk-quota-{name}")

    def _watcher(self, name: str, client: Any) -> WatchedWorker:
        def counted() -> None:
            self.lists += 1

        def changed(_: set[str]) -> None:
            watched = self.watched.get(name)
            if watched is not None and watched.client is client:
                watched.moved = True
                if self._wake is not None:
                    self._wake.set()

        local, cluster = (
            _Counted(counted, client, BY_KIND[kind], decode_queue, changed, what=f"worker {name} {kind}s",
                     log=log.bind(worker=name), watch_timeout_s=self.multikueue.watch_timeout_s,
                     backoff_s=self.backoff_s)
            for kind in ("LocalQueue", "ClusterQueue"))
        return WatchedWorker(client, local, cluster)

    async def _unwatch(self, name: str) -> None:
        watched = self.watched.pop(name)
        if watched.task is not None:
            if watched.task.done() and not watched.task.cancelled() and watched.task.exception() is not None:
                log.warning("worker queues' watch ended, watching again", worker=name,
                            error=str(watched.task.exception()))
            await stopped(watched.task)

    async def close(self) -> None:
        """Stop every worker's watches."""
        for name in sorted(self.watched):
            await self._unwatch(name)

    async def observe(self) -> None:
        """Append what changed of the queues of each worker reached that an Automated config lists, once its
        watches listed them."""
        events: list[ev.AnyEvent] = []
        state = self.multikueue.state
        for name in automated_workers(state):
            w = self.multikueue.workers.get(name)
            watched = self.watched.get(name)
            if w is None or not w.connected or watched is None or not watched.moved or not watched.synced:
                continue  # a worker not reached counts for nothing (the pure side reads its link)
            watched.moved = False
            lqs = local_queues(watched.local.known.values())
            cqs = cluster_queues(watched.cluster.known.values())
            known = state.worker_queues.get(name)
            if known is None or known.local_queues != lqs or known.cluster_queues != cqs:
                events.append(ev.WorkerQueuesObserved(time=int(time.time() * 1000), key=name, local_queues=lqs,
                                                      cluster_queues=cqs))
        if events:
            await self.multikueue.append(events)

    async def apply(self) -> None:
        """Write the automated quotas into the spec of each manager ClusterQueue that does not have them yet."""
        state = self.multikueue.state
        world = manager_quota.world_of(state)
        for name in sorted(state.cluster_queues):
            cq = state.cluster_queues[name]
            m = cq.metadata
            if m.deletion_timestamp or self._written.get(name) == (m.uid, m.resource_version):
                continue
            spec = manager_quota.automated_spec(cq, manager_quota.outcome(cq, world))
            if spec is None:
                continue
            body = {"metadata": {"uid": m.uid, "resourceVersion": m.resource_version},
                    "spec": {"resourceGroups": msgspec.to_builtins(spec.resource_groups)}}
            try:
                await self.multikueue.client.patch(BY_KIND["ClusterQueue"], name, body)
            except (Conflict, NotFound):
                continue  # the watch brings the newer version (or the deletion); the next pass looks again
            self._written[name] = (m.uid, m.resource_version)
            self.writes += 1
            log.info("manager ClusterQueue quota written from its workers", cluster_queue=name)
