r"""How the connector reaches the log: append events, and keep a :class:`Mirror` folded up to the log's end.

* :class:`LocalJournal` — this process is the log's only writer (the embedded file log): an append is applied to
  the mirror at once, at the offsets the log assigned, under a lock so concurrent appends apply in log order.
  The scheduler in the same process decides on the same state.
* :class:`FollowingJournal` — others write too (Kafka: the scheduler service appends decisions): appends go to
  the log only, and a follower task folds whatever the log holds, in order, into the mirror.

Either way the mirror is a fold of a prefix of the log; each component :meth:`Journal.subscribe`\ s a
:class:`Signal` that is set whenever the mirror moves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from connectors.k8s.mirror import Mirror
from events.log import EventLog
from events.schema import AnyEvent, Record


class Signal:
    """A level-triggered wake-up for one waiter: set by the journal, cleared by the waiter."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        self._event.set()

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait until set (or ``timeout`` passes) and clear it; returns whether it was set.

        ``asyncio.timeout``, not ``wait_for``: on Python 3.11 ``wait_for`` swallows a cancellation that arrives
        as the event is set, and the worker loop waiting here would then outlive its task group (a shutdown
        that never ends)."""
        if not self._event.is_set():
            try:
                async with asyncio.timeout(timeout):
                    await self._event.wait()
            except TimeoutError:
                return False
        self._event.clear()
        return True


class Journal:
    def __init__(self, log: EventLog, mirror: Mirror) -> None:
        self.log = log
        self.mirror = mirror
        self._signals: list[Signal] = []

    async def append(self, events: Sequence[AnyEvent]) -> list[int]:
        raise NotImplementedError

    def subscribe(self) -> Signal:
        signal = Signal()
        self._signals.append(signal)
        return signal

    def _applied(self, records: list[Record]) -> None:
        self.mirror.apply_batch(records)
        for signal in self._signals:
            signal.set()

    async def caught_up(self, offset: int, timeout: float | None = None) -> None:
        """Wait until the mirror has applied ``offset``."""
        signal = self.subscribe()
        try:
            async with asyncio.timeout(timeout):
                while self.mirror.offset < offset:
                    await signal.wait(1.0)
        finally:
            self._signals.remove(signal)


class LocalJournal(Journal):
    """The process owns the log: appends are applied to the mirror immediately."""

    def __init__(self, log: EventLog, mirror: Mirror) -> None:
        super().__init__(log, mirror)
        self._lock = asyncio.Lock()

    async def append(self, events: Sequence[AnyEvent]) -> list[int]:
        if not events:
            return []
        async with self._lock:
            offsets = await self.log.append(events)
            self._applied([Record(off, e) for off, e in zip(offsets, events, strict=True)])
        return offsets


class FollowingJournal(Journal):
    """Others append too: a follower folds the log into the mirror; appends only append."""

    async def append(self, events: Sequence[AnyEvent]) -> list[int]:
        if not events:
            return []
        return await self.log.append(events)

    async def follow(self) -> None:
        """Fold the log into the mirror from where it is, forever (run it as a task)."""
        async for batch in self.log.read_batches(self.mirror.offset + 1, follow=True):
            self._applied(batch)
