"""Checkpoints of the embedded log: snapshots of the projected state kept beside the log, so that a restart and
a replay fold only what came after the newest one they can use.

``<log>/checkpoints/<offset, 20 digits>.ckpt`` holds the state folded from the log's first event up to and
including ``offset`` (the last event of a frame), encoded by :mod:`projections.snapshot` and zlib-compressed,
with the checksum of that frame. A checkpoint is used only while the log still holds that very frame: a log
written again from another history, or cut back below it, makes the checkpoint unusable, never wrong. One that
cannot be read is passed over (and named) for an older one; with none usable, the fold starts from the
beginning. A checkpoint only ever shortens a fold.

The process that writes the log writes them (``kueue-es run``: :class:`Checkpointer`), every
``scheduler.snapshot_every_events`` events or ``snapshot_interval_s`` seconds, encoded by a forked child
(:mod:`kueue_es.background`) so the scheduler is not held up, and keeps the newest
``scheduler.checkpoints_kept``. ``kueue-es run --kube`` adds its connector's part (``connector``: the mirror
beyond the state, :mod:`connectors.k8s.mirror_snapshot`), and restarts only from a checkpoint that has one; the
other readers leave that part alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from events.errors import InvalidInput
from events.filelog import FileLog
from kueue_es.background import encode_in_background
from projections import snapshot
from projections.cluster import ClusterState

DIRECTORY = "checkpoints"
SUFFIX = ".ckpt"
FORMAT = 1


class Checkpoint(msgspec.Struct, frozen=True, kw_only=True):
    format: int
    offset: int
    """The log offset of the last event folded in: the last event of the frame ``frame_checksum`` is of."""
    time: int
    """The state's time: the latest event time folded in (``replay --at`` may start from it when not later)."""
    frame_checksum: int
    state: bytes
    """zlib(projections.snapshot.encode(state))."""
    connector: bytes = b""
    """zlib of the writer's own part (``run --kube``: its connector's mirror), empty for none."""


_enc = msgspec.msgpack.Encoder()
_dec = msgspec.msgpack.Decoder(Checkpoint)


def pack(offset: int, time_ms: int, frame_checksum: int, raw_state: bytes,
         connector: Callable[[], bytes] | None = None) -> bytes:
    """The checkpoint file; ``connector`` encodes the writer's own part (called here: in the forked child)."""
    return _enc.encode(Checkpoint(format=FORMAT, offset=offset, time=time_ms, frame_checksum=frame_checksum,
                                  state=zlib.compress(raw_state, 1),
                                  connector=zlib.compress(connector(), 1) if connector is not None else b""))


def directory(log_dir: str | os.PathLike[str]) -> Path:
    return Path(log_dir) / DIRECTORY


def listed(log_dir: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """The checkpoints beside a log, oldest first."""
    where = directory(log_dir)
    if not where.is_dir():
        return []
    found = [(int(p.stem), p) for p in where.iterdir()
             if p.suffix == SUFFIX and p.stem.isascii() and p.stem.isdigit()]
    return sorted(found)


C = TypeVar("C")


@dataclass
class Start(Generic[C]):
    """Where a fold of a log starts: the state of a checkpoint (None: the beginning), the connector's part
    restored around it when asked for, and the checkpoints passed over on the way, each with why."""

    state: ClusterState | None = None
    path: Path | None = None
    passed_over: list[str] = field(default_factory=list)
    connector: C | None = None


class Unusable(Exception):
    """Why a checkpoint cannot be used; the message names its file."""


def read(path: Path, offset: int) -> Checkpoint:
    """The checkpoint listed at ``offset``, checked to be one this version reads. Raises :class:`Unusable`, or
    ``FileNotFoundError`` when it is gone (pruned by the log's writer since it was listed)."""
    try:
        ck = _dec.decode(path.read_bytes())
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise Unusable(f"{path}: cannot read: {exc.strerror}") from None
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise Unusable(f"{path}: not a kueue-es checkpoint: {exc}") from None
    if ck.format != FORMAT or ck.offset != offset:
        raise Unusable(f"{path}: format {ck.format} at offset {ck.offset} is not one this version reads (format "
                       f"{FORMAT}, offset {offset})")
    return ck


def state_of(ck: Checkpoint, path: Path) -> ClusterState:
    """The state ``ck`` (read from ``path``) holds; raises :class:`Unusable` for a damaged one."""
    try:
        state = snapshot.decode(zlib.decompress(ck.state))
    except (zlib.error, InvalidInput) as exc:
        raise Unusable(f"{path}: damaged: {exc}") from None
    if state.offset != ck.offset:
        raise Unusable(f"{path}: holds the state at offset {state.offset}, not {ck.offset}")
    return state


def restore(log: FileLog, *, to: int | None = None, at: int | None = None,
            connector: Callable[[ClusterState, bytes], C] | None = None) -> Start[C]:
    """The newest checkpoint of ``log`` a fold up to offset ``to`` (and of events not after time ``at``) can
    start from. ``at``: only a checkpoint whose every event is at or before it (its time), as such a fold skips
    later events without stopping. ``connector``: only one with a connector's part, which it restores (raising
    :class:`InvalidInput` for a damaged one) around the checkpoint's state."""
    start: Start[C] = Start()
    for offset, path in reversed(listed(log.directory)):
        if to is not None and offset > to:
            continue
        try:
            ck = read(path, offset)
        except FileNotFoundError:
            continue
        except Unusable as exc:
            start.passed_over.append(str(exc))
            continue
        if at is not None and ck.time > at:
            continue
        if connector is not None and not ck.connector:
            start.passed_over.append(f"{path}: holds no connector state (written by kueue-es run without --kube)")
            continue
        if log.frame_checksum(offset) != (ck.frame_checksum, offset):
            start.passed_over.append(f"{path}: the log no longer holds the events it was taken of")
            continue
        try:
            state = state_of(ck, path)
        except Unusable as exc:
            start.passed_over.append(str(exc))
            continue
        if connector is not None:
            try:
                start.connector = connector(state, zlib.decompress(ck.connector))
            except (zlib.error, InvalidInput) as exc:
                start.passed_over.append(f"{path}: damaged connector state: {exc}")
                continue
        start.state, start.path = state, path
        return start
    return start


def save(log_dir: str | os.PathLike[str], offset: int, data: bytes) -> Path:
    """Write atomically (a crash leaves the checkpoint whole or absent) and durably."""
    where = directory(log_dir)
    where.mkdir(exist_ok=True)
    target = where / f"{offset:020d}{SUFFIX}"
    tmp = target.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)
    fd = os.open(where, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return target


def prune(log_dir: str | os.PathLike[str], keep: int) -> list[Path]:
    """Remove all but the newest ``keep`` checkpoints; returns what was removed."""
    old = listed(log_dir)[:-keep] if keep > 0 else listed(log_dir)
    for _, path in old:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    return [p for _, p in old]


Report = Callable[[str, dict[str, Any]], None]


class Sink(Protocol):
    """Where a :class:`Checkpointer`'s checkpoints go."""

    where: str
    """For reports: the log (or topic) they are of."""

    def frame(self, offset: int) -> int | None:
        """What ties a checkpoint at ``offset`` to the log (a frame's checksum, a Kafka offset), or None when
        ``offset`` does not end a stored frame (no checkpoint then)."""

    def pack(self, offset: int, time_ms: int, frame: int, raw_state: bytes,
             connector: Callable[[], bytes] | None) -> bytes:
        """The stored form (runs in the forked child)."""

    async def write(self, offset: int, data: bytes) -> str:
        """Store it; returns where."""


class FileSink:
    """The embedded log's ``checkpoints/`` directory, keeping the newest ``keep``."""

    def __init__(self, log: FileLog, keep: int, report: Report, since: int) -> None:
        self.log, self.keep = log, keep
        self.where = str(log.directory)
        for leftover in directory(log.directory).glob("*.tmp"):  # a write cut short by a crash
            leftover.unlink(missing_ok=True)
        for offset, path in listed(log.directory):
            if offset > since:  # of events this log does not hold (any more): never usable, and pruning by offset
                path.unlink(missing_ok=True)  # would keep them over every new one
                report("checkpoint_removed", {"log": self.where, "offset": offset,
                                              "reason": f"the log ends at offset {since}"})

    def frame(self, offset: int) -> int | None:
        frame = self.log.last_frame
        return frame[0] if frame is not None and frame[1] == offset else None

    def pack(self, offset: int, time_ms: int, frame: int, raw_state: bytes,
             connector: Callable[[], bytes] | None) -> bytes:
        return pack(offset, time_ms, frame, raw_state, connector)

    async def write(self, offset: int, data: bytes) -> str:
        path = await asyncio.to_thread(save, self.log.directory, offset, data)
        await asyncio.to_thread(prune, self.log.directory, self.keep)
        return str(path)


class Checkpointer:
    """Writes checkpoints as the state folds what is appended: call :meth:`after` whenever the state has folded
    a batch (and now and then when idle, for the interval), and :meth:`close` before closing the log. Each is
    encoded by a forked child; one is written at a time."""

    def __init__(self, sink: Sink, *, every_events: int, interval_s: float, report: Report, since: int = -1,
                 connector: Callable[[], bytes] | None = None, enabled: bool = True) -> None:
        self.sink, self.every_events, self.interval_s, self.enabled = sink, every_events, interval_s, enabled
        self.report = report
        self.connector = connector
        """Encodes the writer's own part of each checkpoint, in the forked child, as it is at the fork."""
        self.last_offset = since
        """The offset of the last checkpoint (or of the state the writer started from)."""
        self.last_at = time.monotonic()
        self.events = 0
        """Events folded since the last checkpoint (counted, not told by offsets: Kafka's are not dense)."""
        self.task: asyncio.Task[None] | None = None

    @classmethod
    def of_service(cls, target: FileLog | Sink, opts: Any, report: Report, since: int,
                   connector: Callable[[], bytes] | None = None) -> Checkpointer:
        """Into ``target`` (an embedded log's directory, or a sink), at the cadence and count a service's settings
        give (``ServiceOptions``: ``snapshot_every_events``, ``snapshot_interval_s``, ``checkpoints_kept``)."""
        sink = FileSink(target, opts.checkpoints_kept, report, since) if isinstance(target, FileLog) else target
        return cls(sink, every_events=opts.snapshot_every_events, interval_s=opts.snapshot_interval_s,
                   report=report, since=since, connector=connector, enabled=opts.checkpoints_kept > 0)

    def after(self, state: ClusterState, *, events: int = 0, force: bool = False) -> None:
        """``state`` has folded ``events`` more events: start a checkpoint of it if one is due (``force``:
        whenever the state moved on)."""
        self.events += events
        if not self.enabled or state.offset <= self.last_offset:
            return
        if self.task is not None and not self.task.done():
            return
        if not force and (self.events < self.every_events and time.monotonic() - self.last_at < self.interval_s):
            return
        frame = self.sink.frame(state.offset)
        if frame is None:  # the state is always at the end of what was appended
            return
        self.last_offset, self.last_at, self.events = state.offset, time.monotonic(), 0
        try:
            packing = encode_in_background(state, functools.partial(self.sink.pack, state.offset, state.time, frame,
                                                                   connector=self.connector))
        except OSError as exc:  # no fork (out of memory, process limit): try again at the next cadence
            self.report("checkpoint_failed", {"log": self.sink.where, "error": f"cannot fork: {exc}"})
            return
        self.task = asyncio.create_task(self._write(packing, state.offset, time.monotonic()))

    async def _write(self, packing: asyncio.Task[bytes], offset: int, t0: float) -> None:
        try:
            data = await packing
            where = await self.sink.write(offset, data)
        except Exception as exc:  # noqa: BLE001 - a checkpoint only shortens a fold: report it and go on
            self.report("checkpoint_failed", {"log": self.sink.where, "offset": offset,
                                              "error": str(exc) or type(exc).__name__})
            return
        self.report("checkpoint", {"log": self.sink.where, "offset": offset, "path": where,
                                   "bytes": len(data), "ms": round((time.monotonic() - t0) * 1000, 1)})

    async def close(self, state: ClusterState | None = None) -> None:
        """Finish the checkpoint under way; with ``state`` (a graceful stop), then checkpoint it too, so that the
        next start folds nothing."""
        if self.task is not None:
            await self.task
        if state is not None:
            self.after(state, force=True)
            if self.task is not None:
                await self.task
