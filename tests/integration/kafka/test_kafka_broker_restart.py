"""The broker restarts mid-run — cleanly, then with SIGKILL — while a scheduler replica and a standby run and
the cluster keeps appending observed events: every client reconnects, nothing is lost or duplicated.

The broker goes down in the background right after an observed batch, so the scheduler is deciding,
producing or committing when it disappears, and the driver's next append meets a broker that is away. The
committed log must still be, event for event, the undisturbed reference run's, with every decision written by
the replica whose catch-up marker came last before it.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time

import pytest
from kafkahelp import fresh_topic, settings
from lockstep import LockstepDriver, Scenario, check_exactly_once, densify, read_all, reference_run
from procs import Replica, start_replica, stop_all
from test_kafka_ha import check_fencing, writers

pytestmark = pytest.mark.kafka

SCENARIO = Scenario(workloads=2000, per_batch=100, cluster_queues=50, cohorts=5, quota_cpu=8)
ENV = {"KUEUE_ES_SCHEDULER_SNAPSHOT_EVERY_EVENTS": "500"}
SEED = 7


def diagnose(driver, replicas, restarts, broker) -> str:
    lines = [f"stuck: driver at observed batch {driver.observed}, state offset {driver.state.offset}, "
             f"{driver.errors} errors; restarts {restarts}"]
    for r in replicas:
        lines.append(f"{r.name} (rc {r.proc.returncode}) last reports: {r.reports[-6:]}")
        lines.append("".join(r.stderr[-15:]))
    lines.append(broker.logs()[-3000:])
    return "\n".join(lines)


@pytest.mark.asyncio
async def test_broker_restarts_mid_run_lose_and_duplicate_nothing(kafka_broker) -> None:
    ref = await reference_run(SCENARIO)
    s = settings(kafka_broker.bootstrap, fresh_topic("restart"))
    url = f"kafka://{s.bootstrap}/{s.topic}"
    replicas: list[Replica] = []
    seen: list[float] = []
    restarts: list[dict[str, float]] = []
    background: list[asyncio.Task[None]] = []

    async def restart(hard: bool) -> None:
        r = {"hard": hard, "down": time.time() * 1000, "seen": len(seen)}
        if hard:  # SIGKILL the JVM at once (the script's kill takes a while), a few ms into the scheduler's work
            await asyncio.sleep(random.Random(SEED).uniform(0.0, 0.02))
            os.kill(int((kafka_broker.data_dir / "kafka.pid").read_text()), signal.SIGKILL)
            r["down"] = time.time() * 1000
        await asyncio.to_thread(kafka_broker.restart, hard=hard)
        r["up"] = time.time() * 1000
        restarts.append(r)

    async def on_batch(k: int) -> None:
        if k == 1:
            for name in ("r-a", "r-b"):
                replicas.append(await start_replica(name, url, ENV))
                await replicas[-1].wait_for("assigned")
            await replicas[0].wait_for("active")
        elif k in (5, 12):
            if background:
                await background[-1]  # one restart at a time
            background.append(asyncio.create_task(restart(hard=k == 12)))

    driver = LockstepDriver(s, SCENARIO)
    driver.decision_seen = lambda rec, at: seen.append(at)
    try:
        try:
            async with asyncio.timeout(300):
                result = await driver.run(on_batch)
                for t in background:
                    await t
        except TimeoutError:
            raise AssertionError(diagnose(driver, replicas, restarts, kafka_broker)) from None
        for r in replicas:
            assert r.proc.returncode is None, f"{r.name} died:\n" + "".join(r.stderr[-40:])
    finally:
        try:
            await stop_all(replicas)
        finally:
            if not kafka_broker.running:
                await asyncio.to_thread(kafka_broker.start)

    assert len(restarts) == 2
    check_exactly_once(result, SCENARIO)
    assert [r.event for r in densify(result.records)] == [r.event for r in ref.records]
    assert await read_all(s) == result.records
    check_fencing(await writers(s))
    for r in restarts:
        after = [t for t in seen[int(r["seen"]):] if t > r["up"]]
        r["decision_after_up_s"] = round((after[0] - r["up"]) / 1000, 2) if after else None
        r["down_s"] = round((r["up"] - r["down"]) / 1000, 2)
    retries = {r.name: len(r.events("retry")) + len(r.events("fenced")) for r in replicas}

    print(f"\nbroker restarts {[(('hard' if r['hard'] else 'clean'), r['down_s'], r['decision_after_up_s']) for r in restarts]} "
          f"(kind, seconds down, seconds from broker up to the next decision seen); driver rode out "
          f"{driver.errors} errors; scheduler transaction restarts {retries}")


@pytest.mark.asyncio
async def test_sigterm_while_the_broker_is_down_exits_promptly(kafka_broker) -> None:
    """A replica asked to stop while Kafka is unreachable still exits (each shutdown step is bounded)."""
    s = settings(kafka_broker.bootstrap, fresh_topic("down"))
    driver = LockstepDriver(s, Scenario(workloads=100, per_batch=100, cluster_queues=10, cohorts=2))
    replica = await start_replica("d-a", f"kafka://{s.bootstrap}/{s.topic}", ENV)
    try:
        async with asyncio.timeout(120):
            await driver.run()
            await replica.wait_for("active")
        await asyncio.to_thread(kafka_broker.stop)
        t0 = time.monotonic()
        assert await replica.terminate(timeout=45) == 0, "".join(replica.stderr[-40:])
        assert time.monotonic() - t0 < 45
        assert replica.events("stopped")
    finally:
        await stop_all([replica])
        if not kafka_broker.running:
            await asyncio.to_thread(kafka_broker.start)
