"""The event log on Apache Kafka: one partition of one topic is one log (one scheduling shard).

Records and offsets
    An appended batch is **one Kafka record**: its value is the msgpack array of events, byte for byte the
    payload of a file-log frame. A batch is therefore atomic and contiguous for every reader (no other
    producer's events can land inside it, read_committed or not), and it needs no transaction.

    The log offset of event ``i`` of the record at Kafka offset ``k`` is ``k * STRIDE + i`` with
    ``STRIDE = 1_000_000`` (so offset 42000003 is the 4th event of Kafka record 42; a batch holds fewer
    than STRIDE events). Offsets increase strictly and are consecutive inside a batch, but not dense across
    batches: between two records there is a gap of at least ``STRIDE - len(batch)`` plus whatever Kafka
    itself spends offsets on (transaction markers, aborted records, control records).

    Group append: one record is in flight at a time, and the batches appended while it is on its way are
    written together as the next record (each keeps its own contiguous offsets and stays all-or-nothing;
    a reader may get them as one batch). Many small concurrent appends thus cost one round trip per record,
    not per batch.

Control records
    Records carrying the ``kueue-es-control`` header are not events (the scheduler's catch-up markers); the
    log skips them like Kafka skips transaction markers.

A log whose start is gone
    A read never starts from wherever the partition now begins: when records it needs were deleted (retention,
    DeleteRecords), it fails with :class:`RecordsGone` naming the first one, as the file log fails on a missing
    segment. Readers are therefore never reset by the consumer (``auto_offset_reset="none"``).

Isolation
    Every reader is ``read_committed``: records of open or aborted transactions are never seen. The
    scheduler writes its decisions transactionally (:mod:`connectors.kafka.scheduler_service`); producers of
    observed events use this class, whose producer is idempotent (retries never duplicate a batch).
"""

from __future__ import annotations

import asyncio
import collections
import struct
from collections.abc import AsyncIterator, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import (
    ConsumerStoppedError,
    KafkaError,
    MessageSizeTooLargeError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)

from connectors.kafka.errors import KafkaLogError, kafka_error, start_error
from connectors.kafka.settings import KafkaSettings, client_kwargs
from connectors.kafka.topics import RECORD_OVERHEAD, ensure_topics
from events.codec import Quarantined, decode_batch, encode_batch
from events.errors import InvalidInput, LogClosed, LogError
from events.log import EventLog
from events.schema import AnyEvent, Record

STRIDE = 1_000_000
"""Log offsets per Kafka record: event ``i`` of the record at Kafka offset ``k`` has offset ``k*STRIDE+i``."""

CONTROL_HEADER = "kueue-es-control"
BATCH_HEADERS = [("kueue-es-batch", b"1")]
"""Marks a record as a batch of events, format 1 (the msgpack array of :mod:`events.codec`)."""


def to_offset(kafka_offset: int, index: int = 0) -> int:
    return kafka_offset * STRIDE + index


def to_kafka(offset: int) -> int:
    """The Kafka offset of the record holding log offset ``offset`` (or the first record after it)."""
    return max(0, offset) // STRIDE


def is_control(headers: Sequence[tuple[str, bytes]] | None) -> bool:
    return bool(headers) and any(k == CONTROL_HEADER for k, _ in headers)  # type: ignore[union-attr]


def reader_kwargs(s: KafkaSettings) -> dict[str, Any]:
    """A group-less read_committed consumer that starts where it is told to, and is never moved from there: asked
    for records the partition no longer holds, it fails (OffsetOutOfRangeError) instead of skipping to its start."""
    return {
        **client_kwargs(s),
        "isolation_level": "read_committed",
        "enable_auto_commit": False,
        "auto_offset_reset": "none",
        "fetch_max_wait_ms": s.fetch_max_wait_ms,
        "max_partition_fetch_bytes": max(1 << 20, s.max_batch_bytes + RECORD_OVERHEAD),
    }


class RecordsGone(LogError):
    """The partition no longer holds a record a fold needs: its start moved past it (records deleted by
    retention or DeleteRecords). A fold from where it now starts would miss what they held, silently, so it is an
    error, as a missing segment of the file log is (:func:`events.filelog.segment_gap`)."""

    def __init__(self, topic: str, partition: int, missing: int, log_start: int) -> None:
        self.missing, self.log_start = missing, log_start
        super().__init__(
            f"Kafka log {topic}/{partition} no longer holds Kafka record {missing} (log offset "
            f"{to_offset(missing)}): the partition starts at Kafka record {log_start}, the records before it were "
            "deleted or expired (the topic's retention.ms, retention.bytes, or DeleteRecords); a fold from there "
            "would miss them — restore the topic from a backup")


async def ensure_held(consumer: AIOKafkaConsumer, tp: TopicPartition, first: int) -> None:
    """Raise :class:`RecordsGone` unless the partition still holds Kafka record ``first`` (or starts at or before
    it: a read from there misses nothing)."""
    start = (await consumer.beginning_offsets([tp]))[tp]
    if first < start:
        raise RecordsGone(tp.topic, tp.partition, first, start)


async def out_of_range(consumer: AIOKafkaConsumer, tp: TopicPartition, exc: OffsetOutOfRangeError) -> LogError:
    """The error for a fetch the broker found out of range: records deleted under the reader (RecordsGone), or a
    position past the end (a topic created again under the same name, a partition cut back)."""
    args = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}
    at = args.get(tp, -1)
    try:
        start = (await consumer.beginning_offsets([tp]))[tp]
        end = (await consumer.end_offsets([tp]))[tp]
    except KafkaError as err:
        return kafka_error(err, f"Kafka record {at} of {tp.topic}/{tp.partition} is out of range")
    if 0 <= at < start:
        return RecordsGone(tp.topic, tp.partition, at, start)
    return KafkaLogError(f"Kafka record {at} of {tp.topic}/{tp.partition} is out of range: the partition holds "
                         f"Kafka records {start} to {end - 1} (was the topic created again?)")


def batch_records(value: bytes | None, kafka_offset: int, start: int,
                  quarantine: list[Quarantined] | None, *, lazy: bool = False) -> list[Record]:
    """The events of one batch record from log offset ``start`` on (see :func:`events.codec.decode_batch`)."""
    return decode_batch(value if value is not None else b"", to_offset(kafka_offset), quarantine, start, lazy=lazy)


def _array_body(payload: bytes) -> bytes:
    """The elements of a msgpack array, without its header."""
    tag = payload[0] if payload else 0
    if 0x90 <= tag <= 0x9F:
        return payload[1:]
    if tag == 0xDC:
        return payload[3:]
    if tag == 0xDD:
        return payload[5:]
    raise InvalidInput("a batch payload must be a msgpack array of events")


def _array_header(n: int) -> bytes:
    if n <= 15:
        return bytes([0x90 | n])
    if n <= 0xFFFF:
        return b"\xdc" + struct.pack(">H", n)
    return b"\xdd" + struct.pack(">I", n)


def written_offset(md: Any, what: str) -> int:
    """The Kafka offset a record was acknowledged at. aiokafka acknowledges the retry of a batch the broker already
    has but no longer remembers (DuplicateSequenceNumber) as a success at offset -1: the record is written, but
    where is unknown. That is an unknown outcome, never an offset: not retriable as it is (sending the record
    again would write it twice); whoever needs to know folds the log (a scheduler's open transaction holding it
    is aborted by its next producer)."""
    if md.offset < 0:
        raise KafkaLogError(f"{what}: Kafka acknowledged the record without its offset (a retried batch it already "
                            "had); it is written, at an offset not known")
    return int(md.offset)


TOPIC_WAITS, TOPIC_WAIT_S = 40, 0.25
"""How long a topic just created may take to show in a broker's metadata: 40 asks, a quarter second apart."""


class KafkaLog(EventLog):
    """One partition of a Kafka topic as an :class:`EventLog`. Open with :meth:`open`."""

    def __init__(self, settings: KafkaSettings, partition: int = 0) -> None:
        self.settings = settings
        self.topic = settings.topic
        self.partition = partition
        self.tp = TopicPartition(self.topic, partition)
        self._producer: AIOKafkaProducer | None = None
        self._meta: AIOKafkaConsumer | None = None
        self._readers: set[AIOKafkaConsumer] = set()
        self._queue: collections.deque[tuple[bytes, int, asyncio.Future[int]]] = collections.deque()
        self._writer: asyncio.Task[None] | None = None
        self._closed = False

    @classmethod
    async def open(cls, settings: KafkaSettings, partition: int = 0, *, create: bool | None = None) -> KafkaLog:
        """Connect (creating the topics if ``settings.create_topics``) and check the partition exists."""
        created = create if create is not None else settings.create_topics
        if created:
            await ensure_topics(settings)
        log = cls(settings, partition)
        try:
            await log._start(just_created=created)
        except BaseException:
            await log.close()
            raise
        return log

    async def _start(self, *, just_created: bool = False) -> None:
        """``just_created``: the topics were created (or found) a moment ago, and a broker answers metadata
        from a cache its controller fills after the creation is acknowledged: a topic missing there is asked
        for again for a few seconds before it is called missing."""
        s = self.settings
        self._producer = AIOKafkaProducer(
            **client_kwargs(s),
            acks="all",
            enable_idempotence=True,
            linger_ms=0,
            max_request_size=s.max_batch_bytes + RECORD_OVERHEAD,
        )
        try:
            await self._producer.start()
            # the cluster's topics first: asked for a topic the broker does not have (and will not create),
            # the producer waits out its whole metadata timeout before saying so
            asks = TOPIC_WAITS if just_created else 1
            for ask in range(1, asks + 1):
                known = (await self._producer.client.fetch_all_metadata()).topics()
                partitions = await self._producer.partitions_for(self.topic) if self.topic in known else set()
                if partitions or ask == asks:
                    break
                await asyncio.sleep(TOPIC_WAIT_S)
        except UnknownTopicOrPartitionError:
            partitions = set()
        except KafkaError as exc:
            raise await start_error(exc, f"cannot connect to Kafka at {s.bootstrap}", s) from exc
        if not partitions:
            raise InvalidInput(f"Kafka topic {self.topic!r} does not exist at {s.bootstrap} "
                               "(set kafka.create_topics or create it)")
        if self.partition not in partitions:
            raise InvalidInput(f"Kafka topic {self.topic!r} has {len(partitions)} partition(s): "
                               f"shard {self.partition} does not exist")

    # --- writing -------------------------------------------------------------------------------------------

    async def append(self, events: Sequence[AnyEvent]) -> list[int]:
        """Store ``events`` as one batch. Batches appended concurrently while a write is in flight are written
        together as one record when it completes (group append): each stays contiguous and all-or-nothing."""
        if not events:
            if self._closed:
                raise LogClosed(f"Kafka log {self.topic}/{self.partition} is closed")
            return []
        if len(events) >= STRIDE:
            raise InvalidInput(f"a batch holds at most {STRIDE - 1} events, not {len(events)}")
        return await self._append_payload(encode_batch(events), len(events))

    async def _append_payload(self, payload: bytes, count: int) -> list[int]:
        """Append a msgpack array of ``count`` encoded events."""
        if self._closed or self._producer is None:
            raise LogClosed(f"Kafka log {self.topic}/{self.partition} is closed")
        if len(payload) > self.settings.max_batch_bytes:
            raise InvalidInput(f"a batch of {count} events is {len(payload)} bytes, more than "
                               f"kafka.max_batch_bytes ({self.settings.max_batch_bytes}); nothing was appended")
        done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._queue.append((_array_body(payload), count, done))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_queued())
        base = await done
        return list(range(base, base + count))

    async def _write_queued(self) -> None:
        """One record in flight at a time; everything queued meanwhile goes into the next one, but an append whose
        caller was cancelled while it waited in the queue: a replica that lost its Lease (its task group cancelled)
        sends nothing more to the shared log behind the new leader's relist. The record in flight when that
        happens may still land."""
        limit = self.settings.max_batch_bytes
        while self._queue:
            group, size, count = [], 0, 0
            while self._queue and (not group or size + len(self._queue[0][0]) <= limit) \
                    and count + self._queue[0][1] < STRIDE:
                item = self._queue.popleft()
                if item[2].done():  # its caller gave up (a leader losing its Lease): never sent, not appended
                    continue
                group.append(item)
                size += len(item[0])
                count += item[1]
            if not group:
                continue
            payload = _array_header(count) + b"".join(body for body, _, _ in group)
            try:
                if self._producer is None:
                    raise LogClosed(f"Kafka log {self.topic}/{self.partition} is closed")
                md = await self._producer.send_and_wait(self.topic, payload, partition=self.partition,
                                                        headers=BATCH_HEADERS)
                kafka_offset = written_offset(md, f"append to Kafka log {self.topic}/{self.partition}")
            except BaseException as exc:  # every batch of the record fails with it
                err: BaseException = exc
                if isinstance(exc, MessageSizeTooLargeError):
                    err = InvalidInput(f"a batch of {count} events ({len(payload)} bytes) is larger than the topic "
                                       f"{self.topic!r} accepts (max.message.bytes); nothing was appended")
                elif isinstance(exc, KafkaError):
                    err = kafka_error(exc, f"cannot append to Kafka log {self.topic}/{self.partition}")
                elif isinstance(exc, asyncio.CancelledError):  # closed (:meth:`close`) while it was being sent
                    err = LogClosed(f"Kafka log {self.topic}/{self.partition} closed while this append was being "
                                    "sent: it may or may not be stored")
                for _, _, fut in group:
                    if not fut.done():
                        fut.set_exception(err)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                continue
            base = to_offset(kafka_offset)
            for _, n, fut in group:
                if not fut.done():
                    fut.set_result(base)
                base += n

    # --- reading -------------------------------------------------------------------------------------------

    async def read_batches(
        self, start: int = 0, *, follow: bool = False, quarantine: list[Quarantined] | None = None,
        lazy: bool = False,
    ) -> AsyncIterator[list[Record]]:
        if self._closed:
            raise LogClosed(f"Kafka log {self.topic}/{self.partition} is closed")
        consumer = AIOKafkaConsumer(**reader_kwargs(self.settings))
        self._readers.add(consumer)
        try:
            try:
                await consumer.start()
                consumer.assign([self.tp])
                end = None if follow else (await consumer.end_offsets([self.tp]))[self.tp]
                first = to_kafka(start)
                await ensure_held(consumer, self.tp, first)
                if end is not None and first >= end:
                    return
                consumer.seek(self.tp, first)
            except (KafkaError, ConsumerStoppedError) as exc:
                raise self._read_error(exc) from exc
            while True:
                if self._closed:  # before the end a bounded read promised, or following: never taken for the end
                    raise LogClosed(f"Kafka log {self.topic}/{self.partition} closed while it was read")
                if end is not None and await consumer.position(self.tp) >= end:
                    return
                try:
                    fetched = await consumer.getmany(self.tp, timeout_ms=200)
                except OffsetOutOfRangeError as exc:  # deleted under the reader, since ensure_held
                    raise await out_of_range(consumer, self.tp, exc) from None
                except (KafkaError, ConsumerStoppedError) as exc:
                    raise self._read_error(exc) from exc
                for rec in fetched.get(self.tp, ()):
                    if end is not None and rec.offset >= end:
                        return
                    if is_control(rec.headers):
                        continue
                    batch = batch_records(rec.value, rec.offset, start, quarantine, lazy=lazy)
                    if batch:
                        yield batch
        finally:
            self._readers.discard(consumer)
            await consumer.stop()

    def _read_error(self, exc: BaseException) -> LogError:
        """What a reader's client failing means: the log closed under it (its client stopped), or a Kafka error."""
        if isinstance(exc, KafkaError) and not self._closed:
            return kafka_error(exc, f"cannot read Kafka log {self.topic}/{self.partition}")
        return LogClosed(f"Kafka log {self.topic}/{self.partition} closed while it was read")

    async def end_offset(self) -> int:
        """Greater than every stored offset and not greater than the next appended event's offset."""
        if self._closed:
            raise LogClosed(f"Kafka log {self.topic}/{self.partition} is closed")
        try:
            if self._meta is None:
                self._meta = AIOKafkaConsumer(**reader_kwargs(self.settings))
                await self._meta.start()
            return to_offset((await self._meta.end_offsets([self.tp]))[self.tp])
        except KafkaError as exc:
            raise kafka_error(exc, f"cannot read the end of Kafka log {self.topic}/{self.partition}") from exc

    # --- closing -------------------------------------------------------------------------------------------

    async def close(self) -> None:
        """Finish the appends already accepted, for as long as one request may take (``request_timeout_ms``): with
        the broker away an idempotent send is never given up by the producer, and a close waiting for it would keep
        the process from stopping. Appends still unsent then fail (:class:`LogClosed`); the one in flight may still
        land. Then stop every client. Cancelled meanwhile (a timeout around the caller), it still stops them all: a
        client left running would be collected unclosed."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._writer is not None and not self._writer.done():
                await asyncio.wait([self._writer], timeout=self.settings.request_timeout_ms / 1000)
                await self._give_up_writing()
        finally:
            clients: list[Any] = [c for c in (self._producer, self._meta, *self._readers) if c is not None]
            self._producer = self._meta = None
            self._readers = set()
            await asyncio.shield(asyncio.gather(*(_stop(c) for c in clients)))

    async def _give_up_writing(self) -> None:
        """Stop the writer if it is still at work, failing what it had not sent."""
        if self._writer is not None and not self._writer.done():
            self._writer.cancel()
            await asyncio.wait([self._writer])
        closed = LogClosed(f"Kafka log {self.topic}/{self.partition} closed before this append was sent")
        while self._queue:
            fut = self._queue.popleft()[2]
            if not fut.done():
                fut.set_exception(closed)


async def _stop(client: Any) -> None:
    try:
        await client.stop()
    except (KafkaError, RuntimeError):  # pragma: no cover - best effort
        pass


__all__ = ["STRIDE", "KafkaLog", "KafkaLogError", "RecordsGone", "to_kafka", "to_offset"]
