"""Helpers shared by the Kafka integration tests: settings for the session broker, fresh topic names."""

from __future__ import annotations

import itertools
import os

from connectors.kafka.settings import KafkaSettings

_counter = itertools.count()


def fresh_topic(stem: str) -> str:
    """A topic name no other test (or earlier session on the same broker) has used."""
    return f"{stem}-{os.getpid()}-{next(_counter)}"


def settings(bootstrap: str, topic: str, **kw: object) -> KafkaSettings:
    return KafkaSettings(bootstrap=bootstrap, topic=topic, replication_factor=1, **kw)  # type: ignore[arg-type]
