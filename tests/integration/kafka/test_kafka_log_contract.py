"""The EventLog contract suite (``tests/contracts/test_event_log.py``) against the real broker.

Every test of the shared suite is imported here and runs with the Kafka backend only: a fresh topic per log,
raw batches produced as records behind the log's back. Offsets are not dense on Kafka (see
:mod:`connectors.kafka.log`), so the suite's dense-only test is not collected here and the rest check the properties every
backend has.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from contracts.test_event_log import *  # noqa: F403 - the shared suite, collected here again
from contracts.test_event_log import Backend, _raw_array
from kafkahelp import fresh_topic, settings

from connectors.kafka.log import KafkaLog
from events.log import EventLog

pytestmark = pytest.mark.kafka

# Gap-free offsets are promised only by the dense backends (memory, file): that test is not Kafka's contract,
# so it is not collected here rather than collected and skipped.
del test_append_returns_dense_offsets_from_zero  # noqa: F821


@pytest.fixture
def backend(kafka_broker) -> Backend:  # noqa: F811 - replaces the suite's memory/file parametrization
    bootstrap = kafka_broker.bootstrap

    async def create(path: Path) -> EventLog:
        return await KafkaLog.open(settings(bootstrap, fresh_topic("contract")))

    async def append_raw(log: EventLog, raws: list[bytes]) -> list[int]:
        assert isinstance(log, KafkaLog)
        return await log._append_payload(_raw_array(raws), len(raws))  # noqa: SLF001

    return Backend("kafka", create, append_raw, dense=False)
