"""The connection to each MultiKueue worker: its client built (:meth:`WorkerConnections._connect`), its Workloads and
adapters' owners of this origin listed and watched, and the worker connected once every watch opened; a
connection that fails before that, or whose watches do not open in time (:func:`establish_timeout`), is a failed
attempt retried after Kueue's backoff; one cut after, a reconnect (:data:`WATCH_CUTS`).

:class:`WorkerConnections` is a part of :class:`connectors.k8s.multikueue.MultiKueueConnector`, whose ``__init__``
sets the state it uses and which provides ``_adapters``, ``_group_keys`` and ``_unauthorized``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import msgspec
import structlog

from connectors.k8s import multikueue_kubeconfigs as kubeconfigs
from connectors.k8s.client import KubeClient
from connectors.k8s.clusterprofile import CONNECTION_FAILED, failed_attempt, retry_after
from connectors.k8s.errors import Gone, NotFound, Unavailable
from connectors.k8s.follow_one import stopped as _stopped
from connectors.k8s.multikueue_adapters import ORIGIN_LABEL
from connectors.k8s.multikueue_worker import (
    CONNECTING,
    WORKLOADS,
    Opening,
    Worker,
    key_of,
    uid_of,
    workload_key_of,
)
from connectors.k8s.resources import LEADER_WORKER_SETS, Resource

log = structlog.get_logger("kueue_es.k8s.multikueue")


WATCH_CUTS = (Unavailable, Gone)
"""A connected worker's watch (every watch of its connection opened) ending on these (a cut connection, a read
timeout, a 410 Gone) is a reconnect, not a lost worker: only the relist that follows failing reports it lost."""


ESTABLISH_TIMEOUT_S = 60.0
ESTABLISH_TIMEOUT_MAX_S = 600.0
"""How long a connection's watches have to open: Kueue's watch establishment timeout (#11206), 1 minute doubled for
each failed attempt in a row, at most 10 minutes (:func:`establish_timeout`)."""


def establish_timeout(failures: int) -> float:
    """Seconds the watches of a connection attempt made after ``failures`` failed ones in a row have to open."""
    return min(ESTABLISH_TIMEOUT_S * 2.0 ** min(failures, 16), ESTABLISH_TIMEOUT_MAX_S)


class NoClient(Exception):
    """No client comes of a worker's kubeconfig (a failed connection attempt)."""


class EstablishTimeout(Exception):
    """A connection's watches did not all open in time (a failed connection attempt, in Kueue's words)."""

    def __init__(self) -> None:
        super().__init__("watch establishment timed out")


class WorkerConnections:
    """The connector's connections to its workers (a base of :class:`connectors.k8s.multikueue.MultiKueueConnector`,
    which sets the state below in its ``__init__``)."""

    client: KubeClient
    absent_retry_s: float
    watch_timeout_s: int
    wait: Callable[[float], Awaitable[None]]
    establish_wait: Callable[[float], Awaitable[None]]
    _wake: asyncio.Event

    async def _rewatch(self, w: Worker, origin: str) -> None:
        """(Re)open the worker's watches on the copies of ``origin``: a new client's, or, when the Configuration's
        ``multiKueue.origin`` changed, in place of those following the old origin's label (what they showed is
        forgotten and listed anew; the client is kept). Until listed, the worker is neither reached nor lost."""
        await self._stop_watches(w)
        w.workloads.clear()
        w.owners.clear()
        w.moved.clear()
        w.origin, w.connected, w.reason, w.message = origin, False, CONNECTION_FAILED, CONNECTING
        w.reconnecting, w.attempts = False, 0
        w.task = asyncio.create_task(self._watch_worker(w, origin), name=f"mk-{w.name}")

    @staticmethod
    async def _stop_watches(w: Worker) -> None:
        if w.task is not None:
            await _stopped(w.task)
            w.task = None

    async def _stop(self, w: Worker) -> None:
        await self._stop_watches(w)
        if w.client is not None:
            with contextlib.suppress(Exception):
                await w.client.close()

    async def _watch_worker(self, w: Worker, origin: str) -> None:
        """Build the worker's client if it has none yet (:meth:`_connect`), then list and watch its Workloads and
        adapters' owners of this origin; mark it connected once every watch opened (the worker answered it), as
        Kueue marks a remote client connected once all its watches are established. A kind the worker does not
        serve (the JobSet CRD not installed there) is looked for again every ``absent_retry_s`` and watched once
        served (Kueue lists it again on its next reconcile), the connection kept. A connection that fails before
        every watch opened, or whose watches do not all open in time (:meth:`_establishing`), is a failed attempt
        (:meth:`_failed_attempt`); one cut after, a reconnect (:meth:`_reconnect`)."""
        selector = f"{ORIGIN_LABEL}={origin}"
        while True:
            c = w.opening = Opening(set())
            try:
                if w.client is None:
                    w.client = await self._connect(w)
                listed, absent = {}, []
                adapters = self._adapters()
                for a in adapters:
                    w.owners.setdefault(a.resource.kind, {})
                watched = [(WORKLOADS, w.workloads), *((a.resource, w.owners[a.resource.kind]) for a in adapters)]
                for r, cache in list(watched):
                    try:
                        page = await w.client.list(r, label_selector=selector)
                    except NotFound:
                        if r is WORKLOADS or not r.optional:
                            raise
                        watched.remove((r, cache))
                        absent.append((r, cache))
                        continue
                    listed[r.kind] = page.metadata.resource_version
                    cache.clear()
                    for raw in page.items:
                        obj = msgspec.json.decode(raw)
                        cache[key_of(obj)] = obj
                c.unopened = {r.kind for r, _ in watched}
                await _all_or_none(*(self._follow_opening(w, r, cache, listed[r.kind], selector)
                                     for r, cache in watched),
                                   *(self._follow_once_served(w, r, cache, selector) for r, cache in absent),
                                   self._establishing(w, c))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure to reach the worker is a lost connection
                if isinstance(exc, WATCH_CUTS) and (w.connected or c.cut):
                    self._reconnect(w, exc)
                    continue
                await self.wait(self._failed_attempt(w, exc))

    async def _connect(self, w: Worker) -> KubeClient:
        """The worker's client, built from its kubeconfig, with the manager client's fence (a leader that lost its
        Lease writes to no worker). One that does not come of it (a kubeconfig Kueue takes whose client the library
        will not make: CA data that is no certificate) fails the connection attempt, as Kueue counts a client it
        could not build: reported with its attempts, built again after the backoff."""
        try:
            client = await kubeconfigs.client_from(w.source)
        except Exception as exc:  # noqa: BLE001 - whatever the kubeconfig held, no client comes of it
            raise NoClient(f"{type(exc).__name__}: {exc}") from exc
        client.fence = getattr(self.client, "fence", None)
        return client

    async def _follow_opening(self, w: Worker, r: Resource, cache: dict[str, dict[str, Any]], rv: str,
                              selector: str) -> None:
        """:meth:`_follow` as one of the watches of the connection being made (:attr:`Worker.opening`): one failing
        once it had opened is a cut (:attr:`Opening.cut`) even before the others opened, as Kueue reads a
        connection's watches only once all are established, so sees that end after connecting."""
        c = w.opening
        try:
            await self._follow(w, r, cache, rv, selector)
        except Exception:
            c.cut = r.kind not in c.unopened
            raise

    async def _establishing(self, w: Worker, c: Opening) -> None:
        """The time the watches of the connection ``c`` have to open (:func:`establish_timeout` of the worker's
        failed attempts): one the worker has not answered by then fails the attempt (:class:`EstablishTimeout`), its
        watches stopped, as Kueue bounds a watch's establishment rather than waiting for the client's read
        timeout on a worker that never answers."""
        await self.establish_wait(establish_timeout(w.attempts))
        if c.unopened:
            raise EstablishTimeout

    def _opened(self, w: Worker, kind: str) -> None:
        """The worker answered its watch of ``kind``: once it has every watch of the connection being made, it is
        connected and its failed attempts are forgotten (Kueue resets them once every watch is established)."""
        w.opening.unopened.discard(kind)
        if w.opening.unopened or w.connected:
            return
        w.connected, w.reconnecting, w.reason, w.message, w.relisted = True, False, "", "", True
        w.attempts = 0
        self._wake.set()

    def _failed_attempt(self, w: Worker, exc: Exception) -> float:
        """A connection attempt failed — a list, or a watch the worker did not open however long it took to fail (a
        503, a 429, a connection reset before its answer, "too large resource version") or did not answer in time
        (:meth:`_establishing`), as Kueue counts a watch it could not establish, or a client that did not come of
        the kubeconfig (:meth:`_connect`): the worker is reported lost, the message carrying Kueue's backoff
        progress (:func:`failed_attempt`), and tried again after :func:`retry_after` of its failed attempts in a
        row (Kueue's: 5 s doubling, at most 320 s). Returns that wait."""
        w.connected, w.reconnecting = False, False
        w.attempts += 1
        after = retry_after(w.attempts)
        error = str(exc) or type(exc).__name__
        w.reason = CONNECTION_FAILED
        w.message = failed_attempt(error, w.attempts, (_now() + round(after * 1000)) / 1000)
        log.info("MultiKueue worker not reached, will retry", cluster=w.name, error=error, attempts=w.attempts,
                 retry_after_s=after)
        self._unauthorized(w, exc)
        self._wake.set()
        return after

    def _reconnect(self, w: Worker, exc: Exception) -> None:
        """A connected worker's watch was cut after every watch of its connection opened: it is listed again at once
        (Kueue reconnects a client whose watch ended, its failed attempts reset when it connected), skipped by the
        passes until then and reported lost only if that relist, or a watch of it, fails. A worker whose watches
        keep opening and being cut is never reported lost, as in Kueue, each connection a success."""
        w.connected, w.reconnecting = False, True
        log.info("MultiKueue worker watch cut, reconnecting", cluster=w.name, error=str(exc) or type(exc).__name__)

    async def _follow_once_served(self, w: Worker, r: Resource, cache: dict[str, dict[str, Any]],
                                  selector: str) -> None:
        """A kind the worker did not serve when connected: listed again until it is, then watched."""
        assert w.client is not None
        while True:
            await asyncio.sleep(self.absent_retry_s)
            try:
                page = await w.client.list(r, label_selector=selector)
            except NotFound:
                continue
            cache.clear()
            for raw in page.items:
                obj = msgspec.json.decode(raw)
                cache[key_of(obj)] = obj
            log.info("MultiKueue worker now serves the kind", kind=r.kind, cluster=w.name)
            w.moved.update(filter(None, map(workload_key_of, cache.values())))
            if r is LEADER_WORKER_SETS:
                w.moved.update(self._group_keys(cache))
            self._wake.set()
            await self._follow(w, r, cache, page.metadata.resource_version, selector)

    async def _follow(self, w: Worker, r: Any, cache: dict[str, dict[str, Any]], rv: str, selector: str) -> None:
        """Watch the kind ``r`` from ``rv``, the version ``cache`` was just listed at. A DELETED takes away only the
        copy it is about (its uid): a newer copy of that name the manager holds ahead of the watch (a create's
        answer, :meth:`Worker.keep`) stays. A copy this manager deleted (:attr:`Worker.deleted`,
        :attr:`Worker.deleted_owners`), and what was mirrored of an owner copy (:attr:`Worker.mirrored`), is
        forgotten once the watch shows it deleted, or once a listing no longer holds it (its watch, from after, will
        not)."""
        assert w.client is not None
        w.watched[r.kind] = rv
        w.listed(r.kind, cache)
        while True:
            async for e in w.client.watch(r, rv, timeout_seconds=self.watch_timeout_s, label_selector=selector,
                                          on_open=partial(self._opened, w, r.kind)):
                obj = msgspec.json.decode(e.object)
                rv = w.watched[r.kind] = (obj.get("metadata") or {}).get("resourceVersion", rv)
                if e.type == "BOOKMARK":
                    continue
                if e.type == "DELETED":
                    if uid_of(cache.get(key_of(obj))) == uid_of(obj):  # not a namesake made since (kept ahead of it)
                        cache.pop(key_of(obj), None)
                    w.gone(r.kind, key_of(obj), uid_of(obj))
                else:
                    cache[key_of(obj)] = obj
                if r is LEADER_WORKER_SETS:
                    w.moved.update(self._group_keys([key_of(obj)]))
                else:
                    w.moved.add(key_of(obj) if r is WORKLOADS else workload_key_of(obj))
                self._wake.set()


async def _all_or_none(*followers: Any) -> None:
    """Run the watches of one connection together until one fails, then stop the others before raising its error:
    the next connection opens its own (a plain gather would leave them running beside those)."""
    tasks = [asyncio.ensure_future(f) for f in followers]
    try:
        await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _now() -> int:
    return int(time.time() * 1000)
