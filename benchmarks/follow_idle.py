"""CPU an idle follower of the embedded log spends: a FileLog whose last segment holds ``--mib`` MiB, a reader
(read-only, as another process would be, and the writer's own log) following it with nothing appended for
``--seconds``; prints CPU seconds (``time.process_time``) and the count of polls. The directory's modification
time is dated back ten seconds first: a follower lists the directory again while its last change is recent.

    .venv/bin/python benchmarks/follow_idle.py --mib 40 --seconds 3
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import anyio

from events import schema as ev
from events.filelog import FileLog


async def _fill(path: Path, mib: int) -> FileLog:
    log = FileLog.open(path, fsync="never", segment_bytes=1 << 30)
    n, pad = 0, "p" * 1000
    while log._segment_size < mib << 20:  # noqa: SLF001 - a benchmark filling one segment
        await log.append([ev.ClockTicked(time=n + i, id=f"{n + i}", key=pad) for i in range(100)])
        n += 100
    return log


async def _idle(log: FileLog, seconds: float) -> tuple[float, int]:
    """CPU seconds a follower uses in ``seconds`` of wall time with nothing new, and how many polls it made."""
    end = await log.end_offset()
    polls = 0
    name = "read_new" if hasattr(log, "read_new") else "scan"  # what one poll calls, after and before session 32
    real = getattr(log, name)

    def counting(*a, **kw):
        nonlocal polls
        polls += 1
        return real(*a, **kw)

    setattr(log, name, counting)
    async with anyio.create_task_group() as tg:
        async def follow() -> None:
            async for _ in log.read_batches(end, follow=True):
                pass

        tg.start_soon(follow)
        await anyio.sleep(0.2)
        cpu0, polls0 = time.process_time(), polls
        await anyio.sleep(seconds)
        cpu, n = time.process_time() - cpu0, polls - polls0
        tg.cancel_scope.cancel()
    return cpu, n


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=40)
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        writer = await _fill(Path(tmp), args.mib)
        back = Path(tmp).stat().st_mtime_ns - 10 * 10**9  # a log that has not rolled a segment lately (session 33)
        os.utime(tmp, ns=(back, back))
        for name, log in (("read-only", FileLog.open(tmp, readonly=True)), ("writer", writer)):
            cpu, polls = await _idle(log, args.seconds)
            print(f"{name}: last segment {args.mib} MiB, idle {args.seconds:.1f} s: {cpu:.3f} CPU s, "
                  f"{polls} polls observed, {1000 * cpu / max(polls, 1):.3f} CPU ms per poll")


if __name__ == "__main__":
    anyio.run(main)
