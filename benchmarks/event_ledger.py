"""Cost of the Event ledger in the connector's mirror fold (connectors/k8s/decision_events.py).

The connector's :class:`connectors.k8s.mirror.Mirror` folds every record — at start-up the whole log, then each
batch as it is appended. The ledger adds, per decision that records Events, what those Events need of the
workload, and per ``DecisionApplied`` its move to ``ready``. Measured: the CPU time of folding the replay
benchmark's generated log (``benchmarks/replay.py``: ~22% decisions), with a ``DecisionApplied`` after each
decision batch as the status writer appends them, into a Mirror with the ledger and into one whose ledger does
nothing; runs interleaved, one CPU, medians.

    python benchmarks/event_ledger.py --events 200000 --runs 3
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import replay  # noqa: E402 - the generated log of the replay benchmark

from connectors.k8s.mirror import Mirror  # noqa: E402
from events import schema as ev  # noqa: E402
from events.filelog import FileLog  # noqa: E402


def batches_with_outcomes(path: Path) -> list[list[ev.Record]]:
    """The log's batches, each decision batch followed by one batch of its ``DecisionApplied``s."""
    out: list[list[ev.Record]] = []
    offset = 0
    for batch in FileLog.open(path, readonly=True).scan():
        records = [ev.Record(offset + i, r.event) for i, r in enumerate(batch)]
        offset += len(records)
        out.append(records)
        decided = [r for r in records if isinstance(r.event, ev.Decision)]
        if decided:
            out.append([ev.Record(offset + i, ev.DecisionApplied(time=r.event.time + 5, key=r.event.key,
                                                                 decision=r.offset))
                        for i, r in enumerate(decided)])
            offset += len(decided)
    return out


def fold(batches: list[list[ev.Record]], ledger: bool) -> tuple[float, int]:
    mirror = Mirror()
    if not ledger:
        mirror.kube_events.fold = lambda *_: None  # type: ignore[method-assign]
    gc.collect()
    start = time.process_time()
    for b in batches:
        mirror.apply_batch(b)
    return time.process_time() - start, len(mirror.kube_events.ready)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "log"
        replay.generate(path, args.events)
        batches = batches_with_outcomes(path)
    records = sum(len(b) for b in batches)
    without, with_ledger = [], []
    ready = 0
    for _ in range(args.runs):
        without.append(fold(batches, False)[0])
        cpu, ready = fold(batches, True)
        with_ledger.append(cpu)
    a, b = statistics.median(without), statistics.median(with_ledger)
    print(json.dumps({
        "records": records, "decisions_ready": ready,
        "without_ledger_cpu_s": round(a, 3), "with_ledger_cpu_s": round(b, 3), "ratio": round(b / a, 3),
        "records_per_cpu_s_without": round(records / a), "records_per_cpu_s_with": round(records / b),
        "runs": {"without": [round(x, 3) for x in without], "with": [round(x, 3) for x in with_ledger]},
        "load_average": os.getloadavg()[0],
    }, indent=1))


if __name__ == "__main__":
    main()
