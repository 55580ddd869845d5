"""The log port: one totally ordered, append-only sequence of events.

Every backend (in-memory, embedded file, Kafka) offers the same five operations and passes the same contract
suite (``tests/contracts/test_event_log.py``). Offsets are dense integers starting at 0 and assigned by the log;
a batch appended together is stored together (all of it or none of it survives a crash).
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Sequence

import anyio

from events.codec import Quarantined, decode_batch, encode_batch
from events.errors import LogClosed
from events.schema import AnyEvent, Record


class EventLog(abc.ABC):
    """Append batches, read from an offset, know the end, close."""

    @abc.abstractmethod
    async def append(self, events: Sequence[AnyEvent]) -> list[int]:
        """Store ``events`` as one batch; return their offsets once durable by the log's policy."""

    @abc.abstractmethod
    def read_batches(
        self, start: int = 0, *, follow: bool = False, quarantine: list[Quarantined] | None = None
    ) -> AsyncIterator[list[Record]]:
        """Yield stored records from ``start`` in order, a batch at a time; with ``follow``, wait for more. A read
        never takes the log's close for its end: one begun on a closed log, or that the close cuts short (a
        follower, always: it has no end), raises :class:`~events.errors.LogClosed`."""

    @abc.abstractmethod
    async def end_offset(self) -> int:
        """The offset the next appended event will get (= number of events stored)."""

    @abc.abstractmethod
    async def close(self) -> None: ...

    async def read(
        self, start: int = 0, *, follow: bool = False, quarantine: list[Quarantined] | None = None
    ) -> AsyncIterator[Record]:
        """Yield records one at a time (see :meth:`read_batches`)."""
        async for batch in self.read_batches(start, follow=follow, quarantine=quarantine):
            for record in batch:
                yield record

    async def __aenter__(self) -> EventLog:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class MemoryLog(EventLog):
    """A log held in memory, for unit tests. Batches go through the real codec, as they would on disk."""

    def __init__(self) -> None:
        self._frames: list[tuple[int, bytes]] = []
        self._end = 0
        self._closed = False
        self._grew = anyio.Event()

    async def append(self, events: Sequence[AnyEvent]) -> list[int]:
        if self._closed:
            raise LogClosed("log is closed")
        if not events:
            return []
        base = self._end
        self._frames.append((base, encode_batch(events)))
        self._end += len(events)
        self._grew.set()
        self._grew = anyio.Event()
        return list(range(base, self._end))

    async def read_batches(
        self, start: int = 0, *, follow: bool = False, quarantine: list[Quarantined] | None = None
    ) -> AsyncIterator[list[Record]]:
        if self._closed:
            raise LogClosed("log is closed")
        i = 0
        while True:
            while i < len(self._frames):
                base, payload = self._frames[i]
                i += 1
                end = self._frames[i][0] if i < len(self._frames) else self._end
                if end <= start:
                    continue  # wholly before ``start``: not even decoded
                batch = decode_batch(payload, base, quarantine, start)
                if batch:
                    yield batch
            if not follow:
                return
            if self._closed:
                raise LogClosed("log closed while it was followed")
            await self._grew.wait()

    async def end_offset(self) -> int:
        return self._end

    async def close(self) -> None:
        self._closed = True
        self._grew.set()
