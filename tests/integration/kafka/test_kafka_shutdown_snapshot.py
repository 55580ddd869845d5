"""A replica's stop snapshots a shard only as the fold of the committed log (review s36 R1, R2), against a broker.

* An undecodable record stops the active replica; no snapshot it leaves says the record was folded, so the
  replica given the shard next meets the same record and stops there too, naming it (there is no quarantine on
  the scheduler's path: ``--quarantine`` is the reading tools').
* A stop while a chained decision transaction cannot commit (a broker slow to answer EndTxn) cancels the step
  after ``shutdown_step_s``: the batches applied to the state are of a transaction the next producer aborts, and
  the stop must not snapshot them.

The replicas run in the test's event loop; ``decide`` is stood in for by one that moves the log's time on with
each batch, so a chain of several batches needs no workloads.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from kafkahelp import fresh_topic, settings

from connectors.kafka import scheduler_service, snapshots
from connectors.kafka.log import BATCH_HEADERS, KafkaLog, client_kwargs, to_kafka, to_offset
from connectors.kafka.scheduler_service import SchedulerReplica, ServiceOptions
from connectors.kafka.settings import KafkaSettings
from events import schema as ev
from events.errors import UndecodableRecord
from projections import snapshot
from projections.cluster import ClusterState

pytestmark = pytest.mark.kafka


class Run:
    """A replica running in this loop, its reports and its stop event."""

    def __init__(self, s: KafkaSettings, name: str, **options: Any) -> None:
        self.reports: list[tuple[str, dict[str, Any]]] = []
        self.stop = asyncio.Event()
        opts = ServiceOptions(**{"ticks": False, "freeze_gc": False, "stats_interval_s": 0, "instance_id": name,
                                 "retry_backoff_s": 0.1, "shutdown_step_s": 1.0, **options})
        self.replica = SchedulerReplica(s, opts, lambda kind, fields: self.reports.append((kind, fields)))
        self.task = asyncio.create_task(self.replica.run(self.stop))

    def seen(self, kind: str) -> list[dict[str, Any]]:
        return [f for k, f in self.reports if k == kind]

    async def until_active_or_done(self) -> None:
        async with asyncio.timeout(60):
            while not self.seen("active") and not self.task.done():
                await asyncio.sleep(0.05)


async def fold_below(log: KafkaLog, kafka_next: int) -> ClusterState:
    """The fold of the committed log's records below Kafka offset ``kafka_next``."""
    state = ClusterState()
    async for batch in log.read_batches(0):
        for r in batch:
            if to_kafka(r.offset) >= kafka_next:
                return state
            state.apply(r)
    return state


async def check_snapshot_is_a_fold(s: KafkaSettings, log: KafkaLog, *, not_past: int | None = None
                                   ) -> snapshots.SnapshotRecord | None:
    """The shard's latest snapshot, if any, holds exactly the committed log below its ``next`` (which is at most
    ``not_past``)."""
    loaded = await snapshots.load_latest(s, 0)
    if loaded is None:
        return None
    rec, state = loaded
    if not_past is not None:
        assert rec.next <= not_past, f"the snapshot says Kafka record {rec.next} comes next: {not_past} is skipped"
    folded = await fold_below(log, rec.next)
    assert (state.offset, state.time) == (folded.offset, folded.time), rec
    assert snapshot.digest(state) == snapshot.digest(folded), rec
    return rec


def ticking(bound: int) -> Any:
    def decide(state: ClusterState, _config: Any) -> list[Any]:
        if state.time < bound:
            return [ev.ClockTicked(time=state.time + 1000, id=f"d{state.time + 1000}")]
        return []
    return decide


@pytest.mark.asyncio
async def test_an_undecodable_record_stops_every_replica_given_the_shard_at_it(kafka_broker) -> None:
    s = settings(kafka_broker.bootstrap, fresh_topic("undecodable"))
    log = await KafkaLog.open(s)
    try:
        await log.append([ev.ClockTicked(time=1000, id="t1")])
        a = Run(s, "a")
        await a.until_active_or_done()
        assert a.seen("active"), a.reports
        await log.append([ev.ClockTicked(time=2000, id="t2")])
        p = AIOKafkaProducer(**client_kwargs(s), enable_idempotence=True, acks="all")
        await p.start()
        try:
            md = await p.send_and_wait(s.topic, b"\x91\xc1 not an event", partition=0, headers=BATCH_HEADERS)
        finally:
            await p.stop()
        await log.append([ev.ClockTicked(time=3000, id="t3")])
        with pytest.raises(UndecodableRecord) as err:
            await asyncio.wait_for(a.task, 60)
        assert err.value.offset == to_offset(md.offset)

        await check_snapshot_is_a_fold(s, log, not_past=md.offset)

        b = Run(s, "b")
        await b.until_active_or_done()
        assert not b.seen("active"), f"b passed Kafka record {md.offset} without folding it: {b.seen('active')}"
        with pytest.raises(UndecodableRecord) as again:
            await b.task
        assert again.value.offset == to_offset(md.offset)
        assert f"log offset {to_offset(md.offset)}" in str(again.value)
        await check_snapshot_is_a_fold(s, log, not_past=md.offset)
    finally:
        await log.close()


@pytest.mark.asyncio
async def test_a_stop_during_a_chained_transaction_that_cannot_commit_snapshots_only_the_committed_log(
        kafka_broker, monkeypatch) -> None:
    s = settings(kafka_broker.bootstrap, fresh_topic("cutoff"))
    monkeypatch.setattr(scheduler_service, "decide", ticking(20_000))
    commits = {"decisions": 0}
    hanging = asyncio.Event()
    real_commit = scheduler_service.ShardEngine._commit

    async def commit(self, p):  # type: ignore[no-untyped-def]
        if self.phase is scheduler_service.Phase.ACTIVE:  # a decision transaction (markers commit in setup)
            commits["decisions"] += 1
            if commits["decisions"] == 2:  # the broker does not answer this EndTxn
                assert self.speculative  # batches of this transaction are in the state: the case at hand
                hanging.set()
                await asyncio.Event().wait()
        return await real_commit(self, p)

    monkeypatch.setattr(scheduler_service.ShardEngine, "_commit", commit)
    log = await KafkaLog.open(s)
    try:
        await log.append([ev.ClockTicked(time=1000, id="t1")])
        a = Run(s, "a", chain=4, offsets_interval_s=0)
        async with asyncio.timeout(60):
            await hanging.wait()
        a.stop.set()
        await asyncio.wait_for(a.task, 60)
        await check_snapshot_is_a_fold(s, log)

        # the replica given the shard next restores that and decides on from the committed log alone
        monkeypatch.setattr(scheduler_service, "decide", lambda _state, _config: [])
        b = Run(s, "b")
        await b.until_active_or_done()
        assert b.seen("active"), b.reports
        b.stop.set()
        await asyncio.wait_for(b.task, 60)
        rec = await check_snapshot_is_a_fold(s, log)
        assert rec is not None and rec.next > b.seen("active")[0]["marker"]
    finally:
        await log.close()
