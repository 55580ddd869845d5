"""Where a replay's fold spends its time, per event type, on a log written by ``benchmarks/replay.py``.

Each ``ClusterState.apply`` of the first ``--events`` records is timed on its own (``time.perf_counter``, no
profiler), and the time is summed per event type (per object kind for ``ObjectUpserted``). With ``--fold-only``
the script only folds, untimed: run it under callgrind to count the instructions a version of the code spends,
a figure the machine's load does not change (subtract a run with ``--events 1`` for start-up and opening the
log):

    python benchmarks/replay.py --events 200000 --runs 1 --log /tmp/replay-200k.klog --keep
    python benchmarks/fold_by_type.py /tmp/replay-200k.klog
    valgrind --tool=callgrind python benchmarks/fold_by_type.py /tmp/replay-200k.klog --events 40000 --fold-only
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from pathlib import Path

from events.filelog import FileLog
from projections.cluster import ClusterState


def kind(event: object) -> str:
    name = type(event).__name__
    obj = getattr(event, "obj", None)
    return f"{name}:{type(obj).__name__}" if obj is not None else name


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("log", type=Path, help="a log directory (benchmarks/replay.py --log DIR --keep)")
    p.add_argument("--events", type=int, default=0, help="fold only the first N records (default: all)")
    p.add_argument("--fold-only", action="store_true", help="fold without timing (for callgrind)")
    args = p.parse_args()
    log = FileLog.open(args.log, readonly=True)
    apply = ClusterState().apply
    clock = time.perf_counter
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    n = 0
    for batch in log.scan(lazy=True):
        for record in batch:
            if args.fold_only:
                apply(record)
            else:
                t = clock()
                apply(record)
                spent = clock() - t
                row = totals[kind(record.event)]
                row[0] += 1
                row[1] += spent
        n += len(batch)
        if args.events and n >= args.events:
            break
    print(f"{n:,} records folded")
    total = sum(t for _, t in totals.values())
    for name, (count, spent) in sorted(totals.items(), key=lambda kv: -kv[1][1]):
        print(f"{name:45s} {int(count):9,} events {spent / count * 1e6:7.1f} µs each {100 * spent / total:5.1f}% of the fold")


if __name__ == "__main__":
    main()
