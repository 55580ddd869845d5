"""The Kafka scheduler replica records the Kueue Configuration it runs with, once, and again only when it changed.

Three replicas run in turn (in-process) over one shard, each after new workloads came in: two with the same
configuration (fairSharing), then one with another (fairSharing and a waitForPodsReady timeout). The committed
log holds two ``ConfigRecorded``, each before the decisions made under it, and re-running every decision batch
under the configuration in force at its input gives the log's decisions.
"""

from __future__ import annotations

import asyncio

import pytest
from fixtures.eventgen import T0, upsert, workload
from kafkahelp import fresh_topic, settings
from lockstep import NS, Scenario, fold, read_all

from connectors.kafka.log import KafkaLog
from connectors.kafka.scheduler_service import SchedulerReplica, ServiceOptions
from connectors.kafka.settings import KafkaSettings
from events import schema as ev
from kueue_es.scheduler import decide
from kueue_es.scheduler.config import load_config
from kueue_es.verify import verify
from projections.workloads import ADMITTED

pytestmark = pytest.mark.kafka

HEAD = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}
FAIR = {**HEAD, "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}}
FAIR_PODS_READY = {**FAIR, "waitForPodsReady": {"timeout": "1m"}}
SCENARIO = Scenario(workloads=0, cluster_queues=4, cohorts=2, quota_cpu=4)


async def next_batch(s: KafkaSettings, first: int, n: int) -> None:
    """Workloads ``first`` .. ``first + n - 1`` come in, and every admitted one finishes (the next replica has
    something to decide)."""
    state = fold(await read_all(s))
    t = T0 + (first + 1) * 1000
    done = [ev.WorkloadFinished(time=t, key=k, uid=w.uid) for k, w in sorted(state.workloads.items())
            if w.phase == ADMITTED]
    log = await KafkaLog.open(s)
    try:
        await log.append([*done, *(upsert(workload(NS, f"w{i:03d}", queue=f"lq{i % 4}", cpu="3", created=t), t)
                                   for i in range(first, first + n))])
    finally:
        await log.close()


async def run_until_settled(s: KafkaSettings, document: dict, instance: str) -> list[ev.Record]:
    config = load_config(document)
    replica = SchedulerReplica(s, ServiceOptions(config=config, config_document=document, config_source="kueue.yaml",
                                                 ticks=False, instance_id=instance, freeze_gc=False))
    stop = asyncio.Event()
    task = asyncio.create_task(replica.run(stop))
    try:
        async with asyncio.timeout(90):
            while True:
                await asyncio.sleep(0.2)
                if task.done():
                    task.result()
                records = await read_all(s)
                state = fold(records)
                if state.config is not None and state.config.document == document and not decide(state, config):
                    return records
    finally:
        stop.set()
        await task


def configs(records: list[ev.Record]) -> list[ev.Record]:
    return [r for r in records if isinstance(r.event, ev.ConfigRecorded)]


@pytest.mark.asyncio
async def test_the_replica_records_its_configuration_once_and_again_when_changed(kafka_broker) -> None:
    s = settings(kafka_broker.bootstrap, fresh_topic("config"))
    log = await KafkaLog.open(s)
    try:
        await log.append(SCENARIO.setup())
    finally:
        await log.close()

    await next_batch(s, 0, 8)
    first = await run_until_settled(s, FAIR, "replica-a")
    (recorded,) = configs(first)
    assert recorded.event.document == FAIR and recorded.event.writer == "replica-a"
    assert recorded.event.source == "kueue.yaml"
    decisions = [r for r in first if isinstance(r.event, ev.Decision)]
    assert decisions and all(r.event.input >= recorded.offset for r in decisions)

    await next_batch(s, 8, 4)
    same = await run_until_settled(s, FAIR, "replica-b")
    assert configs(same) == [recorded], "the same configuration is not recorded again"
    assert len([r for r in same if isinstance(r.event, ev.Decision)]) > len(decisions)

    await next_batch(s, 12, 4)
    changed = await run_until_settled(s, FAIR_PODS_READY, "replica-c")
    old, new = configs(changed)
    assert old == recorded and new.event.document == FAIR_PODS_READY and new.event.writer == "replica-c"
    later = [r for r in changed if isinstance(r.event, ev.Decision) and r.offset > new.offset]
    assert later and all(r.event.input >= new.offset for r in later)

    report = verify(lambda: iter(changed))
    assert report.ok, [m.describe() for m in report.mismatches]
    assert [off for off, _ in report.configs] == [old.offset, new.offset] and report.before_config == 0
