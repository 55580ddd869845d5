"""The scheduler group's consumer offset: committed inside decision transactions at most once per
``offsets_interval_s``, and caught up in a transaction of its own once the shard goes quiet, so that
consumer-lag monitoring shows where the active scheduler is; with 0, in every decision transaction.

The replica runs in the test's event loop; the producer's ``send_offsets_to_transaction`` and
``commit_transaction`` are counted (not changed).
"""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from kafkahelp import fresh_topic, settings
from lockstep import LockstepDriver, Scenario, check_exactly_once

from connectors.kafka.scheduler_service import SchedulerReplica, ServiceOptions
from connectors.kafka.settings import client_kwargs

pytestmark = pytest.mark.kafka

SCENARIO = Scenario(workloads=600, per_batch=60, cluster_queues=12, cohorts=3, quota_cpu=8)


async def committed_offset(s, tp: TopicPartition) -> int | None:  # type: ignore[no-untyped-def]
    consumer = AIOKafkaConsumer(**client_kwargs(s), group_id=s.group_id, enable_auto_commit=False)
    await consumer.start()
    try:
        return await consumer.committed(tp)
    finally:
        await consumer.stop()


@pytest.mark.asyncio
@pytest.mark.parametrize("interval_s", [0.0, 0.4])
async def test_group_offset_rides_along_at_most_every_interval_and_catches_up(
        kafka_broker, monkeypatch, interval_s: float) -> None:
    s = settings(kafka_broker.bootstrap, fresh_topic("groupoffsets"))
    calls = {"offsets": 0, "commits": 0}
    real_offsets = AIOKafkaProducer.send_offsets_to_transaction
    real_commit = AIOKafkaProducer.commit_transaction

    async def send_offsets(self, offsets, group_id):  # type: ignore[no-untyped-def]
        calls["offsets"] += 1
        return await real_offsets(self, offsets, group_id)

    async def commit(self):  # type: ignore[no-untyped-def]
        calls["commits"] += 1
        return await real_commit(self)

    monkeypatch.setattr(AIOKafkaProducer, "send_offsets_to_transaction", send_offsets)
    monkeypatch.setattr(AIOKafkaProducer, "commit_transaction", commit)
    replica = SchedulerReplica(s, ServiceOptions(ticks=False, instance_id="in-process", freeze_gc=False,
                                                 offsets_interval_s=interval_s))
    stop = asyncio.Event()
    service: list[asyncio.Task[None]] = []

    async def on_batch(k: int) -> None:
        if not service:
            service.append(asyncio.create_task(replica.run(stop)))

    tp = TopicPartition(s.topic, 0)
    try:
        async with asyncio.timeout(120):
            started = time.monotonic()
            result = await LockstepDriver(s, SCENARIO).run(on_batch)
            busy_s = time.monotonic() - started
            engine = replica.engines[0]
            if interval_s:
                while await committed_offset(s, tp) != engine.next:  # quiet now: the offset catches up
                    await asyncio.sleep(0.1)
            during = dict(calls)
            await asyncio.sleep(interval_s + 0.5)  # and then no more transactions follow
            assert calls == during
    finally:
        stop.set()
        if service:
            await asyncio.wait_for(service[0], 30)

    check_exactly_once(result, SCENARIO)
    decision_txns = calls["commits"] - 1  # the catch-up marker's transaction carries no offset
    if interval_s == 0:
        assert calls["offsets"] == decision_txns
    else:
        # at most one per interval while busy, plus the one that caught up when the shard went quiet
        assert 1 <= calls["offsets"] <= busy_s / interval_s + 2
        assert calls["offsets"] < decision_txns / 2, calls
