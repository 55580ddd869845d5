"""The Kafka end-to-end load (``kafka_e2e.py``), folded in one process without a broker: what deciding and folding
cost the scheduler at a steady state, and what a full collection of the cyclic GC costs once the state holds it.

Simulated time in ms: every ms ``--rate`` new workloads are folded (1 cpu each, spread over 100 ClusterQueues in 10
cohorts of 20 cpu), every ``--every-ms`` the scheduler decides ``--decides`` times (a Kafka transaction holds
about two batches) and its decisions are folded, and each workload finishes ``--runtime-ms`` after its
QuotaReserved. Reported: ``decide`` per call split into the controller rules (``reconcile``) and the scheduling
cycle, the fold per event type (medians, µs), their CPU totals, the objects the collector tracks at the end and a
full collection's time. The cyclic GC is off while it runs (its pauses would land in whatever is being timed).

    python benchmarks/decide_steady.py [--seconds 20] [--rate 1] [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections import defaultdict
from typing import Any

from kafka_e2e import cluster, workload_event  # the same objects as the end-to-end benchmark (this directory)

import kueue_es.scheduler as scheduler
from events import schema as ev
from kueue_es.scheduler import DEFAULT, decide
from projections.cluster import ClusterState

T0 = 1_700_000_000_000


def _median_us(values: list[float]) -> float:
    s = sorted(values)
    return round(s[len(s) // 2] * 1e6, 1) if s else 0.0


def run(seconds: int, rate: int, every_ms: int, decides: int, runtime_ms: int) -> dict[str, Any]:
    timings: dict[str, list[float]] = defaultdict(list)
    real_reconcile, real_cycle = scheduler.reconcile, scheduler.run_cycle

    def timed(name: str, fn: Any) -> Any:
        def wrapper(*args: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args, **kw)
            finally:
                timings[name].append(time.perf_counter() - t)
        return wrapper

    scheduler.reconcile, scheduler.run_cycle = timed("reconcile", real_reconcile), timed("cycle", real_cycle)
    state, folds = ClusterState(), defaultdict(list)

    def apply(e: ev.AnyEvent) -> None:
        t = time.perf_counter()
        state.apply(ev.Record(state.offset + 1, e))
        folds[type(e).__name__].append(time.perf_counter() - t)

    gc.collect()
    gc.disable()
    try:
        for e in cluster(100, 10, 20, T0):
            apply(e)
        finishing: list[tuple[int, str, str]] = []
        i = 0
        for ms in range(seconds * 1000):
            t = T0 + ms
            for _ in range(rate):
                apply(workload_event(i, 100, t))
                i += 1
            while finishing and finishing[0][0] <= t:
                _, key, uid = finishing.pop(0)
                apply(ev.WorkloadFinished(time=t, key=key, uid=uid, id=f"fin-{key}"))
            if ms % every_ms == 0:
                for _ in range(decides):
                    d0 = time.perf_counter()
                    batch = decide(state, DEFAULT)
                    timings["decide"].append(time.perf_counter() - d0)
                    for d in batch:
                        apply(d)
                        if isinstance(d, ev.QuotaReserved):
                            finishing.append((t + runtime_ms, d.key, d.uid))
    finally:
        scheduler.reconcile, scheduler.run_cycle = real_reconcile, real_cycle
        gc.enable()
    gc.collect()
    tracked = len(gc.get_objects())
    t = time.perf_counter()
    gc.collect()
    full_gc_ms = (time.perf_counter() - t) * 1000
    return {
        "workloads": i, "events": state.offset + 1,
        "holdingQuota": sum(len(v) for v in state.reserving.values()),
        "decideUs": {k: {"p50": _median_us(v), "calls": len(v), "totalS": round(sum(v), 3)} for k, v in timings.items()},
        "foldUs": {k: {"p50": _median_us(v), "events": len(v), "totalS": round(sum(v), 3)}
                   for k, v in sorted(folds.items(), key=lambda kv: -sum(kv[1]))},
        "gcTrackedObjects": tracked, "fullCollectionMs": round(full_gc_ms, 1),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=int, default=20, help="simulated seconds")
    p.add_argument("--rate", type=int, default=1, help="new workloads per simulated ms")
    p.add_argument("--every-ms", type=int, default=20, help="simulated ms between transactions")
    p.add_argument("--decides", type=int, default=2, help="decide calls per transaction")
    p.add_argument("--runtime-ms", type=int, default=1000)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    out = run(args.seconds, args.rate, args.every_ms, args.decides, args.runtime_ms)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{out['workloads']:,} workloads, {out['events']:,} events, {out['holdingQuota']:,} holding quota at the end")
    for k, v in out["decideUs"].items():
        print(f"  {k:10s} p50 {v['p50']:9.1f} us  {v['calls']:,} calls  {v['totalS']} s")
    for k, v in out["foldUs"].items():
        print(f"  fold {k:22s} p50 {v['p50']:6.1f} us  {v['events']:,} events  {v['totalS']} s")
    print(f"GC: {out['gcTrackedObjects']:,} tracked objects; a full collection {out['fullCollectionMs']} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
