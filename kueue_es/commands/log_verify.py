"""``kueue-es log verify``: read every stored byte of the embedded log, and check its checkpoints against it.

A replay that starts from a checkpoint never reads the frames before it, so damage there goes unnoticed until a
full replay. This walks every frame of every segment, checks its checksum and decodes every event in full, and
stops at the first problem, naming segment, byte and log offset (exit code 1). With ``--checkpoints`` it also
folds the log from its first event and, at each checkpoint's offset, compares the digest of the state the
checkpoint restores with the digest of the fold: one that differs is reported (exit code 1); one that cannot be
used (unreadable, of another history) is reported too but, as no fold ever starts from it, is no problem. A
checkpoint written by an older version is compared on what its snapshot version holds (``snapshot.take_as``):
one older than 71 restores no flush marks, so they are left out of its comparison. That is not the only way an
older checkpoint can differ on a healthy log: where the fold itself has since changed what it keeps (a
MultiKueue manager's workloads first seen admitted before version 69, pod-level resources before 73, a
LocalQueue's AFS zeros), the state it restores is not the one the fold reaches, and it is reported; taking a
new checkpoint ends that.
"""

from __future__ import annotations

import argparse
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from connectors.kafka.settings import is_kafka_url
from events.codec import decode_batch
from events.errors import CorruptRecord, InvalidInput, LogError
from events.filelog import FrameInfo, SegmentWalk, Window, list_segments, segment_gap
from kueue_es import checkpoints
from kueue_es.commands._common import (
    add_output_argument,
    embedded_log_dir,
    path_arg,
    progress_bar,
    render_table,
    write_data,
)
from projections import snapshot
from projections.cluster import ClusterState


@dataclass
class CheckpointCheck:
    """One checkpoint against the fold: ``matches``, ``differs``, ``unusable`` or ``unchecked`` (the log is
    damaged before its offset)."""

    offset: int
    path: Path
    result: str = "unchecked"
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"file": f"{checkpoints.DIRECTORY}/{self.path.name}", "offset": self.offset,
                               "result": self.result}
        return {**out, "detail": self.detail} if self.detail else out


@dataclass
class Verification:
    """What a walk of the log found; counts are of what was verified (up to the problem, when one)."""

    log: str
    segments: int = 0
    frames: int = 0
    events: int = 0
    bytes: int = 0
    torn_tail: int = 0
    problem: dict[str, Any] | None = None
    checkpoints: list[CheckpointCheck] | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None and not any(c.result == "differs" for c in self.checkpoints or [])

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"log": self.log, "ok": self.ok, "segments": self.segments, "frames": self.frames,
                               "events": self.events, "bytes": self.bytes}
        if self.torn_tail:
            out["tornTailBytes"] = self.torn_tail
        if self.problem is not None:
            out["problem"] = self.problem
        if self.checkpoints is not None:
            out["checkpoints"] = [c.as_dict() for c in self.checkpoints]
        return out


def register(log_subparsers: Any) -> None:
    p = log_subparsers.add_parser(
        "verify", help="check every frame and event of the log (and, with --checkpoints, its checkpoints)",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    p.add_argument("--log", required=True, type=path_arg, metavar="PATH", help="directory of the embedded event log")
    p.add_argument("--checkpoints", action="store_true",
                   help="also fold the log from its first event and compare each checkpoint with the fold")
    add_output_argument(p, ["text", "json", "yaml"], "text")
    p.set_defaults(func=run_verify)


def run_verify(args: argparse.Namespace) -> int:
    report = verify_log(args.log, with_checkpoints=args.checkpoints)
    if args.output == "text":
        sys.stdout.write(render(report))
    else:
        write_data(report.as_dict(), args.output)
    return 0 if report.ok else 1


def verify_log(path: str, *, with_checkpoints: bool) -> Verification:
    directory = _log_directory(path)
    report = Verification(path)
    folder = _Folder(directory) if with_checkpoints else None
    segments = list_segments(directory)
    with progress_bar(_end_offset(segments), "Verifying") as advance:
        try:
            _walk(segments, report, folder, advance)
        except _Stop:
            pass
    if folder is not None:
        report.checkpoints = folder.finish(report.problem is not None)
    return report


def _end_offset(segments: list[tuple[int, Path]]) -> int:
    """Where the log ends, for the progress bar: where its last segment's intact frames end."""
    if not segments:
        return 0
    base, path = segments[-1]
    walk = SegmentWalk(path, base)
    try:
        for _ in walk.windows():
            pass
    except CorruptRecord:
        pass  # the walk will report it
    return walk.expect


def _log_directory(path: str) -> Path:
    """The log's directory, refused as :func:`kueue_es.commands._common.open_readonly` refuses it; not opened as
    a log, which would read (and stop at damage in) its last segment before the walk."""
    if is_kafka_url(path):
        raise InvalidInput(f"--log {path}: log verify reads the embedded log's segment files; a Kafka topic is "
                           "checked by its brokers")
    return embedded_log_dir(path)


class _Stop(Exception):
    """The walk met its problem (recorded in the report)."""


def _walk(segments: list[tuple[int, Path]], report: Verification, folder: _Folder | None, advance: Any) -> None:
    expect = 0
    for i, (base, seg_path) in enumerate(segments):
        size = seg_path.stat().st_size
        report.segments += 1
        report.bytes += size
        if base != expect:
            _stop(report, seg_path.name, segment_gap(seg_path.name, base, expect))
        walk = SegmentWalk(seg_path, base, size=size)
        damage = None
        try:  # the intact frames before damage are still checked, as one of them may hold the first problem
            for window in walk.windows():
                for fr in window.frames:
                    with _problem_at(report, seg_path.name, fr.base, fr.position):
                        _check_frame(window, fr, folder)
                    report.frames += 1
                    report.events += fr.count
                    advance(fr.count)
        except CorruptRecord as exc:
            damage = exc
        if damage is not None:
            _stop(report, seg_path.name, damage)
        expect = walk.expect
        if walk.torn_at is not None:
            if i + 1 < len(segments):
                _stop(report, seg_path.name, CorruptRecord(seg_path.name, expect, walk.torn_at, "truncated frame"))
            report.torn_tail = size - walk.torn_at  # a crash's: the writer cuts it off when it next opens the log


def _check_frame(window: Window, fr: FrameInfo, folder: _Folder | None) -> None:
    payload = window.payload(fr)
    decoded = decode_batch(payload, fr.base)  # every event in full: a fold decodes Workloads only as it needs
    if len(decoded) != fr.count:
        raise CorruptRecord(fr.segment.name, fr.base, fr.position,
                            f"the frame holds {len(decoded)} events but its header counts {fr.count}")
    if folder is not None:
        folder.fold(decode_batch(payload, fr.base, lazy=True), fr, window.checksum(fr))


def _stop(report: Verification, segment: str, exc: LogError, offset: int = 0, position: int = 0) -> NoReturn:
    """Record ``exc`` as the report's problem, where it was met (its own offset and byte when it has them), and
    stop the walk."""
    report.problem = {"segment": segment, "offset": getattr(exc, "offset", offset),
                      "byte": getattr(exc, "position", position), "error": str(exc)}
    raise _Stop from exc


class _problem_at:  # noqa: N801 - used as a context manager
    """A log error raised inside (decoding, folding a frame) is the report's problem: :func:`_stop`."""

    def __init__(self, report: Verification, segment: str, offset: int, position: int) -> None:
        self.report, self.segment, self.offset, self.position = report, segment, offset, position

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, LogError):
            _stop(self.report, self.segment, exc, self.offset, self.position)


class _Folder:
    """The fold from the log's first event, as a replay folds (lazily), held against each checkpoint as it
    reaches the checkpoint's offset."""

    def __init__(self, directory: Path) -> None:
        self.state = ClusterState()
        self.checks = [CheckpointCheck(offset, path) for offset, path in checkpoints.listed(directory)]
        self.next = 0
        self.end = 0

    def fold(self, records: list[Any], fr: FrameInfo, crc: int) -> None:
        for record in records:
            self.state.apply(record)
        last = fr.base + fr.count - 1
        self.end = last + 1
        while self.next < len(self.checks) and self.checks[self.next].offset <= last:
            check = self.checks[self.next]
            self.next += 1
            if check.offset < last:
                check.result, check.detail = "unusable", f"no frame of the log ends at its offset {check.offset}"
            else:
                self._compare(check, crc)

    def _compare(self, check: CheckpointCheck, crc: int) -> None:
        try:
            ck = checkpoints.read(check.path, check.offset)
            if ck.frame_checksum != crc:
                raise checkpoints.Unusable(f"{check.path}: the log no longer holds the events it was taken of")
            restored = checkpoints.state_of(ck, check.path)
            version = snapshot.version_of(zlib.decompress(ck.state))  # state_of decoded it: both succeed
        except FileNotFoundError:
            check.result, check.detail = "unusable", "removed while the log was being verified"
            return
        except checkpoints.Unusable as exc:
            check.result, check.detail = "unusable", str(exc)
            return
        held, folded = snapshot.digest_as(restored, version), snapshot.digest_as(self.state, version)
        if held == folded:
            check.result = "matches"
            return
        differing = ", ".join(_differing(restored, self.state, version))
        check.result = "differs"
        check.detail = (f"its state (digest {held[:12]}) is not the fold of the log up to offset {check.offset} "
                        f"(digest {folded[:12]}); differing: {differing}")

    def finish(self, damaged: bool) -> list[CheckpointCheck]:
        """Every checkpoint's result, those the walk did not reach told why."""
        for check in self.checks[self.next:]:
            if damaged:
                check.detail = "the log is damaged before its offset"
            else:
                check.result = "unusable"
                check.detail = (f"the log ends at offset {self.end - 1}, before its offset" if self.end else
                                "the log holds no events")
        return self.checks


def _differing(a: ClusterState, b: ClusterState, version: int) -> list[str]:
    """The parts of two states' snapshots (as of ``version``) that differ, by name: where to look first."""
    sa, sb = snapshot.take_as(a, version), snapshot.take_as(b, version)
    return [name for name in sa.__struct_fields__ if getattr(sa, name) != getattr(sb, name)] or ["encoding"]


def render(report: Verification) -> str:
    out = [f"Log {report.log}: {_count(report.events, 'event')} in {_count(report.frames, 'frame')}, "
           f"{_count(report.segments, 'segment')}, {_count(report.bytes, 'byte')} read\n"]
    if report.torn_tail:
        out.append(f"Torn tail: {report.torn_tail} bytes after the last complete frame (the writer truncates them "
                   "when it next opens the log)\n")
    if report.problem is not None:
        out.append(f"PROBLEM: {report.problem['error']}\n")
    if report.checkpoints is not None:
        out.append("\n")
        out.append(render_table(
            ["CHECKPOINT", "OFFSET", "RESULT", "DETAIL"],
            [[f"{checkpoints.DIRECTORY}/{c.path.name}", c.offset, c.result, c.detail] for c in report.checkpoints],
            empty="No checkpoints.",
        ))
    out.append("\nsound\n" if report.ok else "\nNOT SOUND\n")
    return "".join(out)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
