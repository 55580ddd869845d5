"""Replay throughput (decode + fold on one core) and memory per pending workload.

Generates a log shaped like a busy cluster — 100 ClusterQueues in 10 cohorts over 3 flavors, 100 LocalQueues
in 10 namespaces, then workloads created, sometimes found pending, reserved, admitted, finished and deleted,
each step followed by the watcher's upsert of the changed Workload (upserts dominate) — written in batches the
way a watcher and a scheduler append them. Then, in fresh processes pinned to one CPU, times
``FileLog.scan(lazy=True)`` batches folded by ``ClusterState.apply`` (what ``kueue-es replay`` does) and
reports events/s and peak RSS, and times decoding alone, lazily and in full; and measures the bytes a pending
workload costs in the projected state (tracemalloc, and RSS as a cross-check).

    python benchmarks/replay.py                      # 1,000,000 events, 3 runs
    python benchmarks/replay.py --events 100000 --runs 1 --pending 10000
    python benchmarks/replay.py --log /tmp/replay.klog --keep   # reuse the generated log next time
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import anyio
import msgspec

from events import objects as o
from events import schema as ev
from events.codec import decode_batch, encode_batch
from events.filelog import FileLog
from events.timefmt import format_time
from projections.cluster import ClusterState

T0 = 1_714_550_400_000  # 2024-05-01T08:00:00Z
FLAVORS = ("on-demand", "spot", "reserved")
N_CQ, N_COHORTS, N_NS = 100, 10, 10
SHAPES = [  # (cpu per pod, memory per pod, pods, priority class)
    ("500m", "1Gi", 1, "low"), ("1", "2Gi", 1, "low"), ("2", "4Gi", 2, "normal"), ("4", "16Gi", 4, "normal"),
    ("8", "32Gi", 8, "high"), ("250m", "512Mi", 1, "low"), ("1", "4Gi", 16, "normal"),
]
PENDING_MESSAGE = "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor {}, {} more needed"


# --- the cluster ---------------------------------------------------------------------------------------------


def _meta(name: str, ns: str = "", **kw: object) -> o.ObjectMeta:
    return o.ObjectMeta(name=name, namespace=ns, **kw)  # type: ignore[arg-type]


def cluster_objects() -> list[o.KObject]:
    objs: list[o.KObject] = [o.Namespace(api_version="v1", metadata=_meta(f"team-{i}", labels={"team": str(i)}))
                             for i in range(N_NS)]
    objs += [o.ResourceFlavor(metadata=_meta(f), spec=o.ResourceFlavorSpec(node_labels={"pool": f}))
             for f in FLAVORS]
    objs += [o.WorkloadPriorityClass(metadata=_meta(n), value=v) for n, v in (("low", 10), ("normal", 100),
                                                                               ("high", 1000))]
    for i in range(N_CQ):
        flavors = [o.FlavorQuotas(name=f, resources=[o.ResourceQuota(name="cpu", nominal_quota=64 + 16 * k),
                                                     o.ResourceQuota(name="memory", nominal_quota=f"{256 + 64 * k}Gi")])
                   for k, f in enumerate(FLAVORS)]
        objs.append(o.ClusterQueue(metadata=_meta(f"cq-{i}"), spec=o.ClusterQueueSpec(
            cohort_name=f"cohort-{i % N_COHORTS}", namespace_selector=o.LabelSelector(),
            resource_groups=[o.ResourceGroup(covered_resources=["cpu", "memory"], flavors=flavors)],
            preemption=o.ClusterQueuePreemption(reclaim_within_cohort="Any", within_cluster_queue="LowerPriority"))))
        objs.append(o.LocalQueue(metadata=_meta(f"lq-{i}", f"team-{i % N_NS}"),
                                 spec=o.LocalQueueSpec(cluster_queue=f"cq-{i}")))
    return objs


def upserted(obj: o.KObject, time_ms: int) -> ev.ObjectUpserted:
    m = obj.metadata
    return ev.ObjectUpserted(time=time_ms, key=obj.key, uid=m.uid, resource_version=m.resource_version,
                             obj=obj)  # type: ignore[arg-type]


def new_workload(i: int, time_ms: int, shape: int, cq: int) -> o.Workload:
    cpu, mem, pods, pclass = SHAPES[shape]
    pod = o.PodSpec(containers=[o.Container(name="main", resources=o.ResourceRequirements(
        requests={"cpu": cpu, "memory": mem}))])
    return o.Workload(
        api_version="kueue.x-k8s.io/v1beta2",
        metadata=_meta(f"job-{i}-abcde", f"team-{cq % N_NS}", uid=f"6c1f0000-0000-4000-8000-{i:012d}",
                       resource_version=str(1000 + i * 10), generation=1, creation_timestamp=format_time(time_ms),
                       labels={"kueue.x-k8s.io/queue-name": f"lq-{cq}"},
                       owner_references=[o.OwnerReference(api_version="batch/v1", kind="Job", name=f"job-{i}",
                                                          uid=f"0b0b0000-0000-4000-8000-{i:012d}", controller=True)]),
        spec=o.WorkloadSpec(
            queue_name=f"lq-{cq}",
            priority_class_ref=o.PriorityClassRef(group="kueue.x-k8s.io", kind="WorkloadPriorityClass", name=pclass),
            priority={"low": 10, "normal": 100, "high": 1000}[pclass],
            pod_sets=[o.PodSet(name="main", count=pods, template=o.PodTemplateSpec(spec=pod))],
        ),
    )


def _cond(type_: str, status: str, reason: str, message: str, time_ms: int) -> o.Condition:
    return o.Condition(type=type_, status=status, reason=reason, message=message,
                       last_transition_time=format_time(time_ms))


class _Flight:
    __slots__ = ("admission", "conditions", "cq", "i", "obj", "rv", "stage")

    def __init__(self, i: int, obj: o.Workload, cq: int) -> None:
        self.i, self.obj, self.cq = i, obj, cq
        self.stage, self.rv = 0, 0
        self.conditions: list[o.Condition] = []
        self.admission: o.Admission | None = None


def generate(path: Path, n_events: int, seed: int = 1, outcomes: bool = False) -> int:
    """Write about ``n_events`` events to a new log at ``path``; return the exact number written. ``outcomes``: as
    ``run --kube`` writes it, each decision's ``DecisionApplied`` before the watcher's upsert it caused."""
    rng = random.Random(seed)
    log = FileLog.open(path, fsync="never")
    written = 0
    now = T0
    cycle = 0

    def append(batch: list[ev.AnyEvent]) -> None:
        nonlocal written
        if batch:
            anyio.run(log.append, batch)
            written += len(batch)

    append([upserted(obj, now) for obj in cluster_objects()])
    inflight: dict[int, _Flight] = {}
    next_id = 0
    target_inflight = 4000
    watcher: list[ev.AnyEvent] = []
    while written + len(watcher) < n_events:
        now += rng.randint(1, 40)
        # new workloads arrive
        for _ in range(rng.choice((0, 1, 1, 2, 3)) if len(inflight) < target_inflight else rng.choice((0, 0, 1))):
            cq = rng.randrange(N_CQ)
            w = new_workload(next_id, now, rng.randrange(len(SHAPES)), cq)
            inflight[next_id] = _Flight(next_id, w, cq)
            watcher.append(upserted(w, now))
            next_id += 1
        # one scheduler cycle: a few decisions, appended as one batch
        cycle += 1
        decisions: list[ev.AnyEvent] = []
        changed: list[_Flight] = []
        candidates = rng.sample(sorted(inflight), min(len(inflight), rng.randint(1, 12)))
        for i in candidates:
            f = inflight[i]
            key = f.obj.key
            d = {"time": now, "cycle": cycle, "input": written - 1, "key": key}
            if f.stage == 0:  # pending: either a failed attempt or a reservation
                if rng.random() < 0.3:
                    flavor = FLAVORS[rng.randrange(3)]
                    msg = PENDING_MESSAGE.format(flavor, rng.choice(("1", "2", "500m", "4")))
                    decisions.append(ev.WorkloadPending(reason="Pending", message=msg, **d))
                    f.conditions = [_cond("QuotaReserved", "False", "Pending", msg, now)]
                else:
                    ps = f.obj.spec.pod_sets[0]
                    req = ps.template.spec.containers[0].resources.requests
                    flavor = FLAVORS[rng.randrange(3)]
                    f.admission = o.Admission(cluster_queue=f"cq-{f.cq}", pod_set_assignments=[o.PodSetAssignment(
                        name="main", flavors={"cpu": flavor, "memory": flavor}, count=ps.count,
                        resource_usage={"cpu": _times(req["cpu"], ps.count), "memory": _times(req["memory"], ps.count)})])
                    decisions.append(ev.QuotaReserved(admission=f.admission, **d))
                    f.conditions = [_cond("QuotaReserved", "True", "QuotaReserved",
                                          f"Quota reserved in ClusterQueue cq-{f.cq}", now)]
                    f.stage = 1
            elif f.stage == 1:
                decisions.append(ev.WorkloadAdmitted(**d))
                f.conditions = f.conditions + [_cond("Admitted", "True", "Admitted", "The workload is admitted", now)]
                f.stage = 2
            elif f.stage == 2:
                if rng.random() < 0.5:
                    continue  # still running
                watcher.append(ev.WorkloadFinished(time=now, key=key, reason="Succeeded", message="Job finished"))
                f.conditions = f.conditions + [_cond("Finished", "True", "Succeeded", "Job finished", now)]
                f.stage = 3
            else:
                watcher.append(ev.ObjectDeleted(time=now, key=key, kind="Workload", uid=f.obj.metadata.uid))
                del inflight[i]
                continue
            changed.append(f)
        append(decisions)
        if outcomes:
            watcher += [ev.DecisionApplied(time=now, key=d.key, decision=written - len(decisions) + n)
                        for n, d in enumerate(decisions)]
        # the watcher sees the status changes the decisions caused, and everything else since its last batch
        for f in changed:
            f.rv += 1
            m = msgspec.structs.replace(f.obj.metadata, resource_version=f"{f.obj.metadata.resource_version}-{f.rv}")
            status = o.WorkloadStatus(conditions=f.conditions, admission=f.admission if f.stage in (1, 2, 3) else None)
            watcher.append(upserted(msgspec.structs.replace(f.obj, metadata=m, status=status), now))
        if len(watcher) >= rng.randint(1, 60):
            append(watcher[: max(0, n_events - written)])
            watcher = []
    append(watcher[: max(0, n_events - written)])
    log.close_sync()
    return written


def _times(q: str, n: int) -> str:
    if q.endswith("m"):
        return f"{int(q[:-1]) * n}m"
    for suffix in ("Gi", "Mi"):
        if q.endswith(suffix):
            return f"{int(q[:-2]) * n}{suffix}"
    return str(int(q) * n)


# --- measurements (each in a fresh process) ----------------------------------------------------------------


def _pin() -> str:
    cpus = sorted(os.sched_getaffinity(0))
    cpu = cpus[-1]
    os.sched_setaffinity(0, {cpu})
    return str(cpu)


def measure_replay(path: Path) -> dict[str, float]:
    cpu = _pin()
    log = FileLog.open(path, readonly=True)
    gc.collect()
    state = ClusterState()
    apply = state.apply
    n = 0
    load = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), time.process_time()
    for batch in log.scan(lazy=True):
        for record in batch:
            apply(record)
        n += len(batch)
    elapsed, cpu_s = time.perf_counter() - t0, time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    del state
    gc.collect()
    c0 = time.process_time()
    decoded = sum(len(b) for b in log.scan(lazy=True))
    decode_cpu = time.process_time() - c0
    c0 = time.process_time()
    decoded_full = sum(len(b) for b in log.scan())
    decode_full_cpu = time.process_time() - c0
    assert decoded == decoded_full == n
    return {
        "events": n, "seconds": elapsed, "cpu_seconds": cpu_s,
        "events_per_s": n / elapsed, "events_per_cpu_s": n / cpu_s, "decode_only_per_cpu_s": n / decode_cpu,
        "full_decode_only_per_cpu_s": n / decode_full_cpu,
        "peak_rss_mib": peak, "cpu": cpu, "load_average": load,
    }


def measure_pending(n: int) -> dict[str, float]:
    """Bytes of projected state per pending workload: fold N workload creations into a state that has the
    cluster already, and compare traced memory (and RSS) before and after. The events go through the log's
    codec and are decoded lazily, as a replay decodes them, so the decoders' memos are counted too."""
    _pin()
    rng = random.Random(7)
    state = ClusterState()
    offset = 0
    for obj in cluster_objects():
        state.apply(ev.Record(offset, upserted(obj, T0)))
        offset += 1

    def events(k: int):
        for i in range(k):
            t = T0 + i * 100
            cq = rng.randrange(N_CQ)
            e = upserted(new_workload(i, t, rng.randrange(len(SHAPES)), cq), t)
            yield from decode_batch(encode_batch([e]), offset + i, lazy=True)

    # warm the interning and parse caches with workloads that are then deleted, so the measure is per workload
    for r in events(200):
        state.apply(r)
    for key in sorted(state.workloads):
        state.apply(ev.Record(offset, ev.ObjectDeleted(time=T0, key=key, kind="Workload")))
    gc.collect()
    rss0 = _rss_bytes()
    tracemalloc.start()
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    for r in events(n):
        state.apply(r)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    pending = sum(1 for w in state.workloads.values() if w.phase == "Pending")
    assert pending == n, (pending, n)
    queued = sum(len(q) for q in state.queues.values())
    assert queued == n, (queued, n)
    # RSS cross-check without tracemalloc's own overhead, in the same process on a second state
    state2 = ClusterState()
    for obj_off, obj in enumerate(cluster_objects()):
        state2.apply(ev.Record(obj_off, upserted(obj, T0)))
    gc.collect()
    rss1 = _rss_bytes()
    for r in events(n):
        state2.apply(r)
    gc.collect()
    rss2 = _rss_bytes()
    return {"pending": n, "traced_bytes_per_pending": (after - before) / n,
            "rss_bytes_per_pending": (rss2 - rss1) / n, "rss_before_mib": rss0 / 2**20}


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _child(args: list[str]) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"measurement failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def machine() -> dict[str, str]:
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"nproc": str(os.cpu_count()), "cpu": model, "python": platform.python_version(),
            "msgspec": msgspec.__version__}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=1_000_000, help="events in the generated log (default 1,000,000)")
    p.add_argument("--runs", type=int, default=3, help="timed replays, each in a fresh process (default 3)")
    p.add_argument("--pending", type=int, default=50_000, help="pending workloads for the memory measure")
    p.add_argument("--log", type=Path, help="where to write the log (default: a temporary directory)")
    p.add_argument("--keep", action="store_true", help="keep the log, and reuse it if it already exists")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--outcomes", action="store_true",
                   help="a connector's log: each decision's DecisionApplied too (benchmarks/checkpoints.py --kube)")
    p.add_argument("--_replay", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--_pending", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args._replay:
        print(json.dumps(measure_replay(args._replay)))
        return
    if args._pending:
        print(json.dumps(measure_pending(args._pending)))
        return

    tmp = None
    path = args.log
    if path is None:
        tmp = tempfile.mkdtemp(prefix="kueue-es-replay-")
        path = Path(tmp) / "log"
    try:
        if args.keep and path.exists():
            n = anyio.run(FileLog.open(path, readonly=True).end_offset)
            print(f"reusing {path}: {n:,} events", file=sys.stderr)
        else:
            if path.exists():
                raise SystemExit(f"{path} exists; pass --keep to reuse it")
            t0 = time.perf_counter()
            n = generate(path, args.events, outcomes=args.outcomes)
            print(f"generated {n:,} events in {time.perf_counter() - t0:.1f}s at {path}", file=sys.stderr)
        size = sum(p.stat().st_size for p in path.glob("*.seg"))
        runs = []
        for i in range(args.runs):
            r = _child(["--_replay", str(path)])
            runs.append(r)
            print(f"run {i + 1}: {r['events_per_cpu_s']:,.0f} events per CPU-second ({r['cpu_seconds']:.2f} CPU-s), "
                  f"{r['events_per_s']:,.0f} events/s wall ({r['seconds']:.2f}s, load average {r['load_average']:.1f}), "
                  f"decode only {r['decode_only_per_cpu_s']:,.0f} events per CPU-second "
                  f"(in full: {r['full_decode_only_per_cpu_s']:,.0f}), "
                  f"peak RSS {r['peak_rss_mib']:.0f} MiB", file=sys.stderr)
        mem = _child(["--_pending", str(args.pending)])
        result = {
            "machine": machine(),
            "events": n,
            "log_bytes": size,
            "runs": runs,
            "median_events_per_cpu_s": statistics.median(r["events_per_cpu_s"] for r in runs),
            "median_events_per_s": statistics.median(r["events_per_s"] for r in runs),
            "median_decode_only_per_cpu_s": statistics.median(r["decode_only_per_cpu_s"] for r in runs),
            "median_full_decode_only_per_cpu_s": statistics.median(r["full_decode_only_per_cpu_s"] for r in runs),
            "median_peak_rss_mib": statistics.median(r["peak_rss_mib"] for r in runs),
            "pending": mem,
        }
        if args.json:
            print(json.dumps(result, indent=2))
        else:
            m = result["machine"]
            print(f"machine: {m['nproc']} CPUs, {m['cpu']}, Python {m['python']}, msgspec {m['msgspec']}")
            print(f"log: {n:,} events, {size / 2**20:.1f} MiB")
            print(f"replay (decode + fold, one core, median of {len(runs)}): "
                  f"{result['median_events_per_cpu_s']:,.0f} events per CPU-second, "
                  f"{result['median_events_per_s']:,.0f} events/s wall; decode only "
                  f"{result['median_decode_only_per_cpu_s']:,.0f} events per CPU-second "
                  f"(in full: {result['median_full_decode_only_per_cpu_s']:,.0f}); "
                  f"peak RSS {result['median_peak_rss_mib']:.0f} MiB")
            print(f"pending workloads: {mem['pending']:,}: {mem['traced_bytes_per_pending']:,.0f} bytes each "
                  f"(tracemalloc), {mem['rss_bytes_per_pending']:,.0f} bytes each (RSS delta)")
    finally:
        if tmp is not None and not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
