"""The scheduler's transactional producer retries CONCURRENT_TRANSACTIONS on a transaction's first
AddPartitionsToTxn after its own retry backoff, not after aiokafka's fixed 20 ms (a module constant the
service shortens; this fails if an aiokafka upgrade moves it, so the shortening cannot silently stop)."""

from __future__ import annotations

import pytest
from aiokafka.producer import sender as aiokafka_sender
from kafkahelp import fresh_topic, settings

from connectors.kafka.scheduler_service import SchedulerReplica, ServiceOptions, ShardEngine
from connectors.kafka.topics import ensure_topics


@pytest.mark.asyncio
async def test_concurrent_transactions_are_retried_after_the_configured_backoff(kafka_broker, monkeypatch) -> None:
    monkeypatch.setattr(aiokafka_sender, "BACKOFF_OVERRIDE", 0.02)  # aiokafka's own value, restored afterwards
    s = settings(kafka_broker.bootstrap, fresh_topic("txnbackoff"), transaction_retry_backoff_ms=3)
    await ensure_topics(s)
    replica = SchedulerReplica(s, ServiceOptions(freeze_gc=False))
    engine = ShardEngine(replica, 0)
    try:
        await engine._new_producer()
    finally:
        await engine.close_producer()
        await replica.consumer.stop()
    assert aiokafka_sender.BACKOFF_OVERRIDE == 0.003
