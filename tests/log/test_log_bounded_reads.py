"""Readers of whole segments (a replay's scan, a writer's recovery, a follower from a segment's start, ``segments``,
``frame_checksum``, ``log inspect`` and ``log verify``) hold a bounded window of a segment at a time, not the
segment: a segment is up to 64 MiB by default, and each of these read one whole into memory."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from loghelp import SEG0, count_read

from events import schema as ev
from events.errors import CorruptRecord
from events.filelog import HEADER, FileLog, SegmentWalk, list_segments, scan_frames
from kueue_es.commands.log_cmd import inspect_log
from kueue_es.commands.log_verify import verify_log

SEGMENT_MIB = 8
BOUND = 3 << 20
"""What a reader may hold at once: two 1 MiB windows (the one being walked, the one a caller still holds), and
the decoding of one 100 KB batch. Far below the 8 MiB segment each test reads."""


def _fill(path: Path, segments: int) -> Path:
    """Segments of 8 MiB (batches of 100 events of about 1 KB) until there are ``segments``, the last small."""

    async def fill() -> None:
        log = FileLog.open(path, fsync="never", segment_bytes=SEGMENT_MIB << 20)
        n = 0
        while len(list_segments(path)) < segments or (path / SEG0).stat().st_size < (SEGMENT_MIB - 1) << 20:
            await log.append([ev.ClockTicked(time=n + i, id=f"{n + i}", key="p" * 1000) for i in range(100)])
            n += 100
        log.close_sync()

    anyio.run(fill)
    return path


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A segment of 8 MiB and a second, small one after it."""
    return _fill(tmp_path_factory.mktemp("big"), 2)


@pytest.fixture(scope="module")
def big_tail(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One segment of 8 MiB: the last, which a writer's recovery and a read-only log's end read."""
    return _fill(tmp_path_factory.mktemp("big_tail"), 1)


def _peak(read: Callable[[], Any], fails: type[BaseException] | tuple[()] = ()) -> int:
    """The most memory allocated at once while ``read`` runs, above what was allocated before it (``read`` may
    raise ``fails``)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        try:
            read()
        except fails:
            pass
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def _replay(path: Path) -> int:
    log = FileLog.open(path, readonly=True)
    n = 0
    for batch in log.scan(lazy=True):
        n += len(batch)
    return n


def _follow_from_the_start(path: Path) -> int:
    log = FileLog.open(path, readonly=True)
    cursor = log._cursor_at(0)  # noqa: SLF001 - what read_batches(0, follow=True) starts from
    assert cursor is not None
    return sum(len(b) for b in log.read_new(cursor))


def _recover(path: Path) -> None:
    FileLog.open(path, fsync="never").close_sync()


def _segments(path: Path) -> None:
    first, _ = FileLog.open(path, readonly=True).segments()
    assert first.size > (SEGMENT_MIB - 1) << 20 and first.frames > 70


def _frame_checksum(path: Path) -> None:
    log = FileLog.open(path, readonly=True)
    assert log.frame_checksum(0) is not None


def _inspect(path: Path) -> None:
    assert inspect_log(str(path))["bytes"] > SEGMENT_MIB << 20


def _verify(path: Path) -> None:
    report = verify_log(str(path), with_checkpoints=False)
    assert report.ok and report.bytes > SEGMENT_MIB << 20


def _open_read_only(path: Path) -> None:
    assert anyio.run(FileLog.open(path, readonly=True).end_offset) > 0


@pytest.mark.parametrize("read", [_recover, _open_read_only], ids=lambda f: f.__name__.strip("_"))
def test_the_last_segment_is_read_in_a_bounded_window(big_tail: Path, read: Callable[[Path], Any]) -> None:
    peak = _peak(lambda: read(big_tail))
    assert peak < BOUND, f"{read.__name__} held {peak / (1 << 20):.1f} MiB of an {SEGMENT_MIB} MiB segment"


@pytest.mark.parametrize("read", [_replay, _follow_from_the_start, _segments, _frame_checksum, _inspect,
                                  _verify], ids=lambda f: f.__name__.strip("_"))
def test_a_whole_segment_reader_holds_a_bounded_window(big: Path, read: Callable[[Path], Any]) -> None:
    peak = _peak(lambda: read(big))
    assert peak < BOUND, f"{read.__name__} held {peak / (1 << 20):.1f} MiB of an {SEGMENT_MIB} MiB segment"


def test_a_frame_larger_than_the_window_is_read_whole(tmp_path: Path) -> None:
    async def fill() -> None:
        log = FileLog.open(tmp_path, fsync="never")
        await log.append([ev.ClockTicked(time=0, id="small", key="s")])
        await log.append([ev.ClockTicked(time=1, id="big", key="b" * (3 << 20))])  # a 3 MiB frame
        await log.append([ev.ClockTicked(time=2, id="after", key="a")])
        log.close_sync()

    anyio.run(fill)
    log = FileLog.open(tmp_path, readonly=True)
    assert [r.event.id for b in log.scan() for r in b] == ["small", "big", "after"]
    assert log.segments()[0].frames == 3 and log.frame_checksum(2) is not None
    assert verify_log(str(tmp_path), with_checkpoints=False).events == 3


def test_a_window_asked_smaller_than_a_frame_header_still_walks_the_segment(tmp_path: Path) -> None:
    """A window must hold a header to learn how long its frame is: a smaller one is taken as one that does."""
    async def fill() -> None:
        log = FileLog.open(tmp_path, fsync="never")
        for i in range(3):
            await log.append([ev.ClockTicked(time=i, id=f"{i}", key="k")])
        log.close_sync()

    anyio.run(fill)
    for chunk in (1, HEADER.size - 1):
        walk = SegmentWalk(tmp_path / SEG0, 0, chunk=chunk)
        windows = 0
        for _ in walk.windows():
            windows += 1
            assert windows < 100, f"no progress with a {chunk}-byte window"
        assert (walk.frames, walk.expect, walk.torn_at) == (3, 3, None)


def test_damage_past_the_first_window_names_segment_and_offset(big: Path, tmp_path: Path) -> None:
    """A flipped payload byte in a frame about 5 MiB into the first segment: every reader names the frame's segment, offset and byte,
    and a replay and verify have handed on the frames before it."""
    copy = tmp_path / "log"
    copy.mkdir()
    for _, segment in list_segments(big):
        (copy / segment.name).write_bytes(segment.read_bytes())
    data = bytearray((big / SEG0).read_bytes())
    pos, offset = 0, 0
    while pos < 5 << 20:
        length, _, base, count = HEADER.unpack_from(data, pos)
        pos, offset = pos + HEADER.size + length, base + count
    data[pos + HEADER.size + 10] ^= 0x40
    (copy / SEG0).write_bytes(bytes(data))
    log = FileLog.open(copy, readonly=True)
    seen: list[int] = []
    with pytest.raises(CorruptRecord) as err:
        for batch in log.scan():
            seen.extend(r.offset for r in batch)
    assert (err.value.segment, err.value.offset, err.value.position) == (SEG0, offset, pos)
    assert seen == list(range(offset))
    for read in (log.segments, lambda: log.frame_checksum(0), lambda: inspect_log(str(copy))):
        with pytest.raises(CorruptRecord) as err:
            read()
        assert (err.value.segment, err.value.offset, err.value.position) == (SEG0, offset, pos)
    report = verify_log(str(copy), with_checkpoints=False)
    assert report.problem is not None and (report.problem["offset"], report.problem["byte"]) == (offset, pos)
    assert report.events == offset



def _copy(log: Path, to: Path) -> Path:
    to.mkdir()
    for _, segment in list_segments(log):
        (to / segment.name).write_bytes(segment.read_bytes())
    return to


def _frame_after(segment: Path, at: int) -> tuple[int, int]:
    """Byte position and offset of the first frame of ``segment`` that starts at or after byte ``at``."""
    with segment.open("rb") as f:
        pos = offset = 0
        while pos < at:
            f.seek(pos)
            length, _, base, count = HEADER.unpack(f.read(HEADER.size))
            pos, offset = pos + HEADER.size + length, base + count
    return pos, offset


def _overlong(log: Path, to: Path, *, header: bool) -> tuple[Path, int, int]:
    """A copy of ``log`` whose first segment's frame about 1 MiB in claims a length of about 2 GB (its length's high
    byte damaged), with the rest of its header intact or (``header`` False) its count zeroed too: the copy, and
    the frame's position and offset."""
    copy = _copy(log, to)
    pos, offset = _frame_after(copy / SEG0, 1 << 20)
    with (copy / SEG0).open("r+b") as f:
        f.seek(pos + 3)
        f.write(b"\x7f")
        if not header:
            f.seek(pos + 16)
            f.write(bytes(4))
    return copy, pos, offset


@pytest.mark.parametrize("header", [True, False], ids=["header of this log", "header not of this log"])
@pytest.mark.parametrize("log", ["big", "big_tail"], ids=["older segment", "last segment"])
def test_a_length_past_the_segments_end_is_damage_found_without_reading_the_rest(
        log: str, header: bool, request: pytest.FixtureRequest, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A damaged length that claims more than the segment holds after the frame makes no reader hold or read the
    rest of the segment: the frame after it (or the header itself) shows it is damage, named by segment and offset,
    and a writer refuses the log rather than cut it off there."""
    copy, pos, offset = _overlong(request.getfixturevalue(log), tmp_path / "log", header=header)
    pristine = (copy / SEG0).read_bytes()
    where = (SEG0, offset, pos)
    readers = _readers(copy, last_segment=log == "big_tail")
    for name, read in readers.items():
        read_bytes = count_read(monkeypatch)
        peak = _peak(read, CorruptRecord)
        monkeypatch.undo()
        with pytest.raises(CorruptRecord) as err:
            read()
        assert (err.value.segment, err.value.offset, err.value.position) == where, name
        assert sum(read_bytes) < pos + (3 << 20), f"{name} read {sum(read_bytes)} bytes, the damage at byte {pos}"
        assert peak < BOUND, f"{name} held {peak / (1 << 20):.1f} MiB"
    peak = _peak(lambda: verify_log(str(copy), with_checkpoints=False))
    assert peak < BOUND, f"verify held {peak / (1 << 20):.1f} MiB"
    report = verify_log(str(copy), with_checkpoints=False)
    assert report.problem is not None and (report.problem["offset"], report.problem["byte"]) == (offset, pos)
    assert (copy / SEG0).read_bytes() == pristine, "a writer cut the segment off at the damaged frame"


def _readers(copy: Path, *, last_segment: bool) -> dict[str, Callable[[], Any]]:
    """Every reader of the log at ``copy`` by name; with ``last_segment`` (the damage in the segment a writer
    appends to) also the writer's recovery and a read-only open, which read only that one."""
    readers: dict[str, Callable[[], Any]] = {
        "replay": lambda: _replay(copy), "follow": lambda: _follow_from_the_start(copy),
        "segments": lambda: _segments(copy), "frame_checksum": lambda: _frame_checksum(copy),
        "inspect": lambda: _inspect(copy)}
    if last_segment:
        readers |= {"recover": lambda: _recover(copy), "open read-only": lambda: _open_read_only(copy)}
    return readers


@pytest.mark.parametrize("log", ["big", "big_tail"], ids=["older segment", "last segment"])
def test_a_damaged_length_that_fits_in_the_segment_grows_no_window(
        log: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """The frame about 1 MiB in claims 5 MiB, which the segment still holds after it: its checksum, streamed a
    window at a time, fails before any window grows to hold the claimed frame. Every reader names segment, offset
    and byte as a checksum mismatch, as when a window held it, and a writer refuses the log rather than cut it."""
    copy = _copy(request.getfixturevalue(log), tmp_path / "log")
    pos, offset = _frame_after(copy / SEG0, 1 << 20)
    data = bytearray((copy / SEG0).read_bytes())
    assert pos + HEADER.size + (5 << 20) < len(data)  # the claimed frame fits in the segment
    data[pos : pos + 4] = (5 << 20).to_bytes(4, "little")
    (copy / SEG0).write_bytes(bytes(data))
    readers = _readers(copy, last_segment=log == "big_tail")
    for name, read in readers.items():
        peak = _peak(read, CorruptRecord)
        with pytest.raises(CorruptRecord, match="checksum mismatch") as err:
            read()
        assert (err.value.segment, err.value.offset, err.value.position) == (SEG0, offset, pos), name
        assert peak < BOUND, f"{name} held {peak / (1 << 20):.1f} MiB"
    peak = _peak(lambda: verify_log(str(copy), with_checkpoints=False))
    assert peak < BOUND, f"verify held {peak / (1 << 20):.1f} MiB"
    report = verify_log(str(copy), with_checkpoints=False)
    assert report.problem is not None and (report.problem["offset"], report.problem["byte"]) == (offset, pos)
    assert (copy / SEG0).read_bytes() == bytes(data), "a writer cut the segment off at the damaged frame"


def test_a_torn_tail_larger_than_a_window_is_judged_in_bounded_windows(tmp_path: Path) -> None:
    """A crash cut off a 9 MiB frame after 8 MiB of it: readers stop before it and a writer cuts it off, none of them
    holding it whole (it could be a damaged length until the bytes after it show no frame follows)."""
    async def fill() -> None:
        log = FileLog.open(tmp_path, fsync="never")
        await log.append([ev.ClockTicked(time=i, id=f"{i}", key="k") for i in range(3)])
        log.close_sync()

    anyio.run(fill)
    torn = HEADER.pack(9 << 20, 0, 3, 40) + bytes(range(256)) * (32 << 10)
    with (tmp_path / SEG0).open("ab") as f:
        f.write(torn)
    size = (tmp_path / SEG0).stat().st_size
    assert _peak(lambda: _replay(tmp_path)) < BOUND
    assert _replay(tmp_path) == 3
    assert _peak(lambda: _recover(tmp_path)) < BOUND
    assert (tmp_path / SEG0).stat().st_size == size - len(torn)


def test_a_length_past_the_end_is_judged_alike_wherever_the_windows_cut(tmp_path: Path) -> None:
    """The search after a frame claiming too much reads overlapping windows: whatever their size, it finds the
    intact frame after a damaged length, and finds none after a torn tail (nor after a header of which only
    the first bytes landed, the rest reading as zeros)."""
    async def fill() -> None:
        log = FileLog.open(tmp_path, fsync="never")
        for i in range(4):
            await log.append([ev.ClockTicked(time=i, id=f"{i}", key="k" * 40 * i)])
        log.close_sync()

    anyio.run(fill)
    seg = tmp_path / SEG0
    pristine = seg.read_bytes()
    damaged = bytearray(pristine)
    damaged[3] = 0x7F  # the first frame's length claims about 2 GB
    last = scan_frames(seg, pristine, 0)[0][-1].position
    torn = pristine[:-5]
    landed = pristine[: last + 6] + bytes(len(pristine) - last - 6)  # only 6 bytes of the last frame's header
    for chunk in range(HEADER.size, 160):
        seg.write_bytes(bytes(damaged))
        with pytest.raises(CorruptRecord, match="intact frames follow") as err:
            for _ in SegmentWalk(seg, 0, chunk=chunk).windows():
                pass
        assert (err.value.offset, err.value.position) == (0, 0), chunk
        for tail in (torn, landed):
            seg.write_bytes(tail)
            walk = SegmentWalk(seg, 0, chunk=chunk)
            for _ in walk.windows():
                pass
            assert (walk.frames, walk.expect, walk.torn_at) == (3, 3, last), chunk


@pytest.mark.parametrize("torn", [b"", HEADER.pack(50, 12345, 4, 1) + b"x" * 14, HEADER.pack(50, 12345, 4, 1)[:11]],
                         ids=["at the end", "a torn append after it", "a few bytes of a torn append after it"])
def test_a_damaged_length_of_a_large_last_frame_whose_bytes_are_whole_is_damage(tmp_path: Path, torn: bytes) -> None:
    """The last frame, of 3 MiB, has a bit of its length flipped so that it claims more than the segment holds, as
    a torn tail would; its bytes are whole (its checksum, streamed a window at a time, matches up to the segment's
    end, or up to where the start of a later append a crash tore begins): a writer refuses the log and cuts
    nothing, holding a window and not the frame."""
    async def fill() -> None:
        log = FileLog.open(tmp_path, fsync="never")
        await log.append([ev.ClockTicked(time=i, id=f"{i}", key="k") for i in range(3)])
        await log.append([ev.ClockTicked(time=3, id="3", key="p" * (3 << 20))])
        log.close_sync()

    anyio.run(fill)
    seg = tmp_path / SEG0
    last = scan_frames(seg, seg.read_bytes(), 0)[0][-1]
    data = bytearray(seg.read_bytes())
    data[last.position + 3] ^= 0x01  # the length claims 16 MiB more
    data += torn
    seg.write_bytes(bytes(data))
    assert _peak(lambda: _recover(tmp_path), CorruptRecord) < BOUND
    with pytest.raises(CorruptRecord, match="its bytes are whole") as err:
        _recover(tmp_path)
    assert (err.value.offset, err.value.position) == (3, last.position)
    assert seg.read_bytes() == bytes(data)
    report = verify_log(str(tmp_path), with_checkpoints=False)
    assert report.problem is not None and (report.problem["offset"], report.problem["byte"]) == (3, last.position)
