"""Following the embedded file log: every appended batch reaches a follower exactly once (across segment rolls,
torn tails that complete later or are cut off by the next writer, a writer in another process), damage appended
later is reported, and an idle poll reads nothing it has read before and costs two stats."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import anyio
import pytest
from loghelp import SEG0, count_read, ticks

from events import filelog
from events import schema as ev
from events.errors import CorruptRecord
from events.filelog import HEADER, FileLog, list_segments

pytestmark = pytest.mark.usefixtures("windows")  # every case also with windows smaller than a frame


async def _append(log: FileLog, sizes: list[int], start: int = 0) -> int:
    for size in sizes:
        assert await log.append(ticks(start, size, pad=300)) == list(range(start, start + size))
        start += size
    return start


async def _follow_until(log: FileLog, start: int, end: int, seen: list[int]) -> None:
    async for batch in log.read_batches(start, follow=True):
        seen.extend(r.offset for r in batch)
        if seen[-1] + 1 >= end:
            return


@pytest.mark.parametrize("reader", ["read-only", "writer"])
def test_a_follower_sees_every_batch_once_across_segment_rolls(tmp_path: Path, reader: str) -> None:
    sizes = [1, 3, 7, 2, 5] * 8

    async def main() -> list[int]:
        writer = FileLog.open(tmp_path, fsync="never", segment_bytes=8 << 10)
        follower = writer if reader == "writer" else FileLog.open(tmp_path, readonly=True)
        seen: list[int] = []
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_follow_until, follower, 0, sum(sizes), seen)
                n = 0
                for size in sizes:
                    n = await _append(writer, [size], n)
                    await anyio.sleep(0)  # let the follower catch up at some appends, not at others
        writer.close_sync()
        return seen

    seen = anyio.run(main)
    assert len(list_segments(tmp_path)) > 3
    assert seen == list(range(sum(sizes)))


def _frames(path: Path, sizes: list[int]) -> bytes:
    """The segment bytes a writer lays down for batches of ``sizes``."""
    anyio.run(_append, FileLog.open(path, fsync="never"), sizes)
    return (path / SEG0).read_bytes()


def test_a_torn_tail_that_completes_later_is_read_once_when_whole(tmp_path: Path) -> None:
    data = _frames(tmp_path / "model", [2, 3, 4])
    first = HEADER.size + HEADER.unpack_from(data, 0)[0]
    log_dir = tmp_path / "log"
    log_dir.mkdir()
    seg = log_dir / SEG0
    seg.write_bytes(data[: first + 20])  # the first frame and the start of the second

    async def main() -> list[list[int]]:
        log = FileLog.open(log_dir, readonly=True)
        batches = log.read_batches(0, follow=True).__aiter__()
        got = [[r.offset for r in await batches.__anext__()]]  # the torn second frame was read with it
        with seg.open("ab") as f:
            f.write(data[first + 20 :])
        with anyio.fail_after(30):
            got.append([r.offset for r in await batches.__anext__()])
            got.append([r.offset for r in await batches.__anext__()])
        await batches.aclose()
        return got

    assert anyio.run(main) == [[0, 1], [2, 3, 4], [5, 6, 7, 8]]


WRITER = r"""
import sys
import anyio
from events import schema as ev
from events.filelog import FileLog

async def main():
    log = FileLog.open(sys.argv[1], fsync="never", segment_bytes=int(sys.argv[2]))
    n = 0
    for size in [int(s) for s in sys.argv[3].split(",")]:
        await log.append([ev.ClockTicked(time=n + i, id=f"{n + i}", key="p" * 700) for i in range(size)])
        n += size
    log.close_sync()

anyio.run(main)
"""


def test_a_follower_reads_a_writer_in_another_process(tmp_path: Path) -> None:
    sizes = [1, 4, 2, 9, 3, 1, 6] * 15
    tmp_path.mkdir(exist_ok=True)

    async def main() -> list[ev.Record]:
        log = FileLog.open(tmp_path, readonly=True)  # before the writer made any segment
        seen: list[ev.Record] = []
        with anyio.fail_after(60):
            proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(16 << 10),
                                     ",".join(map(str, sizes))], stderr=subprocess.PIPE, text=True)
            try:
                async for batch in log.read_batches(0, follow=True):
                    seen.extend(batch)
                    if seen[-1].offset + 1 == sum(sizes):
                        break
            finally:
                _, err = proc.communicate(30)
        assert proc.returncode == 0, err
        return seen

    seen = anyio.run(main)
    assert [r.offset for r in seen] == list(range(sum(sizes)))
    assert [r.event.id for r in seen] == [str(i) for i in range(sum(sizes))]
    assert len(list_segments(tmp_path)) > 3


def test_damage_appended_after_the_follower_started_is_reported_with_segment_and_offset(tmp_path: Path) -> None:
    writer = FileLog.open(tmp_path, fsync="never")
    anyio.run(_append, writer, [2, 3])

    async def main() -> tuple[CorruptRecord, int]:
        log = FileLog.open(tmp_path, readonly=True)
        batches = log.read_batches(0, follow=True).__aiter__()
        assert [r.offset for r in await batches.__anext__()] == [0, 1]
        assert [r.offset for r in await batches.__anext__()] == [2, 3, 4]
        at = (tmp_path / SEG0).stat().st_size
        await _append(writer, [4, 1], 5)
        with (tmp_path / SEG0).open("r+b") as f:  # a byte of the first new frame's payload
            f.seek(at + HEADER.size + 10)
            b = f.read(1)
            f.seek(at + HEADER.size + 10)
            f.write(bytes([b[0] ^ 0x40]))
        with anyio.fail_after(30), pytest.raises(CorruptRecord) as err:
            await batches.__anext__()
        await batches.aclose()
        return err.value, at

    exc, at = anyio.run(main)
    assert (exc.segment, exc.offset, exc.position) == (SEG0, 5, at)
    assert "checksum" in str(exc)


def test_a_segment_appearing_after_a_gap_is_reported(tmp_path: Path) -> None:
    writer = FileLog.open(tmp_path, fsync="never")
    anyio.run(_append, writer, [2])

    async def main() -> CorruptRecord:
        log = FileLog.open(tmp_path, readonly=True)
        batches = log.read_batches(0, follow=True).__aiter__()
        assert [r.offset for r in await batches.__anext__()] == [0, 1]
        (tmp_path / f"{5:020d}.seg").write_bytes(b"")  # offsets 2..4 are nowhere
        with anyio.fail_after(30), pytest.raises(CorruptRecord) as err:
            await batches.__anext__()
        await batches.aclose()
        return err.value

    exc = anyio.run(main)
    assert (exc.segment, exc.offset) == (f"{5:020d}.seg", 2)


def _count_polls(log: FileLog) -> list[int]:
    """Calls of the log's ``read_new``, what a follower calls once per poll: one entry per call."""
    polls: list[int] = []
    real = log.read_new

    def counting(*args, **kwargs):
        polls.append(1)
        return real(*args, **kwargs)

    log.read_new = counting  # type: ignore[method-assign]
    return polls


def test_an_idle_follower_reads_nothing_it_has_read_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writer = FileLog.open(tmp_path, fsync="never")
    end = anyio.run(_append, writer, [10] * 50)
    read = count_read(monkeypatch)

    async def main() -> list[int]:
        log = FileLog.open(tmp_path, readonly=True)
        polls = _count_polls(log)
        seen: list[int] = []
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_follow_until, log, 0, end + 1, seen)
                while not seen or seen[-1] + 1 < end:
                    await anyio.sleep(0.01)
                caught_up, polled = len(read), len(polls)
                while len(polls) < polled + 3:  # three idle polls
                    await anyio.sleep(0.01)
                tg.cancel_scope.cancel()
        return read[caught_up:]

    idle = anyio.run(main)
    assert sum(idle) == 0, f"idle polls re-read {idle} bytes"


def test_a_read_only_logs_end_reads_only_what_was_appended(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writer = FileLog.open(tmp_path, fsync="never")
    anyio.run(_append, writer, [10] * 20)
    log = FileLog.open(tmp_path, readonly=True)
    before = (tmp_path / SEG0).stat().st_size
    monkeypatch.setattr(filelog, "READ_CHUNK", 1 << 20)  # what was appended fits one window: read once
    read = count_read(monkeypatch)
    assert anyio.run(log.end_offset) == 200
    anyio.run(_append, writer, [3], 200)
    assert anyio.run(log.end_offset) == 203
    assert sum(read) == (tmp_path / SEG0).stat().st_size - before


def test_a_writers_append_wakes_its_follower_without_a_poll(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the poll interval an hour, only the append's wake-up can deliver the batch before the guard expires."""
    monkeypatch.setattr(filelog, "FOLLOW_POLL_SECONDS", 3600)

    async def main() -> list[int]:
        log = FileLog.open(tmp_path, fsync="never")
        seen: list[int] = []
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(_follow_until, log, 0, 5, seen)
                await anyio.sleep(0)
                await _append(log, [2, 3])
        log.close_sync()
        return seen

    assert anyio.run(main) == [0, 1, 2, 3, 4]


def _count_os_calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Calls of the os functions that list a directory or stat or open a file, by name."""
    calls: Counter[str] = Counter()
    for name in ("listdir", "scandir", "stat", "lstat", "open", "fstat"):
        real = getattr(os, name)

        def counting(*args, _real=real, _name=name, **kwargs):
            calls[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(os, name, counting)
    return calls


def _settle(directory: Path) -> None:
    """Date the directory's last change ten seconds back: a listing of it is trusted only once its change is older
    than file system timestamps are coarse (one made just now may hide a change in the same tick)."""
    back = directory.stat().st_mtime_ns - 10 * 10**9
    os.utime(directory, ns=(back, back))


def _idle_polls(path: Path, sizes: list[int], monkeypatch: pytest.MonkeyPatch, polls: int = 5) -> Counter[str]:
    """os calls of ``polls`` idle polls of a read-only follower at the end of a log of batches of ``sizes``."""
    writer = FileLog.open(path, fsync="never", segment_bytes=8 << 10)
    end = anyio.run(_append, writer, sizes)
    writer.close_sync()
    _settle(path)
    log = FileLog.open(path, readonly=True)
    cursor = log._cursor_at(0)  # noqa: SLF001 - the cursor read_batches(0, follow=True) keeps
    assert cursor is not None
    assert sum(len(b) for b in log.read_new(cursor)) == end  # caught up
    with monkeypatch.context() as m:
        calls = _count_os_calls(m)
        for _ in range(polls):
            assert list(log.read_new(cursor)) == []
    return calls


def test_an_idle_read_only_poll_costs_two_stats_however_many_segments(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    few, many = tmp_path / "few", tmp_path / "many"
    few_calls = _idle_polls(few, [5, 5], monkeypatch)
    many_calls = _idle_polls(many, [5] * 200, monkeypatch)
    assert len(list_segments(few)) == 1 and len(list_segments(many)) > 20
    assert few_calls == many_calls == Counter(stat=10), f"{few_calls} vs {many_calls}"


def test_a_follower_whose_listing_is_trusted_sees_the_writer_roll(tmp_path: Path) -> None:
    writer = FileLog.open(tmp_path, fsync="never", segment_bytes=8 << 10)
    end = anyio.run(_append, writer, [5] * 10)
    _settle(tmp_path)
    log = FileLog.open(tmp_path, readonly=True)
    cursor = log._cursor_at(0)  # noqa: SLF001
    assert cursor is not None
    assert [r.offset for b in log.read_new(cursor) for r in b] == list(range(end))
    assert list(log.read_new(cursor)) == []  # idle: the listing is trusted from here on
    segments = len(list_segments(tmp_path))
    more = anyio.run(_append, writer, [5] * 20, end)
    assert len(list_segments(tmp_path)) > segments + 1
    assert [r.offset for b in log.read_new(cursor) for r in b] == list(range(end, more))
    writer.close_sync()


def test_a_directory_changed_just_now_is_listed_at_every_poll(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its timestamp may not move for a segment created in the same tick, so a listing of it proves nothing."""
    writer = FileLog.open(tmp_path, fsync="never")
    anyio.run(_append, writer, [5])
    log = FileLog.open(tmp_path, readonly=True)
    cursor = log._cursor_at(0)  # noqa: SLF001
    assert cursor is not None
    list(log.read_new(cursor))
    with monkeypatch.context() as m:
        calls = _count_os_calls(m)
        for _ in range(3):
            list(log.read_new(cursor))
    assert calls["listdir"] + calls["scandir"] == 3
    writer.close_sync()


def test_a_kept_listing_is_listed_again_once_it_is_old_whatever_the_directory_time_says(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file system whose clock lags this machine's may leave the directory's time where a kept listing saw it
    after a new segment: the listing serves RELIST_NS at most."""
    writer = FileLog.open(tmp_path, fsync="never", segment_bytes=8 << 10)
    end = anyio.run(_append, writer, [5] * 10)
    _settle(tmp_path)
    kept = tmp_path.stat().st_mtime_ns
    log = FileLog.open(tmp_path, readonly=True)
    cursor = log._cursor_at(0)  # noqa: SLF001
    assert cursor is not None
    assert sum(len(b) for b in log.read_new(cursor)) == end
    assert list(log.read_new(cursor)) == []  # the listing is kept from here on
    more = anyio.run(_append, writer, [5] * 20, end)
    os.utime(tmp_path, ns=(kept, kept))  # the directory's time as the kept listing saw it
    seen = [r.offset for b in log.read_new(cursor) for r in b]  # its own segment's growth, not the next segments
    assert seen == list(range(end, end + len(seen))) and end + len(seen) < more, "the kept listing served"
    now = time.monotonic_ns()
    monkeypatch.setattr(filelog.time, "monotonic_ns", lambda: now + filelog.RELIST_NS)
    assert [r.offset for b in log.read_new(cursor) for r in b] == list(range(end + len(seen), more))
    writer.close_sync()


def test_a_torn_tail_cut_off_by_the_next_writer_is_followed_by_its_appends(tmp_path: Path) -> None:
    """A writer crashed mid-append; a follower stops before the torn frame, and reads on from there what the next
    writer appends where its recovery cut the torn bytes off."""
    writer = FileLog.open(tmp_path, fsync="never")
    anyio.run(_append, writer, [2, 3])
    writer.close_sync()
    torn = HEADER.pack(900, 0, 5, 4) + b"x" * 300  # the crash cut off a frame for offsets 5..8
    with (tmp_path / SEG0).open("ab") as f:
        f.write(torn)
    log = FileLog.open(tmp_path, readonly=True)
    cursor = log._cursor_at(0)  # noqa: SLF001
    assert cursor is not None
    assert [[r.offset for r in b] for b in log.read_new(cursor)] == [[0, 1], [2, 3, 4]]
    assert list(log.read_new(cursor)) == []  # the torn frame may still be being written
    again = FileLog.open(tmp_path, fsync="never")
    assert again.truncated_bytes == len(torn)
    assert list(log.read_new(cursor)) == []  # nothing after the cut yet
    anyio.run(_append, again, [1, 6], 5)
    assert [[r.offset for r in b] for b in log.read_new(cursor)] == [[5], list(range(6, 12))]
    again.close_sync()


def test_an_unchanged_torn_tail_costs_a_stat_not_a_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A crashed writer's torn tail stays until a writer reopens the log: a read-only follower reads it once, then
    each poll only stats the segment, until its size or modification time moves."""
    writer = FileLog.open(tmp_path, fsync="never")
    anyio.run(_append, writer, [2, 3])
    seg = tmp_path / SEG0
    intact = seg.stat().st_size
    anyio.run(_append, writer, [4], 5)
    writer.close_sync()
    frame = seg.read_bytes()[intact:]
    os.truncate(seg, seg.stat().st_size - 40)  # the crash cut off the frame for offsets 5..8 40 bytes short
    changed = seg.stat().st_mtime_ns
    with monkeypatch.context() as clock:  # the clock stays where the tail changed, however long the machine stalls
        clock.setattr(filelog.time, "time_ns", lambda: changed)
        log = FileLog.open(tmp_path, readonly=True)
        cursor = log._cursor_at(0)  # noqa: SLF001
        assert cursor is not None
        assert [[r.offset for r in b] for b in log.read_new(cursor)] == [[0, 1], [2, 3, 4]]
        read = count_read(clock)
        list(log.read_new(cursor))
        assert sum(read) > 0, "a torn tail changed just now is read again: its time may hide a change in its tick"
    _settle_file(seg)
    with monkeypatch.context() as m:
        read = count_read(m)
        assert list(log.read_new(cursor)) == []  # found torn once more, as its time moved
        found = sum(read)
        for _ in range(3):
            assert list(log.read_new(cursor)) == []
        assert found > 0 and sum(read) == found, f"idle polls re-read the torn tail: {read}"
        seg.write_bytes(seg.read_bytes())  # the same bytes written again: its time moves, its size does not
        _settle_file(seg, seconds=5)
        assert list(log.read_new(cursor)) == [] and sum(read) == 2 * found
        now = time.monotonic_ns()  # a finding serves RELIST_NS at most, as a kept listing does
        m.setattr(filelog.time, "monotonic_ns", lambda: now + filelog.RELIST_NS)
        assert list(log.read_new(cursor)) == [] and sum(read) == 3 * found
    with seg.open("ab") as f:
        f.write(frame[-40:])  # the frame completes (as if the writer had been slow, not dead)
    assert [[r.offset for r in b] for b in log.read_new(cursor)] == [[5, 6, 7, 8]]


def _settle_file(path: Path, seconds: int = 10) -> None:
    """Date a file's last change ``seconds`` back, as a crashed writer's torn tail is after a while."""
    back = time.time_ns() - seconds * 10**9
    os.utime(path, ns=(back, back))
