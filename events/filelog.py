"""The embedded log: segmented append-only files in one directory, one writer at a time.

Layout: ``<dir>/<base offset, 20 digits>.seg`` holding frames, and ``<dir>/LOCK`` held by the writer.
A frame is one appended batch::

    u32 payload length | u32 crc32(base offset .. payload) | u64 base offset | u32 event count | payload

The payload is a msgpack array of events. On opening for writing, the last segment is scanned: a frame cut off
by a crash (a torn tail) is truncated away; a frame that fails its checksum with valid data after it is
corruption and refuses to open. Readers verify every frame they read and name segment and offset on failure,
and read a segment in windows of :data:`READ_CHUNK` bytes (:class:`SegmentWalk`), not whole; a frame whose length
claims more than the segment holds after it is told for a torn tail or damage a window at a time (damage if an
intact frame follows it, after its header's count of events or its payload's, or its own bytes are whole: a torn
tail's are not). A follower
(:meth:`FileLog.read_new`, under ``read_batches(follow=True)``) remembers where it stopped and reads only the bytes
appended since; it lists the directory again only when its modification time moved.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple

import anyio
import anyio.lowlevel
from zlib_ng.zlib_ng import crc32

from events.codec import Quarantined, decode_batch, encode_batch
from events.errors import CorruptRecord, InvalidInput, LogClosed, LogError, LogLocked
from events.log import EventLog
from events.schema import AnyEvent, Record

HEADER = struct.Struct("<IIQI")
SEGMENT_SUFFIX = ".seg"
FsyncPolicy = Literal["always", "group", "never"]
"""When an append is made durable: ``always`` before it is acknowledged (what ``kueue-es run`` uses), ``group``
within ``group_commit_ms``, ``never`` by the caller (the simulator, which can run again). Under ``group`` or
``never`` a crash may leave more than one frame in flight; if the file's size covers them but their bytes never
landed (zeros), the first fails its checksum with bytes after it and the writer refuses the log, naming segment and
offset, rather than cut what it cannot tell from damage: nothing is lost, but the tail is for an operator to cut."""
FOLLOW_POLL_SECONDS = 0.02
"""How often a follower looks for what another process appended (a writer's own appends wake it at once)."""
DIRECTORY_SETTLE_NS = 2 * 10**9
"""How old a directory's modification time must be before a listing of it is kept for polls to come: older than
the coarsest timestamps of a file system a log may live on (a tick of the kernel's clock on most, a second or two
on some), so that a segment created after the listing cannot leave the time where it was."""
RELIST_NS = 10 * 10**9
"""How long a kept listing serves at most (by this machine's monotonic clock) before the directory is listed again
whatever its modification time says: a file system whose clock lags this machine's (a network one) could otherwise
hide a new segment behind a time that did not move."""
READ_CHUNK = 1 << 20
"""Bytes of a segment a reader holds at once (more only for a frame larger than that, as there is no largest frame,
and only once its checksum, streamed a window at a time, has verified it): a segment is up to ``segment_bytes``
(64 MiB by default), and replay, recovery, ``log inspect`` and ``log verify`` walk whole ones."""


class FrameInfo(NamedTuple):
    """Where a frame is (a named tuple: a replay walks a hundred thousand of them per million events)."""

    segment: Path
    position: int
    base: int
    count: int
    length: int


@dataclass(frozen=True)
class SegmentInfo:
    path: Path
    base: int
    end: int
    frames: int
    size: int


@dataclass
class TailCursor:
    """Where a reader following the log stopped: the segment it reads, the byte position there of the next frame
    and the offset that frame must carry. Bytes before ``position`` were checked already; a poll reads only
    what lies after it."""

    base: int
    path: Path
    position: int
    expect: int


def _segment_name(base: int) -> str:
    return f"{base:020d}{SEGMENT_SUFFIX}"


def _crc(header_tail: bytes, payload: bytes) -> int:
    return crc32(payload, crc32(header_tail))


def _frame_crc(view: memoryview, pos: int, end: int) -> int:
    """The checksum of the frame at ``pos``: its base offset, event count and payload, which lie contiguous.

    zlib-ng's CRC-32 is zlib's, bit for bit, computed with SIMD: on frame-sized buffers several times faster,
    and every frame a replay reads is checked."""
    return crc32(view[pos + 8 : end])


def list_segments(directory: Path) -> list[tuple[int, Path]]:
    out = []
    for p in directory.iterdir():
        if p.suffix == SEGMENT_SUFFIX and p.stem.isascii() and p.stem.isdigit():
            out.append((int(p.stem), p))
    out.sort()
    return out


def segment_gap(name: str, base: int, expect: int) -> CorruptRecord:
    """The error for segment ``name`` starting at offset ``base`` where the log before it ends before ``expect``:
    a segment between them is missing (or misnamed), and the events it held with it."""
    before = f"the log before it ends at offset {expect - 1}" if expect else "the log starts at offset 0"
    return CorruptRecord(name, expect, 0, f"the segment starts at offset {base}, but {before} "
                                          "(a segment is missing or misnamed)")


def scan_frames(
    path: Path, data: bytes | memoryview, expected_base: int, origin: int = 0
) -> tuple[list[FrameInfo], int | None]:
    """Walk a segment's frames, checking framing and checksums; ``data`` is the segment's bytes from byte
    ``origin`` on (a frame boundary, whose frame must carry ``expected_base``), and every position returned or named
    is the segment's.

    Returns the frames and, if the segment ends in a torn frame, the byte position where it starts.
    Raises :class:`CorruptRecord` for damage that is not a torn tail.
    """
    frames: list[FrameInfo] = []
    pos, size, expect = 0, len(data), expected_base
    view = memoryview(data)
    while pos < size:
        if size - pos < HEADER.size:
            return frames, origin + pos
        length, crc, base, count = HEADER.unpack_from(view, pos)
        end = pos + HEADER.size + length
        if end > size:
            if base == expect and count > 0:
                counts = _counts(count, bytes(view[pos + HEADER.size : pos + HEADER.size + 5]))
                for n in counts:
                    if _frame_follows(data, pos + HEADER.size, base + n):
                        # Not a torn tail: the length field is damaged and intact frames come after it.
                        raise CorruptRecord(path.name, expect, origin + pos, f"frame length {length} runs past the "
                                            "end of the segment but intact frames follow")
                if _bytes_whole(view, pos, crc) or any(_whole_before_append(view, pos, crc, base + n) for n in counts):
                    raise CorruptRecord(path.name, expect, origin + pos, _whole_but_overlong(length))
            _check_torn_header(path, view, pos, expect, base, count, origin)
            return frames, origin + pos
        if _frame_crc(view, pos, end) != crc:
            if end == size and not (base == expect and count > 0 and _frame_follows(data, pos + HEADER.size,
                                                                                   base + count)):
                _check_torn_header(path, view, pos, expect, base, count, origin)
                return frames, origin + pos
            raise CorruptRecord(path.name, expect, origin + pos, "checksum mismatch")
        if base != expect or count == 0:
            raise CorruptRecord(path.name, expect, origin + pos, f"frame claims offset {base} with {count} events")
        frames.append(FrameInfo(path, origin + pos, base, count, length))
        expect = base + count
        pos = end
    return frames, None


def _check_torn_header(
    path: Path, view: memoryview, pos: int, expect: int, base: int, count: int, origin: int = 0
) -> None:
    """A torn tail is the start of the frame the writer was appending: its header names the next offset and at least
    one event. A crash may leave the tail's last bytes unwritten, reading as zeros (a file extended before its data
    landed), up into the header itself: then only the header's bytes before those zeros are held to that. Anything
    else is not a frame of this log, and cutting it off would destroy bytes nothing here wrote."""
    _check_torn_head(path, view[pos : pos + HEADER.size], len(bytes(view[pos:]).rstrip(b"\0")), expect, base, count,
                     origin + pos)


def _check_torn_head(
    path: Path, head: bytes | memoryview, written: int, expect: int, base: int, count: int, at: int
) -> None:
    """:func:`_check_torn_header` for the header ``head`` at byte ``at`` of the segment, of which ``written`` bytes
    lie before the tail's trailing zeros (exact only below a header's size)."""
    if written >= HEADER.size:
        torn = base == expect and count > 0
    else:
        want = HEADER.pack(0, 0, expect, 0)
        torn = all(head[i] == want[i] for i in range(8, min(16, written)))
    if not torn:
        raise CorruptRecord(path.name, expect, at, "the bytes after the last frame are not a frame of "
                            f"this log (a header claiming offset {base} with {count} events)")


def _frame_follows(data: bytes | memoryview, start: int, next_base: int) -> bool:
    """Whether an intact frame for offset ``next_base`` starts somewhere at or after ``start``."""
    buf = data if isinstance(data, bytes) else bytes(data)
    needle = struct.pack("<Q", next_base)
    i = buf.find(needle, start + 8)
    while i != -1:
        pos = i - 8
        if pos + HEADER.size > len(buf):
            return False
        length, crc, base, count = HEADER.unpack_from(buf, pos)
        end = pos + HEADER.size + length
        if count > 0 and end <= len(buf):
            if _frame_crc(memoryview(buf), pos, end) == crc:
                return True
        i = buf.find(needle, i + 1)
    return False


ZERO_SPAN = 4096
"""How many zero bytes after a frame's last non-zero byte may still be its own when a frame whose length runs
past the segment's end is checked for whole bytes (:func:`_ends_whole`): its payload may end in zeros (a msgpack
``0``, a float ``0.0``), then a crash may have left the tail of a later append as zeros. The end of the segment is
tried too, however many zeros lie before it."""


def _ends_whole(crc: int, zeros: int, want: int) -> bool:
    """Whether the checksum ``crc`` (of a frame's bytes up to the last non-zero one) reaches ``want`` there, after up
    to :data:`ZERO_SPAN` of the ``zeros`` zero bytes that follow, or after all of them (the segment's end)."""
    for _ in range(min(zeros, ZERO_SPAN)):
        if crc == want:
            return True
        crc = crc32(b"\0", crc)
    rest = zeros - min(zeros, ZERO_SPAN)
    while rest:
        step = min(rest, len(_ZEROS))
        crc, rest = crc32(_ZEROS[:step], crc), rest - step
    return crc == want


_ZEROS = bytes(1 << 16)


def _counts(count: int, head: bytes) -> list[int]:
    """The event counts a frame whose length is damaged may have: its header's ``count``, and the one its payload's
    first bytes ``head`` say (the header of the msgpack array of its events) if that differs, as when the count
    was damaged too. The frame after it carries the offset after that many events."""
    kind = head[:1]
    if kind and 0x90 <= kind[0] <= 0x9F:
        said = kind[0] & 0x0F
    elif kind == b"\xdc" and len(head) >= 3:
        said = int.from_bytes(head[1:3], "big")
    elif kind == b"\xdd" and len(head) >= 5:
        said = int.from_bytes(head[1:5], "big")
    else:
        return [count]
    return [count] if said in (0, count) else [count, said]


def _whole_but_overlong(length: int) -> str:
    return f"frame length {length} runs past the end of the segment but its bytes are whole"


def _bytes_whole(view: memoryview, pos: int, crc: int) -> bool:
    """Whether the frame at ``pos``, whose length runs past the end of ``view``, has every byte its checksum
    ``crc`` covers (:func:`_frame_crc`) in ``view`` all the same: its length alone is damaged, and it is no torn tail
    (whose bytes are missing, so its checksum cannot match but by a chance of 2^-32 a try)."""
    rest = bytes(view[pos + 8 :])
    kept = rest.rstrip(b"\0")
    return _ends_whole(crc32(kept), len(rest) - len(kept), crc)


def _whole_before_append(view: memoryview, pos: int, crc: int, next_base: int) -> bool:
    """Whether the frame at ``pos``, whose length runs past the end of ``view``, has every byte its checksum ``crc``
    covers before the start of a later append that a crash tore: a header for ``next_base`` (its base offset field
    found whole), or, where fewer than a header's bytes of it landed, bytes that could begin such a header. Then its
    length alone is damaged, and cutting it would lose an acknowledged frame."""
    buf = bytes(view[pos:])
    needle = struct.pack("<Q", next_base)
    run, done = 0, 8
    i = buf.find(needle, HEADER.size + 8)
    while i != -1:
        run, done = crc32(buf[done : i - 8], run), i - 8
        if run == crc:
            return True
        i = buf.find(needle, i + 1)
    kept = len(buf.rstrip(b"\0"))
    start = max(HEADER.size, kept - HEADER.size + 1)
    return start <= kept and _short_append(crc32(buf[8:start]), buf[start:kept], crc, needle)


def _short_append(run: int, tail: bytes, crc: int, needle: bytes) -> bool:
    """Whether a frame whose checksum up to ``tail``'s start is ``run`` reaches ``crc`` at a byte of ``tail`` (the
    last non-zero bytes of the segment, fewer than a header's) after which the rest of ``tail`` could be the start
    of a header whose base offset field is ``needle``: a torn append of which fewer than a header's bytes landed
    (its length and checksum fields are any bytes; the zeros trimmed after it are unwritten or the needle's own)."""
    for cut in range(len(tail)):
        rest = tail[cut:]
        if run == crc and rest[8:] == needle[: max(0, len(rest) - 8)]:
            return True
        run = crc32(tail[cut : cut + 1], run)
    return False


def _nonzero_end(fd: int, start: int, size: int, chunk: int) -> int:
    """The byte after the file's last byte that is not zero between ``start`` and ``size`` (``start`` if none),
    read backwards a window at a time."""
    end = size
    while end > start:
        low = max(start, end - chunk)
        block = os.pread(fd, end - low, low)
        kept = len(block) - _trailing_zeros(block)
        if kept:
            return low + kept
        end = low
        del block  # before the next is read: one window at a time
    return start


def _trailing_zeros(block: bytes) -> int:
    """How many zero bytes ``block`` ends in, looked at up to 64 KiB at a time: ``rstrip`` would copy all the bytes
    before them, a second window held at once."""
    n, step = 0, 64
    while n < len(block):
        part = block[max(0, len(block) - n - step) : len(block) - n]
        zeros = len(part) - len(part.rstrip(b"\0"))
        n += zeros
        if zeros < len(part):
            break
        step = min(2 * step, len(_ZEROS))
    return n


def _whole_in(fd: int, at: int, size: int, crc: int, chunk: int) -> bool:
    """:func:`_bytes_whole` for the frame at byte ``at`` of a file of ``size`` bytes, read a window at a time."""
    written = _nonzero_end(fd, at + 8, size, chunk)
    got = _crc_in(fd, at + 8, written, chunk)
    return got is not None and _ends_whole(got, size - written, crc)


def _whole_before_append_in(fd: int, at: int, size: int, crc: int, next_base: int, chunk: int) -> bool:
    """:func:`_whole_before_append` for the frame at byte ``at`` of a file of ``size`` bytes, read a window at a
    time (the checksum streamed on from one header for ``next_base`` to the next)."""
    needle = struct.pack("<Q", next_base)
    run, done = 0, at + 8
    for head in _needle_heads_in(fd, at + HEADER.size, size, needle, chunk):
        got = _crc_in(fd, done, head, chunk, run)
        if got is None:
            return False
        if got == crc:
            return True
        run, done = got, head
    kept = _nonzero_end(fd, at + 8, size, chunk)
    start = max(at + HEADER.size, kept - HEADER.size + 1)
    if start > kept:
        return False
    got = _crc_in(fd, at + 8, start, chunk)
    return got is not None and _short_append(got, os.pread(fd, kept - start, start), crc, needle)


def _needle_heads_in(fd: int, start: int, size: int, needle: bytes, chunk: int) -> Iterator[int]:
    """The positions from ``start`` on, in order, of the headers up to ``size`` whose base offset field is
    ``needle``, read a window of ``chunk`` bytes at a time."""
    at = start + 8
    while at + len(needle) <= size:
        block = os.pread(fd, min(max(chunk, 2 * len(needle)), size - at), at)
        if len(block) < len(needle):
            return
        i = block.find(needle)
        while i != -1:
            yield at + i - 8
            i = block.find(needle, i + 1)
        at += len(block) - len(needle) + 1  # the next window starts at the first field this one did not hold
        del block  # before the next is read: one window at a time


def _frame_follows_in(fd: int, start: int, size: int, next_base: int, chunk: int) -> bool:
    """:func:`_frame_follows` on a segment's file from byte ``start`` up to ``size``, read a window of ``chunk``
    bytes at a time (a candidate frame's checksum too): memory is bounded by the window, not the bytes searched."""
    needle = struct.pack("<Q", next_base)
    at = start  # a window [at, at + n) holds the headers that start in [at, at + n - HEADER.size]
    while at + HEADER.size <= size:
        block = os.pread(fd, min(chunk, size - at), at)
        if len(block) < HEADER.size:
            return False
        i = block.find(needle, 8)
        while i != -1 and i - 8 + HEADER.size <= len(block):
            length, crc, _, count = HEADER.unpack_from(block, i - 8)
            end = at + i - 8 + HEADER.size + length
            if count > 0 and end <= size and _crc_in(fd, at + i, end, chunk) == crc:
                return True
            i = block.find(needle, i + 1)
        at += len(block) - HEADER.size + 1  # the next window starts at the first header this one did not hold
        del block  # before the next is read: one window at a time
    return False


def _crc_in(fd: int, start: int, end: int, chunk: int, crc: int = 0) -> int | None:
    """The CRC-32 of a file's bytes ``start`` to ``end`` (carried on from ``crc``, that of the bytes before them),
    read a window at a time; None if the file ends first."""
    while start < end:
        block = os.pread(fd, min(chunk, end - start), start)
        if not block:
            return None
        crc, start = crc32(block, crc), start + len(block)
        del block  # before the next is read: one window at a time
    return crc


def _written_in(fd: int, at: int, size: int, chunk: int) -> int:
    """How many bytes from ``at`` lie before the file's trailing zeros (up to ``size``): exactly when fewer than a
    header's size, else that size, as reading stops at the first byte that is not zero from the header's last on."""
    pos = at + HEADER.size - 1
    while pos < size:
        block = os.pread(fd, min(chunk, size - pos), pos)
        if not block:
            break
        if block.count(0) < len(block):
            return HEADER.size
        pos += len(block)
        del block  # before the next is read: one window at a time
    return len(os.pread(fd, HEADER.size - 1, at).rstrip(b"\0"))


class Window(NamedTuple):
    """Bytes of a segment from byte ``origin`` on, and the intact frames that lie whole in them."""

    data: memoryview
    origin: int
    frames: list[FrameInfo]

    def payload(self, fr: FrameInfo) -> memoryview:
        at = fr.position - self.origin + HEADER.size
        return self.data[at : at + fr.length]

    def checksum(self, fr: FrameInfo) -> int:
        return HEADER.unpack_from(self.data, fr.position - self.origin)[1]


class SegmentWalk:
    """A segment's frames from byte ``origin`` (a frame boundary, whose frame must carry ``expected_base``) up to
    ``size`` (the segment's size when the walk starts, if not given), read in windows of about ``chunk`` bytes
    with the checks :func:`scan_frames` makes: memory is bounded by the window (or the largest intact frame), not the
    segment. A frame cut off at the end is judged by :func:`scan_frames` on the bytes from it to the end, as a torn
    tail or as damage.

    :meth:`windows` yields every intact frame before damage, then raises it (:class:`CorruptRecord`); afterwards
    ``expect`` is the offset after the last frame, ``position`` the byte after it, ``torn_at`` where a torn tail
    starts (None without one), and ``size`` how many bytes the walk covered."""

    def __init__(self, path: Path, expected_base: int, origin: int = 0, size: int | None = None,
                 chunk: int | None = None) -> None:
        self.path, self.expect, self.position, self.size = path, expected_base, origin, size
        self.chunk = max(READ_CHUNK if chunk is None else chunk, HEADER.size)  # a window holds a header at least
        self.torn_at: int | None = None
        self.frames = 0
        self._overlong: tuple[int, int, int, int] | None = None
        self._large: tuple[int, int] | None = None

    def windows(self) -> Iterator[Window]:
        with open(self.path, "rb", buffering=0) as f:
            fd = f.fileno()
            if self.size is None:
                self.size = os.fstat(fd).st_size
            want = self.chunk
            while self.position < self.size:
                asked = min(want, self.size - self.position)
                data = os.pread(fd, asked, self.position)
                at_end = len(data) < asked or self.position + asked == self.size
                if at_end:  # shorter only if cut since its size was taken (a writer's recovery cut a torn tail)
                    self.size = self.position + len(data)
                window, want, damage = self._walk(memoryview(data), at_end)
                self.frames += len(window.frames)
                yield window
                if damage is None and self._large is not None:
                    del data, window  # checked holding no window of ours (a caller may still hold the last)
                    damage = self._check_large(fd, *self._large)
                elif damage is None and self._overlong is not None:
                    del data, window  # judged holding no window of ours (a caller may still hold the last)
                    damage = self._judge_overlong(fd, *self._overlong)
                    if damage is None:
                        return
                if damage is not None:
                    try:
                        raise damage
                    finally:  # no cycle through this frame, which would keep its windows until a collection
                        del damage
                if at_end:
                    return

    def _walk(self, view: memoryview, at_end: bool) -> tuple[Window, int, CorruptRecord | None]:
        """The intact frames lying whole in ``view`` (the segment's bytes from ``position``), how many bytes the
        next window must hold to take the next frame whole, and the damage that stopped the walk, if any. At the
        segment's end, its last frame and what follows it are left to :func:`scan_frames`; a frame claiming more
        than the segment holds after it, to :meth:`_judge_overlong` (``_overlong`` holds its header's length,
        checksum, base and count), without a window growing to hold it; a frame longer than a window that the
        segment holds before its end, to :meth:`_check_large` (``_large`` holds its checksum and end)."""
        frames: list[FrameInfo] = []
        origin, pos, size, want = self.position, 0, len(view), self.chunk
        damage = None
        while size - pos >= HEADER.size:
            length, crc, base, count = HEADER.unpack_from(view, pos)
            end = pos + HEADER.size + length
            if end > size or (at_end and end == size):
                assert self.size is not None
                if not at_end and origin + end > self.size:
                    self._overlong = length, crc, base, count  # no window can hold it: judged after this one
                else:
                    want = max(want, HEADER.size + length)  # the next window starts at this frame
                    if want > self.chunk and origin + end < self.size:
                        self._large = crc, origin + end  # verified streamed before a window grows to hold it
                break
            if _frame_crc(view, pos, end) != crc:
                damage = CorruptRecord(self.path.name, self.expect, origin + pos, "checksum mismatch")
            elif base != self.expect or count == 0:
                damage = CorruptRecord(self.path.name, self.expect, origin + pos,
                                       f"frame claims offset {base} with {count} events")
            if damage is not None:
                break
            frames.append(FrameInfo(self.path, origin + pos, base, count, length))
            self.expect, pos = base + count, end
        self.position = origin + pos
        if at_end and damage is None:
            try:
                tail, self.torn_at = scan_frames(self.path, view[pos:], self.expect, self.position)
            except CorruptRecord as exc:
                damage = exc
            else:
                if tail:
                    frames += tail
                    self.expect = tail[-1].base + tail[-1].count
                    self.position = tail[-1].position + HEADER.size + tail[-1].length
        return Window(view, origin, frames), want, damage

    def _check_large(self, fd: int, crc: int, end: int) -> CorruptRecord | None:
        """The frame at ``position`` is longer than a window and ends at byte ``end``, before the segment's end: its
        checksum is checked streamed, a window at a time, before the next window grows to hold it whole. A damaged
        length that still fits in the segment would otherwise make a reader hold up to the rest of the segment only
        to find the mismatch; a frame that verifies is read whole for decoding (its bytes read twice). A file cut
        short since its size was taken is left to the next window to judge, as before."""
        self._large = None
        got = _crc_in(fd, self.position + 8, end, self.chunk)
        if got is None or got == crc:
            return None
        return CorruptRecord(self.path.name, self.expect, self.position, "checksum mismatch")

    def _judge_overlong(self, fd: int, length: int, crc: int, base: int, count: int) -> CorruptRecord | None:
        """The frame at ``position`` claims ``length`` bytes, more than the segment holds after it: a torn tail
        (``torn_at`` is set; None is returned) or damage (returned), told apart as :func:`scan_frames` tells them
        (an intact frame after it, for its count or its payload's, or its own bytes whole make it damage), reading
        the bytes after it a window at a time, never all at once. A damaged length names segment and offset as
        soon as the frame after it is found."""
        assert self.size is not None
        at, expect = self.position, self.expect
        if base == expect and count > 0:
            counts = _counts(count, os.pread(fd, max(0, min(5, self.size - at - HEADER.size)), at + HEADER.size))
            for n in counts:
                if _frame_follows_in(fd, at + HEADER.size, self.size, base + n, self.chunk):
                    return CorruptRecord(self.path.name, expect, at, f"frame length {length} runs past the end of "
                                         "the segment but intact frames follow")
            if _whole_in(fd, at, self.size, crc, self.chunk) or any(
                    _whole_before_append_in(fd, at, self.size, crc, base + n, self.chunk) for n in counts):
                return CorruptRecord(self.path.name, expect, at, _whole_but_overlong(length))
        else:
            try:
                _check_torn_head(self.path, os.pread(fd, HEADER.size, at), _written_in(fd, at, self.size, self.chunk),
                                 expect, base, count, at)
            except CorruptRecord as exc:
                return exc
        self.torn_at = at
        return None


def take_writer_lock(directory: Path) -> int:
    """Take the single-writer lock of the log in ``directory`` (an existing directory) and return its file
    descriptor: the lock is held until it is closed. Another process holding it raises :class:`LogLocked`."""
    fd = os.open(directory / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise LogLocked(f"log {directory} is locked by another writer (pid {holder})") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


class FileLog(EventLog):
    """Segmented file log. Open with :meth:`open`; ``readonly`` skips the writer lock and recovery."""

    def __init__(
        self,
        directory: Path,
        *,
        readonly: bool,
        fsync: FsyncPolicy,
        group_commit_ms: float,
        segment_bytes: int,
    ) -> None:
        self.directory = directory
        self.readonly = readonly
        self.fsync = fsync
        self.group_commit_ms = group_commit_ms
        self.segment_bytes = segment_bytes
        self._lock_fd: int | None = None
        self._fd: int | None = None
        self._segment_size = 0
        self._end = 0
        self._synced = 0
        self._sync_done: anyio.Event | None = None
        self._unsynced: str | None = None  # why appends are refused since an fsync failed
        self._end_cursor: TailCursor | None = None  # a read-only log's end, as far as read
        self._listed: tuple[int, int, list[tuple[int, Path]]] | None = None  # (mtime, listed at, segments)
        self._torn: tuple[Path, int, int, int, int] | None = None  # (segment, torn at, size, mtime, found at)
        self._followers: list[anyio.Event] = []  # set when an append or close may wake a waiting follower
        self._closed = False
        self.truncated_bytes = 0
        """How many bytes of torn tail recovery removed when this writer opened the log."""
        self.last_frame: tuple[int, int] | None = None
        """A writer's ``(checksum, last offset)`` of the log's last frame (:meth:`frame_checksum`), None while
        the log is empty."""

    # --- opening -------------------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        readonly: bool = False,
        fsync: FsyncPolicy = "always",
        group_commit_ms: float = 2.0,
        segment_bytes: int = 64 << 20,
    ) -> FileLog:
        directory = Path(path)
        if fsync not in ("always", "group", "never"):
            raise InvalidInput(f"fsync policy must be always, group or never, not {fsync!r}")
        if readonly:
            if not directory.is_dir():
                raise InvalidInput(f"no log at {directory}: not a directory")
        elif directory.exists() and not directory.is_dir():
            raise InvalidInput(f"cannot create log at {directory}: a file is in the way")
        log = cls(directory, readonly=readonly, fsync=fsync, group_commit_ms=group_commit_ms, segment_bytes=segment_bytes)
        if readonly:
            log._end = log._scan_end()
        else:
            directory.mkdir(parents=True, exist_ok=True)
            log._acquire_lock()
            try:
                log._recover()
            except BaseException:
                log._release()
                raise
        return log

    def _acquire_lock(self) -> None:
        self._lock_fd = take_writer_lock(self.directory)

    def _recover(self) -> None:
        segments = list_segments(self.directory)
        if not segments:
            self._open_segment(0)
            return
        base, path = segments[-1]
        walk = SegmentWalk(path, base)
        for window in walk.windows():
            if window.frames:
                last = window.frames[-1]
                self.last_frame = window.checksum(last), last.base + last.count - 1
        assert walk.size is not None
        if walk.torn_at is not None:
            self.truncated_bytes = walk.size - walk.torn_at
            with open(path, "r+b") as f:
                f.truncate(walk.torn_at)
                os.fsync(f.fileno())
        self._end = walk.expect
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        self._segment_size = walk.position
        self._synced = self._segment_size

    def _open_segment(self, base: int) -> None:
        if self._fd is not None:
            os.fsync(self._fd)
            os.close(self._fd)
        self._fd = os.open(self.directory / _segment_name(base), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        dir_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        self._segment_size = 0
        self._synced = 0

    def _scan_end(self) -> int:
        """A read-only log's end: its last segment walked once, then only what was appended since."""
        if self._end_cursor is None:
            self._end_cursor = self._cursor_at(sys.maxsize)
            if self._end_cursor is None:
                return 0
        for _ in self.read_new(self._end_cursor, sys.maxsize):
            pass
        return self._end_cursor.expect

    # --- writing -------------------------------------------------------------------------------------------

    async def append(self, events: Sequence[AnyEvent]) -> list[int]:
        if self._closed:
            raise LogClosed(f"log {self.directory} is closed")
        if self.readonly:
            raise LogError(f"log {self.directory} was opened read-only")
        if self._unsynced is not None:
            raise LogError(self._unsynced)
        if not events:
            return []
        payload = encode_batch(events)
        base = self._end
        tail = struct.pack("<QI", base, len(events))
        crc = _crc(tail, payload)
        frame = struct.pack("<II", len(payload), crc) + tail + payload
        if self._segment_size and self._segment_size + len(frame) > self.segment_bytes:
            self._open_segment(base)
        assert self._fd is not None
        before = self._segment_size
        self._write_frame(frame)
        self._segment_size += len(frame)
        if self.fsync == "always":
            self._sync_frame(before)  # durable before anyone, a follower included, is shown it
        self._end = base + len(events)
        self.last_frame = crc, self._end - 1
        self._wake_followers()
        if self.fsync == "group":
            await self._group_sync(self._segment_size)
        return list(range(base, self._end))

    def _sync_frame(self, before: int) -> None:
        """fsync the frame just written after byte ``before``; if that fails, cut it off again and refuse every
        later append: after a failed fsync the kernel may have dropped pages it could not write, and a second
        fsync may report success for them, so only reopening the log (its recovery reads what the disk holds)
        is trusted."""
        assert self._fd is not None
        try:
            os.fsync(self._fd)
        except OSError as exc:
            self._segment_size = before
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, before)
            raise self._fsync_failed(exc) from exc
        self._synced = self._segment_size

    def _fsync_failed(self, exc: OSError) -> LogError:
        self._unsynced = (f"log {self.directory} takes no more appends since an fsync failed "
                          f"({exc.strerror or exc}); open it again")
        return LogError(f"cannot sync log {self.directory}: {exc.strerror or exc}; the append is not acknowledged "
                        "(whether it is kept shows when the log is opened again)")

    def _write_frame(self, frame: bytes) -> None:
        """Write a whole frame or nothing: a short or failed write is cut off again before raising."""
        assert self._fd is not None
        view = memoryview(frame)
        written = 0
        try:
            while written < len(frame):
                written += os.write(self._fd, view[written:])
        except OSError as exc:
            try:
                os.ftruncate(self._fd, self._segment_size)
            except OSError:
                self._closed = True  # the tail may hold part of a frame: refuse further appends
            raise LogError(f"cannot append to log {self.directory}: {exc.strerror or exc}; nothing was appended") from exc

    async def _group_sync(self, upto: int) -> None:
        """Group commit: one fsync serves every append waiting when it starts."""
        fd = self._fd
        while self._synced < upto and fd == self._fd:
            if self._sync_done is not None:
                await self._sync_done.wait()
                continue
            if self._unsynced is not None:
                raise LogError(self._unsynced)
            done = self._sync_done = anyio.Event()
            try:
                await anyio.sleep(self.group_commit_ms / 1000)
                target = self._segment_size
                try:
                    await anyio.to_thread.run_sync(os.fsync, fd)
                except OSError as exc:  # every append waiting fails: a second fsync might not report it again
                    raise self._fsync_failed(exc) from exc
                self._synced = max(self._synced, target)
            finally:
                self._sync_done = None
                done.set()

    # --- reading -------------------------------------------------------------------------------------------

    def scan(
        self, start: int = 0, quarantine: list[Quarantined] | None = None, *, lazy: bool = False
    ) -> Iterator[list[Record]]:
        """Synchronous read of everything stored from ``start``, a batch at a time; ``lazy`` as in
        :func:`events.codec.decode_batch`. It is :meth:`read_new` from the start of the segment holding ``start``:
        one walk serves a replay and a follower."""
        cursor = self._cursor_at(start)
        if cursor is not None:
            yield from self.read_new(cursor, start, quarantine, lazy=lazy)

    def _may_be_growing(self) -> bool:
        # A reader may see a writer's frame half-written; a writer's own tail never is.
        return self.readonly

    def segments(self) -> list[SegmentInfo]:
        out = []
        for base, path in list_segments(self.directory):
            walk = SegmentWalk(path, base)
            for _ in walk.windows():
                pass
            assert walk.size is not None
            out.append(SegmentInfo(path, base, walk.expect, walk.frames, walk.size))
        return out

    def frame_checksum(self, offset: int) -> tuple[int, int] | None:
        """``(checksum, last offset)`` of the stored frame that holds ``offset``, None when none does. The
        checksum covers the frame's offsets and events, so it tells one log's frame from another's."""
        holder = None
        for base, path in list_segments(self.directory):
            if base > offset:
                break
            holder = base, path
        if holder is None:
            return None
        base, path = holder
        found = None
        for window in SegmentWalk(path, base).windows():  # on to the segment's end: damage there is reported
            for fr in window.frames:
                if fr.base <= offset < fr.base + fr.count:
                    found = window.checksum(fr), fr.base + fr.count - 1
        return found

    async def read_batches(
        self, start: int = 0, *, follow: bool = False, quarantine: list[Quarantined] | None = None
    ) -> AsyncIterator[list[Record]]:
        if self._closed:
            raise LogClosed(f"log {self.directory} is closed")
        if not follow:
            for batch in self.scan(start, quarantine):
                yield batch
                await anyio.lowlevel.checkpoint()
            return
        cursor = self._cursor_at(start)
        while True:
            if cursor is not None:
                for batch in self.read_new(cursor, start, quarantine):
                    yield batch
                    await anyio.lowlevel.checkpoint()
            if self._closed:
                raise LogClosed(f"log {self.directory} closed while it was followed")
            await self._wait_for_more()
            if cursor is None:
                cursor = self._cursor_at(start)

    async def _wait_for_more(self) -> None:
        """Until the log may have grown: a writer's appends (in this process, as it holds the lock) wake its
        followers at once; a read-only log polls, as another process appends."""
        if self.readonly:
            await anyio.sleep(FOLLOW_POLL_SECONDS)
            return
        grew = anyio.Event()  # one per wait: an event is bound to the loop that waits on it
        self._followers.append(grew)
        try:
            with anyio.move_on_after(FOLLOW_POLL_SECONDS):
                await grew.wait()
        finally:
            self._followers.remove(grew)

    def _cursor_at(self, start: int) -> TailCursor | None:
        """A cursor at the start of the segment that holds offset ``start`` (the last one when the log ends
        before it), None while the log has no segment."""
        segments = list_segments(self.directory)
        for i, (base, path) in enumerate(segments):
            if i + 1 == len(segments) or segments[i + 1][0] > start:
                return TailCursor(base, path, 0, base)
        return None

    def read_new(
        self, cursor: TailCursor, start: int = 0, quarantine: list[Quarantined] | None = None, *, lazy: bool = False
    ) -> Iterator[list[Record]]:
        """The batches stored after ``cursor`` (from offset ``start`` on), advancing it: only bytes appended since
        are read and checked (checksums, offsets, a gap between segments, a torn frame that is not the log's tail),
        so a follower's idle poll costs a stat of the directory and one of the segment, at a crashed writer's torn
        tail too once it is found (:meth:`_keep_torn`). A writer's own log, whose end it knows, costs nothing when
        nothing was appended. :meth:`scan` is this from a new cursor."""
        header = HEADER.size
        while self.readonly or cursor.expect != self._end or cursor.position == 0:
            later = self._segment_after(cursor.base)  # before reading: a segment listed after ours makes ours whole
            torn_at = None
            stat = self._stat_of(cursor)
            size = stat.st_size
            if size > cursor.position and self._torn_unchanged(cursor, stat):
                torn_at = cursor.position
            elif size > cursor.position:
                walk = SegmentWalk(cursor.path, cursor.expect, cursor.position, size)
                for window in walk.windows():
                    data, origin = window.data, window.origin
                    for _, position, base, count, length in window.frames:  # unpacked: a replay's hot loop
                        at, after = position - origin + header, base + count
                        cursor.position, cursor.expect = at + length + origin, after
                        if after <= start:
                            continue
                        records = decode_batch(data[at : at + length], base, quarantine, start, lazy=lazy)
                        if records:
                            yield records
                torn_at = walk.torn_at
                if torn_at is not None:
                    self._keep_torn(cursor, torn_at, stat)
            if torn_at is not None and (later or not self._may_be_growing()):
                raise CorruptRecord(cursor.path.name, cursor.expect, torn_at, "truncated frame")
            if later is None:
                return
            base, path = later
            if base != cursor.expect:
                raise segment_gap(path.name, base, cursor.expect)
            cursor.base, cursor.path, cursor.position = base, path, 0

    @staticmethod
    def _stat_of(cursor: TailCursor) -> os.stat_result:
        """The cursor's segment's status, whose size never falls below what the cursor has read: a writer's
        recovery cuts off only a torn tail, which a reader stops before."""
        stat = os.stat(cursor.path)
        if stat.st_size < cursor.position:
            raise CorruptRecord(cursor.path.name, cursor.expect, stat.st_size, f"the segment shrank to "
                                f"{stat.st_size} bytes below the frame read up to {cursor.position}")
        return stat

    def _keep_torn(self, cursor: TailCursor, at: int, stat: os.stat_result) -> None:
        """Remember that the cursor's segment, as ``stat`` found it, ends in a torn frame at byte ``at``: a crashed
        writer's tail stays so until a writer reopens the log, and a follower polls it meanwhile. Kept only once
        the segment's modification time is older than :data:`DIRECTORY_SETTLE_NS` (a change in the same tick of
        the file system's clock, at the same size, would not move it)."""
        if stat.st_mtime_ns < time.time_ns() - DIRECTORY_SETTLE_NS:
            self._torn = cursor.path, at, stat.st_size, stat.st_mtime_ns, time.monotonic_ns()
        else:
            self._torn = None

    def _torn_unchanged(self, cursor: TailCursor, stat: os.stat_result) -> bool:
        """Whether the cursor stands at a torn tail found before in its segment, unchanged since in size and
        modification time (and found less than :data:`RELIST_NS` ago): then it is not read again."""
        torn = self._torn
        return (torn is not None and torn[:4] == (cursor.path, cursor.position, stat.st_size, stat.st_mtime_ns)
                and time.monotonic_ns() - torn[4] < RELIST_NS)

    def _segment_after(self, base: int) -> tuple[int, Path] | None:
        """The first segment after the one starting at offset ``base``, if any."""
        for segment in self._listing():
            if segment[0] > base:
                return segment
        return None

    def _listing(self) -> list[tuple[int, Path]]:
        """The log's segments, listed again only when the directory may have changed since the last listing: a
        new segment (or any file created, renamed or removed there) moves the directory's modification time.
        A listing is kept only once that time is older than :data:`DIRECTORY_SETTLE_NS`, since a change in the
        same tick of the file system's clock would leave it where it was, and for :data:`RELIST_NS` at most."""
        mtime, now = os.stat(self.directory).st_mtime_ns, time.monotonic_ns()
        if self._listed is not None and self._listed[0] == mtime and now - self._listed[1] < RELIST_NS:
            return self._listed[2]
        settled = mtime < time.time_ns() - DIRECTORY_SETTLE_NS
        segments = list_segments(self.directory)
        self._listed = (mtime, now, segments) if settled else None
        return segments

    async def end_offset(self) -> int:
        return self.stored_end()

    def stored_end(self) -> int:
        """:meth:`end_offset`, synchronously: a read-only log reads what was appended since it last looked."""
        return self._end if not self.readonly else self._scan_end()

    # --- closing -------------------------------------------------------------------------------------------

    async def close(self) -> None:
        self.close_sync()

    def close_sync(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._release()
        self._wake_followers()

    def _wake_followers(self) -> None:
        for grew in self._followers:
            grew.set()

    def _release(self) -> None:
        if self._fd is not None:
            if self.fsync != "never":
                os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
