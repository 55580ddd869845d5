"""The snapshot writer reads back the log record a snapshot ends at (its anchor) before writing it, and refuses a
snapshot of a record the log does not hold: at once when no record is written there (past the log's high
watermark: the topic created again, cut back), after waiting when one is written in a transaction whose commit is
not visible yet (below the high watermark, at or past the last stable offset).

The log's consumers are stood in for: the read_committed one sees the partition's end at its last stable offset,
the read_uncommitted one at its high watermark. The refusal against a broker is in
``tests/integration/kafka/test_kafka_connector_snapshots.py``.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from fixtures.kafka_fakes import PartitionReader

from connectors.kafka import snapshots
from connectors.kafka.errors import KafkaLogError
from connectors.kafka.settings import KafkaSettings


class _Partition:
    """The log partition: records 0 to ``high - 1`` are written; those below ``stable`` are visible to a
    read_committed reader. ``resolved_after``: the last stable offset reaches the high watermark after that many
    reads of it (the transaction's markers written); None: never asked twice (a second read fails the test)."""

    def __init__(self, stable: int, high: int, resolved_after: int | None) -> None:
        self.stable, self.high, self.resolved_after = stable, high, resolved_after
        self.stable_reads = 0

    def last_stable(self) -> int:
        self.stable_reads += 1
        if self.resolved_after is None:
            assert self.stable_reads == 1, "waited for a record that no transaction is writing"
        elif self.stable_reads > self.resolved_after:
            self.stable = self.high
        return self.stable


def _consumers(partition: _Partition) -> type:
    class Consumer(PartitionReader):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__()
            self.committed = kwargs.get("isolation_level") == "read_committed"

        async def end_offsets(self, tps: list[Any]) -> dict[Any, int]:
            end = partition.last_stable() if self.committed else partition.high
            return {tp: end for tp in tps}

        async def getmany(self, tp: Any, timeout_ms: int = 0) -> dict[Any, list[Any]]:
            if self.at >= partition.stable:
                return {}
            rec = SimpleNamespace(offset=self.at, timestamp=1000 + self.at, value=f"record {self.at}".encode())
            self.at += 1
            return {tp: [rec]}

    return Consumer


def _anchor(monkeypatch: pytest.MonkeyPatch, partition: _Partition, nxt: int) -> bytes:
    monkeypatch.setattr(snapshots, "AIOKafkaConsumer", _consumers(partition))
    writer = snapshots.SnapshotWriter(KafkaSettings(bootstrap="127.0.0.1:9", topic="t"))

    async def main() -> bytes:
        try:
            return await writer._anchor(0, nxt)  # noqa: SLF001 - the read-back write() does first
        finally:
            await writer.close()

    return asyncio.run(main())


def test_a_snapshot_past_the_logs_end_is_refused_without_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    partition = _Partition(stable=5, high=5, resolved_after=None)
    with pytest.raises(KafkaLogError, match="holds no committed record at Kafka offset 9"):
        _anchor(monkeypatch, partition, nxt=10)
    assert partition.stable_reads == 1


def test_a_snapshot_of_a_record_whose_commit_is_not_visible_yet_waits_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    partition = _Partition(stable=4, high=5, resolved_after=3)  # record 4: its transaction's markers on their way
    got = _anchor(monkeypatch, partition, nxt=5)
    assert got == snapshots.anchor(SimpleNamespace(timestamp=1004, value=b"record 4"))
    assert partition.stable_reads == 4
