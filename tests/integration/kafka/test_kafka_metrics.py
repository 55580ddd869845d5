"""``/metrics`` of Kafka scheduler replicas: the active one serves Kueue's metrics (``replica_role="leader"``), a
standby none; after a handover the new active replica — restored from a snapshot plus the log tail — serves the
same counters and histograms, where Kueue's would have started from zero."""

from __future__ import annotations

import asyncio
import socket
import time

import aiohttp
import pytest
from fixtures.scrape import kueue_samples
from kafkahelp import fresh_topic, settings
from lockstep import LockstepDriver, Scenario, fold
from procs import Replica, start_replica, stop_all

from kueue_es import metrics

pytestmark = pytest.mark.kafka

SCENARIO = Scenario(workloads=300, per_batch=60, cluster_queues=6, cohorts=2, quota_cpu=8)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed_attempts(live: dict) -> dict[str, float]:
    """Attempts admission_attempt_duration_seconds observed, per result."""
    return {dict(labels)["result"]: v for (name, labels), v in live.items()
            if name == metrics.ATTEMPT_DURATION.name + "_count"}


async def scrape(port: int) -> str:
    async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{port}/metrics") as r:
        assert r.status == 200
        return await r.text()


async def until_equal(port: int, expected: dict, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        got = kueue_samples(await scrape(port))
        if got == expected:
            return
        assert time.monotonic() < deadline, f"{what}: {len(got)} samples, {len(expected)} expected"
        await asyncio.sleep(0.5)


@pytest.mark.asyncio
async def test_metrics_follow_the_active_replica_and_survive_a_handover(kafka_broker) -> None:
    s = settings(kafka_broker.bootstrap, fresh_topic("metrics"))
    url = f"kafka://{s.bootstrap}/{s.topic}"
    ports = [free_port(), free_port()]
    replicas: list[Replica] = []

    async def on_batch(k: int) -> None:
        if k == 1:
            replicas.append(await start_replica("m-a", url, {"KUEUE_ES_METRICS_PORT": str(ports[0])}))
            await replicas[0].wait_for("active")
            replicas.append(await start_replica("m-b", url, {"KUEUE_ES_METRICS_PORT": str(ports[1])}))
            await replicas[1].wait_for("assigned")

    try:
        async with asyncio.timeout(180):
            result = await LockstepDriver(s, SCENARIO).run(on_batch)
        expected = kueue_samples(metrics.text([fold(result.records)], metrics.LEADER))
        finished = sum(v for (name, _), v in expected.items() if name == "kueue_finished_workloads_total")
        assert finished == SCENARIO.workloads
        await until_equal(ports[0], expected, "the active replica")
        assert kueue_samples(await scrape(ports[1])) == {}, "a standby holds no state"
        # the first replica made every attempt: each timed once, under the result the counter gives it
        attempts = {dict(labels)["result"]: v for (name, labels), v in expected.items()
                    if name == "kueue_admission_attempts_total"}
        assert timed_attempts(kueue_samples(await scrape(ports[0]), live=True)) == attempts

        assert await replicas[0].terminate() == 0, "".join(replicas[0].stderr[-40:])
        active = await replicas[1].wait_for("active")
        assert active["snapshotOffset"] is not None  # restored, not refolded from the start
        await until_equal(ports[1], expected, "the replica that took over")
        # ... which restored the log's metrics, but times only its own attempts (none left): from zero, as Kueue
        assert kueue_samples(await scrape(ports[1]), live=True) == {}
    finally:
        await stop_all(replicas)
