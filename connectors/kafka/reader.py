"""A Kafka log partition read the way the command-line tools read a log (``replay``, ``audit``, ``explain``,
``metrics``, ``pending``, ``replay --verify``, ``import``): synchronously, one batch at a time.

The tools are synchronous code over :class:`events.filelog.FileLog`'s ``scan``. The reader runs an event loop
on a thread of its own (an anyio blocking portal) for as long as the tool runs, and opens the partition there
once: the end offset, every scan and an ``import``'s append share one connection. A scan's consumer hands its
batches over through a short memory object stream, so a long log is never held in memory at once, and leaving
the loop early stops the consumer.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import TypeVar

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal

from connectors.kafka import snapshots
from connectors.kafka.errors import KafkaLogError
from connectors.kafka.log import KafkaLog, to_kafka
from connectors.kafka.settings import KafkaSettings, parse_url
from events.log import Quarantined
from events.schema import AnyEvent, Record
from projections.cluster import ClusterState

T = TypeVar("T")

_HANDOVER_BATCHES = 8
"""Batches a scan's consumer may read ahead of the tool."""


class _Failed:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class KafkaReader:
    """``kafka://HOST:PORT/TOPIC[?shard=N]`` with the tools' subset of a log's interface. Close it with
    :meth:`close_sync`."""

    def __init__(self, url: str, base: KafkaSettings | None = None, *, writes: bool = False) -> None:
        """``writes`` (``import``): the topics are created when missing, as ``kafka.create_topics`` says; a
        reader only reads a topic that exists."""
        self.url = url
        self.settings, self.shard = parse_url(url, base)
        self.create = None if writes else False
        self._portal_cm: contextlib.AbstractContextManager[BlockingPortal] | None = None
        self._portal: BlockingPortal | None = None
        self._log: KafkaLog | None = None
        self.passed_over: list[str] = []
        """The snapshots :meth:`latest_snapshot` passed over, each with why."""

    def _loop(self) -> BlockingPortal:
        """The reader's own event loop, started on first use."""
        if self._portal is None:
            self._portal_cm = start_blocking_portal()
            self._portal = self._portal_cm.__enter__()
        return self._portal

    def _call(self, fn: Callable[..., Awaitable[T]], *args: object) -> T:
        """Run ``fn`` on the reader's own event loop and wait for it (from any thread but that loop's)."""
        return self._loop().call(fn, *args)

    async def _opened(self) -> KafkaLog:
        if self._log is None:
            self._log = await KafkaLog.open(self.settings, self.shard, create=self.create)
        return self._log

    @staticmethod
    def record_of(offset: int) -> int:
        """The Kafka offset of the record holding log offset ``offset``: what a progress bar counts here."""
        return to_kafka(offset)

    async def end_offset(self) -> int:
        async def end() -> int:
            return await (await self._opened()).end_offset()
        return self._call(end)

    async def append(self, events: Sequence[AnyEvent]) -> list[int]:
        async def append() -> list[int]:
            return await (await self._opened()).append(events)
        return self._call(append)

    async def latest_snapshot(self) -> tuple[str, ClusterState] | None:
        """The scheduler service's newest snapshot of this shard that is of this very log (a fold of a prefix of
        the partition: :func:`snapshots.restore`), and where it was read; None when there is none, or none can be
        used (the tools then fold from the beginning). Those passed over are left in :attr:`passed_over`."""
        try:
            found = self._call(snapshots.restore, self.settings, self.shard)
        except KafkaLogError as exc:
            self.passed_over = [f"{self.settings.snapshots}/{self.shard}: cannot be read: {exc}"]
            return None
        self.passed_over = found.passed_over
        if found.record is None or found.state is None:
            return None
        return f"{self.settings.snapshots}/{self.shard} (next Kafka offset {found.record.next})", found.state

    def scan(self, start: int = 0, quarantine: list[Quarantined] | None = None, *, lazy: bool = False
             ) -> Iterator[list[Record]]:
        """Every batch from ``start`` to the end the partition has when the read begins."""
        send, receive = anyio.create_memory_object_stream[object](_HANDOVER_BATCHES)

        async def pump() -> None:
            async with send:
                try:
                    log = await self._opened()
                    async with contextlib.aclosing(log.read_batches(start, quarantine=quarantine,
                                                                    lazy=lazy)) as batches:
                        async for batch in batches:
                            await send.send(batch)  # waits while the tool is _HANDOVER_BATCHES behind
                except anyio.BrokenResourceError:
                    return  # the tool stopped reading
                except BaseException as exc:  # noqa: BLE001 - handed to the reading thread, which raises it
                    with contextlib.suppress(anyio.BrokenResourceError):
                        await send.send(_Failed(exc))

        portal = self._loop()
        pumping = portal.start_task_soon(pump)
        try:
            while True:
                try:
                    item = portal.call(receive.receive)
                except anyio.EndOfStream:
                    return
                if isinstance(item, _Failed):
                    raise item.exc
                yield item  # type: ignore[misc]
        finally:
            portal.call(receive.aclose)  # a pump still sending stops (BrokenResourceError)
            pumping.result()

    def close_sync(self) -> None:
        """Close the partition and stop the reader's loop."""
        if self._portal is None or self._portal_cm is None:
            return
        try:
            if self._log is not None:
                self._portal.call(self._log.close)
        finally:
            self._log = None
            portal_cm, self._portal_cm, self._portal = self._portal_cm, None, None
            portal_cm.__exit__(None, None, None)
