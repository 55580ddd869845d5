"""A transaction that fails without the process dying: the scheduler starts over from what is committed.

The replica runs in the test's event loop with its producer patched to fail (a retriable Kafka error) at
chosen points of chosen transactions — after the first batch of a chain was folded into the scheduler's state,
while adding the consumer offsets, while committing. The transaction is left open on the broker; the replica
must drop the state that holds its uncommitted batches, start a new producer (which aborts the old
transaction), restore the latest snapshot, catch up to its marker and decide again — and the committed log must
be the reference run's, event for event.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaTimeoutError, RequestTimedOutError
from kafkahelp import fresh_topic, settings
from lockstep import LockstepDriver, Scenario, check_exactly_once, densify, reference_run

from connectors.kafka.scheduler_service import SchedulerReplica, ServiceOptions

pytestmark = pytest.mark.kafka

SCENARIO = Scenario(workloads=1000, per_batch=100, cluster_queues=50, cohorts=5, quota_cpu=8)


@pytest.mark.asyncio
async def test_failed_transactions_are_retried_from_committed_state(kafka_broker, monkeypatch) -> None:
    ref = await reference_run(SCENARIO)
    s = settings(kafka_broker.bootstrap, fresh_topic("txnfail"))
    # (method, decision transaction number) pairs that raise instead of doing their work. A decision
    # transaction is one that sends offsets (catch-up markers commit without; offsets_interval_s=0 puts them
    # in every decision transaction).
    faults = {("send_offsets_to_transaction", 3), ("commit_transaction", 6), ("send_offsets_to_transaction", 9),
              ("commit_transaction", 12)}
    txn = {"count": 0, "decision": False}
    injected: list[str] = []
    real_begin = AIOKafkaProducer.begin_transaction
    real_offsets = AIOKafkaProducer.send_offsets_to_transaction
    real_commit = AIOKafkaProducer.commit_transaction

    async def begin(self):  # type: ignore[no-untyped-def]
        txn["decision"] = False
        return await real_begin(self)

    async def send_offsets(self, offsets, group_id):  # type: ignore[no-untyped-def]
        if not txn["decision"]:
            txn["decision"] = True
            txn["count"] += 1
            if ("send_offsets_to_transaction", txn["count"]) in faults:
                injected.append(f"send_offsets#{txn['count']}")
                raise RequestTimedOutError()
        return await real_offsets(self, offsets, group_id)

    async def commit(self):  # type: ignore[no-untyped-def]
        if txn["decision"] and ("commit_transaction", txn["count"]) in faults:
            injected.append(f"commit#{txn['count']}")
            raise KafkaTimeoutError()
        return await real_commit(self)

    monkeypatch.setattr(AIOKafkaProducer, "begin_transaction", begin)
    monkeypatch.setattr(AIOKafkaProducer, "send_offsets_to_transaction", send_offsets)
    monkeypatch.setattr(AIOKafkaProducer, "commit_transaction", commit)

    reports: list[tuple[str, dict]] = []
    replica = SchedulerReplica(s, ServiceOptions(ticks=False, instance_id="in-process", snapshot_every_events=300,
                                                 retry_backoff_s=0.05, freeze_gc=False, offsets_interval_s=0),
                               report=lambda kind, fields: reports.append((kind, fields)))
    stop = asyncio.Event()
    driver = LockstepDriver(s, SCENARIO)
    service: list[asyncio.Task[None]] = []

    async def on_batch(k: int) -> None:
        if not service:
            service.append(asyncio.create_task(replica.run(stop)))

    try:
        async with asyncio.timeout(180):
            result = await driver.run(on_batch)
    finally:
        stop.set()
        if service:
            await asyncio.wait_for(service[0], 30)

    check_exactly_once(result, SCENARIO)
    assert [r.event for r in densify(result.records)] == [r.event for r in ref.records]
    assert len(injected) == len(faults), injected
    retries = [f for kind, f in reports if kind == "retry"]
    assert len(retries) == len(faults), retries
    actives = [f for kind, f in reports if kind == "active"]
    assert len(actives) == len(faults) + 1
    # A failure after batches were folded in speculatively restarts from a snapshot (or from nothing).
    assert all("snapshotOffset" in a for a in actives[1:]), actives
