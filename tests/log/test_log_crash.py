"""Crash safety with a real process kill: SIGKILL a writer mid-append, then check nothing acknowledged is lost.

A child process appends batches in a loop (sizes and payloads vary, some frames span many pages so the kill
can land inside a write) and prints each acknowledged offset. The parent kills it at a random moment, then
reopens the log: every acknowledged event is there, in order, and decodes; a torn tail, if any, is cut off
by the next writer. Rounds continue on the same log, so recovery is followed by more appends.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest

from events.filelog import FileLog, list_segments

CHILD = r"""
import random, sys
import anyio
from events import schema as ev
from events.filelog import FileLog

path, seed, fsync, segment_bytes = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
rng = random.Random(seed)

async def main():
    log = FileLog.open(path, fsync=fsync, segment_bytes=segment_bytes)
    n = await log.end_offset()
    print(f"start {n} {log.truncated_bytes}", flush=True)
    while True:
        size = rng.choice([1, 1, 3, 10, 50])
        pad = rng.choice([0, 100, 5000, 300000])
        batch = [ev.ClockTicked(time=n + i, id=f"{n + i}", key="p" * pad) for i in range(size)]
        offsets = await log.append(batch)
        assert offsets == list(range(n, n + size)), offsets
        n += size
        print(f"ack {offsets[-1]}", flush=True)

anyio.run(main)
"""


def run_round(path: Path, seed: int, fsync: str, rng: random.Random) -> tuple[int, int, int]:
    """Start a writer, kill it at a random moment; return (its start offset, torn bytes it cut, last acked)."""
    with subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), str(seed), fsync, str(2 << 20)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as proc:
        lines: list[list[str]] = []
        started = threading.Event()

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line.split())
                started.set()

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        if not started.wait(30):
            proc.kill()
            raise AssertionError(f"the writer did not start: {proc.communicate()[1]}")
        time.sleep(rng.uniform(0.01, 0.4))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        reader.join(30)
        stderr = proc.stderr.read() if proc.stderr else ""
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, stderr)
    head = lines[0]
    assert head[0] == "start", lines[:3]
    acks = [int(line[1]) for line in lines[1:] if line[0] == "ack"]
    return int(head[1]), int(head[2]), (acks[-1] if acks else int(head[1]) - 1)


def check(path: Path, acked: int) -> tuple[int, int]:
    # A reader before recovery sees every acknowledged event.
    reader = FileLog.open(path, readonly=True)
    seen = [r for batch in reader.scan() for r in batch]
    assert len(seen) >= acked + 1
    # The writer's reopen keeps them all, cuts a torn tail if there is one, and everything decodes.
    log = FileLog.open(path)
    try:
        end, torn = anyio.run(log.end_offset), log.truncated_bytes
        assert end >= acked + 1, f"acknowledged offset {acked} lost: log ends at {end}"
        records = [r for batch in log.scan() for r in batch]
    finally:
        log.close_sync()
    assert [r.offset for r in records] == list(range(end))
    for r in records:
        assert r.event.id == str(r.offset) and r.event.time == r.offset, r.offset
    return end, torn


@pytest.mark.parametrize("fsync", ["never", "always"])
def test_sigkill_during_appends_loses_nothing_acknowledged(tmp_path: Path, fsync: str) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    end = 0
    rounds = []
    for i in range(6):
        start, _, acked = run_round(tmp_path, seed + i, fsync, rng)
        assert start == end, f"seed {seed}: the writer started at {start}, the log held {end}"
        end, torn = check(tmp_path, acked)
        rounds.append((start, acked, end, torn))
    assert end > 0, f"seed {seed}: nothing was ever acknowledged {rounds}"
    assert len(list_segments(tmp_path)) > 1, f"seed {seed}: segments never rolled {rounds}"
