"""``/metrics`` of a Kafka scheduler replica reads only what the log has committed (review s36 L3).

While a chained decision transaction is open, the engine has applied batches the transaction may yet lose (an abort
reloads its state): a scrape then must not count them, or a counter would go down after the abort. The replica runs
its real loop under ``kueue_es.service.serve`` with the group consumer, the transactional producer and the snapshot
writer stood in for, and ``/metrics`` is scraped over HTTP before the transaction and while its commit is pending.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
from fixtures.eventgen import prelude, upsert, workload
from fixtures.kafka_fakes import GroupConsumer, TransactionalProducer
from fixtures.scrape import kueue_samples

from connectors.kafka import scheduler_service
from connectors.kafka.log import BATCH_HEADERS
from connectors.kafka.scheduler_service import Phase, SchedulerReplica, ServiceOptions, ShardEngine
from events.codec import encode_batch
from kueue_es import metrics, service
from kueue_es.config import MetricsSettings, Settings

T0 = 1_700_000_000_000


_Consumer = GroupConsumer
"""The group consumer: nothing to fetch, and everything below our batches folded already."""


class _Producer(TransactionalProducer):
    """Begins its first transaction once ``go`` is set; its batches land at Kafka offsets 1, 2, ...; its commit never
    comes back (a broker that does not answer EndTxn), after setting ``committing``."""

    def __init__(self) -> None:
        super().__init__(1, hang=True)
        self.go = asyncio.Event()

    async def begin_transaction(self) -> None:
        await self.go.wait()


class _Writer:
    async def write(self, _partition: int, value: bytes, *, connector: bool = False) -> int:
        return 0

    async def close(self) -> None:
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _scrape(port: int) -> str:
    for _ in range(500):  # the server starts with the replica
        try:
            async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{port}/metrics") as r:
                return await r.text()
        except aiohttp.ClientConnectorError:
            await asyncio.sleep(0.01)
    raise AssertionError("/metrics never answered")


def _active_replica(monkeypatch: pytest.MonkeyPatch, producer: _Producer, engines: list[ShardEngine]) -> Any:
    """``SchedulerReplica`` for ``serve``: active on shard 0, whose log holds a small cluster and one pending
    workload (Kafka record 0); ``decide`` admits it in the first batch of a transaction."""
    monkeypatch.setattr(scheduler_service, "AIOKafkaConsumer", _Consumer)
    monkeypatch.setattr(ServiceOptions, "config_to_record", lambda *_: [])  # a configuration already recorded

    def make(kafka: Any, opts: ServiceOptions, report: Any) -> SchedulerReplica:
        opts = dataclasses.replace(opts, freeze_gc=False, stats_interval_s=0, shutdown_step_s=0.05, chain=4)
        replica = SchedulerReplica(kafka, opts, report)
        replica.snapshot_writer = _Writer()  # type: ignore[assignment]
        e = ShardEngine(replica, 0)
        e.phase, e.fresh = Phase.ACTIVE, False
        cluster = [*prelude(T0), upsert(workload("ns0", "w1", queue="lq0", created=T0), T0)]
        e.ingest([SimpleNamespace(offset=0, value=encode_batch(cluster), headers=BATCH_HEADERS)])
        e.producer = producer  # type: ignore[assignment]
        replica.engines[0] = e
        engines.append(e)
        return replica

    async def no_topics(_kafka: Any) -> None:
        pass

    monkeypatch.setattr(service, "prepare_topics", no_topics)
    return make


@pytest.mark.asyncio
async def test_a_scrape_during_an_open_decision_transaction_counts_none_of_its_batches(
        monkeypatch: pytest.MonkeyPatch) -> None:
    producer, engines = _Producer(), []
    monkeypatch.setattr(service, "SchedulerReplica", _active_replica(monkeypatch, producer, engines))
    port = _free_port()
    settings = Settings(log="kafka://127.0.0.1:9/t", metrics=MetricsSettings(port=port, address="127.0.0.1"))
    stop = asyncio.Event()
    serving = asyncio.create_task(service.serve(settings, stop, lambda *_: None))
    try:
        settled = kueue_samples(await _scrape(port))
        assert settled, "the active replica serves the shard's metrics"
        producer.go.set()
        await producer.committing.wait()  # the admission is applied locally; its transaction is still open
        [e] = engines
        assert e.speculative and kueue_samples(metrics.text([e.state], metrics.LEADER)) != settled
        assert kueue_samples(await _scrape(port)) == settled
    finally:
        stop.set()
        await serving
