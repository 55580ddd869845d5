"""Smoke tests for the test broker: topics, transactions, read_committed, restarts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

if TYPE_CHECKING:  # the fixture's class lives in this directory's conftest.py
    from conftest import KafkaBroker

pytestmark = pytest.mark.kafka

TEST_TIMEOUT_S = 90


async def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    finally:
        await admin.close()


@asynccontextmanager
async def txn_producer(bootstrap: str, transactional_id: str) -> AsyncIterator[AIOKafkaProducer]:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id=transactional_id,
        enable_idempotence=True,
        acks="all",
    )
    await producer.start()
    try:
        yield producer
    finally:
        await producer.stop()


@asynccontextmanager
async def committed_consumer(
    bootstrap: str, *topics: str, **kwargs: object
) -> AsyncIterator[AIOKafkaConsumer]:
    consumer = AIOKafkaConsumer(
        *topics,
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **kwargs,
    )
    await consumer.start()
    try:
        yield consumer
    finally:
        await consumer.stop()


async def drain(consumer: AIOKafkaConsumer, want: int, *, deadline_s: float = 30.0) -> list[bytes]:
    """Read values until `want` records arrived (or fail after deadline_s)."""
    got: list[bytes] = []
    async with asyncio.timeout(deadline_s):
        while len(got) < want:
            batches = await consumer.getmany(timeout_ms=500)
            for records in batches.values():
                got.extend(r.value for r in records if r.value is not None)
    return got


@pytest.mark.asyncio
async def test_transactional_produce_read_committed(kafka_broker: KafkaBroker) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = "smoke-txn"
    async with asyncio.timeout(TEST_TIMEOUT_S):
        await create_topic(bootstrap, topic, partitions=3)

        async with txn_producer(bootstrap, "smoke-txn-producer") as producer:
            async with producer.transaction():
                for i in range(10):
                    await producer.send(topic, key=b"k%d" % (i % 3), value=b"committed-%d" % i)
            # An aborted transaction must stay invisible to read_committed readers.
            await producer.begin_transaction()
            for i in range(5):
                await producer.send(topic, key=b"k%d" % (i % 3), value=b"aborted-%d" % i)
            await producer.abort_transaction()
            async with producer.transaction():
                await producer.send(topic, key=b"k0", value=b"committed-last")

        async with committed_consumer(bootstrap) as consumer:
            consumer.assign([TopicPartition(topic, p) for p in range(3)])
            await consumer.seek_to_beginning()
            got = await drain(consumer, 11)
            # Nothing else (in particular no aborted record) is pending.
            rest = await consumer.getmany(timeout_ms=1000)
            got.extend(r.value for records in rest.values() for r in records if r.value is not None)

    assert sorted(got) == sorted([b"committed-%d" % i for i in range(10)] + [b"committed-last"])
    # Per-key order is preserved (same key -> same partition).
    k0 = [v for v in got if v in {b"committed-0", b"committed-3", b"committed-6", b"committed-9"}]
    assert k0 == [b"committed-0", b"committed-3", b"committed-6", b"committed-9"]


@pytest.mark.asyncio
async def test_clients_survive_broker_restart(kafka_broker: KafkaBroker) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = "smoke-restart"
    group = "smoke-restart-group"
    async with asyncio.timeout(TEST_TIMEOUT_S * 2):
        await create_topic(bootstrap, topic, partitions=2)

        async with (
            txn_producer(bootstrap, "smoke-restart-producer") as producer,
            committed_consumer(bootstrap, topic, group_id=group) as consumer,
        ):
            async with producer.transaction():
                for i in range(5):
                    await producer.send(topic, value=b"before-%d" % i)
            before = await drain(consumer, 5)
            await consumer.commit()

            # Clean restart of the node; the clients stay up and reconnect.
            await asyncio.to_thread(kafka_broker.restart)

            async with producer.transaction():
                for i in range(5):
                    await producer.send(topic, value=b"after-%d" % i)
            after = await drain(consumer, 5, deadline_s=60)
            await consumer.commit()

        assert sorted(before) == [b"before-%d" % i for i in range(5)]
        assert sorted(after) == [b"after-%d" % i for i in range(5)], kafka_broker.logs()

        # Committed offsets survived the restart: a new member of the group
        # starts after everything already consumed.
        async with (
            txn_producer(bootstrap, "smoke-restart-producer") as producer,
            committed_consumer(bootstrap, topic, group_id=group) as consumer,
        ):
            async with producer.transaction():
                await producer.send(topic, value=b"third")
            assert await drain(consumer, 1) == [b"third"]


@pytest.mark.asyncio
async def test_committed_data_survives_broker_crash(kafka_broker: KafkaBroker) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = "smoke-crash"
    async with asyncio.timeout(TEST_TIMEOUT_S * 2):
        await create_topic(bootstrap, topic, partitions=1)
        async with txn_producer(bootstrap, "smoke-crash-producer") as producer:
            async with producer.transaction():
                for i in range(20):
                    await producer.send(topic, value=b"rec-%d" % i)

        # SIGKILL: no controlled shutdown, the node recovers its logs on start.
        await asyncio.to_thread(kafka_broker.restart, hard=True)

        async with committed_consumer(bootstrap) as consumer:
            consumer.assign([TopicPartition(topic, 0)])
            await consumer.seek_to_beginning()
            got = await drain(consumer, 20, deadline_s=60)
    assert got == [b"rec-%d" % i for i in range(20)], kafka_broker.logs()
