"""The embedded file log on disk: reopening, torn tails, damaged bytes, failed writes, segments."""

from __future__ import annotations

import errno
import os
import zlib
from pathlib import Path

import anyio
import pytest
from loghelp import SEG0, ticks

from events import schema as ev
from events.errors import CorruptRecord, LogError, LogLocked
from events.filelog import HEADER, FileLog, list_segments, scan_frames
from kueue_es.commands.log_verify import verify_log

pytestmark = pytest.mark.usefixtures("windows")  # every case also with windows smaller than a frame


def write(path: Path, batches: list[int], **kw) -> FileLog:
    log = FileLog.open(path, fsync="never", **kw)
    n = 0
    for size in batches:
        assert anyio.run(log.append, ticks(n, size)) == list(range(n, n + size))
        n += size
    return log


def read_all(path: Path) -> list[ev.Record]:
    log = FileLog.open(path, readonly=True)
    return [r for batch in log.scan() for r in batch]


def frames_of(path: Path):
    seg = path / SEG0
    frames, torn = scan_frames(seg, seg.read_bytes(), 0)
    assert torn is None
    return frames


def test_reopen_keeps_every_event_and_continues_offsets(tmp_path: Path) -> None:
    write(tmp_path, [3, 1, 5]).close_sync()
    log = FileLog.open(tmp_path)
    assert anyio.run(log.end_offset) == 9
    assert anyio.run(log.append, ticks(9, 2)) == [9, 10]
    log.close_sync()
    recs = read_all(tmp_path)
    assert [r.offset for r in recs] == list(range(11))
    assert [r.event.id for r in recs] == [str(i) for i in range(11)]


def test_frames_carry_the_crc32_the_format_names(tmp_path: Path) -> None:
    """Logs written before stay readable only while the checksum is zlib's CRC-32 of base offset .. payload."""
    write(tmp_path, [2, 7]).close_sync()
    data = (tmp_path / SEG0).read_bytes()
    for fr in frames_of(tmp_path):
        length, crc, base, count = HEADER.unpack_from(data, fr.position)
        assert (base, count, length) == (fr.base, fr.count, fr.length)
        assert crc == zlib.crc32(data[fr.position + 8 : fr.position + HEADER.size + length])


def test_one_writer_at_a_time(tmp_path: Path) -> None:
    log = write(tmp_path, [1])
    with pytest.raises(LogLocked, match="locked by another writer"):
        FileLog.open(tmp_path)
    reader = FileLog.open(tmp_path, readonly=True)  # readers need no lock
    assert [r.offset for b in reader.scan() for r in b] == [0]
    log.close_sync()
    FileLog.open(tmp_path).close_sync()


def test_torn_tail_is_truncated_by_the_writer_on_reopen(tmp_path: Path) -> None:
    write(tmp_path, [2, 3, 4]).close_sync()
    seg = tmp_path / SEG0
    last = frames_of(tmp_path)[-1]
    full = seg.stat().st_size
    cut = last.position + HEADER.size + last.length // 2  # half of the last batch made it to disk
    os.truncate(seg, cut)
    # A reader takes the torn frame for one still being written and stops before it.
    assert [r.offset for r in read_all(tmp_path)] == [0, 1, 2, 3, 4]
    log = FileLog.open(tmp_path)
    assert log.truncated_bytes == cut - last.position
    assert seg.stat().st_size == last.position
    assert anyio.run(log.end_offset) == 5  # the torn batch is gone entirely, never in part
    assert anyio.run(log.append, ticks(5, 1)) == [5]
    log.close_sync()
    assert [r.event.id for r in read_all(tmp_path)] == ["0", "1", "2", "3", "4", "5"]
    assert full > seg.stat().st_size


@pytest.mark.parametrize("keep", [1, HEADER.size - 1, HEADER.size, HEADER.size + 1])
def test_torn_inside_the_header_is_a_torn_tail_too(tmp_path: Path, keep: int) -> None:
    write(tmp_path, [2, 2]).close_sync()
    last = frames_of(tmp_path)[-1]
    os.truncate(tmp_path / SEG0, last.position + keep)
    log = FileLog.open(tmp_path)
    assert anyio.run(log.end_offset) == 2 and log.truncated_bytes == keep
    log.close_sync()


@pytest.mark.parametrize("header", [
    (7, 0, 99, 1),  # a frame for an offset this log has not reached
    (7, 0, 2, 0),  # a frame of no events
    (0xFFFF, 0, 2, 0),  # the same, running past the end
])
def test_bytes_after_the_last_frame_that_no_writer_of_this_log_began_are_corruption_not_a_torn_tail(
        tmp_path: Path, header: tuple[int, int, int, int]) -> None:
    """Whatever was appended to a segment by hand, or a whole file that is not a segment, is not cut off as the
    start of a crashed append: the writer refuses to open the log, the readers say where, nothing is changed."""
    write(tmp_path, [2]).close_sync()
    seg = tmp_path / SEG0
    damaged = seg.read_bytes() + HEADER.pack(*header) + b"x" * 7
    seg.write_bytes(damaged)
    with pytest.raises(CorruptRecord, match="not a frame of this log") as info:
        FileLog.open(tmp_path)
    assert (info.value.segment, info.value.offset) == (SEG0, 2)
    with pytest.raises(CorruptRecord, match="not a frame of this log"):
        read_all(tmp_path)
    assert seg.read_bytes() == damaged


def test_a_zeroed_header_after_the_last_frame_is_still_a_torn_tail(tmp_path: Path) -> None:
    """A file extended before its data landed reads as zeros: that is the start of an append a crash cut."""
    write(tmp_path, [2]).close_sync()
    seg = tmp_path / SEG0
    size = seg.stat().st_size
    seg.write_bytes(seg.read_bytes() + bytes(HEADER.size))
    log = FileLog.open(tmp_path)
    assert log.truncated_bytes == HEADER.size and seg.stat().st_size == size
    log.close_sync()


@pytest.mark.parametrize("written", [1, 8, 9, 12, 16, 17])
def test_a_header_whose_last_bytes_never_landed_is_a_torn_tail(tmp_path: Path, written: int) -> None:
    """A crash may leave the end of the appended bytes as zeros inside the header: what was written of it names
    the next offset, so it is the start of the crashed append."""
    write(tmp_path, [2, 2]).close_sync()
    seg = tmp_path / SEG0
    size = seg.stat().st_size
    header = HEADER.pack(40, 0x5EED, 4, 3)[:written]
    seg.write_bytes(seg.read_bytes() + header + bytes(HEADER.size - written + 40))
    log = FileLog.open(tmp_path)
    assert log.truncated_bytes == HEADER.size + 40 and seg.stat().st_size == size
    assert anyio.run(log.end_offset) == 4
    log.close_sync()


def test_a_partly_written_header_naming_another_offset_is_corruption(tmp_path: Path) -> None:
    write(tmp_path, [2, 2]).close_sync()
    seg = tmp_path / SEG0
    damaged = seg.read_bytes() + HEADER.pack(40, 0x5EED, 5, 3)[:12] + bytes(HEADER.size - 12)
    seg.write_bytes(damaged)
    with pytest.raises(CorruptRecord, match="not a frame of this log"):
        FileLog.open(tmp_path)
    assert seg.read_bytes() == damaged


def _flip(path: Path, position: int, mask: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= mask
    path.write_bytes(bytes(data))


def test_flipped_byte_mid_file_is_a_corrupt_record_naming_segment_and_offset(tmp_path: Path) -> None:
    write(tmp_path, [2, 3, 4, 1]).close_sync()
    frames = frames_of(tmp_path)
    damaged = frames[1]  # offsets 2..4
    _flip(tmp_path / SEG0, damaged.position + HEADER.size + damaged.length // 2, 0x40)
    before = (tmp_path / SEG0).read_bytes()
    with pytest.raises(CorruptRecord) as info:
        read_all(tmp_path)
    err = info.value
    assert (err.segment, err.offset, err.position) == (SEG0, 2, damaged.position)
    assert SEG0 in str(err) and "log offset 2" in str(err)
    with pytest.raises(CorruptRecord):
        FileLog.open(tmp_path)  # the writer refuses too, and changes nothing
    assert (tmp_path / SEG0).read_bytes() == before


@pytest.mark.parametrize("mask", [0x01, 0x80, 0xFF])
def test_every_flipped_byte_before_the_last_frame_is_detected(tmp_path: Path, mask: int) -> None:
    """Header or payload, any byte of any frame but the last: an error at that frame, never silent loss."""
    write(tmp_path, [1, 3, 2, 2]).close_sync()
    seg = tmp_path / SEG0
    pristine = seg.read_bytes()
    frames = frames_of(tmp_path)
    for frame in frames[:-1]:
        for pos in range(frame.position, frame.position + HEADER.size + frame.length):
            seg.write_bytes(pristine)
            _flip(seg, pos, mask)
            with pytest.raises(CorruptRecord) as info:
                read_all(tmp_path)
            assert (info.value.segment, info.value.offset) == (SEG0, frame.base), pos
            with pytest.raises(CorruptRecord):
                FileLog.open(tmp_path).close_sync()
            assert len(seg.read_bytes()) == len(pristine), f"byte {pos}: the writer truncated a damaged log"


def test_damaged_length_that_runs_past_the_end_is_not_taken_for_a_torn_tail(tmp_path: Path) -> None:
    write(tmp_path, [2, 2, 2]).close_sync()
    seg = tmp_path / SEG0
    first = frames_of(tmp_path)[0]
    data = bytearray(seg.read_bytes())
    data[first.position + 3] = 0x7F  # length's high byte: the frame now claims ~2 GB
    seg.write_bytes(bytes(data))
    with pytest.raises(CorruptRecord, match="intact frames follow"):
        FileLog.open(tmp_path)
    assert seg.read_bytes() == bytes(data)


@pytest.mark.parametrize(("size", "count"), [(2, 3), (2, 1), (20, 21), (20, 300)])
def test_damaged_length_and_count_mid_segment_are_not_taken_for_a_torn_tail(
        tmp_path: Path, size: int, count: int) -> None:
    """A frame's length runs past the end and its count was hit too, so no frame follows for the offset it names:
    its payload still says how many events the writer put in it, and the frame after that many is found. The
    writer refuses the log rather than cut the acknowledged frames after the damage off."""
    write(tmp_path, [size] * 4).close_sync()
    seg = tmp_path / SEG0
    second = frames_of(tmp_path)[1]
    data = bytearray(seg.read_bytes())
    data[second.position + 3] = 0x7F  # length's high byte: the frame now claims ~2 GB
    data[second.position + 16 : second.position + 20] = count.to_bytes(4, "little")
    seg.write_bytes(bytes(data))
    with pytest.raises(CorruptRecord, match="intact frames follow") as info:
        FileLog.open(tmp_path)
    assert (info.value.offset, info.value.position) == (size, second.position)
    assert seg.read_bytes() == bytes(data)


def _last_frame_overlong(path: Path, tail: bytes = b"") -> tuple[bytes, int]:
    """Five acknowledged batches whose last frame's length has one bit flipped so that it runs past the end of the
    segment (``tail`` appended after it, as a crash may leave): the damaged segment's bytes, and that frame's
    first offset."""
    write(path, [2, 2, 2, 2, 2]).close_sync()
    seg = path / SEG0
    last = frames_of(path)[-1]
    data = bytearray(seg.read_bytes())
    data[last.position + 2] ^= 0x10  # the length claims 1 MiB more than the frame holds
    seg.write_bytes(bytes(data) + tail)
    return seg.read_bytes(), last.base


@pytest.mark.parametrize("tail", [b"", bytes(40), bytes(5000)], ids=["at the end", "zeros after", "4 KiB of zeros"])
def test_a_damaged_length_of_the_last_frame_whose_bytes_are_whole_is_not_a_torn_tail(
        tmp_path: Path, tail: bytes) -> None:
    """One flipped bit in the length of the last acknowledged frame makes it claim more than the segment holds, as a
    torn tail does; but its bytes are all there (its checksum matches up to the segment's end, or up to the zeros a
    crash left after it): it is damage, and a writer must refuse the log, not cut the frame off."""
    damaged, base = _last_frame_overlong(tmp_path, tail)
    with pytest.raises(CorruptRecord, match="its bytes are whole"):
        read_all(tmp_path)
    _refused_and_kept(tmp_path, damaged, base)


def _refused_and_kept(path: Path, damaged: bytes, base: int) -> None:
    """A writer refuses the log at the frame holding offset ``base`` and cuts nothing of the segment (``damaged``,
    as the test left it), and ``log verify`` reports the damage there."""
    seg = path / SEG0
    with pytest.raises(CorruptRecord, match="its bytes are whole") as info:
        FileLog.open(path)
    assert (info.value.segment, info.value.offset) == (SEG0, base)
    assert seg.read_bytes() == damaged, "the writer cut acknowledged data off"
    report = verify_log(str(path), with_checkpoints=False)
    assert report.problem is not None and report.problem["offset"] == base
    assert seg.read_bytes() == damaged


def _torn_append(path: Path, landed: int) -> bytes:
    """The first ``landed`` bytes of the frame a sixth append of two events writes after :func:`_last_frame_overlong`'s
    five (a header for offset 10, then its payload), as a crash that tore that append leaves them."""
    write(path, [2, 2, 2, 2, 2, 2]).close_sync()
    torn = frames_of(path)[-1]
    return (path / SEG0).read_bytes()[torn.position : torn.position + landed]


@pytest.mark.parametrize("landed, zeros", [(30, 0), (30, 200), (20, 0), (16, 0), (10, 0), (10, 40), (3, 0)],
                         ids=["30 bytes", "30 bytes then zeros", "20 bytes", "a header", "10 bytes",
                              "10 bytes then zeros", "3 bytes"])
def test_a_damaged_length_of_the_last_frame_before_a_torn_append_is_not_a_torn_tail(
        tmp_path: Path, landed: int, zeros: int) -> None:
    """The last acknowledged frame's length has a bit flipped and a crash then tore the next append, leaving its
    first bytes after the frame: the frame's bytes are whole up to where that append's header (for the offset after
    it) begins, or up to bytes that could begin one where fewer than a header's landed. It is damage: a writer must
    refuse the log and cut nothing, and ``log verify`` report it."""
    tail = _torn_append(tmp_path / "other", landed) + bytes(zeros)
    damaged, base = _last_frame_overlong(tmp_path, tail)
    _refused_and_kept(tmp_path, damaged, base)


@pytest.mark.parametrize("landed", [30, 16, 10, 3])
def test_a_torn_last_frame_before_a_torn_append_is_still_cut(tmp_path: Path, landed: int) -> None:
    """Bytes that could begin the next append's header after a last frame that is itself torn (cut short in its
    payload, by more than those bytes, so that its length still runs past the segment's end) do not make it whole:
    its checksum matches nowhere, and it is cut as a torn tail."""
    write(tmp_path, [2, 2, 2, 2, 2]).close_sync()
    seg = tmp_path / SEG0
    last = frames_of(tmp_path)[-1]
    kept = seg.read_bytes()[: last.position + HEADER.size + last.length - 40]
    seg.write_bytes(kept + _torn_append(tmp_path / "other", landed))
    log = FileLog.open(tmp_path)
    assert anyio.run(log.end_offset) == last.base
    log.close_sync()
    assert seg.read_bytes() == kept[: last.position]


@pytest.mark.parametrize("landed", [None, 0, 9], ids=["cut short", "payload zeros", "zeros after 9 bytes"])
def test_a_torn_last_frame_claiming_more_than_landed_is_still_cut_off(tmp_path: Path, landed: int | None) -> None:
    """The frame a crash cut while it was being appended, short or with its payload's last bytes (after ``landed``
    of them) reading as zeros, is a torn tail: its bytes are not whole, and the writer cuts it off as before."""
    write(tmp_path, [2, 2, 2]).close_sync()
    seg = tmp_path / SEG0
    last = frames_of(tmp_path)[-1]
    data = seg.read_bytes()
    cut = last.position + HEADER.size + last.length // 2  # the file's end: half the frame made it
    keep = cut if landed is None else last.position + HEADER.size + landed
    seg.write_bytes(data[:keep] + bytes(cut - keep))
    log = FileLog.open(tmp_path)
    assert log.truncated_bytes == cut - last.position and seg.stat().st_size == last.position
    assert anyio.run(log.end_offset) == 4
    log.close_sync()


def _several_segments(path: Path) -> tuple[int, list[tuple[int, Path]]]:
    """A log of 18 events in 400-byte segments (at least three): the count, and its segments."""
    log = FileLog.open(path, fsync="never", segment_bytes=400)
    n = 0
    for size in [3, 3, 3, 3, 3, 3]:
        anyio.run(log.append, ticks(n, size, pad=40))
        n += size
    log.close_sync()
    segments = list_segments(path)
    assert len(segments) >= 3
    return n, segments


def test_segments_roll_and_damage_in_an_older_segment_names_it(tmp_path: Path) -> None:
    n, segments = _several_segments(tmp_path)
    assert [r.offset for r in read_all(tmp_path)] == list(range(n))
    info = FileLog.open(tmp_path, readonly=True).segments()
    assert [s.base for s in info] == [b for b, _ in segments]
    assert all(a.end == b.base for a, b in zip(info, info[1:], strict=False)) and info[-1].end == n
    base, older = segments[1]
    _flip(older, HEADER.size + 5, 0x10)
    with pytest.raises(CorruptRecord) as e:
        read_all(tmp_path)
    assert e.value.segment == older.name and e.value.offset == base
    # reading from after the damaged segment still works
    reader = FileLog.open(tmp_path, readonly=True)
    assert [r.offset for b in reader.scan(segments[2][0]) for r in b][0] == segments[2][0]


def test_a_missing_middle_segment_stops_the_read_naming_the_gap(tmp_path: Path) -> None:
    """Each segment is intact on its own: only where the next one starts tells that events went missing between
    them. A read that crosses the gap stops there; one that starts after it does not see it (``log verify`` does)."""
    n, segments = _several_segments(tmp_path)
    (gone_base, gone), (after_base, after) = segments[1], segments[2]
    gone.unlink()
    with pytest.raises(CorruptRecord) as e:
        read_all(tmp_path)
    assert (e.value.segment, e.value.offset) == (after.name, gone_base)
    assert f"the segment starts at offset {after_base}, but the log before it ends at offset {gone_base - 1}" in str(
        e.value)
    reader = FileLog.open(tmp_path, readonly=True)
    assert [r.offset for b in reader.scan(after_base) for r in b][0] == after_base


def test_read_from_the_middle_of_a_batch_and_of_the_log(tmp_path: Path) -> None:
    write(tmp_path, [4, 4]).close_sync()
    reader = FileLog.open(tmp_path, readonly=True)
    assert [r.offset for b in reader.scan(2) for r in b] == [2, 3, 4, 5, 6, 7]
    assert [r.offset for b in reader.scan(8) for r in b] == []


def test_a_failed_write_appends_nothing_and_leaves_the_log_usable(tmp_path: Path, monkeypatch) -> None:
    log = write(tmp_path, [2])
    seg = tmp_path / SEG0
    size = seg.stat().st_size
    real_write = os.write

    def half_then_fail(fd: int, data) -> int:
        if fd == log._fd:  # noqa: SLF001
            n = real_write(fd, bytes(data)[: len(data) // 2])
            assert n > 0
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", half_then_fail)
    with pytest.raises(LogError, match="No space left on device"):
        anyio.run(log.append, ticks(2, 3))
    monkeypatch.undo()
    assert seg.stat().st_size == size
    assert anyio.run(log.end_offset) == 2
    assert anyio.run(log.append, ticks(2, 1)) == [2]
    log.close_sync()
    assert [r.event.id for r in read_all(tmp_path)] == ["0", "1", "2"]


@pytest.mark.parametrize("fsync", ["always", "group"])
def test_a_failed_fsync_acknowledges_nothing_shows_a_follower_nothing_and_refuses_later_appends(
        tmp_path: Path, monkeypatch, fsync: str) -> None:
    """After a failed fsync the kernel may have dropped the pages it could not write and a second fsync may not
    say so: the append fails, no later one is taken, and the log is trusted again only once reopened."""
    log = FileLog.open(tmp_path, fsync=fsync)  # type: ignore[arg-type]
    assert anyio.run(log.append, ticks(0, 2)) == [0, 1]
    real_fsync, failures = os.fsync, [OSError(errno.EIO, "Input/output error")]

    def fail_once(fd: int) -> None:
        if fd == log._fd and failures:  # noqa: SLF001
            raise failures.pop()
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fail_once)
    seen: list[int] = []

    async def append_beside_a_follower() -> None:
        async def follow() -> None:
            async for batch in log.read_batches(0, follow=True):
                seen.extend(r.offset for r in batch)

        async with anyio.create_task_group() as tg:
            tg.start_soon(follow)
            await anyio.sleep(0.05)
            with pytest.raises(LogError, match="Input/output error.*not acknowledged"):
                await log.append(ticks(2, 3))
            with pytest.raises(LogError, match="no more appends since an fsync failed"):
                await log.append(ticks(2, 1))
            await anyio.sleep(0.05)
            tg.cancel_scope.cancel()

    anyio.run(append_beside_a_follower)
    monkeypatch.undo()
    if fsync == "always":
        assert seen == [0, 1] and anyio.run(log.end_offset) == 2, "shown to no one before it is durable"
    log.close_sync()
    reopened = FileLog.open(tmp_path)
    assert anyio.run(reopened.append, ticks(anyio.run(reopened.end_offset), 1))
    reopened.close_sync()


def test_short_writes_are_completed(tmp_path: Path, monkeypatch) -> None:
    log = write(tmp_path, [1])
    real_write = os.write

    def dribble(fd: int, data) -> int:
        return real_write(fd, bytes(data)[:7]) if fd == log._fd else real_write(fd, data)  # noqa: SLF001

    monkeypatch.setattr(os, "write", dribble)
    assert anyio.run(log.append, ticks(1, 3, pad=50)) == [1, 2, 3]
    monkeypatch.undo()
    log.close_sync()
    assert [r.event.id[:1] for r in read_all(tmp_path)] == ["0", "1", "2", "3"]


def test_frame_checksums_tell_which_frame_holds_an_offset(tmp_path: Path) -> None:
    """What a checkpoint is anchored to (kueue_es.checkpoints): the writer's last frame, and any stored frame."""
    log = write(tmp_path, [3, 2, 4], segment_bytes=200)  # several segments
    assert len(list_segments(tmp_path)) > 1
    assert log.last_frame is not None and log.last_frame[1] == 8
    assert log.frame_checksum(8) == log.last_frame
    a, b, c = log.frame_checksum(0), log.frame_checksum(3), log.frame_checksum(5)
    assert a is not None and b is not None and c is not None
    assert (a[1], b[1], c[1]) == (2, 4, 8) and len({a[0], b[0], c[0]}) == 3
    assert log.frame_checksum(1) == a and log.frame_checksum(7) == c
    assert log.frame_checksum(9) is None
    log.close_sync()
    reopened = FileLog.open(tmp_path, fsync="never")
    assert reopened.last_frame == c  # recovered from the tail
    reopened.close_sync()
    same = write(tmp_path / "same", [3])  # the same events at the same offsets: the same frame
    assert same.frame_checksum(0) == a
    other = FileLog.open(tmp_path / "other", fsync="never")
    anyio.run(other.append, ticks(100, 3))  # the same offsets, other events
    assert other.frame_checksum(0) not in (None, a)
    assert FileLog.open(tmp_path / "empty", fsync="never").last_frame is None
