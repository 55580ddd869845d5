"""List+watch the cluster into observed events: ``ObjectUpserted`` / ``ObjectDeleted``.

Per resource (:mod:`connectors.k8s.resources`), the loop is the informer's:

1. **list** everything (paged, one consistent snapshot) and emit, as one batch, exactly the differences from
   what the log already says (the mirror's inventory: kind → key → (uid, resourceVersion)): new or changed
   objects are upserted, objects the log has but the list has not are deleted. A relist therefore never
   produces a spurious change — not after a 410, not after a restart (the inventory is folded from the log);
2. **watch** from the list's resourceVersion with bookmarks; every event moves the resume point once it is handled
   (emitted, or found to need nothing), not before: a watch cut mid-stream resumes after the last event handled,
   so the apiserver replays nothing already in the log (a replay would write an object's older versions after its
   newer ones, a deleted object back). An event whose (uid, resourceVersion) the log already has is dropped (a
   restart's ``resume`` may repeat the last one);
3. the server ends a watch after ``timeout_seconds``: watch again from the resume point; a cut connection or a
   5xx: back off and watch again from the resume point; **410 Gone**: go to 1.

A kind whose API is not served (``Resource.optional``: the autoscaler's ProvisioningRequests, ResourceClaimTemplates,
DeviceClasses and ResourceSlices where resource.k8s.io/v1 is off) lists as empty and is looked for again every
``absent_retry_s``. Pods and Nodes
are trimmed to what the log needs, and their updates that change nothing kept are dropped
(:mod:`connectors.k8s.trim`); a Pod leaving the watch by succeeding while its Workload waits for its pods'
scheduling is kept as succeeded (:mod:`connectors.k8s.succeeded_pods`).

Objects are decoded with msgspec into :mod:`events.objects` views, a Workload's pod templates stamped with the
digest of each whole raw template (:mod:`events.template_digest`). One that does not decode, or that the
projections could not fold (a malformed quantity or time, ...: :func:`events.manifests.check_foldable`), is skipped
and reported — the log only ever holds objects the projections can fold, and the connector keeps running. Kueue's
admission rules are its validating webhooks' to apply (:mod:`connectors.k8s.validating`), not the watch's: a
stored object they would refuse now is folded, as Kueue's controllers act on it, and never deleted from the log
by a relist. Event time is the wall clock when the watch delivered
the change (connectors may read clocks; the core never does). Event ids are ``kind/uid/resourceVersion`` (and
``kind/uid/deleted``), stable across retries.

Events go to the log through one appender task that takes everything queued and appends it as one batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import structlog

from connectors.k8s import succeeded_pods, trim
from connectors.k8s.client import KubeClient, resource_version_of
from connectors.k8s.errors import NotFound
from connectors.k8s.list_watch import Delivered, list_then_watch
from connectors.k8s.mirror import Mirror
from connectors.k8s.resources import BY_KIND, WATCHED, Resource
from events import objects as o
from events import schema as ev
from events.errors import InvalidInput
from events.manifests import check_foldable
from events.template_digest import stamped_from_json

log = structlog.get_logger("kueue_es.k8s.watch")
Emit = Callable[[Sequence[ev.AnyEvent]], Awaitable[Any]]


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class WatchStats:
    listed: dict[str, int] = field(default_factory=dict)
    relists: dict[str, int] = field(default_factory=dict)
    upserted: int = 0
    deleted: int = 0
    duplicates: int = 0
    unchanged: int = 0
    """Updates not appended: nothing the log keeps of the object changed (Pods, Nodes)."""
    skipped: dict[str, str] = field(default_factory=dict)
    """``kind key`` -> why the object was not taken (undecodable, invalid)."""


class Watcher:
    """Keeps the log in step with the cluster for the watched kinds; see the module docstring."""

    def __init__(self, client: KubeClient, mirror: Mirror, emit: Emit, *, kinds: Sequence[str] = WATCHED,
                 timeout_seconds: int = 300, backoff_s: float = 1.0, emit_event: Emit | None = None,
                 absent_retry_s: float = 30.0) -> None:
        self.client = client
        self.mirror = mirror
        self.emit = emit
        """Appends and returns once the events are in the log (relists: ``synced`` means in the log)."""
        self.emit_event = emit_event or emit
        """For watch events: may return before the append (the order of emits is kept)."""
        self.resources = [BY_KIND[k] for k in kinds]
        self.timeout_seconds = timeout_seconds
        self.backoff_s = backoff_s
        self.absent_retry_s = absent_retry_s
        self.stats = WatchStats()
        self.reads = succeeded_pods.Reads()
        self.synced: dict[str, asyncio.Event] = {r.kind: asyncio.Event() for r in self.resources}
        self.resume_from: dict[str, str] = {}
        """kind -> the resourceVersion of the last watch event handled (for a later :meth:`run`'s ``resume``)."""
        self._decoders = {r.kind: msgspec.json.Decoder(r.view) for r in self.resources}
        # what this watcher emitted, ahead of the mirror (which only learns it once the log applied it)
        self._emitted: dict[str, dict[str, tuple[str, str] | None]] = {r.kind: {} for r in self.resources}

    @property
    def is_synced(self) -> bool:
        return all(e.is_set() for e in self.synced.values())

    async def wait_synced(self) -> None:
        for e in self.synced.values():
            await e.wait()

    async def run(self, resume: dict[str, str] | None = None) -> None:
        """Watch every kind until cancelled; ``resume`` (kind -> resourceVersion) watches from there first
        instead of listing (a 410 then falls back to the relist)."""
        self.mirror.listeners.append(self._on_applied)
        try:
            async with asyncio.TaskGroup() as tg:
                for r in self.resources:
                    tg.create_task(self.run_resource(r, (resume or {}).get(r.kind)), name=f"watch-{r.kind}")
        finally:
            self.mirror.listeners.remove(self._on_applied)

    def _on_applied(self, records: list[ev.Record]) -> None:
        if any(self._emitted.values()):
            self.forget_emitted()

    # --- one resource --------------------------------------------------------------------------------------

    async def run_resource(self, r: Resource, resume_from: str | None = None) -> None:
        async def relist() -> str | None:
            rv = await self.relist(r)
            self.synced[r.kind].set()
            return rv

        def gone() -> None:
            log.info("watch expired, relisting", kind=r.kind)
            self.stats.relists[r.kind] = self.stats.relists.get(r.kind, 0) + 1

        await list_then_watch(relist, lambda rv, delivered: self.watch_once(r, rv, delivered),
                              log=log.bind(kind=r.kind), what=r.kind,
                              backoff_s=self.backoff_s, on_gone=gone, resume_from=resume_from,
                              absent_retry_s=self.absent_retry_s)

    async def relist(self, r: Resource) -> str | None:
        """List ``r`` and emit exactly what differs from the log; returns the list's resourceVersion (None: the
        kind is optional and not served, which lists as empty)."""
        try:
            listed = await self.client.list(r, field_selector=r.field_selector)
        except NotFound:
            if not r.optional:
                raise
            log.info("kind not served, none exist", kind=r.kind, retry_in_s=self.absent_retry_s)
            listed = None
        t = now_ms()
        seen_keys: set[str] = set()
        out: list[ev.AnyEvent] = []
        for raw in listed.items if listed is not None else ():
            obj = self._decode(r, raw)
            if obj is None:
                continue
            obj = trim.view(obj)
            if obj is None:
                continue
            seen_keys.add(obj.key)
            e = self._upsert(r, obj, t)
            if e is not None:
                out.append(e)
        for key, (uid, rv) in sorted(self._known(r.kind).items()):
            if key in seen_keys:
                continue
            kept = await self.reads.unlisted(self.client, self.mirror.state, key) if r.kind == "Pod" else None
            if kept is None:
                out.append(self._delete(r, key, uid, rv, t))
            elif (e := self._upsert(r, kept, t)) is not None:
                out.append(e)
        self.stats.listed[r.kind] = len(listed.items) if listed is not None else 0
        if out:
            await self.emit(out)
        if listed is None:
            return None
        log.info("listed", kind=r.kind, objects=len(listed.items), changes=len(out),
                 resource_version=listed.metadata.resource_version)
        return listed.metadata.resource_version

    async def watch_once(self, r: Resource, rv: str, delivered: Delivered) -> None:
        """One watch request from ``rv`` until the server ends it; ``delivered`` is told each event's
        resourceVersion once the event is handled (where to resume)."""
        stream = self.client.watch(r, rv, timeout_seconds=self.timeout_seconds, on_open=self.synced[r.kind].set,
                                   field_selector=r.field_selector)
        async with contextlib.aclosing(stream):  # closed at once when cancelled, not when garbage-collected
            async for event in stream:
                at = resource_version_of(event.object) if event.type == "BOOKMARK" else await self._handle(r, event)
                if at:
                    self.resume_from[r.kind] = at
                    delivered(at)

    async def _handle(self, r: Resource, event: Any) -> str:
        """Emit what one watch event changes; returns its resourceVersion. Only once this returns is the event past
        (a read for a Pod leaving the watch may fail: the watch then resumes before the event, which comes again,
        until :class:`succeeded_pods.Reads` gives up on it)."""
        t = now_ms()
        obj = self._decode(r, event.object)
        if obj is None:
            return resource_version_of(event.object)
        rv = obj.metadata.resource_version
        kept = trim.view(obj)
        if kept is None and event.type != "DELETED":
            event_type = "DELETED"  # no longer needed: as good as gone
        else:
            event_type, obj = event.type, kept or obj
        if event.type == "DELETED" and isinstance(obj, o.Pod) and succeeded_pods.awaits(
                self.mirror.state, self.mirror.state.pods.get(obj.key)):
            succeeded = await self.reads.left_succeeded(self.client, obj)
            if succeeded is not None:
                event_type, obj = "MODIFIED", succeeded  # left the selection by succeeding: Kueue counts it
        if event_type in ("ADDED", "MODIFIED"):
            e = self._upsert(r, obj, t)
        elif event_type == "DELETED":
            known = self._known(r.kind).get(obj.key)
            e = None
            if known is not None and known[0] == obj.metadata.uid:
                e = self._delete(r, obj.key, obj.metadata.uid, obj.metadata.resource_version, t)
            elif event.type == "DELETED":
                self.stats.duplicates += 1
        else:
            log.warning("unknown watch event type", kind=r.kind, type=event.type)
            return rv
        if e is not None:
            await self.emit_event([e])
        return rv

    # --- helpers -------------------------------------------------------------------------------------------

    def _known(self, kind: str) -> dict[str, tuple[str, str]]:
        """What the log says exists, overlaid with what this watcher emitted and the log has not applied yet."""
        known = dict(self.mirror.inventory.get(kind, {}))
        for key, v in self._emitted[kind].items():
            if v is None:
                known.pop(key, None)
            else:
                known[key] = v
        return known

    def _upsert(self, r: Resource, obj: o.KObject, t: int) -> ev.ObjectUpserted | None:
        """The event for ``obj`` unless the log has it already (or, Pods and Nodes, nothing it keeps changed).
        Versions are not ordered here: the watch delivers each object's in order and resumes after the last one
        handled, and a relist is a quorum read — nothing brings an older one (and after an etcd restore without
        a revision bump, the list's lower resourceVersion is the object as it is)."""
        m = obj.metadata
        current = (m.uid, m.resource_version)
        emitted = self._emitted[r.kind]
        if emitted.get(obj.key, self.mirror.seen(r.kind, obj.key)) == current:
            self.stats.duplicates += 1
            return None
        if r.kind in trim.DEDUPLICATED and obj.key not in emitted and trim.same_content(
                self._current(r.kind, obj.key), obj):
            self.stats.unchanged += 1
            return None
        emitted[obj.key] = current
        self.stats.upserted += 1
        return ev.ObjectUpserted(time=t, key=obj.key, uid=m.uid, resource_version=m.resource_version,
                                 id=f"{r.kind}/{m.uid}/{m.resource_version}", obj=obj)

    def _current(self, kind: str, key: str) -> o.KObject | None:
        table: dict[str, Any] = self.mirror.state.pods if kind == "Pod" else self.mirror.state.nodes
        return table.get(key)

    def _delete(self, r: Resource, key: str, uid: str, rv: str, t: int) -> ev.ObjectDeleted:
        self._emitted[r.kind][key] = None
        self.stats.deleted += 1
        return ev.ObjectDeleted(time=t, key=key, uid=uid, resource_version=rv, id=f"{r.kind}/{uid}/deleted",
                                kind=r.kind)

    def forget_emitted(self) -> None:
        """Drop the overlay for whatever the mirror has caught up with (called after the log applied)."""
        for kind, emitted in self._emitted.items():
            inv = self.mirror.inventory.get(kind, {})
            for key in [k for k, v in emitted.items() if inv.get(k) == v or (v is None and k not in inv)]:
                del emitted[key]

    def _decode(self, r: Resource, raw: msgspec.Raw | bytes) -> o.KObject | None:
        try:
            obj = self._decoders[r.kind].decode(raw)
            if type(obj) is o.Workload:  # its whole templates, as digests
                obj = stamped_from_json(obj, raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            self._skip(r, _name_of(raw), f"cannot decode: {exc}")
            return None
        try:
            check_foldable(obj, f"{r.kind} {obj.key}")
        except InvalidInput as exc:
            self._skip(r, obj.key, str(exc))
            return None
        self.stats.skipped.pop(f"{r.kind} {obj.key}", None)
        return obj

    def _skip(self, r: Resource, key: str, why: str) -> None:
        if self.stats.skipped.get(f"{r.kind} {key}") != why:
            log.warning("object skipped", kind=r.kind, key=key, reason=why)
        self.stats.skipped[f"{r.kind} {key}"] = why


class _NameOnly(msgspec.Struct):
    name: str = ""
    namespace: str = ""


class _Named(msgspec.Struct):
    metadata: _NameOnly = msgspec.field(default_factory=_NameOnly)


def _name_of(raw: msgspec.Raw | bytes) -> str:
    try:
        m = msgspec.json.decode(raw, type=_Named).metadata
    except (msgspec.DecodeError, msgspec.ValidationError):
        return "?"
    return f"{m.namespace}/{m.name}" if m.namespace else m.name


class Appender:
    """One writer for the connector's events: everything queued by then is appended as one batch.

    ``emit`` queues events (the queue is bounded: back-pressure) and, with ``wait``, returns their offsets
    once they are in the log; without, it returns at once — the order of emits is the order in the log.
    """

    def __init__(self, append: Callable[[Sequence[ev.AnyEvent]], Awaitable[list[int]]], *, max_batch: int = 5000,
                 queue_size: int = 1000) -> None:
        self._append = append
        self._queue: asyncio.Queue[tuple[list[ev.AnyEvent], asyncio.Future[list[int]] | None]] = \
            asyncio.Queue(queue_size)
        self.max_batch = max_batch
        self.batches = 0

    async def emit(self, events: Sequence[ev.AnyEvent], *, wait: bool = True) -> list[int]:
        done: asyncio.Future[list[int]] | None = asyncio.get_running_loop().create_future() if wait else None
        await self._queue.put((list(events), done))
        return await done if done is not None else []

    async def emit_nowait(self, events: Sequence[ev.AnyEvent]) -> list[int]:
        return await self.emit(events, wait=False)

    async def run(self) -> None:
        while True:
            items = [await self._queue.get()]
            size = len(items[0][0])
            while not self._queue.empty() and size < self.max_batch:
                items.append(self._queue.get_nowait())
                size += len(items[-1][0])
            batch = [e for events, _ in items for e in events]
            try:
                offsets = await self._append(batch) if batch else []
            except BaseException as exc:
                for _, done in items:
                    if done is not None and not done.done():
                        done.set_exception(exc if isinstance(exc, Exception) else RuntimeError("cancelled"))
                raise
            self.batches += 1
            i = 0
            for events, done in items:
                if done is not None and not done.done():
                    done.set_result(list(offsets[i:i + len(events)]))
                i += len(events)
