"""Kubernetes' list-then-watch loop, shared by everything the connector keeps in step with the apiserver (the
watcher's kinds into the log; the managed Pods, the JobSets and the StatefulSets' revisions, which the
integrations keep for themselves in an :class:`Informer`): :func:`list_then_watch` brings the order and the
recovery — a relist after 410 Gone, a capped exponential backoff after any other failure, each watch resumed
from the last event handled.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from connectors.k8s.client import KubeClient, resource_version_of
from connectors.k8s.errors import Gone, KubeError, NotFound
from connectors.k8s.resources import Resource

BACKOFF_CAP_S = 30.0
W = TypeVar("W", bound="Watched")


def retry_delay(backoff_s: float, failures: int) -> float:
    """Seconds to wait after the ``failures``-th failure in a row: doubling from ``backoff_s``, at most 30 s."""
    return min(backoff_s * 2 ** min(failures - 1, 5), BACKOFF_CAP_S)


Delivered = Callable[[str], None]
"""Told the resourceVersion of each watch event (a bookmark too) once it is handled: where to resume."""


async def list_then_watch(relist: Callable[[], Awaitable[str | None]],
                          watch: Callable[[str, Delivered], Awaitable[None]], *,
                          log: Any, what: str, backoff_s: float, on_gone: Callable[[], None],
                          resume_from: str | None = None, absent_retry_s: float = 1.0,
                          absent: Callable[[], Awaitable[None]] | None = None) -> None:
    """Until cancelled: list (``relist`` returns the list's resourceVersion, None when there is nothing to list —
    the kind not served, say: listed again after ``absent()``, by default a sleep of ``absent_retry_s``), then
    ``watch(rv, delivered)`` from there; ``resume_from`` watches first without listing. ``what`` names it in the
    warnings ``log`` gets.

    A watch that ends, or fails other than 410 Gone (a cut connection, a read timeout, a 5xx), is started again
    from the last resourceVersion it reported to ``delivered`` — as client-go's reflector resumes from the last one
    it synced — not from where it started: the apiserver would replay what was already handled, and a consumer
    would take an object back to an older version (or a deleted one back to life) until the replay caught up."""
    rv = resume_from

    def delivered(at: str) -> None:
        nonlocal rv
        if at:
            rv = at

    failures = 0
    while True:
        try:
            if rv is None:
                rv = await relist()
                if rv is None:
                    await (absent() if absent is not None else asyncio.sleep(absent_retry_s))
                    continue
            await watch(rv, delivered)
            failures = 0
        except Gone:
            on_gone()
            rv = None
        except KubeError as exc:
            failures += 1
            delay = retry_delay(backoff_s, failures)
            log.warning(f"{what} watch failed, retrying", error=str(exc), retry_in_s=delay)
            await asyncio.sleep(delay)


class Watched(Protocol):
    """An object as an informer keeps it: keyed ``<namespace>/<name>``, told apart from a namesake by its uid."""

    @property
    def key(self) -> str: ...

    @property
    def metadata(self) -> Any: ...


class Informer(Generic[W]):
    """The objects of one resource as last listed or watched (:attr:`known`, key -> object), for the integrations
    that keep their own (the log does not hold them): ``decode`` reads one (None: skipped), ``on_change`` gets the
    keys of those that changed, came or went, ``on_deleted`` each one the watch saw deleted (maybe one never
    known) or a relist no longer found under its uid (deleted while a 410 Gone left no watch running), and
    ``on_listed`` is called after each list (the first and every relist), as a client-go informer's relist
    redelivers every object. ``known`` is one dict for the informer's life, so a holder may keep it. Until the first list is in (:attr:`synced`), nothing
    is known, and nothing may be taken as gone. ``optional``: a resource whose CRD may not be served, which then
    lists as empty and is listed again later."""

    def __init__(self, client: KubeClient, resource: Resource, decode: Callable[[msgspec.Raw | bytes], W | None],
                 on_change: Callable[[set[str]], None], *, what: str, log: Any, label_selector: str = "",
                 watch_timeout_s: int = 300, backoff_s: float = 1.0, optional: bool = False,
                 on_deleted: Callable[[W], None] | None = None, on_listed: Callable[[], None] | None = None) -> None:
        self.client, self.resource, self.decode, self.on_change = client, resource, decode, on_change
        self.what, self.log, self.label_selector = what, log, label_selector
        self.watch_timeout_s, self.backoff_s, self.optional, self.on_deleted, self.on_listed = (
            watch_timeout_s, backoff_s, optional, on_deleted, on_listed)
        self.known: dict[str, W] = {}
        self.synced = asyncio.Event()
        self.relists = 0

    async def run(self, absent: Callable[[], Awaitable[None]] | None = None, absent_retry_s: float = 10.0) -> None:
        """List and watch until cancelled; ``absent`` (else a sleep of ``absent_retry_s``) while there is nothing
        to list: the CRD not served, or :meth:`relist` overridden to list nothing."""
        def gone() -> None:
            self.relists += 1

        await list_then_watch(self.relist, self._watch, log=self.log, what=self.what, backoff_s=self.backoff_s,
                              on_gone=gone, absent=absent, absent_retry_s=absent_retry_s)

    async def relist(self) -> str | None:
        """List afresh; returns the list's resourceVersion (None: an optional resource not served)."""
        try:
            listed = await self.client.list(self.resource, label_selector=self.label_selector)
        except NotFound:
            if not self.optional:
                raise
            listed = None
        fresh: dict[str, W] = {}
        for raw in listed.items if listed is not None else ():
            obj = self.decode(raw)
            if obj is not None:
                fresh[obj.key] = obj
        changed = {k for k in fresh.keys() | self.known.keys() if fresh.get(k) != self.known.get(k)}
        vanished = [old for k, old in self.known.items() if _gone(old, fresh.get(k))]
        self.known.clear()
        self.known.update(fresh)
        self.synced.set()
        if self.on_deleted is not None:
            for old in vanished:  # deleted while no watch ran (a 410 Gone): the list is all that tells
                self.on_deleted(old)
        self._changed(changed)
        if self.on_listed is not None:
            self.on_listed()
        return listed.metadata.resource_version if listed is not None else None

    async def _watch(self, rv: str, delivered: Delivered) -> None:
        """One watch from ``rv``; each event is applied to :attr:`known` before it counts as ``delivered``."""
        stream = self.client.watch(self.resource, rv, timeout_seconds=self.watch_timeout_s,
                                   label_selector=self.label_selector)
        async with contextlib.aclosing(stream):
            async for event in stream:
                if event.type != "BOOKMARK":
                    self._apply(event.type, event.object)
                delivered(resource_version_of(event.object))

    def _apply(self, event_type: str, raw: msgspec.Raw | bytes) -> None:
        obj = self.decode(raw)
        if obj is None:
            return
        before = self.known.get(obj.key)
        if event_type == "DELETED":
            if before is not None and before.metadata.uid == obj.metadata.uid:
                del self.known[obj.key]
            if self.on_deleted is not None:
                self.on_deleted(obj)
            self._changed({obj.key})
        elif before != obj:
            self.known[obj.key] = obj
            self._changed({obj.key})

    def _changed(self, keys: set[str]) -> None:
        if keys:
            self.on_change(keys)


def _gone(known: Watched, listed: Watched | None) -> bool:
    """Whether an object known before a relist was deleted meanwhile: not listed, or listed under another uid (a
    namesake made anew)."""
    return listed is None or listed.metadata.uid != known.metadata.uid


class ListedWhile(Informer[W]):
    """An informer that lists only while ``listing()`` (an integration's framework on): off, the RBAC may not even
    allow the list, and none of the objects is wanted."""

    def __init__(self, listing: Callable[[], bool], *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.listing = listing

    async def relist(self) -> str | None:
        if self.listing():
            return await super().relist()
        self.synced.set()
        return None
