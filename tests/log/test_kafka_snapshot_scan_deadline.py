"""The backwards scan for a shard's newest snapshot times out only when reading stalls, never because it has much to
pass over (review s36 L5).

The snapshot partition holds one scheduler snapshot at offset 0, then many of the connector's (another key, up to
``max_snapshot_bytes`` each): the scan reads back through them all. The snapshot topic's consumer is stood in for,
handing out a few records per fetch, and the clock is the test's own: each fetch takes a second.
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import pytest
from fixtures.kafka_fakes import PartitionReader

from connectors.kafka import snapshots
from connectors.kafka.errors import KafkaLogError
from connectors.kafka.settings import KafkaSettings

SETTINGS = KafkaSettings(bootstrap="127.0.0.1:9", topic="t", request_timeout_ms=10_000)
RECORDS = 100
PER_FETCH = 5


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def _consumer(clock: _Clock, stalls_at: int | None) -> type:
    """The snapshot partition: the scheduler's snapshot at 0, the connector's after it; from ``stalls_at`` on, the
    broker sends nothing more."""
    wanted, other = snapshots.key("t", 0), snapshots.key("t", 0, connector=True)

    class Consumer(PartitionReader):
        async def end_offsets(self, tps: list[Any]) -> dict[Any, int]:
            return {tp: RECORDS for tp in tps}

        async def getmany(self, tp: Any, timeout_ms: int = 0) -> dict[Any, list[Any]]:
            clock.now += 1.0
            if stalls_at is not None and self.at >= stalls_at:
                return {}
            recs = [SimpleNamespace(offset=k, key=wanted if k == 0 else other, value=b"snapshot %d" % k, headers=[])
                    for k in range(self.at, min(RECORDS, self.at + PER_FETCH))]
            self.at += len(recs)
            return {tp: recs}

    return Consumer


def _newest(monkeypatch: pytest.MonkeyPatch, stalls_at: int | None = None) -> Any:
    clock = _Clock()
    monkeypatch.setattr(snapshots, "time", SimpleNamespace(monotonic=clock.monotonic, time=time.time))
    monkeypatch.setattr(snapshots, "AIOKafkaConsumer", _consumer(clock, stalls_at))

    async def main() -> Any:
        async with snapshots._Reading(SETTINGS, 0, connector=False) as reading:  # noqa: SLF001
            return await reading.newest_below(reading.end)

    return asyncio.run(main())


def test_a_scan_back_through_many_connector_snapshots_finds_the_schedulers(monkeypatch: pytest.MonkeyPatch) -> None:
    found = _newest(monkeypatch)  # windows of 4, 32, then all 100 records: 28 fetches, 28 s on the test's clock
    assert found is not None and (found.offset, found.value) == (0, b"snapshot 0")


def test_a_scan_that_stalls_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(KafkaLogError, match="timed out reading snapshots"):
        _newest(monkeypatch, stalls_at=40)
