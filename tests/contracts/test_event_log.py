"""The EventLog contract: every backend (memory, file, Kafka) must pass this same suite.

To add a backend, write a ``Backend`` (how to create a fresh log, how to store a batch of raw, possibly
undecodable, events behind the API's back) and add it to ``BACKENDS``. Everything else is shared. The Kafka
backend needs the session broker of ``tests/integration/kafka``, so ``tests/integration/kafka/
test_kafka_log_contract.py`` imports this module's tests and runs them with its own ``backend`` fixture.

What every backend guarantees (tested for all):

* offsets are integers >= 0 assigned by the log; they increase strictly in log order, and the events of one
  appended batch get consecutive offsets;
* ``end_offset()`` is greater than every stored offset and not greater than the next appended event's offset;
* a read from offset ``s`` yields every stored event with offset >= ``s``, in order, each with the offset
  ``append`` returned for it (``s`` may fall between stored offsets);
* a batch is all-or-nothing and never split across two reads;
* undecodable events name their offset, or are set aside with it under quarantine;
* a read begun on a closed log, or that the close cuts short (a follower's, always), raises ``LogClosed``: a
  reader never takes the close for the log's end.

Only the dense backends (``Backend.dense``: memory and file) also guarantee gap-free offsets from 0, so that
``end_offset()`` is the number of stored events. Kafka's are not dense: a batch is one Kafka record, and
event ``i`` of the record at Kafka offset ``k`` has offset ``k * 1_000_000 + i`` (transaction markers and
control records occupy Kafka offsets too); see :mod:`connectors.kafka.log`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest

from events import schema as ev
from events.codec import Quarantined
from events.errors import LogClosed, UndecodableRecord
from events.filelog import FileLog
from events.log import EventLog, MemoryLog

# --- backends --------------------------------------------------------------------------------------------------


@dataclass
class Backend:
    name: str
    create: Callable[[Path], Awaitable[EventLog]]
    """A new, empty log (``path`` is a fresh directory for backends that need one)."""
    append_raw: Callable[[EventLog, list[bytes]], Awaitable[list[int]]]
    """Store already-encoded events (msgpack maps) as one batch, bypassing the encoder."""
    dense: bool = True
    """Offsets are gap-free from 0 (``end_offset()`` counts the events)."""


async def _memory(path: Path) -> EventLog:
    return MemoryLog()


async def _memory_raw(log: EventLog, raws: list[bytes]) -> list[int]:
    assert isinstance(log, MemoryLog)
    base = log._end  # noqa: SLF001 - the test stores what the encoder would refuse to write
    log._frames.append((base, _raw_array(raws)))  # noqa: SLF001
    log._end += len(raws)  # noqa: SLF001
    return list(range(base, log._end))  # noqa: SLF001


async def _file(path: Path) -> EventLog:
    return FileLog.open(path / "log", fsync="never", segment_bytes=4096)


async def _file_raw(log: EventLog, raws: list[bytes]) -> list[int]:
    assert isinstance(log, FileLog)
    import events.filelog as fl

    real = fl.encode_batch
    fl.encode_batch = lambda events: _raw_array(raws)  # the frame is written and checksummed as usual
    try:
        return await log.append([ev.ClockTicked(time=0)] * len(raws))
    finally:
        fl.encode_batch = real


def _raw_array(raws: list[bytes]) -> bytes:
    return msgspec.msgpack.encode([msgspec.Raw(r) for r in raws])


BACKENDS = [
    Backend("memory", _memory, _memory_raw),
    Backend("file", _file, _file_raw),
    # Backend("kafka", ..., dense=False) lives in tests/integration/kafka/test_kafka_log_contract.py
]


@pytest.fixture(params=BACKENDS, ids=lambda b: b.name)
def backend(request) -> Backend:
    return request.param


@pytest.fixture
def make_log(backend: Backend, tmp_path: Path):
    """A factory of fresh logs of the backend under test; every log made is closed at the end."""
    made: list[EventLog] = []
    counter = iter(range(1000))

    async def make() -> EventLog:
        d = tmp_path / f"l{next(counter)}"
        d.mkdir()
        log = await backend.create(d)
        made.append(log)
        return log

    yield make
    for log in made:  # tests close their logs; this catches the ones a failing test left open
        asyncio.run(log.close())


# --- helpers ---------------------------------------------------------------------------------------------------


def ticks(start: int, n: int) -> list[ev.AnyEvent]:
    return [ev.ClockTicked(time=start + i, id=f"e{start + i}") for i in range(n)]


async def append_all(log: EventLog, sizes: list[int]) -> list[list[int]]:
    """Append batches of ``sizes`` ticks (ids e0, e1, ... in order); the offsets of each batch."""
    out, n = [], 0
    for size in sizes:
        out.append(await log.append(ticks(n, size)))
        n += size
    return out


def check_offsets(batches: list[list[int]], sizes: list[int]) -> None:
    """Consecutive inside a batch, strictly increasing across batches, never negative."""
    assert [len(b) for b in batches] == sizes
    flat_offsets = [o for b in batches for o in b]
    assert all(o >= 0 for o in flat_offsets)
    assert all(a < b for a, b in zip(flat_offsets, flat_offsets[1:], strict=False)), flat_offsets
    for b in batches:
        if b:
            assert b == list(range(b[0], b[0] + len(b)))


async def collect(it: AsyncIterator[list[ev.Record]]) -> list[list[ev.Record]]:
    return [batch async for batch in it]


def flat(batches: list[list[ev.Record]]) -> list[ev.Record]:
    return [r for b in batches for r in b]


def good(t: int) -> bytes:
    return msgspec.msgpack.encode(ev.ClockTicked(time=t, id=f"e{t}"))


UNKNOWN_TYPE = msgspec.msgpack.encode({"type": "EventFromTheFuture", "time": 5})
WRONG_FIELD = msgspec.msgpack.encode({"type": "ClockTicked", "time": "five o'clock"})


# --- the contract ---------------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_append_returns_increasing_offsets(make_log) -> None:
    log = await make_log()
    try:
        assert await log.end_offset() == 0
        sizes = [3, 1, 0, 5]
        batches = await append_all(log, sizes)
        check_offsets(batches, sizes)
        end = await log.end_offset()
        assert end > batches[-1][-1]
        (nxt,) = await log.append(ticks(9, 1))
        assert end <= nxt
        assert await log.end_offset() > nxt
    finally:
        await log.close()


@pytest.mark.asyncio
async def test_append_returns_dense_offsets_from_zero(make_log, backend: Backend) -> None:
    assert backend.dense, f"{backend.name} does not promise dense offsets: do not collect this test for it"
    log = await make_log()
    try:
        assert await log.end_offset() == 0
        assert await log.append(ticks(0, 3)) == [0, 1, 2]
        assert await log.append(ticks(3, 1)) == [3]
        assert await log.append([]) == []
        assert await log.append(ticks(4, 5)) == [4, 5, 6, 7, 8]
        assert await log.end_offset() == 9
    finally:
        await log.close()


@pytest.mark.asyncio
async def test_read_gives_every_event_in_order_with_its_offset(make_log, backend: Backend) -> None:
    log = await make_log()
    try:
        batches = await append_all(log, [2, 7, 1])
        records = [r async for r in log.read()]
        assert [r.offset for r in records] == [o for b in batches for o in b]
        assert [r.event for r in records] == ticks(0, 10)
        if backend.dense:
            assert [r.offset for r in records] == list(range(10))
    finally:
        await log.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("start", [0, 1, 3, 4, 8, 9, 10, 50])
async def test_read_from_an_offset(make_log, backend: Backend, start: int) -> None:
    """``start`` indexes the stored events (10 = the end, 50 = past it); on dense logs it is the offset."""
    log = await make_log()
    try:
        offsets = [o for b in await append_all(log, [3, 1, 6]) for o in b]
        end = await log.end_offset()
        at = offsets[start] if start < 10 else end + (start - 10)
        if backend.dense:
            assert at == start
        got = flat(await collect(log.read_batches(at)))
        assert [r.offset for r in got] == offsets[min(start, 10):]
        assert [r.event.id for r in got] == [f"e{i}" for i in range(min(start, 10), 10)]
    finally:
        await log.close()


@pytest.mark.asyncio
async def test_read_from_between_stored_offsets(make_log) -> None:
    """A start that no event has (a gap between batches, on logs with gaps) reads from the next event."""
    log = await make_log()
    try:
        batches = await append_all(log, [2, 3, 1])
        offsets = [o for b in batches for o in b]
        for i, b in enumerate(batches[1:], 1):
            for at in sorted({b[0] - 1, (batches[i - 1][-1] + b[0]) // 2 + 1, b[0]}):
                if at <= batches[i - 1][-1]:
                    continue
                got = [r.offset async for r in log.read(at)]
                assert got == [o for o in offsets if o >= at] == [o for bb in batches[i:] for o in bb]
    finally:
        await log.close()


@pytest.mark.asyncio
async def test_batches_are_never_split(make_log) -> None:
    """Whatever grouping a backend yields, a reader never stops in the middle of an appended batch."""
    log = await make_log()
    try:
        sizes = [1, 4, 2, 7, 1, 3]
        batches = await append_all(log, sizes)
        firsts = {b[0]: i for i, b in enumerate(batches)}
        lasts = {b[-1]: i for i, b in enumerate(batches)}
        expected = [o for b in batches for o in b]
        seen: list[int] = []
        async for batch in log.read_batches():
            offsets = [r.offset for r in batch]
            assert offsets == expected[len(seen):len(seen) + len(batch)]
            assert offsets[0] in firsts, f"a read began at offset {offsets[0]}, inside an appended batch"
            assert offsets[-1] in lasts, f"a read ended at offset {offsets[-1]}, inside an appended batch"
            seen.extend(offsets)
        assert seen == expected
    finally:
        await log.close()


@pytest.mark.asyncio
async def test_follow_sees_later_appends(make_log) -> None:
    log = await make_log()
    try:
        first = await log.append(ticks(0, 2))
        seen: list[int] = []
        all_seen = asyncio.Event()

        async def follower() -> None:
            async for batch in log.read_batches(first[1], follow=True):
                seen.extend(r.offset for r in batch)
                if len(seen) == 6:
                    all_seen.set()

        task = asyncio.create_task(follower())
        for _ in range(250):  # a backend may need a moment to start reading
            await asyncio.sleep(0.02)
            if seen:
                break
        assert seen == [first[1]]
        later = await log.append(ticks(2, 3))
        await asyncio.sleep(0.01)
        later += await log.append(ticks(5, 2))
        await asyncio.wait_for(all_seen.wait(), 5)
        assert seen == [first[1], *later]
        await log.close()
        with pytest.raises(LogClosed):  # closing ends a follower, and never as if the log ended there
            await asyncio.wait_for(task, 5)
    finally:
        await log.close()


@pytest.mark.asyncio
async def test_close_refuses_further_appends(make_log) -> None:
    log = await make_log()
    await log.append(ticks(0, 1))
    await log.close()
    await log.close()  # idempotent
    with pytest.raises(LogClosed):
        await log.append(ticks(1, 1))


@pytest.mark.asyncio
@pytest.mark.parametrize("follow", [False, True], ids=["to-the-end", "follow"])
async def test_a_read_of_a_closed_log_raises_log_closed(make_log, follow: bool) -> None:
    """A reader never takes a closed log for an empty one, or for one that ends there."""
    log = await make_log()
    await log.append(ticks(0, 2))
    await log.close()
    with pytest.raises(LogClosed):
        async for _ in log.read_batches(0, follow=follow):
            pass


@pytest.mark.asyncio
async def test_async_context_manager_closes(make_log) -> None:
    async with await make_log() as log:
        await log.append(ticks(0, 1))
    with pytest.raises(LogClosed):
        await log.append(ticks(1, 1))


@pytest.mark.asyncio
@pytest.mark.parametrize("bad", [UNKNOWN_TYPE, WRONG_FIELD], ids=["unknown-type", "wrong-field-type"])
async def test_undecodable_event_names_its_offset(make_log, backend: Backend, bad: bytes) -> None:
    log = await make_log()
    try:
        before = await log.append(ticks(0, 2))
        raw = await backend.append_raw(log, [good(2), bad, good(4)])
        if backend.dense:
            assert raw == [2, 3, 4]
        after = await log.append(ticks(5, 1))
        check_offsets([before, raw, after], [2, 3, 1])
        got: list[int] = []
        with pytest.raises(UndecodableRecord) as info:
            async for r in log.read():
                got.append(r.offset)
        assert info.value.offset == raw[1] and f"log offset {raw[1]}" in str(info.value)
        assert got == before  # nothing from the damaged batch was handed out before the error
        assert [r.offset async for r in log.read(raw[2])] == [raw[2], *after]  # reading past it works
    finally:
        await log.close()


@pytest.mark.asyncio
async def test_quarantine_sets_undecodable_events_aside(make_log, backend: Backend) -> None:
    log = await make_log()
    try:
        offsets = await log.append(ticks(0, 1))
        offsets += await backend.append_raw(log, [good(1), UNKNOWN_TYPE, good(3), WRONG_FIELD])
        offsets += await backend.append_raw(log, [b"\xc1"])  # not msgpack at all
        offsets += await log.append(ticks(6, 1))
        if backend.dense:
            assert offsets == list(range(7))
        quarantine: list[Quarantined] = []
        got = [r async for r in log.read(quarantine=quarantine)]
        assert [r.offset for r in got] == [offsets[i] for i in (0, 1, 3, 6)]
        assert [r.event.id for r in got] == ["e0", "e1", "e3", "e6"]
        assert [q.offset for q in quarantine] == [offsets[i] for i in (2, 4, 5)]
        assert quarantine[0].payload == UNKNOWN_TYPE and "EventFromTheFuture" in quarantine[0].error
        end = await log.end_offset()
        assert end > offsets[-1]
        if backend.dense:
            assert end == 7
    finally:
        await log.close()
