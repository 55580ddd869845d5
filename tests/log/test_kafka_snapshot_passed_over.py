"""A shard's setup passes over a snapshot record it cannot read and folds its log from the start, or from an
older snapshot it can use.

The Kafka reads are stood in for: the snapshot partition holds the records given (newest last) and the log holds
whatever they end at (``snapshots.restore``'s reading), and the producer and the catch-up marker are stand-ins;
the real path against a broker, and the checks against the log, are in ``tests/integration/kafka``.
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

    async def beginning_offsets(self, tps: list[object]) -> dict[object, int]:
        return dict.fromkeys(tps, 0)


def _stored(values: list[bytes]) -> type:
    """A stand-in for the snapshot partition holding ``values`` (newest last), each of the log it is checked
    against."""

    class Reading:
        def __init__(self, settings: KafkaSettings, partition: int, _connector: bool) -> None:
            self.where, self.end = f"{settings.snapshots}/{partition}", len(values)

        async def __aenter__(self) -> Reading:
            return self

        async def __aexit__(self, *_exc: object) -> None:
            pass

        async def newest_below(self, upper: int) -> Any:
            return snapshots._Found(upper - 1, values[upper - 1], None) if upper > 0 else None

        async def not_of_the_log(self, _rec: SnapshotRecord, _anchor: bytes | None) -> str | None:
            return None

    return Reading


def _set_up(monkeypatch: pytest.MonkeyPatch, *values: bytes
            ) -> tuple[scheduler_service.ShardEngine, list, _Consumer]:
    """A fresh engine of shard 0 set up with ``values`` as its snapshot records (newest last); its reports and
    consumer."""
    async def nothing(*_args: Any) -> int:
        return 7

    monkeypatch.setattr(snapshots, "_Reading", _stored(list(values)))
    reports: list[tuple[str, dict]] = []
    replica = SimpleNamespace(settings=KafkaSettings(bootstrap="127.0.0.1:9"), instance_id="r1", marker_headers=[],
                              report=lambda kind, fields: reports.append((kind, fields)))
    engine = scheduler_service.ShardEngine(replica, 0)  # type: ignore[arg-type]
    monkeypatch.setattr(engine, "_new_producer", nothing)
    monkeypatch.setattr(engine, "_transact", nothing)
    consumer = _Consumer()
    asyncio.run(engine.setup(consumer))  # type: ignore[arg-type]
    return engine, reports, consumer


def _record(raw_state: bytes, offset: int = -1, nxt: int = 40) -> bytes:
    return snapshots.pack("kueue-es", 0, nxt, offset, raw_state)


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


def test_a_snapshot_holding_the_state_at_another_offset_is_passed_over_for_an_older_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """L4: the record says offset 38 but its state is at -1 (nothing folded): not used; the older one is."""
    older, wrong = _record(snapshot.encode(ClusterState()), nxt=20), _record(snapshot.encode(ClusterState()), 38)
    engine, reports, consumer = _set_up(monkeypatch, older, wrong)
    assert engine.next == 20 and consumer.sought == [20]
    [(_, fields)] = [r for r in reports if r[0] == "checkpoint_passed_over"]
    assert fields["reason"] == f"{engine.settings.snapshots}/0@1: it holds the state at offset -1, not 38"


def test_a_snapshot_it_cannot_read_is_passed_over_for_an_older_one(monkeypatch: pytest.MonkeyPatch) -> None:
    older = _record(snapshot.encode(ClusterState()), nxt=20)
    engine, reports, consumer = _set_up(monkeypatch, older, b"\x93not a record")
    assert engine.next == 20 and consumer.sought == [20]
    assert len([r for r in reports if r[0] == "checkpoint_passed_over"]) == 1
