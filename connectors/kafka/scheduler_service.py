"""The scheduler as a Kafka service: consume → decide → produce, in transactions, one active replica per shard.

Every replica joins one consumer group (``<prefix>.<topic>``) subscribed to the log topic. The group gives each
partition (= shard) to exactly one member, which becomes the shard's active scheduler; the others stand by.
The sticky assignor keeps a shard where it is when replicas join or leave; when the active replica dies, its
session expires and a standby is given the shard.

Becoming active (:meth:`ShardEngine.setup`):

1. restore the latest snapshot of the shard from the compacted snapshot topic (or start from nothing);
2. start a transactional producer with the shard's one stable ``transactional.id`` — this fences every older
   producer of the shard: a zombie's open transaction is aborted, and it can never commit again;
3. append a catch-up marker (a control record) in a transaction and read the log, from the snapshot on,
   until the marker comes back. Everything any earlier active scheduler committed is before the marker, so
   the state now holds all of it. Only then does it decide anything.

Deciding (:meth:`ShardEngine.step`): ``decide(state)`` on the state folded from the committed log (time is
the log's time, so decisions are a pure function of the state at their ``input`` offset); the batch is one
record, produced in a transaction, with the group's consumer offset (``send_offsets_to_transaction``) when
``offsets_interval_s`` has passed since it was last committed. The
scheduler then waits until it has read its own batch back before deciding again, so it never decides twice
on the same state. A kill at any point loses nothing and duplicates nothing: an uncommitted batch is aborted
and will be decided again, identically, by the next active scheduler; a committed one is read back by it.
Once active, a replica whose Kueue Configuration is not the one in force in the log records it first: the record
is the first batch of a transaction, and the decisions chained after it in that transaction are made under it.

aiokafka's ``send_offsets_to_transaction`` has no KIP-447 generation fencing; fencing rests on the stable
transactional id per shard and on one input partition per shard.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import msgspec
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from aiokafka.errors import KafkaError, ProducerFenced
from aiokafka.producer import sender as aiokafka_sender

from connectors.kafka import snapshots
from connectors.kafka.errors import Fenced, KafkaLogError, kafka_error, start_error
from connectors.kafka.log import (
    BATCH_HEADERS,
    CONTROL_HEADER,
    batch_records,
    ensure_held,
    is_control,
    reader_kwargs,
    to_offset,
    written_offset,
)
from connectors.kafka.settings import KafkaSettings, client_kwargs
from connectors.kafka.topics import RECORD_OVERHEAD
from events import schema as ev
from events.codec import encode_batch
from events.errors import InvalidInput
from kueue_es import metrics
from kueue_es.scheduler import DEFAULT, SchedulerConfig, config_record, decide, next_deadline
from projections.cluster import ClusterState

MARKER_HEADERS = [(CONTROL_HEADER, b"marker")]
INSTANCE_HEADER = "kueue-es-instance"
Report = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class ServiceOptions:
    config: SchedulerConfig = DEFAULT
    config_document: dict[str, Any] | None = None
    """``config`` as the user wrote it, recorded in the log whenever it is not the one in force there (None: a
    document that loads as ``config``)."""
    config_source: str = ""
    """Where ``config_document`` was read from (recorded with it)."""
    snapshot_every_events: int = 50_000
    """Write a snapshot after this many events were applied since the last one ..."""
    snapshot_interval_s: float = 60.0
    """... or after this long, if anything was applied."""
    checkpoints_kept: int = 10
    """The embedded log's checkpoints kept (:mod:`kueue_es.checkpoints`); 0: none is written."""
    ticks: bool = True
    """Append a ClockTicked (wall time) when a controller deadline (backoff, waitForPodsReady) has passed."""
    instance_id: str = ""
    retry_backoff_s: float = 0.5
    stats_interval_s: float = 60.0
    """Report per-shard cycle timings (decide, transaction, read-back) this often; 0: never."""
    chain: int = 8
    """Decision batches one transaction may hold (each decided on the state after the previous one)."""
    offsets_interval_s: float = 0.1
    """The group's consumer offset goes into a decision transaction at most this often, and into one of its own
    once the shard has been quiet that long; 0: into every decision transaction, and never on its own."""
    freeze_gc: bool = True
    """``gc.freeze()`` the process once a shard's state is restored (a service process; not in tests)."""
    shutdown_step_s: float = 5.0
    """Bound on each step of a graceful shutdown (final snapshot, closing the producer, leaving the group)."""

    @functools.cached_property
    def document(self) -> dict[str, Any]:
        """The Kueue Configuration document this scheduler records (see :mod:`kueue_es.scheduler.config_record`)."""
        if self.config_document is not None:
            return self.config_document
        return config_record.document_of(self.config)

    def config_to_record(self, state: ClusterState, writer: str) -> list[Any]:
        """The record of this configuration when it is not the one in force, to append before deciding anything
        (:func:`kueue_es.scheduler.config_record.pending`); else nothing."""
        return config_record.pending(state, self.document, writer=writer, source=self.config_source)


def default_instance_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def _ms() -> int:
    return int(time.time() * 1000)


class GCPauses:
    """The cyclic collector's pauses in this process, by generation (``gc.callbacks``): a full collection
    holds the event loop, and every decision waiting on it, for as long as it walks the tracked objects."""

    def __init__(self) -> None:
        self.pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses[info["generation"]].append(time.perf_counter() - self._started)

    def take(self) -> dict[str, Any]:
        out = {}
        for gen, v in self.pauses.items():
            if v:
                out[f"gen{gen}"] = {"n": len(v), "totalMs": round(sum(v) * 1000, 1), "maxMs": round(max(v) * 1000, 1)}
            self.pauses[gen] = []
        return out


@dataclass
class CycleStats:
    """Since the last report: seconds to decide a transaction's first batch, from then to its commit (more
    batches may be decided and produced meanwhile), waiting to read our batch back, folding what was committed
    below the first batch while the transaction is open; batches per transaction."""

    decide: list[float] = field(default_factory=list)
    commit: list[float] = field(default_factory=list)
    readback: list[float] = field(default_factory=list)
    fold: list[float] = field(default_factory=list)
    chained: list[int] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"transactions": len(self.commit), "batches": sum(self.chained)}
        for name in ("decide", "commit", "readback", "fold"):
            v = sorted(getattr(self, name))
            if v:
                out[name + "Ms"] = {"p50": round(v[len(v) // 2] * 1000, 2),
                                    "p99": round(v[min(len(v) - 1, int(len(v) * 0.99))] * 1000, 2),
                                    "max": round(v[-1] * 1000, 2)}
        self.decide, self.commit, self.readback, self.fold, self.chained = [], [], [], [], []
        return out


class Phase(Enum):
    SETUP = "setup"
    """Needs a (new) transactional producer, a marker and a catch-up."""
    CATCHING_UP = "catching-up"
    ACTIVE = "active"


class ShardEngine:
    """The active scheduler of one shard: its state, its transactional producer, its progress."""

    def __init__(self, replica: SchedulerReplica, partition: int) -> None:
        self.replica = replica
        self.settings = replica.settings
        self.partition = partition
        self.tp = TopicPartition(self.settings.topic, partition)
        self.state = ClusterState()
        self.next = 0
        """Kafka offset of the next record to fold in."""
        self.phase = Phase.SETUP
        self.fresh = True
        """The next setup restores the latest snapshot (a new engine) instead of keeping the state."""
        self.assigned = True
        self.retry_at = 0.0
        self.producer: AIOKafkaProducer | None = None
        self.marker: int | None = None
        self.outstanding: int | None = None
        """Kafka offset of our last committed batch until we have read it back."""
        self.since_snapshot = 0
        self.snapshot_at = time.monotonic()
        self.setup_started = 0.0
        self.setup_info: dict[str, Any] = {}
        self.activated_at = 0.0
        self.first_decision_pending = False
        self.decisions = 0
        self.transactions = 0
        self.replayed = 0
        """Events folded in during the last catch-up (the log tail after the snapshot)."""
        self.stats = CycleStats()
        self.committed_at = 0.0
        self.offsets_at = -float("inf")
        """When the group offset last went into a committed transaction (monotonic) ..."""
        self.offsets_next = -1
        """... and what it was: the Kafka offset of the next record to fold."""
        self.speculative = False
        """Our state holds batches of a transaction not known to be committed (a failure must reload)."""
        self.snapshot_task: asyncio.Task[None] | None = None
        """The snapshot being encoded (in a child process) and written, while the engine goes on deciding."""

    # --- becoming active ---------------------------------------------------------------------------------

    async def setup(self, consumer: AIOKafkaConsumer) -> None:
        self.phase = Phase.SETUP
        self.setup_started = time.monotonic()
        info: dict[str, Any] = {"shard": self.partition}
        if self.fresh:
            loaded = await self._latest_snapshot()
            if loaded is not None:
                rec, state = loaded
                self.state, self.next = state, rec.next
                info |= {"snapshotOffset": rec.offset, "snapshotNext": rec.next}
            else:
                self.state, self.next = ClusterState(), 0
                info |= {"snapshotOffset": None, "snapshotNext": 0}
            info["snapshotMs"] = round((time.monotonic() - self.setup_started) * 1000, 1)
            self.since_snapshot = 0
            self.snapshot_at = time.monotonic()
        await self._new_producer()
        info["producerMs"] = round((time.monotonic() - self.setup_started) * 1000, 1)
        self.marker = await self._transact(self._marker_payload(), self.replica.marker_headers)
        info["marker"] = self.marker
        info["fromNext"] = self.next
        self.setup_info = info
        self.replayed = 0
        self.outstanding = None
        self.fresh = False
        try:  # a log whose start is gone is an error (RecordsGone), never folded from where it now starts
            await ensure_held(consumer, self.tp, self.next)
        except KafkaError as exc:
            raise kafka_error(exc, f"cannot read where shard {self.partition}'s log starts") from exc
        consumer.seek(self.tp, self.next)
        consumer.resume(self.tp)
        self.phase = Phase.CATCHING_UP

    async def _latest_snapshot(self) -> tuple[snapshots.SnapshotRecord, ClusterState] | None:
        """The shard's newest snapshot of this very log (:func:`snapshots.restore`), or None. One this version
        cannot read (damaged, or of a layout it cannot convert) or of another history of the log (the topic
        created again) is passed over and named, so the shard folds its log from the start as the file
        checkpoints do, instead of failing its setup on every start or deciding on another log's state."""
        found = await snapshots.restore(self.settings, self.partition)
        for reason in found.passed_over:
            self.replica.report("checkpoint_passed_over", {
                "shard": self.partition, "log": f"{self.settings.snapshots}/{self.partition}", "reason": reason})
        return (found.record, found.state) if found.record is not None and found.state is not None else None

    def _marker_payload(self) -> bytes:
        return msgspec.msgpack.encode({"instance": self.replica.instance_id, "shard": self.partition,
                                       "time": _ms()})

    async def _new_producer(self) -> None:
        await self.close_producer()
        s = self.settings
        _shorten_concurrent_transactions_backoff(s.transaction_retry_backoff_ms / 1000)
        producer = AIOKafkaProducer(
            **client_kwargs(s),
            transactional_id=s.transactional_id(self.partition),
            transaction_timeout_ms=s.transaction_timeout_ms,
            retry_backoff_ms=s.transaction_retry_backoff_ms,
            enable_idempotence=True,
            acks="all",
            linger_ms=0,
            max_request_size=s.max_batch_bytes + RECORD_OVERHEAD,
        )
        try:
            await producer.start()  # InitProducerId: fences every older producer of this shard
        except BaseException as exc:
            await _quiet_stop(producer)
            if isinstance(exc, KafkaError):
                raise kafka_error(exc, f"cannot start the transactional producer of shard {self.partition}") from exc
            raise
        self.producer = producer

    async def close_producer(self) -> None:
        if self.producer is not None:
            p, self.producer = self.producer, None
            await _quiet_stop(p)

    # --- folding -----------------------------------------------------------------------------------------

    def ingest(self, records: list[Any]) -> None:
        """Fold ``records`` in. A record is decoded before anything of it is applied, and ``next`` passes it only
        once all its events are: a record that cannot be decoded (or applied) stops the fold at its offset, and the
        engine is abandoned (:meth:`abandon`) so no snapshot claims it was folded; the next active scheduler
        meets the same record and stops there too, naming it."""
        try:
            for rec in records:
                if rec.offset < self.next:
                    continue  # already folded (a re-fetch after a seek)
                if not is_control(rec.headers):
                    self._fold(batch_records(rec.value, rec.offset, 0, None))
                self.next = rec.offset + 1
        except BaseException:
            self.abandon()
            raise
        if self.phase is Phase.CATCHING_UP and self.marker is not None and self.next > self.marker:
            self._activated()

    def _fold(self, events: list[ev.Record]) -> None:
        apply = self.state.apply
        for r in events:
            apply(r)
        self.since_snapshot += len(events)
        if self.phase is Phase.CATCHING_UP:
            self.replayed += len(events)

    def abandon(self) -> None:
        """The state is not known to be a fold of the committed log (a fold or a decision failed part way, or a
        transaction holding batches already applied was cut off): it is never snapshotted, and a next setup
        restores the latest snapshot instead of keeping it."""
        self.fresh = True
        self.speculative = False
        self.phase = Phase.SETUP
        self.marker = None
        self.outstanding = None

    def _activated(self) -> None:
        if self.replica.options.freeze_gc:
            # The state just restored is long-lived: move it out of the cyclic GC's generations, so collections
            # while deciding only walk what was allocated since (shorter pauses on the decision path).
            gc.collect()
            gc.freeze()
        self.phase = Phase.ACTIVE
        self.marker = None
        now = time.monotonic()
        self.activated_at = now
        self.first_decision_pending = True
        self.replica.report("active", {
            **self.setup_info, "instance": self.replica.instance_id, "offset": self.state.offset,
            "next": self.next, "replayed": self.replayed, "setupMs": round((now - self.setup_started) * 1000, 1), "wallMs": _ms()})

    # --- deciding ----------------------------------------------------------------------------------------

    async def step(self) -> None:
        if self.phase is not Phase.ACTIVE or not self.assigned:
            return
        if self.outstanding is not None:
            if self.next <= self.outstanding:
                return  # our last batch is not folded in yet: deciding now would decide twice
            self.outstanding = None
            self.stats.readback.append(time.monotonic() - self.committed_at)
        opts = self.replica.options
        t0 = time.monotonic()
        batch: list[Any] = (opts.config_to_record(self.state, self.replica.instance_id)
                            or decide(self.state, opts.config))
        t1 = time.monotonic()
        if not batch and opts.ticks:
            deadline = next_deadline(self.state, opts.config)
            now = _ms()
            if deadline is not None and deadline <= now and self.state.time < now:
                batch = [ev.ClockTicked(time=now, id=f"tick-{self.partition}-{now}")]
        if not batch:
            if (self.replica.options.offsets_interval_s and self.offsets_next < self.next
                    and self._due(self.offsets_at) and self._due(self.committed_at)):
                await self._commit_offsets()  # quiet for an interval: no decision transaction will carry it
            await self.maybe_snapshot()
            return
        first = batch[0]
        last = await self._decide_in_transaction(batch, t1 - t0)
        self.committed_at = time.monotonic()
        self.stats.decide.append(t1 - t0)
        self.stats.commit.append(self.committed_at - t1)
        if last >= self.next:
            self.outstanding = last  # not folded in locally: read it back before deciding again
        if isinstance(first, ev.Decision) and self.first_decision_pending:
            self.first_decision_pending = False
            self.replica.report("first_decision", {
                "shard": self.partition, "instance": self.replica.instance_id, "wallMs": _ms(),
                "sinceActiveMs": round((time.monotonic() - self.activated_at) * 1000, 1),
                "cycle": first.cycle, "input": first.input})

    async def _decide_in_transaction(self, batch: list[Any], seconds: float) -> int:
        """Produce ``batch`` and, while the transaction is open, keep deciding on the state it leads to.

        Once the first batch is acknowledged at Kafka offset X, everything committed below X is visible to
        read_committed readers (the LSO is X: ours is the shard's only transactional producer), so the engine
        folds it, then the batch itself at X, and decides again: the next batch is decided on the fold of the
        log up to its ``input``, exactly as if the first had been read back. A later batch is folded in the
        same way only if it landed right after the previous one (nothing in between that the open transaction
        hides). Up to ``chain`` batches share one transaction, with the group's consumer offset when it is due
        (``offsets_interval_s``: two fewer broker round trips in the others). Returns the Kafka
        offset of the last batch; if that one was not folded in, the caller reads it back before deciding.
        ``seconds`` is how long the first batch took to decide: each batch's attempt duration is observed once
        the transaction holding it has committed."""
        p = self._live_producer()
        s, opts = self.settings, self.replica.options
        n, prev = 0, -1
        timed: list[tuple[list[Any], float]] = [(batch, seconds)]
        with self._transaction_errors():
            await p.begin_transaction()
            while True:
                fut = await p.send(s.topic, encode_batch(batch), partition=self.partition,
                                   headers=self.replica.batch_headers)
                if isinstance(batch[0], ev.Decision):
                    self.decisions += len(batch)
                last = written_offset(await fut, f"shard {self.partition}: decision batch")  # else the txn is aborted
                n += 1
                if n >= opts.chain:
                    break
                if n == 1:
                    self.speculative = True  # our state may now hold what the transaction may yet lose
                    t = time.monotonic()
                    folded = await self._fold_below(last)
                    self.stats.fold.append(time.monotonic() - t)
                    if not folded:
                        break
                elif last != prev + 1:
                    break  # something landed in between, invisible to us until we commit
                for i, e in enumerate(batch):
                    self.state.apply(ev.Record(to_offset(last, i), e))
                self.since_snapshot += len(batch)
                prev = last
                self.next = last + 1
                watch = time.perf_counter()
                batch = decide(self.state, opts.config)
                timed.append((batch, time.perf_counter() - watch))
                if not batch:
                    break
            offsets = self.next if self._due(self.offsets_at) else None
            if offsets is not None:
                await p.send_offsets_to_transaction({self.tp: offsets}, s.group_id)
            await self._commit(p)
        self.speculative = False
        if offsets is not None:
            self._offsets_committed(offsets)
        for decided, took in timed[:n]:  # the batches produced (a last one decided empty is no attempt either)
            metrics.ATTEMPTS.observe(decided, took)
        self.transactions += 1
        self.stats.chained.append(n)
        return last

    def _live_producer(self) -> AIOKafkaProducer:
        if self.producer is None:
            raise KafkaLogError(f"shard {self.partition} has no producer", retriable=True)
        return self.producer

    async def _commit(self, p: AIOKafkaProducer) -> None:
        await asyncio.wait_for(p.commit_transaction(), self.settings.transaction_timeout_ms / 1000)

    @contextlib.contextmanager
    def _transaction_errors(self) -> Iterator[None]:
        try:
            yield
        except BaseException as exc:
            if self.speculative:
                # Whatever cut the transaction off (a Kafka error, a bug in batch 2, a shutdown's cancel), our
                # state holds batches it may yet lose: drop it before anything can snapshot it.
                self.abandon()
            if isinstance(exc, ProducerFenced):
                raise Fenced(f"shard {self.partition}: another scheduler took over (fenced)") from exc
            if isinstance(exc, (TimeoutError, KafkaError)):
                # The transaction's outcome may be unknown: a new producer resolves it (InitProducerId completes
                # or aborts it), and the catch-up that follows reads whatever was committed.
                raise kafka_error(exc, f"shard {self.partition}: transaction failed") from exc
            raise

    def _due(self, since: float) -> bool:
        """An offsets interval has passed since ``since`` (monotonic)."""
        return time.monotonic() - since >= self.replica.options.offsets_interval_s

    def _offsets_committed(self, offset: int) -> None:
        self.offsets_at, self.offsets_next = time.monotonic(), offset

    async def _commit_offsets(self) -> None:
        """A transaction holding only the group offset, so that a shard gone quiet shows no consumer lag."""
        p = self._live_producer()
        offset = self.next
        with self._transaction_errors():
            await p.begin_transaction()
            await p.send_offsets_to_transaction({self.tp: offset}, self.settings.group_id)
            await self._commit(p)
        self._offsets_committed(offset)

    async def _fold_below(self, x: int) -> bool:
        """Fold every committed record below Kafka offset ``x``; False if that cannot be done promptly."""
        consumer = self.replica.consumer
        deadline = time.monotonic() + 0.5
        while await consumer.position(self.tp) < x:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            fetched = (await consumer.getmany(self.tp, timeout_ms=max(1, int(remaining * 1000)))).get(self.tp, [])
            if any(rec.offset >= x for rec in fetched):
                raise KafkaLogError(f"shard {self.partition}: read a record at or after {x} while the transaction "
                                    "writing there is open", retriable=True)
            self.ingest(fetched)
        return True

    async def _transact(self, payload: bytes, headers: list[tuple[str, bytes]]) -> int:
        """Produce one record in one transaction; its Kafka offset once committed."""
        p = self._live_producer()
        s = self.settings
        with self._transaction_errors():
            await p.begin_transaction()
            fut = await p.send(s.topic, payload, partition=self.partition, headers=headers)
            await self._commit(p)
            md = await fut
        self.transactions += 1
        return written_offset(md, f"shard {self.partition}: catch-up marker")  # else: a new marker

    async def maybe_snapshot(self, force: bool = False) -> None:
        """Start a snapshot when one is due: the state is captured at once (a forked child encodes it), and
        encoding and writing go on in the background. ``force`` (handing over, stopping): a snapshot of
        whatever was applied since the last one, waited for."""
        opts = self.replica.options
        running = self.snapshot_task
        if running is not None and not running.done():
            if not force:
                return
            await running
        if self.since_snapshot == 0 or self.phase is not Phase.ACTIVE or self.speculative:
            return  # only the fold of the committed log is snapshotted, never batches of an open transaction
        due = (force or self.since_snapshot >= opts.snapshot_every_events
               or time.monotonic() - self.snapshot_at >= opts.snapshot_interval_s)
        if not due:
            return
        t0, started = time.monotonic(), _ms()
        offset, nxt = self.state.offset, self.next
        try:
            packing = snapshots.pack_in_background(self.state, self.settings.topic, self.partition, nxt, offset)
        except OSError as exc:  # no fork (out of memory, process limit): try again at the next cadence
            self.snapshot_at = time.monotonic()
            self.replica.report("snapshot_failed", {"shard": self.partition, "error": f"cannot fork: {exc}"})
            return
        blocked = time.monotonic() - t0
        self.since_snapshot = 0
        self.snapshot_at = time.monotonic()
        self.snapshot_task = asyncio.create_task(self._finish_snapshot(packing, offset, nxt, t0, blocked, started))
        if force:
            await self.snapshot_task

    async def _finish_snapshot(self, packing: asyncio.Task[bytes], offset: int, nxt: int, t0: float,
                               blocked: float, started: int) -> None:
        try:
            value = await packing
            where = await self.replica.snapshot_writer.write(self.partition, value)
        except Exception as exc:  # noqa: BLE001 - a snapshot only shortens a takeover: report it and go on
            self.replica.report("snapshot_failed", {"shard": self.partition, "error": str(exc) or type(exc).__name__})
            return
        self.replica.report("snapshot", {"shard": self.partition, "offset": offset, "next": nxt,
                                         "bytes": len(value), "at": where, "startedWallMs": started,
                                         "ms": round((time.monotonic() - t0) * 1000, 1),
                                         "blockedMs": round(blocked * 1000, 1)})


def _shorten_concurrent_transactions_backoff(seconds: float) -> None:
    """A transaction begun right after the previous commit often meets CONCURRENT_TRANSACTIONS on its first
    AddPartitionsToTxn (the coordinator is still writing the previous one's markers, ~1-3 ms). aiokafka then
    waits a fixed 20 ms (``sender.BACKOFF_OVERRIDE``), not the producer's ``retry_backoff_ms``, and in ~3% of
    the transactions at 1,000 workloads/s every decision waiting on them gets 20 ms later. The constant is
    module-wide: every transactional producer of this process retries that one request this soon."""
    if getattr(aiokafka_sender, "BACKOFF_OVERRIDE", 0) > seconds:
        aiokafka_sender.BACKOFF_OVERRIDE = seconds


async def _bounded(op: Any, seconds: float) -> None:
    try:
        await asyncio.wait_for(op, seconds)
    except (TimeoutError, KafkaError, RuntimeError, OSError):  # pragma: no cover - broker away at shutdown
        pass


async def _quiet_stop(client: Any) -> None:
    try:
        await client.stop()
    except (KafkaError, RuntimeError, OSError):  # pragma: no cover - best effort on a broken connection
        pass
    except asyncio.CancelledError:
        # aiokafka's consumer re-raises the cancellation of its own fetch tasks from stop(); only a
        # cancellation of *this* task is ours to propagate.
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise


class _Listener(ConsumerRebalanceListener):
    def __init__(self, replica: SchedulerReplica) -> None:
        self.replica = replica

    async def on_partitions_revoked(self, revoked: Any) -> None:
        r = self.replica
        async with r.lock:  # let a transaction in flight finish first
            for tp in revoked:
                e = r.engines.get(tp.partition)
                if e is not None:
                    e.assigned = False
        if revoked:
            r.report("revoked", {"instance": r.instance_id, "shards": sorted(tp.partition for tp in revoked)})

    async def on_partitions_assigned(self, assigned: Any) -> None:
        r = self.replica
        tps = list(assigned)
        if tps:
            r.consumer.pause(*tps)  # nothing is read before the engine has seeked to its own position
        r.assignment = {tp.partition for tp in tps}
        r.assignment_changed.set()
        r.report("assigned", {"instance": r.instance_id, "shards": sorted(r.assignment)})


class SchedulerReplica:
    """One scheduler process: a member of the scheduler group, active for the shards the group gives it."""

    def __init__(self, settings: KafkaSettings, options: ServiceOptions = ServiceOptions(),
                 report: Report | None = None) -> None:
        self.settings = settings
        self.options = options
        self.instance_id = options.instance_id or default_instance_id()
        self._report = report
        self.engines: dict[int, ShardEngine] = {}
        self.assignment: set[int] = set()
        self.assignment_changed = asyncio.Event()
        self.lock = asyncio.Lock()
        self._stats_at = time.monotonic() + options.stats_interval_s
        self.gc_pauses = GCPauses()
        self.snapshot_writer = snapshots.SnapshotWriter(settings)
        self.batch_headers = [*BATCH_HEADERS, (INSTANCE_HEADER, self.instance_id.encode())]
        """Decision batches name the replica that decided them (for audits; readers ignore it)."""
        self.marker_headers = [*MARKER_HEADERS, (INSTANCE_HEADER, self.instance_id.encode())]
        self.consumer = AIOKafkaConsumer(
            **reader_kwargs(settings),  # never reset: a position the log no longer holds is an error
            group_id=settings.group_id,
            partition_assignment_strategy=(StickyPartitionAssignor,),
            session_timeout_ms=settings.session_timeout_ms,
            heartbeat_interval_ms=settings.heartbeat_interval_ms,
            group_instance_id=self.instance_id if settings.static_membership else None,
        )

    def report(self, kind: str, fields: dict[str, Any]) -> None:
        if self._report is not None:
            self._report(kind, fields)

    async def run(self, stop: asyncio.Event) -> None:
        s = self.settings
        self.consumer.subscribe([s.topic], listener=_Listener(self))
        try:
            await self.consumer.start()
        except KafkaError as exc:
            await _quiet_stop(self.consumer)
            raise await start_error(exc, f"cannot connect to Kafka at {s.bootstrap}", s) from exc
        partitions = self.consumer.partitions_for_topic(s.topic)
        if partitions is not None and not partitions:
            raise InvalidInput(f"Kafka topic {s.topic!r} does not exist at {s.bootstrap}")
        self.report("started", {"instance": self.instance_id, "group": s.group_id, "topic": s.topic})
        stopping = asyncio.create_task(stop.wait())
        if self.options.stats_interval_s:
            gc.callbacks.append(self.gc_pauses)
        try:
            while not stop.is_set():
                step = asyncio.create_task(self._iteration(stop))
                await asyncio.wait({step, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if not step.done():
                    # Stopping: let a transaction in flight finish, but do not wait on a broker that is away
                    # (a producer starting, a snapshot loading); what is cut off is resolved by the next
                    # active scheduler's producer.
                    await asyncio.wait({step}, timeout=self.options.shutdown_step_s)
                    step.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await step
                    break
                step.result()
        finally:
            stopping.cancel()
            if self.gc_pauses in gc.callbacks:
                gc.callbacks.remove(self.gc_pauses)
            await self._shutdown()

    async def _iteration(self, stop: asyncio.Event) -> None:
        if self.options.stats_interval_s and time.monotonic() >= self._stats_at:
            self._stats_at = time.monotonic() + self.options.stats_interval_s
            gc_pauses = self.gc_pauses.take()
            for e in self.engines.values():
                if e.stats.commit:
                    self.report("stats", {"shard": e.partition, "instance": self.instance_id,
                                          "offset": e.state.offset, **e.stats.summary(), "gc": gc_pauses})
        async with self.lock:
            if self.assignment_changed.is_set():
                self.assignment_changed.clear()
                await self._sync_assignment()
            for e in list(self.engines.values()):
                if e.phase is Phase.SETUP and e.assigned and time.monotonic() >= e.retry_at:
                    await self._guard(e, e.setup(self.consumer))
        waiting = any(e.phase is Phase.SETUP for e in self.engines.values())
        # only the shards set up: one still waiting for its setup has no position yet (a fresh group commits none),
        # and fetching it would raise for every shard, holding back those that are active
        ready = [e.tp for _, e in sorted(self.engines.items()) if e.phase is not Phase.SETUP]
        try:
            fetched = await self.consumer.getmany(*ready, timeout_ms=20 if waiting else 100) if ready else {}
            if not ready:
                await asyncio.sleep(0.02)
        except KafkaError as exc:
            self.report("fetch_failed", {"instance": self.instance_id, "error": str(exc)})
            await asyncio.sleep(self.options.retry_backoff_s)
            return
        async with self.lock:
            for tp, records in fetched.items():
                e = self.engines.get(tp.partition)
                if e is not None and e.phase is not Phase.SETUP:
                    e.ingest(records)
            for e in list(self.engines.values()):
                await self._guard(e, e.step())

    async def _guard(self, e: ShardEngine, op: Any) -> None:
        try:
            await op
        except Fenced as exc:
            # Another producer of the shard started: the group may have given the shard to another replica and not
            # told this one yet. Setting up again now would fence that owner back (InitProducerId), and the two could
            # take turns until the group tells us. So the shard waits for the group's word: a rebalance, which keeps
            # it here (:meth:`_sync_assignment` sets it up at once) or takes it away; failing one, a session timeout,
            # within which a member the group no longer counts has a heartbeat refused and is told (a revocation).
            self.report("fenced", {"shard": e.partition, "instance": self.instance_id, "error": str(exc)})
            await self._reset(e, backoff=max(self.settings.session_timeout_ms / 1000, self.options.retry_backoff_s))
        except KafkaLogError as exc:
            self.report("retry", {"shard": e.partition, "instance": self.instance_id, "error": str(exc)})
            await self._reset(e, backoff=self.options.retry_backoff_s)
        except BaseException:
            e.abandon()  # stopping the replica (a bug, an undecodable record, a cancel): its state is not trusted
            raise

    async def _reset(self, e: ShardEngine, backoff: float) -> None:
        """Start over from the state we have: new producer (resolving any open transaction), marker, catch-up."""
        await e.close_producer()
        if e.speculative:  # the state holds batches of a transaction that may not have committed
            e.fresh = True
            e.speculative = False
        e.phase = Phase.SETUP
        e.marker = None
        e.outstanding = None
        e.retry_at = time.monotonic() + backoff
        if self.consumer.assignment() and e.tp in self.consumer.assignment():
            self.consumer.pause(e.tp)

    async def _sync_assignment(self) -> None:
        for p in sorted(set(self.engines) - self.assignment):
            e = self.engines.pop(p)
            await e.maybe_snapshot(force=True)
            await e.close_producer()
            self.report("standby", {"shard": p, "instance": self.instance_id})
        for p in sorted(self.assignment):
            e = self.engines.get(p)
            if e is None:
                self.engines[p] = ShardEngine(self, p)
            else:
                # Kept through a rebalance: the consumer's position was reset, and someone else may have
                # been active meanwhile. Re-establish: marker and catch-up from our own position.
                e.assigned = True
                await self._reset(e, backoff=0)

    async def _shutdown(self) -> None:
        """Final snapshots, then leave the group — each step bounded, so an unreachable broker cannot keep
        the process from exiting (nothing here is needed for correctness). Only an active engine's state, the
        fold of the committed log, is snapshotted: never one that a failure or the stop's cancel abandoned
        (:meth:`ShardEngine.abandon`)."""
        grace = self.options.shutdown_step_s
        async with self.lock:
            for e in list(self.engines.values()):
                try:
                    await asyncio.wait_for(e.maybe_snapshot(force=True), grace)
                except Exception as exc:  # noqa: BLE001 - shutting down: report and go on
                    self.report("snapshot_failed", {"shard": e.partition, "error": str(exc) or type(exc).__name__})
                await _bounded(e.close_producer(), grace)
            stats = {p: {"decisions": e.decisions, "transactions": e.transactions}
                     for p, e in self.engines.items()}
            self.engines.clear()
        await _bounded(_quiet_stop(self.consumer), grace)  # leaves the group: a standby takes over at once
        await _bounded(self.snapshot_writer.close(), grace)
        self.report("stopped", {"instance": self.instance_id, "shards": stats})
