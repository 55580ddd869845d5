"""What the embedded log's readers of one large segment cost: peak memory (and CPU) of each whole-segment reader,
and the system calls of a read-only follower's idle poll.

A log of one segment of ``--mib`` MiB (batches of 100 events of about 1 KB) is written once; each reader then
runs in a fresh process importing the tree ``--code`` names (default: this one, so another checkout, e.g. main's,
can be measured against the same log). Memory is the growth of the process's peak resident set while the reader
runs (the peak is reset with ``/proc/self/clear_refs`` just before it). An idle poll's system calls are counted
with ``strace -c -f`` over a process making ``--polls`` idle polls less one making none, divided by ``--polls``;
the directory's modification time is dated back ten seconds first (a log that has not rolled a segment lately).

    .venv/bin/python benchmarks/segment_reads.py --mib 40 [--code /path/to/other/checkout]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

READERS = ["replay", "follow-from-start", "recover", "open-read-only", "segments", "frame-checksum", "inspect",
           "verify"]
HERE = Path(__file__).resolve().parent.parent


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _read(reader: str, log_dir: str) -> object:
    """Run one reader over the log (imported from the tree on sys.path)."""
    import anyio

    from events.filelog import FileLog

    if reader == "replay":
        return sum(len(b) for b in FileLog.open(log_dir, readonly=True).scan(lazy=True))
    if reader == "follow-from-start":
        log = FileLog.open(log_dir, readonly=True)
        cursor = log._cursor_at(0)  # noqa: SLF001 - where read_batches(0, follow=True) starts
        return sum(len(b) for b in log.read_new(cursor))
    if reader == "recover":
        FileLog.open(log_dir, fsync="never").close_sync()
        return None
    if reader == "open-read-only":
        return anyio.run(FileLog.open(log_dir, readonly=True).end_offset)
    if reader == "segments":
        return len(FileLog.open(log_dir, readonly=True).segments())
    if reader == "frame-checksum":
        return FileLog.open(log_dir, readonly=True).frame_checksum(0)
    if reader == "inspect":
        from kueue_es.commands.log_cmd import inspect_log

        return inspect_log(log_dir)["events"]
    if reader == "verify":
        from kueue_es.commands.log_verify import verify_log

        return verify_log(log_dir, with_checkpoints=False).events
    raise ValueError(reader)


def _child_memory(reader: str, log_dir: str) -> None:
    import anyio  # noqa: F401 - imported before the peak is reset

    import events.filelog  # noqa: F401
    import kueue_es.commands.log_cmd  # noqa: F401
    import kueue_es.commands.log_verify  # noqa: F401

    rss = _status("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # the peak resident set starts again from here
    cpu = time.process_time()
    _read(reader, log_dir)
    cpu = time.process_time() - cpu
    print(json.dumps({"peak_growth_kib": _status("VmHWM") - rss, "cpu_s": cpu}))


def _child_idle(log_dir: str, polls: int) -> None:
    from events.filelog import FileLog

    log = FileLog.open(log_dir, readonly=True)
    cursor = log._cursor_at(0)  # noqa: SLF001
    for _ in log.read_new(cursor):
        pass
    for _ in range(polls):
        for _ in log.read_new(cursor):
            raise AssertionError("the log grew")


def _child(code: str, argv: list[str]) -> list[str]:
    return [sys.executable, __file__, "--code", code, *argv]


def _fill(log_dir: Path, mib: int) -> None:
    sys.path.insert(0, str(HERE))
    import anyio

    from events import schema as ev
    from events.filelog import FileLog

    async def fill() -> None:
        log = FileLog.open(log_dir, fsync="never", segment_bytes=1 << 30)
        n, pad = 0, "p" * 1000
        while log._segment_size < mib << 20:  # noqa: SLF001 - a benchmark filling one segment
            await log.append([ev.ClockTicked(time=n + i, id=f"{n + i}", key=pad) for i in range(100)])
            n += 100
        log.close_sync()

    anyio.run(fill)


def _syscalls(code: str, log_dir: str, polls: int) -> dict[str, int]:
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        subprocess.run(["strace", "-f", "-c", "-o", out.name, *_child(code, ["--idle", log_dir, str(polls)])],
                       check=True)
        counts = {}
        for line in out.read().splitlines():
            m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)$", line)
            if m and m.group(2) != "total":
                counts[m.group(2)] = int(m.group(1))
        return counts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=40)
    ap.add_argument("--polls", type=int, default=2000)
    ap.add_argument("--code", default=str(HERE))
    ap.add_argument("--reader", help=argparse.SUPPRESS)
    ap.add_argument("--idle", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--log", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.reader or args.idle:
        sys.path.insert(0, args.code)
        if args.reader:
            _child_memory(args.reader, args.log)
        else:
            _child_idle(args.idle[0], int(args.idle[1]))
        return
    with tempfile.TemporaryDirectory() as tmp:
        log_dir = Path(tmp) / "log"
        _fill(log_dir, args.mib)
        size = sum(p.stat().st_size for p in log_dir.glob("*.seg"))
        print(f"log: one segment of {size / (1 << 20):.1f} MiB; code: {args.code}")
        for reader in READERS:
            got = json.loads(subprocess.run(_child(args.code, ["--reader", reader, "--log", str(log_dir)]),
                                            check=True, capture_output=True, text=True).stdout)
            print(f"{reader:>18}: peak resident set +{got['peak_growth_kib'] / 1024:6.1f} MiB, "
                  f"{got['cpu_s']:.3f} CPU s")
        back = log_dir.stat().st_mtime_ns - 10 * 10**9
        os.utime(log_dir, ns=(back, back))
        none, many = _syscalls(args.code, str(log_dir), 0), _syscalls(args.code, str(log_dir), args.polls)
        per_poll = {name: (many.get(name, 0) - none.get(name, 0)) / args.polls for name in many}
        shown = {name: round(n, 2) for name, n in sorted(per_poll.items()) if n >= 0.01}
        print(f"idle read-only poll: {sum(per_poll.values()):.2f} system calls: {shown}")


if __name__ == "__main__":
    main()
