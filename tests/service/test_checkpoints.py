"""Checkpoints of the embedded log: the state at an offset kept beside the log, so that a restart and a replay
fold only the rest. A checkpoint must never change an answer: every test compares with a fold from offset 0.
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
from fixtures.eventgen import fold, interpret, prelude, random_ops, upsert, workload

from events import schema as ev
from events.filelog import FileLog
from events.timefmt import format_time
from kueue_es import checkpoints, config, service
from kueue_es.cli import main
from projections import snapshot

T0 = 1_700_000_000_000


def write_log(log_dir: Path, batches: list[list[ev.AnyEvent]], checkpoint_after: set[int]) -> list[ev.Record]:
    """Append ``batches``, writing a checkpoint after each batch whose index is in ``checkpoint_after``."""
    log = FileLog.open(log_dir, fsync="never")
    recs: list[ev.Record] = []
    try:
        for i, batch in enumerate(batches):
            offsets = anyio.run(log.append, batch)
            recs += [ev.Record(off, e) for off, e in zip(offsets, batch, strict=True)]
            if i in checkpoint_after:
                state = fold(recs)
                crc, last = log.last_frame  # type: ignore[misc]
                assert last == state.offset
                checkpoints.save(log_dir, last, checkpoints.pack(last, state.time, crc, snapshot.encode(state)))
    finally:
        log.close_sync()
    return recs


def replay(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[dict[str, Any], str]:
    assert main(["replay", *args, "-o", "json"]) == 0
    out = capsys.readouterr()
    return json.loads(out.out), out.err


def without_checkpoint(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != "checkpoint"}


@pytest.fixture
def log_with_checkpoints(tmp_path: Path) -> tuple[Path, list[ev.Record], list[int]]:
    batches = interpret(random_ops(random.Random(11), 400))
    marks = {len(batches) // 4, len(batches) // 2, 3 * len(batches) // 4}
    log_dir = tmp_path / "log"
    recs = write_log(log_dir, batches, marks)
    offsets = [o for o, _ in checkpoints.listed(log_dir)]
    assert len(offsets) == 3
    return log_dir, recs, offsets


def test_replay_starts_from_the_newest_checkpoint_and_gives_the_same_state(
        log_with_checkpoints: tuple[Path, list[ev.Record], list[int]], capsys: pytest.CaptureFixture[str]) -> None:
    log_dir, recs, offsets = log_with_checkpoints
    full, _ = replay(capsys, "--log", str(log_dir), "--no-checkpoints")
    assert "checkpoint" not in full and full["offset"] == recs[-1].offset
    fast, err = replay(capsys, "--log", str(log_dir))
    assert err == ""
    assert fast["checkpoint"]["offset"] == offsets[-1]
    assert without_checkpoint(fast) == full

    # a point between two checkpoints: the older one, never one past the point
    to = (offsets[0] + offsets[1]) // 2
    full, _ = replay(capsys, "--log", str(log_dir), "--to", str(to), "--no-checkpoints")
    fast, _ = replay(capsys, "--log", str(log_dir), "--to", str(to))
    assert fast["checkpoint"]["offset"] == offsets[0]
    assert without_checkpoint(fast) == full
    full, _ = replay(capsys, "--log", str(log_dir), "--to", str(offsets[0] - 1))
    assert "checkpoint" not in full


def test_replay_at_a_time_uses_only_a_checkpoint_of_events_not_after_it(
        log_with_checkpoints: tuple[Path, list[ev.Record], list[int]], capsys: pytest.CaptureFixture[str]) -> None:
    log_dir, recs, offsets = log_with_checkpoints
    times = {off: fold(recs[: off + 1]).time for off in offsets}
    assert times[offsets[1]] < times[offsets[2]]
    at = format_time(times[offsets[2]] - 1)  # after the middle checkpoint's events, before the newest one's last
    full, _ = replay(capsys, "--log", str(log_dir), "--at", at, "--no-checkpoints")
    fast, _ = replay(capsys, "--log", str(log_dir), "--at", at)
    assert fast["checkpoint"]["offset"] == offsets[1]
    assert without_checkpoint(fast) == full


def test_a_damaged_checkpoint_is_passed_over_and_named(
        log_with_checkpoints: tuple[Path, list[ev.Record], list[int]], capsys: pytest.CaptureFixture[str]) -> None:
    log_dir, _, offsets = log_with_checkpoints
    newest = checkpoints.listed(log_dir)[-1][1]
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside the compressed state
    newest.write_bytes(bytes(data))
    full, _ = replay(capsys, "--log", str(log_dir), "--no-checkpoints")
    fast, err = replay(capsys, "--log", str(log_dir))
    assert fast["checkpoint"]["offset"] == offsets[1]
    assert without_checkpoint(fast) == full
    assert err.startswith("kueue-es: warning: checkpoint passed over: ") and newest.name in err


def test_a_checkpoint_of_another_history_is_never_used(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same offsets, other events (a log written again from scratch): checkpoints taken where the two
    histories had diverged must not be used; one of their common beginning may (it holds the same state)."""
    ours = tmp_path / "ours"
    other = tmp_path / "other"
    batches = interpret(random_ops(random.Random(5), 200))
    write_log(ours, batches, set())
    other_batches = interpret(random_ops(random.Random(6), 200))
    write_log(other, other_batches, set(range(len(other_batches))))
    common = next(i for i, (a, b) in enumerate(zip(batches, other_batches, strict=False)) if a != b)
    diverged = sum(map(len, batches[:common]))
    assert common >= 1  # both start with the same cluster (prelude)
    stray = [p for o, p in checkpoints.listed(other) if diverged <= o < sum(map(len, batches))]
    assert stray
    (ours / checkpoints.DIRECTORY).mkdir()
    for p in stray:
        shutil.copy(p, ours / checkpoints.DIRECTORY / p.name)
    full, _ = replay(capsys, "--log", str(ours), "--no-checkpoints")
    fast, err = replay(capsys, "--log", str(ours))
    assert fast == full  # no checkpoint used
    assert err.count("the log no longer holds the events it was taken of") == len(stray)

    shared = checkpoints.listed(other)[common - 1][1]  # the state after the common beginning
    shutil.copy(shared, ours / checkpoints.DIRECTORY / shared.name)
    fast, _ = replay(capsys, "--log", str(ours))
    assert fast["checkpoint"]["offset"] == diverged - 1
    assert without_checkpoint(fast) == full


def test_metrics_and_explain_start_from_checkpoints_too(
        log_with_checkpoints: tuple[Path, list[ev.Record], list[int]], capsys: pytest.CaptureFixture[str]) -> None:
    log_dir, _, _ = log_with_checkpoints
    assert main(["metrics", "--log", str(log_dir), "--no-checkpoints"]) == 0
    full = capsys.readouterr().out
    assert main(["metrics", "--log", str(log_dir)]) == 0
    assert capsys.readouterr().out == full


# --- the writer: kueue-es run over the embedded log --------------------------------------------------------------


def workloads(n: int, first: int, time: int) -> list[ev.AnyEvent]:
    return [upsert(workload(f"ns{i % 2}", f"w{i}", queue=f"lq{i % 3}", cpu="1", created=time + i), time + i)
            for i in range(first, first + n)]


async def serve_until_settled(log_dir: Path, reports: list[tuple[str, dict[str, Any]]], **scheduler: Any) -> None:
    settings = config.load(env={}, overrides={"log": str(log_dir), "scheduler": {
        "ticks": False, "instance_id": "test", **scheduler}})
    opts = service.options(settings)
    stop = asyncio.Event()
    task = asyncio.create_task(service.serve_embedded(str(log_dir), opts, stop,
                                                      lambda kind, fields: reports.append((kind, fields))))
    try:
        with anyio.fail_after(60):
            quiet = 0
            last = -2
            while quiet < 10:  # 0.5 s without an append: settled
                await asyncio.sleep(0.05)
                if task.done():
                    task.result()
                    raise AssertionError("the service stopped by itself")
                end = FileLog.open(log_dir, readonly=True)._end  # noqa: SLF001
                quiet = quiet + 1 if end == last else 0
                last = end
    finally:
        stop.set()
        await task


def all_records(log_dir: Path) -> list[ev.Record]:
    log = FileLog.open(log_dir, readonly=True)
    try:
        return [r for batch in log.scan() for r in batch]
    finally:
        log.close_sync()


def test_run_writes_checkpoints_and_a_restart_from_one_decides_as_a_restart_from_zero(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    write_log(log_dir, [prelude(T0), workloads(12, 0, T0)], set())
    reports: list[tuple[str, dict[str, Any]]] = []
    asyncio.run(serve_until_settled(log_dir, reports, snapshot_every_events=1, checkpoints_kept=2))
    written = [f for kind, f in reports if kind == "checkpoint"]
    assert written, reports
    kept = checkpoints.listed(log_dir)
    assert 1 <= len(kept) <= 2
    recs = all_records(log_dir)
    for offset, path in kept:  # each holds exactly the fold of the log up to its offset
        restored = checkpoints.restore(FileLog.open(log_dir, readonly=True), to=offset).state
        assert restored is not None and restored.offset == offset, path
        assert snapshot.digest(restored) == snapshot.digest(fold(recs[: offset + 1]))

    # more work arrives while it is down; one copy restarts from its checkpoint, the other from offset 0
    write_log(log_dir, [workloads(12, 100, T0 + 60_000)], set())
    cold = tmp_path / "cold"
    shutil.copytree(log_dir, cold)
    shutil.rmtree(cold / checkpoints.DIRECTORY)
    warm_reports: list[tuple[str, dict[str, Any]]] = []
    cold_reports: list[tuple[str, dict[str, Any]]] = []
    asyncio.run(serve_until_settled(log_dir, warm_reports, checkpoints_kept=2))
    asyncio.run(serve_until_settled(cold, cold_reports, checkpoints_kept=0))
    warm_active = next(f for kind, f in warm_reports if kind == "active")
    cold_active = next(f for kind, f in cold_reports if kind == "active")
    assert warm_active["checkpoint"] == kept[-1][0] and cold_active["checkpoint"] is None
    warm, cold_recs = all_records(log_dir), all_records(cold)
    assert len(warm) > len(recs) + 12  # it decided about the new workloads
    assert [(r.offset, r.event) for r in warm] == [(r.offset, r.event) for r in cold_recs]
    assert not checkpoints.listed(cold)  # checkpoints_kept: 0 writes none


def test_checkpoints_kept_is_a_setting_that_must_not_be_negative() -> None:
    assert service.options(config.load(env={})).checkpoints_kept == 10
    assert service.options(config.load(env={"KUEUE_ES_SCHEDULER_CHECKPOINTS_KEPT": "3"})).checkpoints_kept == 3
    with pytest.raises(Exception, match=r"\$\.scheduler\.checkpoints_kept"):
        config.load(env={}, overrides={"scheduler": {"checkpoints_kept": -1}})


def test_an_empty_state_when_there_is_no_checkpoint(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    write_log(log_dir, [prelude(T0)], set())
    start = checkpoints.restore(FileLog.open(log_dir, readonly=True))
    assert start.state is None and start.passed_over == []


def test_a_writer_removes_checkpoints_past_the_end_of_its_log(tmp_path: Path) -> None:
    """Checkpoints of offsets the log does not hold (a log cut back, or another one put in its place) would
    outrank every new one when the oldest are pruned: the writer removes them when it starts, and what a crash
    left of a write."""
    log_dir = tmp_path / "log"
    recs = write_log(log_dir, [prelude(T0), workloads(4, 0, T0), workloads(4, 10, T0)], {1, 2})
    beyond = checkpoints.listed(log_dir)[-1]
    assert beyond[0] == recs[-1].offset
    torn = checkpoints.directory(log_dir) / f"{recs[-1].offset:020d}.tmp"
    torn.write_bytes(b"half a checkpoint")  # a write cut short by a crash
    reports: list[tuple[str, dict[str, Any]]] = []
    log = FileLog.open(log_dir, readonly=True)
    checkpoints.FileSink(log, 2, lambda k, f: reports.append((k, f)), since=beyond[0] - 1)
    assert [o for o, _ in checkpoints.listed(log_dir)] == [recs[-5].offset]
    assert not torn.exists()
    assert reports == [("checkpoint_removed", {"log": str(log_dir), "offset": beyond[0],
                                               "reason": f"the log ends at offset {beyond[0] - 1}"})]


def test_log_inspect_lists_the_checkpoints(
        log_with_checkpoints: tuple[Path, list[ev.Record], list[int]], capsys: pytest.CaptureFixture[str]) -> None:
    log_dir, _, offsets = log_with_checkpoints
    assert main(["log", "inspect", "--log", str(log_dir), "-o", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)["checkpoints"]
    assert [c["offset"] for c in listed] == offsets
    assert all(c["file"].startswith("checkpoints/") and c["bytes"] > 0 for c in listed)
    assert main(["log", "inspect", "--log", str(log_dir)]) == 0
    assert f"Checkpoints: 3, at offsets {', '.join(map(str, offsets))}" in capsys.readouterr().out
