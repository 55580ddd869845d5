"""Topology-aware placement, one workload after another (the shape of Kueue's TAS performance test).

Topology: block / rack / hostname levels. The default shape is Kueue's: 1 block x 10 racks x 64 nodes (640 nodes,
96 cpu, 256Gi and 110 pods each); ``--large`` is 8 blocks x 16 racks x 64 nodes (8,192 nodes). The nodes, the
Topology and the TAS ResourceFlavor are folded into a ClusterState; the TAS snapshot is taken from it once, and
then a stream of workloads is placed against it one after another, each placement charged into the snapshot, so
usage grows as in a scheduling run (the cluster is about 90% full at the end of the default stream). The stream
follows Kueue's generator: per 500 workloads, 350 small (2 pods x 500m), 100 medium (4 x 1250m) and 50 large
(8 x 2500m) — a third each with a required rack, a preferred rack, and a balanced rack request (a preferred rack
placed with Kueue's alpha TASBalancedPlacement on, as Kueue's generator runs it) — in a seeded random order. Only
``place`` is timed, per workload, in wall-clock and in CPU (process) time: on a shared machine the CPU time is the
steadier figure.

    python benchmarks/tas.py [--large] [--workloads 15000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import time
from collections import Counter

from events import objects as o
from kueue_es.scheduler.tas import NoPlacement, PodSetRequest, TASOptions, place
from kueue_es.statefile import ObjectFolder
from projections.cluster import ClusterState
from projections.topology import tas_snapshots

BLOCK, RACK, HOST = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack", "kubernetes.io/hostname"
T0 = 1_704_067_200_000
CLASSES = [("small", 2, 500, 350), ("medium", 4, 1250, 100), ("large", 8, 2500, 50)]
"""(name, pods, cpu milli per pod, workloads per 500 of the stream)."""
BALANCED = TASOptions(balanced=True)
GREEDY = TASOptions()


def build(blocks: int, racks: int, nodes: int) -> ClusterState:
    folder = ObjectFolder(T0)
    state, put = folder.state, folder.put

    put({"kind": "Topology", "metadata": {"name": "default-topology"},
         "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOST}]}})
    put({"kind": "ResourceFlavor", "metadata": {"name": "tas-flavor"},
         "spec": {"nodeLabels": {"tas-node-group": "tas"}, "topologyName": "default-topology"}})
    for b in range(blocks):
        for r in range(racks):
            for i in range(nodes):
                name = f"b{b}-r{r}-n{i}"
                put({"kind": "Node", "metadata": {"name": name, "labels": {
                    BLOCK: f"b{b}", RACK: f"b{b}-r{r}", HOST: name, "tas-node-group": "tas"}},
                    "status": {"allocatable": {"cpu": "96", "memory": "256Gi", "pods": "110"},
                               "conditions": [{"type": "Ready", "status": "True"}]}})
    return state


def stream(count: int, seed: int = 0) -> list[tuple[str, PodSetRequest]]:
    kinds = {
        "required": o.PodSetTopologyRequest(required=RACK),
        "preferred": o.PodSetTopologyRequest(preferred=RACK),
        "balanced": o.PodSetTopologyRequest(preferred=RACK),
    }
    out: list[tuple[str, PodSetRequest]] = []
    per_round = sum(c[3] for c in CLASSES)
    rounds = -(-count // per_round)
    for _ in range(rounds):
        for name, pods, cpu, share in CLASSES:
            for j in range(share):
                kind = list(kinds)[j % 3]
                out.append((f"{name}-{kind}", PodSetRequest(
                    name="main", count=pods, requests=(("cpu", cpu),), topology=kinds[kind])))
    random.Random(seed).shuffle(out)
    return out[:count]


def run(state: ClusterState, workloads: list[tuple[str, PodSetRequest]]) -> dict:
    snaps = tas_snapshots(state)
    snap = snaps["tas-flavor"]
    times: list[float] = []
    cpus: list[float] = []
    by_class: dict[str, list[float]] = {}
    outcome: Counter[str] = Counter()
    for cls, req in workloads:
        t, c = time.perf_counter(), time.process_time()
        res = place(snap, req, options=BALANCED if cls.endswith("-balanced") else GREEDY)
        cpu = (time.process_time() - c) * 1000
        dt = (time.perf_counter() - t) * 1000
        times.append(dt)
        cpus.append(cpu)
        by_class.setdefault(cls.split("-", 1)[1], []).append(cpu)
        if isinstance(res, NoPlacement):
            outcome["no fit"] += 1
            continue
        outcome["placed"] += 1
        snaps.charge("tas-flavor", res.domains, dict(req.requests))
    used = 1 - sum(snap.remaining["cpu"]) / sum(snap.free["cpu"])
    return {"times": sorted(times), "cpus": sorted(cpus), "by_kind": {k: sorted(v) for k, v in by_class.items()}, "outcome": outcome,
            "cpu_used": used}


def _pct(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(round(q * (len(sorted_values) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--large", action="store_true", help="8 blocks x 16 racks x 64 nodes instead of 1 x 10 x 64")
    ap.add_argument("--workloads", type=int, default=15000)
    ap.add_argument("--repeat", type=int, default=3, help="runs of the whole stream (fresh snapshot each)")
    args = ap.parse_args()
    blocks, racks = (8, 16) if args.large else (1, 10)
    t = time.perf_counter()
    state = build(blocks, racks, 64)
    built = time.perf_counter() - t
    t = time.perf_counter()
    tas_snapshots(state)
    cold = (time.perf_counter() - t) * 1000
    t = time.perf_counter()
    tas_snapshots(state)
    warm = (time.perf_counter() - t) * 1000
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"topology: {blocks} block(s) x {racks} racks x 64 nodes = {blocks * racks * 64} nodes "
          f"(fold {built:.1f}s); snapshot: first {cold:.1f} ms, memoised (a fork) {warm:.2f} ms")
    workloads = stream(args.workloads)
    walls: dict[str, list[float]] = {"median": [], "p99": []}
    cpus: dict[str, list[float]] = {"median": [], "p99": []}
    for i in range(args.repeat):
        r = run(state, workloads)
        for acc, vals in ((walls, r["times"]), (cpus, r["cpus"])):
            acc["median"].append(statistics.median(vals))
            acc["p99"].append(_pct(vals, 0.99))
        kinds = ", ".join(f"{k} {statistics.median(v):.3f}/{_pct(v, 0.99):.3f}" for k, v in sorted(r["by_kind"].items()))
        print(f"run {i + 1}: {len(r['times'])} workloads ({dict(r['outcome'])}, cpu {r['cpu_used']:.0%} used at the end): "
              f"wall median {walls['median'][-1]:.3f} ms, p99 {walls['p99'][-1]:.3f} ms; "
              f"CPU median {cpus['median'][-1]:.3f} ms, p99 {cpus['p99'][-1]:.3f} ms, max {r['cpus'][-1]:.2f} ms; "
              f"CPU median/p99 ms per request kind: {kinds}")
    print(f"placement per workload (medians over {args.repeat} runs): wall median {statistics.median(walls['median']):.3f} ms, "
          f"p99 {statistics.median(walls['p99']):.3f} ms; CPU median {statistics.median(cpus['median']):.3f} ms, "
          f"p99 {statistics.median(cpus['p99']):.3f} ms")


if __name__ == "__main__":
    main()
