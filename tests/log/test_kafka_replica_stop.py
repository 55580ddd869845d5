"""A Kafka scheduler replica snapshots a shard at its stop only when the shard's state is the fold of the committed
log (review s36 R1, R2).

The replica runs its real loop (``SchedulerReplica.run``: fetch, fold, decide in a transaction, shut down) with the
group consumer, the transactional producer and the snapshot writer stood in for; the paths against a broker are in
``tests/integration/kafka/test_kafka_shutdown_snapshot.py``.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.errors import NoOffsetForPartitionError
from fixtures.kafka_fakes import GroupConsumer, TransactionalProducer

from connectors.kafka import scheduler_service, snapshots
from connectors.kafka.log import BATCH_HEADERS, to_offset
from connectors.kafka.scheduler_service import Phase, SchedulerReplica, ServiceOptions, ShardEngine
from connectors.kafka.settings import KafkaSettings
from events import schema as ev
from events.codec import encode_batch
from events.errors import UndecodableRecord
from projections import snapshot
from projections.cluster import ClusterState

GARBAGE = b"\x91\xc1 not an event"


def _record(offset: int, value: bytes) -> SimpleNamespace:
    return SimpleNamespace(offset=offset, value=value, headers=BATCH_HEADERS)


def _tick(time: int) -> bytes:
    return encode_batch([ev.ClockTicked(time=time, id=f"t{time}")])


class _Consumer(GroupConsumer):
    """The group consumer: hands out the fetches queued in ``fetches``, then nothing."""

    def __init__(self, **_kwargs: Any) -> None:
        self.fetches: list[dict[Any, list[Any]]] = []

    async def getmany(self, *_tps: Any, timeout_ms: int = 0) -> dict[Any, list[Any]]:
        if self.fetches:
            return self.fetches.pop(0)
        return await super().getmany(*_tps, timeout_ms=timeout_ms)


_Producer = TransactionalProducer


class _Writer:
    def __init__(self) -> None:
        self.written: list[bytes] = []

    async def write(self, _partition: int, value: bytes, *, connector: bool = False) -> int:
        self.written.append(value)
        return len(self.written) - 1

    async def close(self) -> None:
        pass


def _replica(monkeypatch: pytest.MonkeyPatch, **options: Any) -> tuple[SchedulerReplica, ShardEngine, _Writer]:
    """A replica active on shard 0, which has folded a ClockTicked at Kafka offset 0 and has nothing to decide
    unless ``decide`` is patched."""
    monkeypatch.setattr(scheduler_service, "AIOKafkaConsumer", _Consumer)
    monkeypatch.setattr(scheduler_service, "decide", lambda _state, _config: [])
    monkeypatch.setattr(ServiceOptions, "config_to_record", lambda *_: [])  # a configuration already recorded
    opts = ServiceOptions(**{"ticks": False, "freeze_gc": False, "stats_interval_s": 0, "instance_id": "r1",
                             "shutdown_step_s": 0.05, "offsets_interval_s": 0, **options})
    replica = SchedulerReplica(KafkaSettings(bootstrap="127.0.0.1:9"), opts)
    writer = _Writer()
    replica.snapshot_writer = writer  # type: ignore[assignment]
    e = ShardEngine(replica, 0)
    e.phase, e.fresh = Phase.ACTIVE, False
    e.ingest([_record(0, _tick(1000))])
    replica.engines[0] = e
    return replica, e, writer


def _fold(*values: bytes) -> ClusterState:
    state = ClusterState()
    for k, value in enumerate(values):
        for r in scheduler_service.batch_records(value, k, 0, None):
            state.apply(r)
    return state


# --- an undecodable record (R1) ------------------------------------------------------------------------------


def test_an_undecodable_record_is_not_passed_and_the_events_before_it_are_counted() -> None:
    replica = SimpleNamespace(settings=KafkaSettings(bootstrap="127.0.0.1:9"), instance_id="r1",
                              options=ServiceOptions(freeze_gc=False), report=lambda *_: None)
    e = ShardEngine(replica, 0)  # type: ignore[arg-type]
    e.phase, e.fresh = Phase.ACTIVE, False
    with pytest.raises(UndecodableRecord) as err:
        e.ingest([_record(0, _tick(1000)), _record(1, _tick(2000)), _record(2, GARBAGE)])
    assert err.value.offset == to_offset(2)
    assert e.next == 2 and e.state.offset == to_offset(1) and e.since_snapshot == 2
    assert (e.phase, e.fresh) == (Phase.SETUP, True)  # the next setup restores a snapshot: it meets record 2 again


def test_a_replica_stopped_by_an_undecodable_record_writes_no_snapshot_past_it(monkeypatch: pytest.MonkeyPatch) -> None:
    async def go() -> list[bytes]:
        replica, e, writer = _replica(monkeypatch)
        replica.consumer.fetches.append({e.tp: [_record(1, _tick(2000)), _record(2, GARBAGE)]})  # type: ignore[attr-defined]
        with pytest.raises(UndecodableRecord, match="log offset 2000000"):
            await replica.run(asyncio.Event())
        return writer.written

    written = asyncio.run(go())
    for value in written:  # none, or one that still has record 2 ahead of it
        rec, state = snapshots.unpack(value)
        assert rec.next <= 2, f"a snapshot says Kafka record {rec.next} comes next: record 2 would be skipped"
        assert snapshot.digest(state) == snapshot.digest(_fold(*[_tick(1000), _tick(2000)][:rec.next]))


# --- a decision transaction cut off (R2) ---------------------------------------------------------------------


def _ticking(bound: int) -> Any:
    """``decide`` standing in for decisions: each batch moves the log's time on, up to ``bound``."""
    def decide(state: ClusterState, _config: Any) -> list[Any]:
        if state.time < bound:
            return [ev.ClockTicked(time=state.time + 1000, id=f"d{state.time + 1000}")]
        return []
    return decide


def test_a_stop_that_cuts_off_a_chained_transaction_snapshots_nothing_it_held(monkeypatch: pytest.MonkeyPatch) -> None:
    async def go() -> tuple[list[bytes], bool]:
        replica, e, writer = _replica(monkeypatch, chain=4)
        monkeypatch.setattr(scheduler_service, "decide", _ticking(10_000))
        producer = _Producer(at=1)
        producer.hang = True
        e.producer = producer  # type: ignore[assignment]
        stop = asyncio.Event()
        run = asyncio.create_task(replica.run(stop))
        await producer.committing.wait()  # batches 1-4 are applied locally; the commit does not come back
        speculative = e.speculative
        stop.set()
        await run
        return writer.written, speculative

    written, speculative = asyncio.run(go())
    assert speculative  # the cut-off point this test is about
    assert written == [], [snapshots.unpack(v)[0] for v in written]


def test_a_failure_in_a_later_batch_of_a_chain_snapshots_nothing_it_held(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"n": 0}
    ticking = _ticking(10_000)

    def decide(state: ClusterState, config: Any) -> list[Any]:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("a bug deciding the second batch")
        return ticking(state, config)

    async def go() -> list[bytes]:
        replica, e, writer = _replica(monkeypatch, chain=4)
        monkeypatch.setattr(scheduler_service, "decide", decide)
        e.producer = _Producer(at=1)  # type: ignore[assignment]
        with pytest.raises(RuntimeError, match="second batch"):
            await replica.run(asyncio.Event())
        return writer.written

    assert asyncio.run(go()) == []


def test_a_speculative_engine_is_never_snapshotted(monkeypatch: pytest.MonkeyPatch) -> None:
    async def go() -> list[bytes]:
        replica, e, writer = _replica(monkeypatch)
        e.speculative = True
        await e.maybe_snapshot(force=True)
        await replica._shutdown()
        return writer.written

    assert asyncio.run(go()) == []


# --- a clean stop -------------------------------------------------------------------------------------------


def test_a_clean_stop_snapshots_the_fold_of_the_committed_log(monkeypatch: pytest.MonkeyPatch) -> None:
    async def go() -> list[bytes]:
        replica, e, writer = _replica(monkeypatch, shutdown_step_s=60)  # the snapshot is not cut short on a busy host
        replica.consumer.fetches.append({e.tp: [_record(1, _tick(2000))]})  # type: ignore[attr-defined]
        stop = asyncio.Event()
        run = asyncio.create_task(replica.run(stop))
        while e.next < 2:
            await asyncio.sleep(0.01)
        stop.set()
        await run
        return writer.written

    [value] = asyncio.run(go())
    rec, state = snapshots.unpack(value)
    assert (rec.next, rec.offset) == (2, to_offset(1))
    assert snapshot.digest(state) == snapshot.digest(_fold(_tick(1000), _tick(2000)))


# --- a shard waiting for its setup (review s36-2 L1) ---------------------------------------------------------


def test_a_shard_waiting_for_its_setup_holds_back_no_active_shard(monkeypatch: pytest.MonkeyPatch) -> None:
    """A shard whose setup is retried later has no position in a fresh group (none committed): a fetch that asks
    for it raises; the active shard's records are fetched and folded meanwhile."""
    async def go() -> None:
        replica, e, _ = _replica(monkeypatch)
        waiting = ShardEngine(replica, 1)
        waiting.assigned, waiting.retry_at = True, float("inf")
        replica.engines[1] = waiting
        consumer = replica.consumer
        consumer.fetches.append({e.tp: [_record(1, _tick(2000))]})  # type: ignore[attr-defined]
        fetch = consumer.getmany

        async def no_position_for_the_waiting_shard(*tps: Any, timeout_ms: int = 0) -> dict[Any, list[Any]]:
            if not tps or waiting.tp in tps:
                raise NoOffsetForPartitionError(f"no committed offset for {waiting.tp}")
            return await fetch(*tps, timeout_ms=timeout_ms)

        consumer.getmany = no_position_for_the_waiting_shard  # type: ignore[method-assign]
        await replica._iteration(asyncio.Event())
        assert e.state.offset == to_offset(1) and waiting.phase is Phase.SETUP

    asyncio.run(go())
