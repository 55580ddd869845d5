"""A Kafka log partition read the way the command-line tools read a log (``replay``, ``audit``, ``explain``,
``metrics``, ``pending``, ``replay --verify``, ``import``): synchronously, one batch at a time.

The tools are synchronous code over :class:`events.filelog.FileLog`'s ``scan``. Here a consumer runs on a thread
of its own (with its own event loop) and hands the batches over through a short queue, so a long log is never
held in memory at once, and leaving the loop early stops the consumer.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Iterator, Sequence

from connectors.kafka import snapshots
from connectors.kafka.errors import KafkaLogError
from connectors.kafka.log import KafkaLog
from connectors.kafka.settings import KafkaSettings, parse_url
from events.errors import InvalidInput
from events.log import Quarantined
from events.schema import AnyEvent, Record
from projections.cluster import ClusterState

_END = object()


class _Failed:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class KafkaReader:
    """``kafka://HOST:PORT/TOPIC[?shard=N]`` with the tools' subset of a log's interface."""

    def __init__(self, url: str, base: KafkaSettings | None = None, *, writes: bool = False) -> None:
        """``writes`` (``import``): the topics are created when missing, as ``kafka.create_topics`` says; a
        reader only reads a topic that exists."""
        self.url = url
        self.settings, self.shard = parse_url(url, base)
        self.create = None if writes else False

    async def _open(self) -> KafkaLog:
        return await KafkaLog.open(self.settings, self.shard, create=self.create)

    async def end_offset(self) -> int:
        log = await self._open()
        try:
            return await log.end_offset()
        finally:
            await log.close()

    async def append(self, events: Sequence[AnyEvent]) -> list[int]:
        log = await self._open()
        try:
            return await log.append(events)
        finally:
            await log.close()

    async def latest_snapshot(self) -> tuple[str, ClusterState] | None:
        """The scheduler service's newest snapshot of this shard (a fold of a prefix of the partition), and where
        it was read; None when there is none, or it cannot be read (the tools then fold from the beginning)."""
        try:
            found = await snapshots.load_latest(self.settings, self.shard)
        except (KafkaLogError, InvalidInput):
            return None
        if found is None:
            return None
        rec, state = found
        return f"{self.settings.snapshots}/{self.shard} (next Kafka offset {rec.next})", state

    def scan(self, start: int = 0, quarantine: list[Quarantined] | None = None, *, lazy: bool = False
             ) -> Iterator[list[Record]]:
        """Every batch from ``start`` to the end the partition has when the read begins."""
        handover: queue.Queue[object] = queue.Queue(maxsize=8)
        stopping = threading.Event()

        async def pump() -> None:
            log = await self._open()
            try:
                async for batch in log.read_batches(start, quarantine=quarantine, lazy=lazy):
                    while not stopping.is_set():
                        try:
                            handover.put(batch, timeout=0.1)
                            break
                        except queue.Full:
                            continue
                    if stopping.is_set():
                        return
            finally:
                await log.close()

        def run() -> None:
            try:
                asyncio.run(pump())
            except BaseException as exc:  # noqa: BLE001 - handed to the reading thread, which raises it
                handover.put(_Failed(exc))
            else:
                handover.put(_END)

        thread = threading.Thread(target=run, name=f"kafka-reader-{self.settings.topic}", daemon=True)
        thread.start()
        try:
            while True:
                item = handover.get()
                if item is _END:
                    return
                if isinstance(item, _Failed):
                    raise item.exc
                yield item  # type: ignore[misc]
        finally:
            stopping.set()
            while thread.is_alive():  # let a pump blocked on a full queue see ``stopping``
                try:
                    handover.get(timeout=0.1)
                except queue.Empty:
                    pass
            thread.join()

    def close_sync(self) -> None:
        pass
