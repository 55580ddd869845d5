"""Scheduler snapshots on the compacted snapshot topic: one key per shard, the latest value wins.

A snapshot is the cluster state of one shard folded from the log up to (and including) Kafka record
``next - 1``, encoded by :mod:`projections.snapshot` and zlib-compressed, so a scheduler that takes over
restores it and reads only the log tail from Kafka offset ``next``. The snapshot of shard N lives in partition
N of the snapshot topic. A snapshot is a pure function of a committed log prefix, so any replica may write
one (even a fenced one: a stale snapshot only means a longer tail to replay).

Encoding and compressing happen in a forked child (:func:`pack_in_background`), so a large state does not
stall the scheduler's event loop.

A snapshot is tied to the log it is of: the Kafka record holding it carries the *anchor* of the log record at
``next - 1`` (a hash of its timestamp and value; header ``kueue-es-log-anchor``), which the writer reads back from
the log before writing. :func:`restore`, the one way a snapshot is restored (the scheduler service, ``run --kube``'s
connector, the tools), uses one only while the log still holds that very record: a topic deleted and created again
under the same name, or cut back, makes the snapshot unusable (passed over and named), never wrong. It then tries
the next older one the compacted topic still holds.

``run --kube`` over Kafka keeps snapshots of its connector's mirror in the same partition under a key of its own
(``TOPIC/N/connector``): the state plus the mirror beyond it (``connector``), written by :class:`ConnectorSink`
through :class:`kueue_es.checkpoints.Checkpointer`, so a restarted connector folds only the log's tail.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import struct
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import msgspec
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError, OffsetOutOfRangeError

from connectors.kafka.errors import KafkaLogError, kafka_error
from connectors.kafka.log import reader_kwargs, to_kafka
from connectors.kafka.settings import KafkaSettings, client_kwargs
from connectors.kafka.topics import RECORD_OVERHEAD
from events.errors import InvalidInput
from kueue_es.background import encode_in_background
from projections import snapshot
from projections.cluster import ClusterState

FORMAT = 1

ANCHOR_HEADER = "kueue-es-log-anchor"
"""Header of a snapshot record: :func:`anchor` of the log record at its ``next - 1`` (absent on records written
before snapshots were anchored)."""


class SnapshotRecord(msgspec.Struct, frozen=True, kw_only=True):
    format: int
    topic: str
    partition: int
    next: int
    """The first Kafka offset of the log *not* folded into ``state``."""
    offset: int
    """``state.offset``: the log offset of the last event folded in (-1 for none)."""
    state: bytes
    """zlib(projections.snapshot.encode(state))."""
    connector: bytes = b""
    """A connector's snapshot: zlib of its mirror beyond the state (:mod:`connectors.k8s.mirror_snapshot`)."""


_enc = msgspec.msgpack.Encoder()
_dec = msgspec.msgpack.Decoder(SnapshotRecord)


def key(topic: str, partition: int, *, connector: bool = False) -> bytes:
    return f"{topic}/{partition}{'/connector' if connector else ''}".encode()


def pack(topic: str, partition: int, next_offset: int, offset: int, raw_state: bytes, level: int = 1,
         connector: Callable[[], bytes] | None = None) -> bytes:
    """``raw_state`` is ``projections.snapshot.encode(state)``, taken while the state was at ``offset``;
    ``connector`` encodes a connector's mirror (called here: in the forked child)."""
    return _enc.encode(SnapshotRecord(format=FORMAT, topic=topic, partition=partition, next=next_offset,
                                      offset=offset, state=zlib.compress(raw_state, level),
                                      connector=zlib.compress(connector(), level) if connector else b""))


def pack_in_background(state: ClusterState, topic: str, partition: int, next_offset: int,
                       offset: int) -> asyncio.Task[bytes]:
    """:func:`pack` of ``state`` as it is at this call, encoded by a forked child while the caller's event loop
    goes on (:func:`kueue_es.background.encode_in_background`)."""
    return encode_in_background(state, functools.partial(pack, topic, partition, next_offset, offset))


def unpack(value: bytes) -> tuple[SnapshotRecord, ClusterState]:
    rec = _envelope(value)
    return rec, _state_of(rec)


def _envelope(value: bytes) -> SnapshotRecord:
    """The snapshot record, its state still compressed."""
    try:
        rec = _dec.decode(value)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise InvalidInput(f"not a kueue-es snapshot record: {exc}") from None
    if rec.format != FORMAT:
        raise InvalidInput(f"snapshot record format {rec.format} is not supported (expected {FORMAT})")
    return rec


def _state_of(rec: SnapshotRecord) -> ClusterState:
    try:
        raw = zlib.decompress(rec.state)
    except zlib.error as exc:
        raise InvalidInput(f"snapshot of {rec.topic}/{rec.partition} is damaged: {exc}") from None
    return snapshot.decode(raw)


class _Next(msgspec.Struct):
    next: int


_next_dec = msgspec.msgpack.Decoder(_Next)


def _next_of(value: bytes) -> int:
    """``next`` of a packed snapshot record, read without copying its state."""
    return _next_dec.decode(value).next


def anchor(rec: Any) -> bytes:
    """What identifies the log record ``rec`` (a consumer record) among the histories a topic of one name may
    have had: a hash of its timestamp and value. Two histories agree on it at an offset only if the same bytes
    were written there at the same millisecond."""
    h = hashlib.blake2b(struct.pack(">q", rec.timestamp if rec.timestamp is not None else -1), digest_size=8)
    h.update(rec.value or b"")
    return h.hexdigest().encode()


async def record_at(consumer: AIOKafkaConsumer, tp: TopicPartition, k: int, *, wait_s: float = 0.0,
                    fetch_s: float = 30.0, written: AIOKafkaConsumer | None = None) -> Any:
    """The record at Kafka offset ``k`` of ``tp`` (assigned to ``consumer``) as a read_committed reader sees it;
    None when the partition holds none there: deleted (below its start), past its end, or an offset that is no
    record (an aborted one, a transaction marker). ``wait_s``: how long a record may take to become visible (its
    transaction's commit markers still being written); ``fetch_s``: to fetch it.

    With ``written`` (a read_uncommitted consumer, whose end of ``tp`` is its high watermark), the wait is only for
    a record that is on its way: one at or past the last stable offset but below the high watermark is written, in a
    transaction not yet resolved; one at or past the high watermark is not written at all, and is None at once."""
    if k < 0:
        return None
    deadline = time.monotonic() + wait_s
    while True:
        start = (await consumer.beginning_offsets([tp]))[tp]
        end = (await consumer.end_offsets([tp]))[tp]  # read_committed: the last stable offset
        if k < start:
            return None
        if k < end:
            break
        if written is not None and k >= (await written.end_offsets([tp]))[tp]:
            return None
        if time.monotonic() >= deadline:
            return None
        await asyncio.sleep(0.05)
    consumer.seek(tp, k)
    deadline = time.monotonic() + fetch_s
    while True:
        try:
            fetched = (await consumer.getmany(tp, timeout_ms=500)).get(tp, [])
        except OffsetOutOfRangeError:  # deleted meanwhile
            return None
        if fetched:
            return fetched[0] if fetched[0].offset == k else None
        if await consumer.position(tp) > k:
            return None
        if time.monotonic() >= deadline:
            raise KafkaLogError(f"timed out reading Kafka record {k} of {tp.topic}/{tp.partition}", retriable=True)


class SnapshotWriter:
    """An idempotent (not transactional) producer for snapshot records."""

    def __init__(self, settings: KafkaSettings) -> None:
        self.settings = settings
        self._producer: AIOKafkaProducer | None = None
        self._reader: AIOKafkaConsumer | None = None
        """Reads back the log record a snapshot ends at (:meth:`_anchor`), one shard at a time ..."""
        self._written: AIOKafkaConsumer | None = None
        """... and the log's high watermark: whether a record not visible yet is written (:func:`record_at`)."""
        self._reading = asyncio.Lock()

    async def write(self, partition: int, value: bytes, *, connector: bool = False) -> int:
        s = self.settings
        nxt = _next_of(value)
        headers = [(ANCHOR_HEADER, await self._anchor(partition, nxt))] if nxt > 0 else []
        if self._producer is None:
            self._producer = AIOKafkaProducer(**client_kwargs(s), acks="all", enable_idempotence=True,
                                              max_request_size=s.max_snapshot_bytes + RECORD_OVERHEAD)
            await self._producer.start()
        try:
            md = await self._producer.send_and_wait(s.snapshots, value, key=key(s.topic, partition,
                                                                                connector=connector),
                                                    partition=partition, headers=headers)
        except KafkaError as exc:
            raise kafka_error(exc, f"cannot write a snapshot to {s.snapshots}/{partition}") from exc
        return md.offset

    async def _anchor(self, partition: int, nxt: int) -> bytes:
        """The anchor of the log record at ``nxt - 1``, read back from the log (waiting a moment for its
        transaction's commit to be visible, when it is written). A snapshot of records the log does not hold
        committed is refused: at once when the log holds no record there at all (past its end: a topic created again,
        cut back)."""
        s = self.settings
        tp = TopicPartition(s.topic, partition)
        async with self._reading:
            try:
                if self._reader is None:
                    self._reader = AIOKafkaConsumer(**reader_kwargs(s))
                    await self._reader.start()
                if self._written is None:
                    self._written = AIOKafkaConsumer(**{**reader_kwargs(s), "isolation_level": "read_uncommitted"})
                    await self._written.start()
                self._reader.assign([tp])
                rec = await record_at(self._reader, tp, nxt - 1, wait_s=s.request_timeout_ms / 1000,
                                      fetch_s=s.request_timeout_ms / 1000, written=self._written)
            except KafkaError as exc:
                raise kafka_error(exc, f"cannot read the record a snapshot of {s.topic}/{partition} ends at") from exc
        if rec is None:
            raise KafkaLogError(f"the log {s.topic}/{partition} holds no committed record at Kafka offset {nxt - 1}, "
                                "where the snapshot ends: it is not written", retriable=True)
        return anchor(rec)

    async def close(self) -> None:
        readers = [c for c in (self._reader, self._written) if c is not None]
        self._reader = self._written = None
        for c in readers:
            await c.stop()
        if self._producer is not None:
            p, self._producer = self._producer, None
            await p.stop()


class _Found(msgspec.Struct, frozen=True):
    offset: int
    """Where the snapshot record is on the snapshot topic."""
    value: bytes
    anchor: bytes | None


class _Reading:
    """The snapshot partition of one shard read backwards, newest first, and the log partition it is checked
    against; use as ``async with``."""

    def __init__(self, settings: KafkaSettings, partition: int, connector: bool) -> None:
        self.settings, self.partition = settings, partition
        self.tp = TopicPartition(settings.snapshots, partition)
        self.log_tp = TopicPartition(settings.topic, partition)
        self.want = key(settings.topic, partition, connector=connector)
        # a compacted topic: a snapshot deleted under the scan is skipped, not an error
        self.consumer = AIOKafkaConsumer(**{**reader_kwargs(settings), "auto_offset_reset": "earliest",
                                            "max_partition_fetch_bytes": settings.max_snapshot_bytes
                                            + RECORD_OVERHEAD})
        self.log: AIOKafkaConsumer | None = None
        self.start = self.end = 0

    async def __aenter__(self) -> _Reading:
        try:
            await self.consumer.start()
            self.consumer.assign([self.tp])
            self.start = (await self.consumer.beginning_offsets([self.tp]))[self.tp]
            self.end = (await self.consumer.end_offsets([self.tp]))[self.tp]
        except KafkaError as exc:
            await self.__aexit__()
            raise kafka_error(exc, f"cannot read snapshots from {self.where}") from exc
        return self

    async def __aexit__(self, *_exc: object) -> None:
        for c in (self.consumer, self.log):
            if c is not None:
                await c.stop()

    @property
    def where(self) -> str:
        return f"{self.settings.snapshots}/{self.partition}"

    async def newest_below(self, upper: int) -> _Found | None:
        """The newest snapshot record of the key below offset ``upper`` of the snapshot partition: read backwards in
        ever wider windows. It times out only when the reading stalls (``request_timeout_ms`` without progress),
        never because there is much to read: the other key's snapshots (up to ``max_snapshot_bytes`` each) that a
        scan for an old one passes over are read as fast as the broker sends them."""
        consumer, tp = self.consumer, self.tp
        patience = self.settings.request_timeout_ms / 1000
        try:
            back = 4
            lo = upper
            while lo > self.start:
                lo = max(self.start, upper - back)
                consumer.seek(tp, lo)
                last = None
                deadline = time.monotonic() + patience
                while (at := await consumer.position(tp)) < upper:
                    if time.monotonic() > deadline:
                        raise KafkaLogError(f"timed out reading snapshots from {self.where}", retriable=True)
                    fetched = await consumer.getmany(tp, timeout_ms=500)
                    for rec in fetched.get(tp, ()):
                        if rec.offset < upper and rec.key == self.want and rec.value:
                            last = rec
                    if await consumer.position(tp) > at:
                        deadline = time.monotonic() + patience
                if last is not None:
                    anchors = [v for k, v in last.headers or () if k == ANCHOR_HEADER]
                    return _Found(last.offset, last.value, anchors[0] if anchors else None)
                back *= 8
            return None
        except KafkaError as exc:
            raise kafka_error(exc, f"cannot read snapshots from {self.where}") from exc

    async def not_of_the_log(self, rec: SnapshotRecord, anchored: bytes | None) -> str | None:
        """Why the log does not hold what ``rec`` was folded from (None: it does, as far as can be told)."""
        s, tp, k = self.settings, self.log_tp, rec.next - 1
        if (rec.topic, rec.partition) != (s.topic, self.partition):
            return f"it is of the log {rec.topic}/{rec.partition}, not {s.topic}/{self.partition}"
        try:
            if self.log is None:
                self.log = AIOKafkaConsumer(**reader_kwargs(s))
                await self.log.start()
                self.log.assign([tp])
            start = (await self.log.beginning_offsets([tp]))[tp]
            end = (await self.log.end_offsets([tp]))[tp]
            if rec.next > end:
                return (f"it is of the log up to Kafka record {k}, past the log's end (Kafka offset {end}): the topic "
                        "was created again under its name, or cut back")
            if k < 0:
                return None
            if k < start:
                return (f"the log no longer holds Kafka record {k}, where it ends (the log starts at Kafka record "
                        f"{start})")
            if anchored is None:  # written before snapshots were anchored: the checks above are all there is
                return None
            held = await record_at(self.log, tp, k, fetch_s=s.request_timeout_ms / 1000)
        except KafkaError as exc:
            raise kafka_error(exc, f"cannot check a snapshot of {self.where} against the log") from exc
        if held is None or anchor(held) != anchored:
            return (f"the log no longer holds the record it was taken up to (Kafka record {k} is not the one it "
                    "ended at): the topic was created again under its name")
        return None


async def load_latest(settings: KafkaSettings, partition: int, *, connector: bool = False
                      ) -> tuple[SnapshotRecord, ClusterState] | None:
    """The newest snapshot of shard ``partition`` (None if there is none yet); ``connector``: the connector's.
    Not checked against the log: :func:`restore` is the one a fold starts from."""
    async with _Reading(settings, partition, connector) as reading:
        found = await reading.newest_below(reading.end)
    return unpack(found.value) if found is not None else None


C = TypeVar("C")


@dataclass
class Restored(Generic[C]):
    """Where a fold of a shard starts: a snapshot's record and state (None: the beginning of the log), what
    ``part`` made of it, and the snapshots passed over on the way, each with why."""

    record: SnapshotRecord | None = None
    state: ClusterState | None = None
    part: C | None = None
    passed_over: list[str] = field(default_factory=list)


async def restore(settings: KafkaSettings, partition: int, *, connector: bool = False,
                  part: Callable[[SnapshotRecord, ClusterState], C] | None = None) -> Restored[C]:
    """The newest snapshot of shard ``partition`` (``connector``: the connector's) that is of this very log: one
    this version reads (:func:`unpack`, and holding the state at its offset) whose last record the log still
    holds (its anchor; the log's end and start for one written before anchors). Each one that is not is passed
    over, named, for the next older one the compacted topic holds, as :func:`kueue_es.checkpoints.restore` does;
    with none usable, the fold starts from the beginning. ``part`` makes the caller's own part of a snapshot (the
    connector's mirror), raising InvalidInput to pass it over. Kafka failures raise :class:`KafkaLogError`."""
    out: Restored[C] = Restored()
    async with _Reading(settings, partition, connector) as reading:
        upper = reading.end
        while (found := await reading.newest_below(upper)) is not None:
            upper = found.offset
            try:
                rec = _envelope(found.value)
                why = await reading.not_of_the_log(rec, found.anchor)  # before the (costly) decoding of the state
                if why is not None:
                    raise InvalidInput(why)
                state = _state_of(rec)
                if state.offset != rec.offset:
                    raise InvalidInput(f"it holds the state at offset {state.offset}, not {rec.offset}")
                made = part(rec, state) if part is not None else None
            except InvalidInput as exc:
                out.passed_over.append(f"{reading.where}@{found.offset}: {exc}")
                continue
            out.record, out.state, out.part = rec, state, made
            return out
    return out


class ConnectorSink:
    """Where ``run --kube`` over Kafka keeps its connector's snapshots (a :class:`kueue_es.checkpoints.Sink`): the
    snapshot topic, under the shard's connector key. The mirror folds whole Kafka records, so every offset it is
    at ends one; the snapshot says which record comes next."""

    def __init__(self, settings: KafkaSettings, partition: int) -> None:
        self.settings, self.partition = settings, partition
        self.where = f"{settings.snapshots}/{partition}"
        self.writer = SnapshotWriter(settings)

    def frame(self, offset: int) -> int | None:
        return to_kafka(offset) + 1

    def pack(self, offset: int, time_ms: int, frame: int, raw_state: bytes,
             connector: Callable[[], bytes] | None) -> bytes:
        return pack(self.settings.topic, self.partition, frame, offset, raw_state, connector=connector)

    async def write(self, offset: int, data: bytes) -> str:
        at = await self.writer.write(self.partition, data, connector=True)
        return f"{self.where}@{at}"

    async def close(self) -> None:
        await self.writer.close()
