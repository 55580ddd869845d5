"""A ``KafkaLog`` read that the log's close cuts short raises ``LogClosed``: never an end of log (review s36 L8).

The reader's consumer is stood in for: it hands out one record per fetch, and once stopped (the log's close stops
every reader) a fetch raises ``ConsumerStoppedError``, as aiokafka's does. A read begun on a closed log, against
every backend, is in the contract suite (``tests/contracts/test_event_log.py``).
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.errors import ConsumerStoppedError
from fixtures.kafka_fakes import PartitionReader

from connectors.kafka import log as kafka_log
from connectors.kafka.log import BATCH_HEADERS, KafkaLog, to_offset
from connectors.kafka.settings import KafkaSettings
from events import schema as ev
from events.codec import encode_batch
from events.errors import LogClosed

RECORDS = 5


class _Consumer(PartitionReader):
    """A partition holding Kafka records 0-4, one handed out per fetch."""

    def __init__(self, **_kwargs: Any) -> None:
        super().__init__()
        self.stopped = asyncio.Event()

    async def end_offsets(self, tps: list[Any]) -> dict[Any, int]:
        return {tp: RECORDS for tp in tps}

    async def getmany(self, tp: Any, timeout_ms: int = 0) -> dict[Any, list[Any]]:
        if self.at >= RECORDS:  # nothing more yet: wait for the timeout, or until stopped
            await asyncio.wait([asyncio.ensure_future(self.stopped.wait())], timeout=timeout_ms / 1000)
        if self.stopped.is_set():
            raise ConsumerStoppedError()
        if self.at >= RECORDS:
            return {}
        rec = SimpleNamespace(offset=self.at, headers=BATCH_HEADERS,
                              value=encode_batch([ev.ClockTicked(time=self.at, id=f"t{self.at}")]))
        self.at += 1
        return {tp: [rec]}

    async def stop(self) -> None:
        self.stopped.set()


def _log() -> KafkaLog:
    return KafkaLog(KafkaSettings(bootstrap="127.0.0.1:9", topic="t"), 0)


@pytest.mark.parametrize("follow", [False, True], ids=["to-the-end", "follow"])
def test_a_read_the_close_cuts_short_raises_log_closed(monkeypatch: pytest.MonkeyPatch, follow: bool) -> None:
    """Closed after the first record (a read to the end) or after the last one (a follower, waiting for more)."""
    monkeypatch.setattr(kafka_log, "AIOKafkaConsumer", _Consumer)
    seen: list[int] = []

    async def main() -> None:
        log = _log()
        try:
            async for batch in log.read_batches(0, follow=follow):
                seen.extend(r.offset for r in batch)
                if len(seen) == (RECORDS if follow else 1):
                    await log.close()
        finally:
            await log.close()

    with pytest.raises(LogClosed, match="closed while it was read"):
        asyncio.run(main())
    assert seen == [to_offset(k) for k in range(RECORDS if follow else 1)]


def test_a_read_to_the_end_the_close_does_not_cut_short_ends_normally(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_log, "AIOKafkaConsumer", _Consumer)

    async def main() -> list[int]:
        log = _log()
        try:
            return [r.offset async for batch in log.read_batches(0) for r in batch]
        finally:
            await log.close()

    assert asyncio.run(main()) == [to_offset(k) for k in range(RECORDS)]
