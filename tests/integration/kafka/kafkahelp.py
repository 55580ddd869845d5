"""Helpers shared by the Kafka integration tests: settings for the session broker, fresh topic names."""

from __future__ import annotations

import itertools
import os
import random
from typing import Any

from fixtures.eventgen import interpret, random_ops

from connectors.k8s import mirror_snapshot
from connectors.k8s.mirror import Mirror
from connectors.kafka.log import KafkaLog
from connectors.kafka.settings import KafkaSettings
from kueue_es import checkpoints

_counter = itertools.count()


def fresh_topic(stem: str) -> str:
    """A topic name no other test (or earlier session on the same broker) has used."""
    return f"{stem}-{os.getpid()}-{next(_counter)}"


def settings(bootstrap: str, topic: str, **kw: object) -> KafkaSettings:
    return KafkaSettings(bootstrap=bootstrap, topic=topic, replication_factor=1, **kw)  # type: ignore[arg-type]


async def connector_snapshot(backend: Any, log: KafkaLog, seed: int, ops: int) -> Mirror:
    """Append ``ops`` random operations to ``log``, fold them into a mirror and write ``run --kube``'s connector
    snapshot of it through ``backend`` (a ``_KafkaLog``) as its checkpointer would; the mirror."""
    for batch in interpret(random_ops(random.Random(seed), ops)):
        await log.append(batch)
    mirror = Mirror()
    async for batch in log.read_batches(0):
        mirror.apply_batch(batch)
    writer = checkpoints.Checkpointer(backend.sink, every_events=1, interval_s=60, report=backend.report,
                                      connector=lambda: mirror_snapshot.encode(mirror))
    await writer.close(mirror.state)
    return mirror
