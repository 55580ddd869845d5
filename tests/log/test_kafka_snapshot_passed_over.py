"""A shard's setup passes over a snapshot record it cannot read and folds its log from the start.

The Kafka reads are stood in for: ``snapshots.load_latest`` unpacks the bytes given (as it does the newest record
it finds), and the producer and the catch-up marker are stand-ins; the real path against a broker is in
``tests/integration/kafka``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from connectors.kafka import scheduler_service, snapshots
from connectors.kafka.settings import KafkaSettings
from connectors.kafka.snapshots import SnapshotRecord
from events.errors import InvalidInput
from projections import snapshot
from projections.cluster import ClusterState

GOLDEN = Path(__file__).parents[1] / "projections" / "golden"


class _Consumer:
    def __init__(self) -> None:
        self.sought: list[int] = []

    def seek(self, _tp: object, offset: int) -> None:
        self.sought.append(offset)

    def resume(self, _tp: object) -> None:
        pass


def _set_up(monkeypatch: pytest.MonkeyPatch, value: bytes) -> tuple[scheduler_service.ShardEngine, list, _Consumer]:
    """A fresh engine of shard 0 set up with ``value`` as the newest snapshot record; its reports and consumer."""
    async def load_latest(_settings: KafkaSettings, _partition: int) -> tuple[SnapshotRecord, ClusterState]:
        return snapshots.unpack(value)

    async def nothing(*_args: Any) -> int:
        return 7

    monkeypatch.setattr(snapshots, "load_latest", load_latest)
    reports: list[tuple[str, dict]] = []
    replica = SimpleNamespace(settings=KafkaSettings(bootstrap="127.0.0.1:9"), instance_id="r1", marker_headers=[],
                              report=lambda kind, fields: reports.append((kind, fields)))
    engine = scheduler_service.ShardEngine(replica, 0)  # type: ignore[arg-type]
    monkeypatch.setattr(engine, "_new_producer", nothing)
    monkeypatch.setattr(engine, "_transact", nothing)
    consumer = _Consumer()
    asyncio.run(engine.setup(consumer))  # type: ignore[arg-type]
    return engine, reports, consumer


def _record(raw_state: bytes) -> bytes:
    return snapshots.pack("kueue-es", 0, 40, 39, raw_state)


@pytest.mark.parametrize(("value", "reason"), [
    (b"\x93not a record", "not a kueue-es snapshot record"),
    (_record(b"\xa5junk!"), "not a kueue-es snapshot"),
    (_record(snapshot.encode(ClusterState()).replace(bytes([snapshot.SNAPSHOT_VERSION]), b"\x7f", 1)), "snapshot version 127 is not supported"),
    (_record((GOLDEN / "v48-afs-changed.snap").read_bytes()), "Admission Fair Sharing history recorded before"),
], ids=["no record", "no snapshot", "unknown version", "unconvertible"])
def test_a_snapshot_it_cannot_read_is_passed_over_and_the_log_folded_from_the_start(
        monkeypatch: pytest.MonkeyPatch, value: bytes, reason: str) -> None:
    with pytest.raises(InvalidInput):
        snapshots.unpack(value)
    engine, reports, consumer = _set_up(monkeypatch, value)
    assert engine.next == 0 and consumer.sought == [0]
    assert snapshot.digest(engine.state) == snapshot.digest(ClusterState())
    [(kind, fields)] = [r for r in reports if r[0] == "checkpoint_passed_over"]
    assert fields["shard"] == 0 and fields["log"] == f"{engine.settings.snapshots}/0" and reason in fields["reason"]


def test_a_snapshot_it_reads_is_restored_and_the_log_read_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    state = ClusterState()
    engine, reports, consumer = _set_up(monkeypatch, _record(snapshot.encode(state)))
    assert engine.next == 40 and consumer.sought == [40]
    assert not [r for r in reports if r[0] == "checkpoint_passed_over"]
