"""The Kubernetes connector's snapshots on the snapshot topic (``run --kube`` over Kafka), against a real broker.

A mirror folded from a connector's log written to a topic is checkpointed through :class:`ConnectorSink` (under
the shard's connector key, beside the scheduler's snapshots) and restored the way ``run --kube`` starts: the same
mirror. A snapshot whose offset is past the partition's end (the topic created again under the same name) is
never written, and one written anyway (without its anchor) is passed over and named, for the older one.
"""

from __future__ import annotations

import secrets

import msgspec
import pytest
from aiokafka import AIOKafkaProducer
from kafkahelp import connector_snapshot

from connectors.k8s import mirror_snapshot
from connectors.kafka import snapshots
from connectors.kafka.errors import KafkaLogError
from connectors.kafka.log import KafkaLog
from connectors.kafka.scheduler_service import ServiceOptions
from kueue_es import config
from kueue_es.kube_service import _KafkaLog
from projections import snapshot


@pytest.mark.asyncio
async def test_a_connector_snapshot_round_trips_and_one_past_the_end_is_passed_over(kafka_bootstrap: str) -> None:
    url = f"kafka://{kafka_bootstrap}/conn-{secrets.token_hex(3)}"
    settings = config.load(env={}, overrides={"log": url})
    reports: list[tuple[str, dict]] = []
    backend = _KafkaLog(settings, ServiceOptions(), lambda kind, fields: reports.append((kind, fields)))
    log = await KafkaLog.open(backend.kafka, backend.shard)
    try:
        mirror = await connector_snapshot(backend, log, seed=5, ops=80)
        assert reports[-1][0] == "checkpoint", reports

        backend.log = log
        restored = await backend._restored()
        assert restored is not None and restored.offset == mirror.offset
        assert snapshot.digest(restored.state) == snapshot.digest(mirror.state)
        assert mirror_snapshot.encode(restored) == mirror_snapshot.encode(mirror)
        scheduler_snapshot = await snapshots.load_latest(backend.kafka, backend.shard)
        assert scheduler_snapshot is None, "the connector's key is its own"

        # a snapshot past the end: as if the topic had been created again under the same name. The writer refuses
        # to write one (the log holds no record where it ends); one written without its anchor is passed over.
        rec, _ = await snapshots.load_latest(backend.kafka, backend.shard, connector=True)
        past = msgspec.msgpack.encode(msgspec.structs.replace(rec, next=rec.next + 1000))
        with pytest.raises(KafkaLogError, match="holds no committed record at Kafka offset"):
            await backend.sink.writer.write(backend.shard, past, connector=True)
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait(backend.kafka.snapshots, past, partition=backend.shard,
                                         key=snapshots.key(backend.kafka.topic, backend.shard, connector=True))
        finally:
            await producer.stop()
        restored = await backend._restored()
        assert reports[-1][0] == "checkpoint_passed_over" and "past the log's end" in reports[-1][1]["reason"]
        assert restored is not None and restored.offset == mirror.offset, "the older snapshot is used"
    finally:
        await backend.sink.close()
        await log.close()
