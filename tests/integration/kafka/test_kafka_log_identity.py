"""A snapshot is of one log, and a log whose start is gone is an error (against a real broker).

* A snapshot is tied to the log record it ends at (its anchor): after the log topic is deleted and created again
  under its name, the scheduler, ``run --kube``'s connector and the tools pass the old snapshot over (named) and
  fold the new log, even once the new log has grown past the old snapshot's ``next``. A snapshot written before
  anchors is still used when the log reaches that far.
* Records deleted from the head of the log (DeleteRecords, retention) are never skipped silently: a read from
  before the log's start, and a scheduler that would fold from there, fail naming the first missing record.
* An existing log topic whose records the broker would delete is refused, naming the topic and the setting.
* An unusable newest snapshot falls back to an older one the compacted topic still holds.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic, RecordsToDelete
from aiokafka.errors import KafkaError
from kafkahelp import connector_snapshot, fresh_topic, settings

from connectors.kafka import snapshots
from connectors.kafka.errors import KafkaLogError
from connectors.kafka.log import KafkaLog, RecordsGone
from connectors.kafka.reader import KafkaReader
from connectors.kafka.scheduler_service import SchedulerReplica, ServiceOptions
from connectors.kafka.settings import KafkaSettings
from connectors.kafka.topics import ensure_topics, prepare_topics
from events import schema as ev
from events.errors import InvalidInput
from kueue_es import config
from kueue_es.kube_service import _KafkaLog
from projections import snapshot
from projections.cluster import ClusterState

pytestmark = pytest.mark.kafka


class Run:
    """A scheduler replica running in this loop, with its reports."""

    def __init__(self, s: KafkaSettings, name: str) -> None:
        self.reports: list[tuple[str, dict[str, Any]]] = []
        self.stop = asyncio.Event()
        opts = ServiceOptions(ticks=False, freeze_gc=False, stats_interval_s=0, instance_id=name,
                              retry_backoff_s=0.2, shutdown_step_s=2.0)
        self.replica = SchedulerReplica(s, opts, lambda kind, fields: self.reports.append((kind, fields)))
        self.task = asyncio.create_task(self.replica.run(self.stop))

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [f for k, f in self.reports if k == kind]

    async def until_active(self) -> dict[str, Any]:
        while not self.of("active"):
            assert not self.task.done(), self.reports
            await asyncio.sleep(0.05)
        return self.of("active")[0]

    async def stopped(self) -> None:
        self.stop.set()
        await self.task


async def fold_of(log: KafkaLog, to: int) -> ClusterState:
    """The fold of ``log`` up to (and including) offset ``to``."""
    state = ClusterState()
    async for batch in log.read_batches(0):
        for r in batch:
            if r.offset <= to:
                state.apply(r)
    return state


async def ticks(log: KafkaLog, times: range, stem: str) -> None:
    for t in times:
        await log.append([ev.ClockTicked(time=t, id=f"{stem}{t}")])


@contextlib.asynccontextmanager
async def admin_of(s: KafkaSettings) -> AsyncIterator[AIOKafkaAdminClient]:
    admin = AIOKafkaAdminClient(bootstrap_servers=s.bootstrap)
    await admin.start()
    try:
        yield admin
    finally:
        await admin.close()


async def create_again(s: KafkaSettings) -> None:
    """Delete the log topic and create it again under its name (the snapshot topic keeps its snapshots)."""
    async with admin_of(s) as admin:
        await admin.delete_topics([s.topic])
        while s.topic in await admin.list_topics():  # deletion is asynchronous
            await asyncio.sleep(0.1)
    while True:  # the new topic's partition may take a moment to have a leader
        with contextlib.suppress(KafkaError, KafkaLogError, InvalidInput):
            await ensure_topics(s, snapshots=False)
            log = await KafkaLog.open(s, create=False)
            await log.close()
            return
        await asyncio.sleep(0.1)


async def snapshot_of_old_history(s: KafkaSettings, events: int) -> dict[str, Any]:
    """A log of ``events`` ticks, a scheduler's shutdown snapshot of it; returns that snapshot's report."""
    log = await KafkaLog.open(s)
    await ticks(log, range(1000, 1000 * (events + 1), 1000), "old")
    await log.close()
    a = Run(s, "a")
    await a.until_active()
    await a.stopped()
    [written] = a.of("snapshot")
    return written


# --- R3: a snapshot is of one log --------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("new_events", [2, 20], ids=["shorter", "grown-past-the-snapshot"])
async def test_a_snapshot_of_the_topic_before_it_was_created_again_is_passed_over(
        kafka_bootstrap: str, new_events: int) -> None:
    s = settings(kafka_bootstrap, fresh_topic("identity"), session_timeout_ms=6000)
    old = await snapshot_of_old_history(s, 10)
    await create_again(s)
    log = await KafkaLog.open(s, create=False)
    try:
        await ticks(log, range(100, 100 * (new_events + 1), 100), "new")
        assert new_events < old["next"] or await log.end_offset() > old["next"] * 1_000_000
        b = Run(s, "b")
        active = await b.until_active()
        state = b.replica.engines[0].state
        await b.stopped()
        want = await fold_of(log, state.offset)
        assert active["snapshotNext"] == 0, active
        assert state.time == 100 * new_events, f"B restored the old history's state (time {state.time})"
        assert snapshot.digest(state) == snapshot.digest(want)
        [passed] = b.of("checkpoint_passed_over")
        assert passed["log"] == f"{s.snapshots}/0"
        assert "created again" in passed["reason"] or "past the log's end" in passed["reason"], passed

        reader = KafkaReader(f"kafka://{kafka_bootstrap}/{s.topic}", s)
        try:
            assert await reader.latest_snapshot() is not None, "B's own snapshot of the new log is used"
        finally:
            reader.close_sync()
    finally:
        await log.close()


@pytest.mark.asyncio
async def test_the_tools_pass_over_a_snapshot_of_another_history(kafka_bootstrap: str) -> None:
    s = settings(kafka_bootstrap, fresh_topic("identity-tools"), session_timeout_ms=6000)
    await snapshot_of_old_history(s, 5)
    await create_again(s)
    log = await KafkaLog.open(s, create=False)
    await ticks(log, range(100, 2100, 100), "new")  # past the old snapshot's next
    await log.close()
    reader = KafkaReader(f"kafka://{kafka_bootstrap}/{s.topic}", s)
    try:
        assert await reader.latest_snapshot() is None
        [passed] = reader.passed_over
        assert passed.startswith(f"{s.snapshots}/0@") and "created again" in passed, passed
    finally:
        reader.close_sync()


async def rewrite_newest(s: KafkaSettings, change: Any, *, anchored: bool = True, connector: bool = False) -> None:
    """Write the newest snapshot record of shard 0 again, changed by ``change`` (a SnapshotRecord to another),
    with its anchor header or without one (as written before snapshots were anchored)."""
    found = await snapshots.load_latest(s, 0, connector=connector)
    assert found is not None
    rec = change(found[0])
    value = msgspec.msgpack.encode(rec)
    if anchored:
        writer = snapshots.SnapshotWriter(s)
        try:
            await writer.write(0, value, connector=connector)
        finally:
            await writer.close()
        return
    producer = AIOKafkaProducer(bootstrap_servers=s.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(s.snapshots, value, key=snapshots.key(s.topic, 0, connector=connector),
                                     partition=0)
    finally:
        await producer.stop()


@pytest.mark.asyncio
async def test_a_snapshot_written_before_anchors_is_used_while_the_log_reaches_its_end(kafka_bootstrap: str) -> None:
    """Old snapshot records carry no anchor: they are used when the log holds their last record (what a rolling
    upgrade meets), and passed over when the log does not reach that far."""
    s = settings(kafka_bootstrap, fresh_topic("identity-legacy"), session_timeout_ms=6000)
    old = await snapshot_of_old_history(s, 6)
    await rewrite_newest(s, lambda rec: rec, anchored=False)
    found = await snapshots.restore(s, 0)
    assert found.record is not None and found.record.next == old["next"] and not found.passed_over

    await rewrite_newest(s, lambda rec: msgspec.structs.replace(rec, next=rec.next + 50), anchored=False)
    found = await snapshots.restore(s, 0)
    assert found.passed_over and "past the log's end" in found.passed_over[0], found.passed_over
    assert found.record is not None and found.record.next == old["next"], "the older usable one is taken (L4)"


@pytest.mark.asyncio
async def test_the_newest_snapshot_unusable_falls_back_to_an_older_one(kafka_bootstrap: str) -> None:
    """L4: a newest snapshot that cannot be used (here: holding the state at another offset than it says) is passed
    over for the next older one of the key, not for a fold from the beginning."""
    s = settings(kafka_bootstrap, fresh_topic("identity-older"), session_timeout_ms=6000)
    old = await snapshot_of_old_history(s, 4)
    await rewrite_newest(s, lambda rec: msgspec.structs.replace(rec, offset=rec.offset - 1))
    found = await snapshots.restore(s, 0)
    assert len(found.passed_over) == 1 and "holds the state at offset" in found.passed_over[0], found.passed_over
    assert found.record is not None and found.record.next == old["next"]
    assert found.state is not None and found.state.offset == old["offset"]


@pytest.mark.asyncio
async def test_the_connector_passes_over_its_snapshot_of_another_history(kafka_bootstrap: str) -> None:
    """``run --kube``'s connector: its snapshot of the old history is passed over once the topic is created again,
    even when the new log has grown past it (the end check alone let that through)."""
    topic = fresh_topic("identity-conn")
    settings_ = config.load(env={}, overrides={"log": f"kafka://{kafka_bootstrap}/{topic}"})
    reports: list[tuple[str, dict]] = []
    backend = _KafkaLog(settings_, ServiceOptions(), lambda kind, fields: reports.append((kind, fields)))
    s = backend.kafka
    log = await KafkaLog.open(s, backend.shard)
    try:
        await connector_snapshot(backend, log, seed=3, ops=40)
        assert reports[-1][0] == "checkpoint", reports
        backend.log = log
        assert await backend._restored() is not None
        end = await log.end_offset()
        await log.close()

        await create_again(s)
        log = await KafkaLog.open(s, create=False)
        await ticks(log, range(100, 100 * (end // 1_000_000 + 5), 100), "new")
        backend.log = log
        assert await backend._restored() is None
        assert reports[-1][0] == "checkpoint_passed_over" and "created again" in reports[-1][1]["reason"], reports
    finally:
        await backend.sink.close()
        await log.close()


# --- R4: a log whose start is gone is an error -------------------------------------------------------------


async def outcome(run: Run) -> None:
    """Wait for the replica to stop by itself (raising what it raised) or to go active (then stop it)."""
    while not run.task.done() and not run.of("active"):
        await asyncio.sleep(0.05)
    if run.task.done():
        await run.task
        return
    await run.stopped()
    raise AssertionError(f"the replica went active: {run.of('active')}")


async def delete_before(s: KafkaSettings, offset: int) -> None:
    async with admin_of(s) as admin:
        await admin.delete_records({TopicPartition(s.topic, 0): RecordsToDelete(before_offset=offset)})


@pytest.mark.asyncio
async def test_a_read_from_before_the_log_start_fails_naming_the_first_missing_record(kafka_bootstrap: str) -> None:
    s = settings(kafka_bootstrap, fresh_topic("gone-read"))
    log = await KafkaLog.open(s)
    try:
        await ticks(log, range(1000, 6000, 1000), "e")
        await delete_before(s, 3)
        with pytest.raises(RecordsGone, match=r"no longer holds Kafka record 0 \(log offset 0\).*starts at Kafka "
                                              r"record 3"):
            [r async for b in log.read_batches(0) for r in b]
        with pytest.raises(RecordsGone, match=r"Kafka record 2 \(log offset 2000000\)"):
            [r async for b in log.read_batches(2_000_000, follow=True) for r in b]
        assert [r.offset async for b in log.read_batches(3_000_000) for r in b] == [3_000_000, 4_000_000]
    finally:
        await log.close()


@pytest.mark.asyncio
async def test_a_scheduler_does_not_fold_a_log_whose_start_is_gone(kafka_bootstrap: str) -> None:
    s = settings(kafka_bootstrap, fresh_topic("gone-scheduler"), session_timeout_ms=6000)
    log = await KafkaLog.open(s)
    try:
        await ticks(log, range(1000, 6000, 1000), "e")
        await delete_before(s, 3)
    finally:
        await log.close()
    run = Run(s, "a")
    with pytest.raises(RecordsGone, match=r"no longer holds Kafka record 0 \(log offset 0\)"):
        await outcome(run)
    assert not run.of("snapshot"), run.reports


@pytest.mark.asyncio
async def test_a_snapshot_whose_last_record_is_gone_is_passed_over_and_the_fold_fails(kafka_bootstrap: str) -> None:
    """A snapshot can no longer be checked once its last record is deleted: it is passed over, and the fold from
    the beginning then fails naming the gap."""
    s = settings(kafka_bootstrap, fresh_topic("gone-snapshot"), session_timeout_ms=6000)
    old = await snapshot_of_old_history(s, 4)
    await delete_before(s, old["next"])
    run = Run(s, "b")
    with pytest.raises(RecordsGone, match=r"no longer holds Kafka record 0 "):
        await outcome(run)
    [passed] = run.of("checkpoint_passed_over")
    assert f"no longer holds Kafka record {old['next'] - 1}" in passed["reason"], passed


@pytest.mark.asyncio
@pytest.mark.parametrize(("config_", "named"), [
    ({"retention.ms": "604800000"}, "retention.ms=604800000"),
    ({"retention.bytes": "1073741824"}, "retention.bytes=1073741824"),
    ({"cleanup.policy": "compact"}, "cleanup.policy=compact"),
], ids=["retention.ms", "retention.bytes", "compacted"])
@pytest.mark.parametrize("create", [True, False], ids=["create_topics", "operator-made"])
async def test_an_existing_log_topic_that_deletes_records_is_refused(
        kafka_bootstrap: str, config_: dict[str, str], named: str, create: bool) -> None:
    """Whether kueue-es creates its topics or an operator does (``kafka.create_topics: false``)."""
    s = settings(kafka_bootstrap, fresh_topic("retained"), create_topics=create)
    async with admin_of(s) as admin:
        await admin.create_topics([NewTopic(s.topic, 1, 1, topic_configs=config_)])
    with pytest.raises(KafkaLogError, match=rf"the log topic '{s.topic}' at .* has {named}") as raised:
        await prepare_topics(s)
    assert not raised.value.retriable


@pytest.mark.asyncio
async def test_an_existing_log_topic_that_keeps_its_records_is_accepted(kafka_bootstrap: str) -> None:
    s = settings(kafka_bootstrap, fresh_topic("kept"))
    await ensure_topics(s)
    await ensure_topics(s)  # exists now, with the settings it was created with
    await prepare_topics(msgspec.structs.replace(s, create_topics=False))
