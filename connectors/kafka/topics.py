"""Creating and checking the two topics: the log (infinite retention) and the snapshots (compacted)."""

from __future__ import annotations

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, for_code

from connectors.kafka.errors import KafkaLogError, start_error
from connectors.kafka.settings import KafkaSettings, client_kwargs

TOPIC_ALREADY_EXISTS = 36

RECORD_OVERHEAD = 64 << 10
"""Room for a record's framing and headers on top of its value (producer and topic limits)."""


def log_topic_config(s: KafkaSettings) -> dict[str, str]:
    cfg = {
        "cleanup.policy": "delete",
        "retention.ms": "-1",
        "retention.bytes": "-1",
        "max.message.bytes": str(s.max_batch_bytes + RECORD_OVERHEAD),
        "message.timestamp.type": "CreateTime",
        "unclean.leader.election.enable": "false",
    }
    if s.min_insync_replicas:
        cfg["min.insync.replicas"] = str(s.min_insync_replicas)
    return cfg


def snapshot_topic_config(s: KafkaSettings) -> dict[str, str]:
    cfg = {
        "cleanup.policy": "compact",
        "max.message.bytes": str(s.max_snapshot_bytes + RECORD_OVERHEAD),
        "segment.ms": str(3_600_000),  # roll hourly so old snapshots get compacted away
        "min.cleanable.dirty.ratio": "0.1",
        "unclean.leader.election.enable": "false",
    }
    if s.min_insync_replicas:
        cfg["min.insync.replicas"] = str(s.min_insync_replicas)
    return cfg


async def ensure_topics(s: KafkaSettings, *, snapshots: bool = True) -> None:
    """Create the log topic (and the snapshot topic) with ``s.shards`` partitions unless they exist."""
    admin = AIOKafkaAdminClient(**client_kwargs(s))
    try:
        await admin.start()
        rf = s.replication_factor
        if rf == -1:  # aiokafka speaks CreateTopics v3, which cannot ask for the broker's default
            rf = min(3, len((await admin.describe_cluster())["brokers"]))
        topics = [NewTopic(s.topic, s.shards, rf, topic_configs=log_topic_config(s))]
        if snapshots:
            topics.append(NewTopic(s.snapshots, s.shards, rf, topic_configs=snapshot_topic_config(s)))
        response = await admin.create_topics(topics)
    except KafkaError as exc:
        raise await start_error(exc, f"cannot create the topics {s.topic!r}/{s.snapshots!r} at {s.bootstrap}",
                                s) from exc
    finally:
        await admin.close()
    for name, code, message, *_ in response.topic_errors:
        if code not in (0, TOPIC_ALREADY_EXISTS):
            err = for_code(code)
            raise KafkaLogError(f"cannot create topic {name!r} at {s.bootstrap}: {message or err.__name__}",
                                bool(getattr(err, "retriable", False)))
