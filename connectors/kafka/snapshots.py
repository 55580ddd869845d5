"""Scheduler snapshots on the compacted snapshot topic: one key per shard, the latest value wins.

A snapshot is the cluster state of one shard folded from the log up to (and including) Kafka record
``next - 1``, encoded by :mod:`projections.snapshot` and zlib-compressed, so a scheduler that takes over
restores it and reads only the log tail from Kafka offset ``next``. The snapshot of shard N lives in partition
N of the snapshot topic. A snapshot is a pure function of a committed log prefix, so any replica may write
one (even a fenced one: a stale snapshot only means a longer tail to replay).

Encoding and compressing happen in a forked child (:func:`pack_in_background`), so a large state does not
stall the scheduler's event loop.

``run --kube`` over Kafka keeps snapshots of its connector's mirror in the same partition under a key of its own
(``TOPIC/N/connector``): the state plus the mirror beyond it (``connector``), written by :class:`ConnectorSink`
through :class:`kueue_es.checkpoints.Checkpointer`, so a restarted connector folds only the log's tail.
"""

from __future__ import annotations

import asyncio
import functools
import time
import zlib
from collections.abc import Callable

import msgspec
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError

from connectors.kafka.errors import KafkaLogError, kafka_error
from connectors.kafka.log import reader_kwargs, to_kafka
from connectors.kafka.settings import KafkaSettings, client_kwargs
from connectors.kafka.topics import RECORD_OVERHEAD
from events.errors import InvalidInput
from kueue_es.background import encode_in_background
from projections import snapshot
from projections.cluster import ClusterState

FORMAT = 1


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
    try:
        rec = _dec.decode(value)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise InvalidInput(f"not a kueue-es snapshot record: {exc}") from None
    if rec.format != FORMAT:
        raise InvalidInput(f"snapshot record format {rec.format} is not supported (expected {FORMAT})")
    try:
        raw = zlib.decompress(rec.state)
    except zlib.error as exc:
        raise InvalidInput(f"snapshot of {rec.topic}/{rec.partition} is damaged: {exc}") from None
    return rec, snapshot.decode(raw)


class SnapshotWriter:
    """An idempotent (not transactional) producer for snapshot records."""

    def __init__(self, settings: KafkaSettings) -> None:
        self.settings = settings
        self._producer: AIOKafkaProducer | None = None

    async def write(self, partition: int, value: bytes, *, connector: bool = False) -> int:
        s = self.settings
        if self._producer is None:
            self._producer = AIOKafkaProducer(**client_kwargs(s), acks="all", enable_idempotence=True,
                                              max_request_size=s.max_snapshot_bytes + RECORD_OVERHEAD)
            await self._producer.start()
        try:
            md = await self._producer.send_and_wait(s.snapshots, value, key=key(s.topic, partition,
                                                                                connector=connector),
                                                    partition=partition)
        except KafkaError as exc:
            raise kafka_error(exc, f"cannot write a snapshot to {s.snapshots}/{partition}") from exc
        return md.offset

    async def close(self) -> None:
        if self._producer is not None:
            p, self._producer = self._producer, None
            await p.stop()


async def load_latest(settings: KafkaSettings, partition: int, *, connector: bool = False
                      ) -> tuple[SnapshotRecord, ClusterState] | None:
    """The newest snapshot of shard ``partition`` (None if there is none yet); ``connector``: the connector's."""
    tp = TopicPartition(settings.snapshots, partition)
    want = key(settings.topic, partition, connector=connector)
    consumer = AIOKafkaConsumer(**{**reader_kwargs(settings),
                                   "max_partition_fetch_bytes": settings.max_snapshot_bytes + RECORD_OVERHEAD})
    try:
        await consumer.start()
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        deadline = time.monotonic() + settings.request_timeout_ms / 1000
        lo, back = end, 4
        while lo > 0:
            lo = max(0, end - back)
            consumer.seek(tp, lo)
            last = None
            while await consumer.position(tp) < end:
                if time.monotonic() > deadline:
                    raise KafkaLogError(f"timed out reading snapshots from {settings.snapshots}/{partition}",
                                        retriable=True)
                fetched = await consumer.getmany(tp, timeout_ms=500)
                for rec in fetched.get(tp, ()):
                    if rec.offset < end and rec.key == want and rec.value:
                        last = rec.value
            if last is not None:
                return unpack(last)
            back *= 8
        return None
    except KafkaError as exc:
        raise kafka_error(exc, f"cannot read snapshots from {settings.snapshots}/{partition}") from exc
    finally:
        await consumer.stop()


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
