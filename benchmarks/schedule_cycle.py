"""One full scheduling cycle over 1,000 ClusterQueue heads (the shape of Kueue's large-scale perf test).

1,000 ClusterQueues in 10 cohorts (nominal 20 cpu, borrowingLimit 100), 50 pending workloads each (50,000),
priorities and sizes as in Kueue's large-scale generator. Each measured cycle runs on the same projected state
(the cycle is pure, so nothing needs resetting); admissions/s = admissions in a cycle / cycle time. One cycle
runs before the measured ones: it compiles the ClusterQueues and builds the quota tree, which the projection
then keeps across cycles (rebuilt only when a spec changes). Wall and CPU (process) times are both reported:
on a shared machine the CPU time is the steadier figure.

    python benchmarks/schedule_cycle.py [--cqs 1000] [--per-cq 50] [--repeat 31] [--freeze]
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import time

import msgspec

from events import objects as o
from events import schema as ev
from kueue_es.scheduler import DEFAULT, SchedulerConfig
from kueue_es.scheduler.config import load_config
from kueue_es.scheduler.cycle import run_cycle
from projections.cluster import ClusterState

T0 = 1_704_067_200_000
CLASSES = [("small", 1, 50, 35), ("medium", 5, 100, 11), ("large", 20, 200, 4)]


def build(cqs: int, per_cq: int, cohorts: int = 10) -> ClusterState:
    state = ClusterState()
    n = 0

    def put(obj: dict, t: int = T0) -> None:
        nonlocal n
        o_ = msgspec.convert(obj, o.KueueObject)
        state.apply(ev.Record(n, ev.ObjectUpserted(time=t, key=o_.key, obj=o_)))
        n += 1

    put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}})
    put({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}})
    for i in range(cqs):
        put({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": f"cq-{i}"},
             "spec": {"cohortName": f"cohort-{i % cohorts}", "namespaceSelector": {},
                      "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
                      "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [
                          {"name": "cpu", "nominalQuota": 20, "borrowingLimit": 100}]}]}]}})
        put({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
             "metadata": {"name": f"lq-{i}", "namespace": "ns"}, "spec": {"clusterQueue": f"cq-{i}"}})
    shares = [c[3] for c in CLASSES]
    for i in range(cqs):
        for j in range(per_cq):
            cls = CLASSES[j % len(CLASSES)] if per_cq < sum(shares) else CLASSES[_class_of(j, shares)]
            put({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
                 "metadata": {"name": f"w-{i}-{j}", "namespace": "ns", "uid": f"u-{i}-{j}",
                              "creationTimestamp": "2024-01-01T00:00:00Z"},
                 "spec": {"queueName": f"lq-{i}", "priority": cls[2], "podSets": [{"name": "main", "count": 1,
                          "template": {"spec": {"containers": [{"name": "c", "resources": {
                              "requests": {"cpu": str(cls[1])}}}]}}}]}})
    return state


def _class_of(j: int, shares: list[int]) -> int:
    j %= sum(shares)
    for k, s in enumerate(shares):
        if j < s:
            return k
        j -= s
    return 0


def _pct(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(round(q * (len(sorted_values) - 1))))]


def measure(state: ClusterState, repeat: int, config: SchedulerConfig = DEFAULT) -> dict:
    """Run ``repeat`` cycles on ``state``; wall and CPU times in ms (sorted), admissions per cycle."""
    walls, cpus, admitted = [], [], 0
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        out = run_cycle(state, config, T0, 1)
        cpus.append((time.process_time() - c) * 1000)
        walls.append((time.perf_counter() - t) * 1000)
        admitted = sum(isinstance(e, ev.QuotaReserved) for e in out)
    walls.sort()
    cpus.sort()
    return {"wall": walls, "cpu": cpus, "admitted": admitted}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cqs", type=int, default=1000)
    ap.add_argument("--per-cq", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=31)
    ap.add_argument("--fair-sharing", action="store_true", help="with Fair Sharing on (config fairSharing with the two-step preemption strategies)")
    ap.add_argument("--freeze", action="store_true",
                    help="gc.freeze() after building the state, as a long-running service may do after loading: "
                         "the loaded heap is then left out of generation-2 collections")
    args = ap.parse_args()
    t = time.perf_counter()
    state = build(args.cqs, args.per_cq)
    print(f"state: {args.cqs} ClusterQueues, {len(state.workloads)} pending workloads "
          f"(built in {time.perf_counter() - t:.1f}s)")
    config = load_config({"fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}}) if args.fair_sharing else DEFAULT
    run_cycle(state, config, T0, 1)  # warm the compiled ClusterQueues and the quota tree (built once per spec)
    if args.freeze:
        gc.collect()
        gc.freeze()
    r = measure(state, args.repeat, config)
    wall, cpu, admitted = r["wall"], r["cpu"], r["admitted"]
    med = statistics.median(wall)
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}" + (", gc frozen after load" if args.freeze else "")
          + (", Fair Sharing on" if args.fair_sharing else ""))
    print(f"full cycle over {args.cqs} heads ({len(wall)} cycles): wall median {med:.1f} ms, p99 {_pct(wall, 0.99):.1f} ms; "
          f"CPU median {statistics.median(cpu):.1f} ms, p99 {_pct(cpu, 0.99):.1f} ms")
    print(f"{admitted} admissions per cycle -> {admitted / med * 1000:,.0f} admissions/s (wall median)")


if __name__ == "__main__":
    main()
