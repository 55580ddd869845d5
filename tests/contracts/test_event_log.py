"""The EventLog contract: every backend (memory, file, later Kafka) must pass this same suite.

To add a backend, write a ``Backend`` (how to create a fresh log, how to store a batch of raw, possibly
undecodable, events behind the API's back) and add it to ``BACKENDS``. Everything else is shared.
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
    # Backend("kafka", ...),  # connectors/kafka: create a topic per test; append_raw produces raw bytes
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
async def test_append_returns_dense_offsets_from_zero(make_log) -> None:
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
async def test_read_gives_every_event_in_order_with_its_offset(make_log) -> None:
    log = await make_log()
    try:
        for start, n in [(0, 2), (2, 7), (9, 1)]:
            await log.append(ticks(start, n))
        records = [r async for r in log.read()]
        assert [r.offset for r in records] == list(range(10))
        assert [r.event for r in records] == ticks(0, 10)
    finally:
        await log.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("start", [0, 1, 3, 4, 8, 9, 10, 50])
async def test_read_from_an_offset(make_log, start: int) -> None:
    log = await make_log()
    try:
        for s, n in [(0, 3), (3, 1), (4, 6)]:
            await log.append(ticks(s, n))
        got = flat(await collect(log.read_batches(start)))
        assert [r.offset for r in got] == list(range(min(start, 10), 10))
        assert all(r.event.id == f"e{r.offset}" for r in got)
    finally:
        await log.close()


@pytest.mark.asyncio
async def test_batches_are_never_split(make_log) -> None:
    """Whatever grouping a backend yields, a reader never stops in the middle of an appended batch."""
    log = await make_log()
    try:
        sizes = [1, 4, 2, 7, 1, 3]
        boundaries, n = {0}, 0
        for size in sizes:
            await log.append(ticks(n, size))
            n += size
            boundaries.add(n)
        seen = 0
        async for batch in log.read_batches():
            assert [r.offset for r in batch] == list(range(seen, seen + len(batch)))
            seen += len(batch)
            assert seen in boundaries, f"a read ended at offset {seen}, inside an appended batch"
        assert seen == n
    finally:
        await log.close()


@pytest.mark.asyncio
async def test_follow_sees_later_appends(make_log) -> None:
    log = await make_log()
    try:
        await log.append(ticks(0, 2))
        seen: list[int] = []
        all_seen = asyncio.Event()

        async def follower() -> None:
            async for batch in log.read_batches(1, follow=True):
                seen.extend(r.offset for r in batch)
                if len(seen) == 6:
                    all_seen.set()

        task = asyncio.create_task(follower())
        await asyncio.sleep(0.05)
        assert seen == [1]
        await log.append(ticks(2, 3))
        await asyncio.sleep(0.01)
        await log.append(ticks(5, 2))
        await asyncio.wait_for(all_seen.wait(), 5)
        assert seen == [1, 2, 3, 4, 5, 6]
        await log.close()
        await asyncio.wait_for(task, 5)  # closing ends a follower
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
        await log.append(ticks(0, 2))
        assert await backend.append_raw(log, [good(2), bad, good(4)]) == [2, 3, 4]
        await log.append(ticks(5, 1))
        got: list[int] = []
        with pytest.raises(UndecodableRecord) as info:
            async for r in log.read():
                got.append(r.offset)
        assert info.value.offset == 3 and "log offset 3" in str(info.value)
        assert got == [0, 1]  # nothing from the damaged batch was handed out before the error
        assert [r.offset async for r in log.read(4)] == [4, 5]  # reading past it works
    finally:
        await log.close()


@pytest.mark.asyncio
async def test_quarantine_sets_undecodable_events_aside(make_log, backend: Backend) -> None:
    log = await make_log()
    try:
        await log.append(ticks(0, 1))
        await backend.append_raw(log, [good(1), UNKNOWN_TYPE, good(3), WRONG_FIELD])
        await backend.append_raw(log, [b"\xc1"])  # not msgpack at all
        await log.append(ticks(6, 1))
        quarantine: list[Quarantined] = []
        got = [r async for r in log.read(quarantine=quarantine)]
        assert [r.offset for r in got] == [0, 1, 3, 6]
        assert [r.event.id for r in got] == ["e0", "e1", "e3", "e6"]
        assert [q.offset for q in quarantine] == [2, 4, 5]
        assert quarantine[0].payload == UNKNOWN_TYPE and "EventFromTheFuture" in quarantine[0].error
        assert await log.end_offset() == 7
    finally:
        await log.close()
