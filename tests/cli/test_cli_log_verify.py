"""``kueue-es log verify``: every frame and event of the embedded log is read, so damage before the newest
checkpoint (which a replay never reads) is found; with ``--checkpoints``, each checkpoint is held against the fold
of the log up to its offset."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from clihelp import FIXTURES, kueue_es

from events import schema as ev
from events.filelog import HEADER, FileLog, list_segments, scan_frames
from kueue_es import checkpoints
from projections import snapshot
from projections.cluster import ClusterState

T0 = 1_714_600_000_000
SEG0 = "00000000000000000000.seg"
SEGMENT = 4144
"""Segment size for the ticks: a little above the imported frame (4018 bytes), so that the first ticks (offset 11
on) still go to the first segment and later ones to others."""


def append_ticks(log_dir: Path, count: int, *, segment_bytes: int, checkpoint_at: set[int] = frozenset()) -> None:
    """One ClockTicked frame per tick, small segments so that the log spans several; after each tick whose offset
    is in ``checkpoint_at``, a checkpoint of the true fold, as ``kueue-es run`` writes one."""
    log = FileLog.open(log_dir, fsync="never", segment_bytes=segment_bytes)
    try:
        for i in range(count):
            (offset,) = anyio.run(log.append, [ev.ClockTicked(time=T0 + i)])
            if offset in checkpoint_at:
                write_checkpoint(log_dir, log, fold(log_dir, offset))
    finally:
        log.close_sync()


def fold(log_dir: Path, to: int) -> ClusterState:
    state = ClusterState()
    reader = FileLog.open(log_dir, readonly=True)
    try:
        for batch in reader.scan():
            for record in batch:
                if record.offset <= to:
                    state.apply(record)
    finally:
        reader.close_sync()
    return state


def write_checkpoint(log_dir: Path, log: FileLog, state: ClusterState) -> Path:
    """A checkpoint of ``state`` tied to the log's last frame (whatever ``state`` is the fold of)."""
    crc, last = log.last_frame  # type: ignore[misc]
    assert last == state.offset
    return checkpoints.save(log_dir, last, checkpoints.pack(last, state.time, crc, snapshot.encode(state)))


def verify(log_dir: Path, *flags: str) -> tuple[int, dict[str, Any]]:
    r = kueue_es("log", "verify", "--log", log_dir, *flags, "-o", "json")
    assert r.err == "", r.err
    return r.code, json.loads(r.out)


@pytest.fixture
def log(tmp_path: Path) -> Path:
    """cluster.yaml imported (one frame, offsets 0..10), then ticks 11.. in small segments."""
    path = tmp_path / "log"
    assert kueue_es("import", "-f", FIXTURES / "cluster.yaml", "--log", path, "--time", "2024-05-01T08:00:00Z").code == 0
    return path


def test_a_sound_log_verifies_with_its_counts(log: Path) -> None:
    append_ticks(log, 6, segment_bytes=SEGMENT)
    segments = list_segments(log)
    assert len(segments) > 1
    code, data = verify(log)
    assert code == 0
    assert data == {"log": str(log), "ok": True, "segments": len(segments), "frames": 7, "events": 17,
                    "bytes": sum(p.stat().st_size for _, p in segments)}
    text = kueue_es("log", "verify", "--log", log)
    assert text.code == 0 and text.err == ""
    assert text.out.startswith(f"Log {log}: 17 events in 7 frames, {len(segments)} segments, ")
    assert text.out.rstrip().endswith("sound")


def test_damage_before_the_newest_checkpoint_is_found_though_replay_does_not_see_it(log: Path) -> None:
    append_ticks(log, 6, segment_bytes=SEGMENT, checkpoint_at={16})
    first, last = list_segments(log)[0][1], list_segments(log)[-1][1]
    assert first.name == SEG0 and last != first
    data = bytearray(first.read_bytes())
    frames, _ = scan_frames(first, bytes(data), 0)
    victim = frames[1]  # offset 11, in the first segment; the checkpoint at 16 is in a later one
    data[victim.position + HEADER.size + victim.length // 2] ^= 0x20
    first.write_bytes(bytes(data))

    replay = kueue_es("replay", "--log", log, "-o", "json")
    assert replay.code == 0, replay.err  # it starts from the checkpoint: the damage is never read
    assert json.loads(replay.out)["checkpoint"]["offset"] == 16

    code, report = verify(log)
    assert code == 1 and report["ok"] is False
    assert report["problem"]["segment"] == SEG0
    assert (report["problem"]["offset"], report["problem"]["byte"]) == (11, victim.position)
    assert (f"corrupt record in segment {SEG0} at byte {victim.position} (log offset 11): checksum mismatch"
            in report["problem"]["error"])
    assert (report["frames"], report["events"]) == (1, 11)  # what was verified before it

    code, report = verify(log, "--checkpoints")
    assert code == 1
    assert [(c["offset"], c["result"]) for c in report["checkpoints"]] == [(16, "unchecked")]

    text = kueue_es("log", "verify", "--log", log)
    assert text.code == 1
    assert f"PROBLEM: corrupt record in segment {SEG0} at byte {victim.position} (log offset 11)" in text.out
    assert text.out.rstrip().endswith("NOT SOUND")


def test_an_undecodable_event_is_found(log: Path) -> None:
    import events.filelog as fl

    future = msgspec.msgpack.encode({"type": "EventFromTheFuture", "time": 7})
    real = fl.encode_batch
    fl.encode_batch = lambda events: msgspec.msgpack.encode([msgspec.Raw(future)])
    try:
        append_ticks(log, 1, segment_bytes=SEGMENT)  # offset 11, written by a "newer version"
    finally:
        fl.encode_batch = real
    code, report = verify(log)
    assert code == 1
    assert (report["problem"]["segment"], report["problem"]["offset"]) == (SEG0, 11)
    assert "cannot decode event at log offset 11" in report["problem"]["error"]


def test_a_checkpoint_that_is_not_the_fold_is_reported(log: Path) -> None:
    append_ticks(log, 6, segment_bytes=SEGMENT, checkpoint_at={12})
    writer = FileLog.open(log, fsync="never", segment_bytes=SEGMENT)
    try:
        anyio.run(writer.append, [ev.ClockTicked(time=T0 + 100)])  # offset 17
        wrong = fold(log, 16)
        wrong.apply(ev.Record(17, ev.ClockTicked(time=T0 + 999)))  # the right offset, another state
        bad = write_checkpoint(log, writer, wrong)
    finally:
        writer.close_sync()

    code, report = verify(log, "--checkpoints")
    assert code == 1 and report["ok"] is False and "problem" not in report
    by_offset = {c["offset"]: c for c in report["checkpoints"]}
    assert by_offset[12]["result"] == "matches"
    assert by_offset[17]["result"] == "differs"
    assert by_offset[17]["file"] == f"checkpoints/{bad.name}"
    assert "is not the fold of the log up to offset 17" in by_offset[17]["detail"]
    assert "differing: time" in by_offset[17]["detail"]
    assert verify(log)[0] == 0  # the log itself is sound

    text = kueue_es("log", "verify", "--log", log, "--checkpoints")
    assert text.code == 1
    assert f"checkpoints/{bad.name}   17       differs" in text.out


def without_marks(path: Path, version: int | None = None) -> None:
    """Rewrite the checkpoint at ``path`` with no flush marks; ``version``: as a writer of that older
    version wrote it, without the field."""
    ck = checkpoints.read(path, int(path.name[:20]))
    snap = msgspec.msgpack.decode(zlib.decompress(ck.state))
    at = snapshot.Snapshot.__struct_fields__.index("flushes")
    assert snap[at] != [] and len(snap) == at + 1, "the imported flavors and ClusterQueues made marks"
    snap[at] = []
    if version is not None:
        snap[0] = version
        del snap[at]
    path.write_bytes(checkpoints.pack(ck.offset, ck.time, ck.frame_checksum, msgspec.msgpack.encode(snap)))


def test_a_checkpoint_from_before_the_flush_marks_matches_the_fold(log: Path) -> None:
    """A snapshot older than 71 restores no flush marks, which the fold of any log with a flavor or a
    ClusterQueue holds: they are left out of the comparison there, and only there."""
    append_ticks(log, 3, segment_bytes=SEGMENT, checkpoint_at={11, 13})
    (_, old), (_, current) = checkpoints.listed(log)
    without_marks(old, version=70)
    without_marks(current)  # a current checkpoint that lost its marks is not the fold
    code, report = verify(log, "--checkpoints")
    assert [(c["offset"], c["result"]) for c in report["checkpoints"]] == [(11, "matches"), (13, "differs")]
    assert report["checkpoints"][1]["detail"].endswith("differing: flushes") and code == 1

def test_a_clean_log_with_checkpoints_verifies_and_an_unreadable_one_is_reported(log: Path) -> None:
    append_ticks(log, 6, segment_bytes=SEGMENT, checkpoint_at={11, 14, 16})
    garbage = checkpoints.directory(log) / f"{13:020d}{checkpoints.SUFFIX}"
    garbage.write_bytes(b"not a checkpoint")
    code, report = verify(log, "--checkpoints")
    assert code == 0 and report["ok"] is True
    assert [(c["offset"], c["result"]) for c in report["checkpoints"]] == [
        (11, "matches"), (13, "unusable"), (14, "matches"), (16, "matches")]
    assert "not a kueue-es checkpoint" in report["checkpoints"][1]["detail"]


def test_verify_reads_only_the_embedded_log(tmp_path: Path) -> None:
    r = kueue_es("log", "verify", "--log", "kafka://localhost:9092/events")
    assert r.code == 2 and "log verify reads the embedded log's segment files" in r.err
    r = kueue_es("log", "verify", "--log", tmp_path / "nope")
    assert r.code == 2 and f"--log {tmp_path / 'nope'}: no such log" in r.err


def test_a_missing_segment_is_found(log: Path) -> None:
    append_ticks(log, 3, segment_bytes=100)  # a segment each
    segments = list_segments(log)
    assert len(segments) >= 3
    (gone_base, gone), (next_base, after) = segments[1], segments[2]
    gone.unlink()
    code, report = verify(log)
    assert code == 1
    assert (report["problem"]["segment"], report["problem"]["offset"]) == (after.name, gone_base)
    assert (f"the segment starts at offset {next_base}, but the log before it ends at offset {gone_base - 1}"
            in report["problem"]["error"])
