"""One full scheduling cycle over 1,000 ClusterQueue heads (the shape of Kueue's large-scale perf test).

1,000 ClusterQueues in 10 cohorts (nominal 20 cpu, borrowingLimit 100), 50 pending workloads each (50,000),
priorities and sizes as in Kueue's large-scale generator. Each measured cycle runs on the same projected state
(the cycle is pure, so nothing needs resetting); admissions/s = admissions in a cycle / cycle time.

    python benchmarks/schedule_cycle.py [--cqs 1000] [--per-cq 50] [--repeat 15]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import msgspec

from events import objects as o
from events import schema as ev
from kueue_es.scheduler import DEFAULT
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cqs", type=int, default=1000)
    ap.add_argument("--per-cq", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    t = time.perf_counter()
    state = build(args.cqs, args.per_cq)
    print(f"state: {args.cqs} ClusterQueues, {len(state.workloads)} pending workloads "
          f"(built in {time.perf_counter() - t:.1f}s)")
    times, admitted = [], 0
    for _ in range(args.repeat):
        t = time.perf_counter()
        out = run_cycle(state, DEFAULT, T0, 1)
        times.append(time.perf_counter() - t)
        admitted = sum(isinstance(e, ev.QuotaReserved) for e in out)
    times.sort()
    med = statistics.median(times)
    p99 = times[min(len(times) - 1, int(round(0.99 * (len(times) - 1))))]
    print(f"python {platform.python_version()} on {platform.machine()}")
    print(f"full cycle over {args.cqs} heads: median {med * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms "
          f"({len(times)} cycles); {admitted} admissions per cycle -> {admitted / med:,.0f} admissions/s")


if __name__ == "__main__":
    main()
