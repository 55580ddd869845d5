"""``KafkaLog.open`` waits for a topic just created to show in a broker's metadata (the lead's 051b9051,
ro-diff-d L2): a broker answers metadata from a cache its controller fills after the creation is acknowledged,
so a topic missing there is asked for again (``TOPIC_WAITS`` asks) before it is called missing. A topic not
created by this open is asked for once; a topic there without the shard fails at once either way.

The producer is stood in for (no broker): its metadata lists the topic only from a given ask on.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from connectors.kafka import log as kafka_log
from connectors.kafka.log import KafkaLog
from connectors.kafka.settings import KafkaSettings
from events.errors import InvalidInput

TOPIC = "t"


def _producer(shows_from: int | None, partitions: set[int], asks: list[int]) -> type:
    """A producer whose metadata lists :data:`TOPIC` from ask ``shows_from`` on (None: never)."""

    class _Producer:
        def __init__(self, **_kwargs: Any) -> None:
            self.client = SimpleNamespace(fetch_all_metadata=self._metadata)

        async def _metadata(self) -> Any:
            asks.append(len(asks) + 1)
            shown = shows_from is not None and len(asks) >= shows_from
            return SimpleNamespace(topics=lambda: {TOPIC} if shown else set())

        async def partitions_for(self, topic: str) -> set[int]:
            return set(partitions)

        async def start(self) -> None:
            pass

        async def stop(self) -> None:
            pass

    return _Producer


async def _no_topics_made(_settings: KafkaSettings, **_kwargs: Any) -> None:
    pass


def _stand_in(monkeypatch: pytest.MonkeyPatch, *, shows_from: int | None,
              partitions: frozenset[int] = frozenset({0})) -> list[int]:
    """Stand the producer in (and the topics' creation, and the wait between asks); the asks made of its
    metadata, filled as the log is opened."""
    asks: list[int] = []
    monkeypatch.setattr(kafka_log, "AIOKafkaProducer", _producer(shows_from, set(partitions), asks))
    monkeypatch.setattr(kafka_log, "ensure_topics", _no_topics_made)
    monkeypatch.setattr(kafka_log, "TOPIC_WAIT_S", 0)
    return asks


def _open(partition: int = 0, *, create: bool) -> None:
    async def main() -> None:
        settings = KafkaSettings(bootstrap="127.0.0.1:9", topic=TOPIC)
        log = await KafkaLog.open(settings, partition, create=create)
        await log.close()

    asyncio.run(main())


def test_a_topic_just_created_is_waited_for_until_the_metadata_shows_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asks = _stand_in(monkeypatch, shows_from=3)
    _open(create=True)
    assert asks == [1, 2, 3]


def test_a_topic_not_created_by_the_open_is_asked_for_once(monkeypatch: pytest.MonkeyPatch) -> None:
    asks = _stand_in(monkeypatch, shows_from=3)
    with pytest.raises(InvalidInput, match="Kafka topic 't' does not exist"):
        _open(create=False)
    assert asks == [1]


def test_a_topic_just_created_that_never_shows_is_called_missing_after_the_waits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    asks = _stand_in(monkeypatch, shows_from=None)
    with pytest.raises(InvalidInput, match="does not exist"):
        _open(create=True)
    assert len(asks) == kafka_log.TOPIC_WAITS


def test_a_topic_shown_without_the_shard_fails_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    asks = _stand_in(monkeypatch, shows_from=1)
    with pytest.raises(InvalidInput, match="shard 1 does not exist"):
        _open(1, create=True)
    assert asks == [1]
