"""Creating and checking the two topics: the log (infinite retention) and the snapshots (compacted).

The log is the system of record: a log topic that exists already (created by an operator, or by the broker with
its defaults) is checked, and refused when the broker would delete its records (:data:`KEEPS_RECORDS`), naming the
topic and the setting: a week later its first records would be gone, and every fold from the beginning with them.
"""

from __future__ import annotations

from typing import Any

import structlog
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import (
    ClusterAuthorizationFailedError,
    KafkaError,
    TopicAuthorizationFailedError,
    for_code,
)

from connectors.kafka.errors import KafkaLogError, start_error
from connectors.kafka.settings import KafkaSettings, client_kwargs

log = structlog.get_logger("kueue_es.kafka.topics")

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


KEEPS_RECORDS = {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"}
"""The log topic's settings under which the broker never deletes a record."""


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
        for name, code, message, *_ in response.topic_errors:
            if code not in (0, TOPIC_ALREADY_EXISTS):
                err = for_code(code)
                raise KafkaLogError(f"cannot create topic {name!r} at {s.bootstrap}: {message or err.__name__}",
                                    bool(getattr(err, "retriable", False)))
            if name == s.topic and code == TOPIC_ALREADY_EXISTS:
                check_log_topic(s, await _topic_config(admin, s.topic, list(KEEPS_RECORDS)))
    except KafkaError as exc:
        raise await start_error(exc, f"cannot create the topics {s.topic!r}/{s.snapshots!r} at {s.bootstrap}",
                                s) from exc
    finally:
        await admin.close()


async def prepare_topics(s: KafkaSettings) -> None:
    """A service's topics before it starts: created unless they exist (``kafka.create_topics``, checked then if
    they do), else the existing log topic checked (:func:`check_log_topic`): an operator's topic with the broker's
    default retention would lose the log's start a week later. A principal not allowed to read the topic's settings
    (DescribeConfigs) is warned about, not refused: it needs no other right than before."""
    if s.create_topics:
        await ensure_topics(s)
        return
    admin = AIOKafkaAdminClient(**client_kwargs(s))
    try:
        await admin.start()
        config = await _topic_config(admin, s.topic, list(KEEPS_RECORDS))
    except KafkaLogError as exc:
        if not isinstance(exc.__cause__, (TopicAuthorizationFailedError, ClusterAuthorizationFailedError)):
            raise
        log.warning("the log topic's settings could not be read: not checked", topic=s.topic, error=str(exc))
        return
    except KafkaError as exc:
        raise await start_error(exc, f"cannot read the settings of topic {s.topic!r} at {s.bootstrap}", s) from exc
    finally:
        await admin.close()
    check_log_topic(s, config)


async def _topic_config(admin: AIOKafkaAdminClient, topic: str, names: list[str]) -> dict[str, str | None]:
    """The values of the settings ``names`` of ``topic`` (its own, or the broker's default)."""
    responses: list[Any] = await admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic, dict.fromkeys(names))])
    out: dict[str, str | None] = {}
    for response in responses:
        for code, message, _type, _name, entries, *_ in response.resources:
            if code:
                err = for_code(code)
                raise KafkaLogError(f"cannot read the settings of topic {topic!r}: {message or err.__name__}",
                                    bool(getattr(err, "retriable", False))) from err()
            out |= {entry[0]: entry[1] for entry in entries}
    return out


def check_log_topic(s: KafkaSettings, config: dict[str, str | None]) -> None:
    """Refuse a log topic whose records the broker would delete (expire by time or size, or compact away)."""
    wrong = {name: config.get(name) for name, want in KEEPS_RECORDS.items() if config.get(name) != want}
    if wrong:
        found = ", ".join(f"{name}={value}" for name, value in wrong.items())
        fix = " ".join(f"{name}={want}" for name, want in KEEPS_RECORDS.items() if name in wrong)
        raise KafkaLogError(
            f"the log topic {s.topic!r} at {s.bootstrap} has {found}: the broker would delete its records, and a "
            f"fold from the beginning would then miss them; set {fix} on the topic (kafka-configs.sh --alter "
            f"--entity-type topics --entity-name {s.topic} --add-config ...), or use another topic")
