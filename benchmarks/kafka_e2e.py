"""End to end on Apache Kafka: ingest rate, decision rate, and observed-event → decision latency.

Three measurements against one broker (a temporary single-node KRaft broker started with
``scripts/kafka.sh`` unless ``--bootstrap`` names one):

1. **Ingest** — observed events appended through :class:`connectors.kafka.log.KafkaLog` (idempotent producer,
   acks=all) and acknowledged, as events/s: one event per append with many appends in flight (a watcher
   writing each change on its own), and batches of ``--batch`` events (a watcher batching a few ms of
   changes). Then the same log read back, decoded and folded into ``ClusterState`` (what a scheduler does to
   catch up), as events/s.
2. **End to end** — a ``kueue-es run --log kafka://...`` scheduler process, and a load generator offering
   ``--rate`` new workloads per second (each its own append, open loop: appends are not held back by the
   scheduler) for ``--seconds``; every workload runs ``--runtime-ms`` once admitted and is then finished by the
   generator (another observed event). Latency of a workload = time its first decision (QuotaReserved) was read
   back committed by a read_committed reader − time the append of its ``ObjectUpserted`` was acknowledged;
   the first ``--warmup`` seconds are left out (``latencySplitMs`` splits it at the CreateTime of the
   decision's record: acknowledged → produced by the scheduler, produced → read committed; wall clocks, ms),
   and a run of ``--broker-warmup`` seconds on another topic comes first (a freshly started broker's JIT is
   cold: its first ~20 s of transactions are 2-3x slower). The
   generator's cyclic GC is off while it offers (its pauses would delay its reader and its appends, not the
   scheduler). Decisions/s
   = decision events committed per second in the measured window. The scheduler reports its cycle timings
   (decide, transaction, fold, read-back) every quarter of the run; they are printed too, with the snapshots
   it took: it runs with the service's default snapshot cadence unless ``--snapshot-every-events`` says
   otherwise, so what snapshots cost a deployed scheduler is in the latencies. ``--profile FILE`` runs the
   measured scheduler under cProfile (its latencies are then not comparable). The CPU seconds the scheduler,
   the generator itself and the broker (when it listens on this machine) used while the load was offered are
   reported too: the three share the machine, and how much of it they use explains the latency's tail. So is
   the CPU steal over the same window (``stealPercent``: on a VM, the share of time the host gave the VM's CPUs
   to something else). To tell what the slowest workloads waited on, the broker's GC pauses (from the gc.log
   ``scripts/kafka.sh`` has the JVM write; ``--broker-logs``) and the scheduler's snapshots are laid over each
   workload's wait: ``tailOverlaps`` gives the share of the slowest 1% whose wait overlapped one, beside the
   share of all workloads (a cause of the tail shows as a much larger share among the slowest). The run's
   topics are deleted at the end unless ``--keep-topics``, so a long-running broker does not pile up every run's
   partitions.

    python benchmarks/kafka_e2e.py [--bootstrap HOST:PORT] [--rate 1000] [--seconds 20] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from connectors.kafka.log import KafkaLog, batch_records, is_control, reader_kwargs
from connectors.kafka.settings import KafkaSettings
from events import objects as o
from events import schema as ev
from projections.cluster import ClusterState

REPO = Path(__file__).resolve().parents[1]
KAFKA_SH = REPO / "scripts" / "kafka.sh"
NS = "bench"


# --- objects ---------------------------------------------------------------------------------------------------


def _meta(name: str, namespace: str = "", **kw: Any) -> o.ObjectMeta:
    return o.ObjectMeta(name=name, namespace=namespace, **kw)


def cluster(cqs: int, cohorts: int, quota_cpu: int, t: int) -> list[ev.AnyEvent]:
    objs: list[Any] = [o.Namespace(api_version="v1", metadata=_meta(NS)),
                       o.ResourceFlavor(metadata=_meta("default"))]
    objs += [o.Cohort(metadata=_meta(f"co-{i}")) for i in range(cohorts)]
    for i in range(cqs):
        group = o.ResourceGroup(covered_resources=["cpu"], flavors=[
            o.FlavorQuotas(name="default", resources=[o.ResourceQuota(name="cpu", nominal_quota=quota_cpu)])])
        objs.append(o.ClusterQueue(metadata=_meta(f"cq-{i}"), spec=o.ClusterQueueSpec(
            resource_groups=[group], cohort_name=f"co-{i % cohorts}", namespace_selector=o.LabelSelector())))
        objs.append(o.LocalQueue(metadata=_meta(f"lq-{i}", NS), spec=o.LocalQueueSpec(cluster_queue=f"cq-{i}")))
    return [ev.ObjectUpserted(time=t, key=obj.key, uid=obj.metadata.uid, obj=obj) for obj in objs]


def workload_event(i: int, cqs: int, t: int) -> ev.ObjectUpserted:
    pod = o.PodSpec(containers=[o.Container(name="main", resources=o.ResourceRequirements(requests={"cpu": "1"}))])
    wl = o.Workload(
        metadata=_meta(f"w-{i:07d}", NS, uid=f"uid-{i:07d}", labels={"app": "bench"}),
        spec=o.WorkloadSpec(pod_sets=[o.PodSet(name="main", count=1, template=o.PodTemplateSpec(spec=pod))],
                            queue_name=f"lq-{i % cqs}"),
    )
    return ev.ObjectUpserted(time=t, key=wl.key, uid=wl.metadata.uid, obj=wl, id=f"wl-{i}")


# --- broker ----------------------------------------------------------------------------------------------------


class Broker:
    """A temporary broker from scripts/kafka.sh (only when no --bootstrap is given)."""

    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.dir = Path(tempfile.mkdtemp(prefix="kueue-es-bench-kafka-"))
        env = {**os.environ, "KAFKA_WATCH_PID": str(os.getpid())}
        subprocess.run([str(KAFKA_SH), "install"], check=True, capture_output=True, env=env)
        out = subprocess.run([str(KAFKA_SH), "start", str(self.port), str(self.dir)], check=True,
                             capture_output=True, text=True, env=env).stdout.strip().splitlines()
        self.bootstrap = out[-1]

    def close(self) -> None:
        subprocess.run([str(KAFKA_SH), "stop", str(self.dir)], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)


def settings(bootstrap: str, topic: str) -> KafkaSettings:
    return KafkaSettings(bootstrap=bootstrap, topic=topic)


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


# --- 1. ingest -------------------------------------------------------------------------------------------------


async def ingest(bootstrap: str, events: int, batch: int, inflight: int, topic: str) -> dict[str, Any]:
    s = settings(bootstrap, topic)
    evs = [workload_event(i, 100, 1_700_000_000_000) for i in range(events)]
    log = await KafkaLog.open(s)
    batches = [evs[i:i + batch] for i in range(0, len(evs), batch)]

    async def appender(mine: list[list[ev.AnyEvent]]) -> None:  # one of ``inflight`` concurrent writers
        for b in mine:
            await log.append(b)

    try:
        await log.append([ev.ClockTicked(time=0)])  # connect, metadata, producer id: not measured
        t0 = time.perf_counter()
        await asyncio.gather(*(appender(batches[i::inflight]) for i in range(inflight)))
        secs = time.perf_counter() - t0
    finally:
        await log.close()
    return {"events": events, "batch": batch, "inflight": inflight, "seconds": round(secs, 3),
            "eventsPerSecond": round(events / secs)}


async def fold_rate(bootstrap: str, topic: str) -> dict[str, Any]:
    s = settings(bootstrap, topic)
    consumer = AIOKafkaConsumer(**reader_kwargs(s))
    tp = TopicPartition(topic, 0)
    state = ClusterState()
    n = 0
    await consumer.start()
    try:
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        consumer.seek(tp, 0)
        t0 = time.perf_counter()
        cpu0 = time.process_time()
        while await consumer.position(tp) < end:
            for rec in (await consumer.getmany(tp, timeout_ms=500)).get(tp, ()):
                if is_control(rec.headers):
                    continue
                for r in batch_records(rec.value, rec.offset, 0, None):
                    state.apply(r)
                    n += 1
        secs = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
    finally:
        await consumer.stop()
    return {"events": n, "seconds": round(secs, 3), "eventsPerSecond": round(n / secs),
            "eventsPerCpuSecond": round(n / cpu)}


# --- 2. end to end ---------------------------------------------------------------------------------------------


def listener_pid(port: int) -> int | None:
    """The process listening on TCP ``port`` on this machine (the broker, to report its CPU), if it can be seen."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                inodes.add(f"socket:[{f[9]}]")
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if any(os.readlink(fd) in inodes for fd in (proc / "fd").iterdir()):
                return int(proc.name)
        except OSError:
            continue
    return None


def cpu_ticks() -> tuple[int, int]:
    """(steal, all) ticks of the machine's CPUs so far: on a VM, the time the host ran something else."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return fields[7], sum(fields)


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


async def end_to_end(bootstrap: str, topic: str, rate: int, seconds: float, warmup: float, runtime_ms: int,
                     cqs: int, cohorts: int, quota_cpu: int, snapshot_every_events: int | None,
                     profile: str | None = None, dump: str | None = None,
                     broker_logs: Path | None = None) -> dict[str, Any]:
    s = settings(bootstrap, topic)
    broker_pid = listener_pid(int(bootstrap.rsplit(":", 1)[1]))
    log = await KafkaLog.open(s)
    now_ms = int(time.time() * 1000)
    await log.append(cluster(cqs, cohorts, quota_cpu, now_ms))
    env = {**os.environ, "KUEUE_ES_SCHEDULER_TICKS": "false",
           "KUEUE_ES_SCHEDULER_STATS_INTERVAL_S": str(max(1.0, seconds / 4))}
    if snapshot_every_events is not None:  # else the service's default cadence, as deployed
        env["KUEUE_ES_SCHEDULER_SNAPSHOT_EVERY_EVENTS"] = str(snapshot_every_events)
    profiler = ["-m", "cProfile", "-o", profile] if profile else []  # written when the scheduler exits (SIGTERM)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *profiler, "-m", "kueue_es", "run", "--log", f"kafka://{bootstrap}/{topic}", "--instance-id", "bench",
        cwd=REPO, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    assert proc.stdout is not None
    while True:  # wait until the scheduler is active
        line = await asyncio.wait_for(proc.stdout.readline(), 120)
        if not line:
            raise RuntimeError("the scheduler exited before becoming active")
        if json.loads(line).get("event") == "active":
            break
    stats: list[dict[str, Any]] = []
    snapshots: list[dict[str, Any]] = []

    async def scheduler_reports() -> None:
        assert proc.stdout is not None
        async for line in proc.stdout:
            rep = json.loads(line)
            if rep.get("event") == "stats":
                stats.append(rep)
            elif rep.get("event") == "snapshot":
                snapshots.append({k: rep[k] for k in ("offset", "bytes", "ms", "blockedMs", "startedWallMs")
                                  if k in rep})

    reports = asyncio.create_task(scheduler_reports())

    acked: dict[str, float] = {}
    decided: dict[str, float] = {}
    acked_wall: dict[str, float] = {}
    produced: dict[str, tuple[int, float]] = {}
    """key -> (CreateTime of the record holding its QuotaReserved, the wall time it was read): splits a latency
    into the part up to the scheduler's producing the decision and the part from there to reading it
    committed (transaction commit, read_committed fetch)."""
    decision_times: list[float] = []
    decision_batches: list[float] = []
    finishes: list[asyncio.Task[Any]] = []
    total = int(rate * seconds)
    done = asyncio.Event()

    async def finish_later(key: str, uid: str) -> None:
        await asyncio.sleep(runtime_ms / 1000)
        await log.append([ev.WorkloadFinished(time=int(time.time() * 1000), key=key, uid=uid, id=f"fin-{key}")])

    async def reader() -> None:
        consumer = AIOKafkaConsumer(**reader_kwargs(s))
        tp = TopicPartition(topic, 0)
        await consumer.start()
        try:
            consumer.assign([tp])
            consumer.seek(tp, 0)
            while not done.is_set():
                fetched = await consumer.getmany(tp, timeout_ms=100)
                t = time.perf_counter()
                wall = time.time() * 1000
                for rec in fetched.get(tp, ()):
                    if is_control(rec.headers):
                        continue
                    recs = batch_records(rec.value, rec.offset, 0, None)
                    if recs and isinstance(recs[0].event, ev.Decision):
                        decision_batches.append(t)
                    for r in recs:
                        e = r.event
                        if isinstance(e, ev.Decision):
                            decision_times.append(t)
                        if isinstance(e, ev.QuotaReserved) and e.key not in decided:
                            decided[e.key] = t
                            produced[e.key] = (rec.timestamp, wall)
                            finishes.append(asyncio.create_task(finish_later(e.key, e.uid)))
                if len(decided) >= total:
                    done.set()
        finally:
            await consumer.stop()

    async def offer(i: int) -> None:
        e = workload_event(i, cqs, int(time.time() * 1000))
        await log.append([e])
        acked[e.key] = time.perf_counter()
        acked_wall[e.key] = time.time() * 1000

    reading = asyncio.create_task(reader())
    # The generator's own collector must not stall its reader or its appends (a full collection of what a
    # run accumulates took 40-250 ms): what is alive now is frozen, and nothing is collected while offering.
    gc.collect()
    gc.freeze()
    gc.disable()
    cpu0 = cpu_seconds(proc.pid)
    steal0, ticks0 = cpu_ticks()
    own_cpu0 = time.process_time()
    broker_cpu0 = cpu_seconds(broker_pid) if broker_pid else float("nan")
    t0 = time.perf_counter()
    offers = []
    for i in range(total):
        delay = t0 + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        offers.append(asyncio.create_task(offer(i)))
    await asyncio.gather(*offers)
    offered_secs = time.perf_counter() - t0
    try:
        await asyncio.wait_for(done.wait(), 60)
    except TimeoutError:
        pass
    elapsed = time.perf_counter() - t0
    sched_cpu = cpu_seconds(proc.pid) - cpu0
    steal1, ticks1 = cpu_ticks()
    own_cpu = time.process_time() - own_cpu0
    broker_cpu = (cpu_seconds(broker_pid) if broker_pid else float("nan")) - broker_cpu0
    gc.enable()
    gc.unfreeze()
    done.set()
    await reading
    for f in finishes:
        f.cancel()
    proc.terminate()
    await proc.wait()
    await reports
    await log.close()

    t_from, t_to = t0 + warmup, t0 + seconds
    measured_keys = [k for k in acked if k in decided and t_from <= acked[k] <= t_to]
    stalls = {"brokerGcPause": broker_gc_pauses(broker_logs, min(acked_wall.values()), time.time() * 1000)
              if broker_logs else [],
              "schedulerSnapshot": [(r["startedWallMs"], r["startedWallMs"] + r["ms"]) for r in snapshots
                                    if "startedWallMs" in r]}
    lat = [(decided[k] - acked[k]) * 1000 for k in measured_keys]
    to_produce = [produced[k][0] - acked_wall[k] for k in measured_keys]
    to_read = [produced[k][1] - produced[k][0] for k in measured_keys]
    if dump:  # one line per measured workload: acknowledged, produced (CreateTime), read (wall ms)
        with open(dump, "w") as f:
            for k in measured_keys:
                f.write(f"{k} {acked_wall[k]:.1f} {produced[k][0]} {produced[k][1]:.1f}\n")
    window = [t for t in decision_times if t_from <= t <= t_to]
    batches = [t for t in decision_batches if t_from <= t <= t_to]
    measured = t_to - t_from
    return {
        "offeredWorkloadsPerSecond": rate, "achievedOfferRate": round(total / offered_secs),
        "workloads": total, "decided": len(decided), "measuredWorkloads": len(lat),
        "latencyMs": {"p50": round(pct(lat, 50), 1), "p90": round(pct(lat, 90), 1), "p99": round(pct(lat, 99), 1),
                      "max": round(max(lat), 1), "mean": round(statistics.fmean(lat), 1)} if lat else None,
        "latencySplitMs": {name: {"p50": round(pct(v, 50), 1), "p90": round(pct(v, 90), 1),
                                  "p99": round(pct(v, 99), 1)}
                           for name, v in (("ackedToProduced", to_produce), ("producedToRead", to_read))}
        if lat else None,
        "decisionsPerSecond": round(len(window) / measured), "decisionBatchesPerSecond": round(len(batches) / measured),
        "schedulerCpuSeconds": round(sched_cpu, 2), "generatorCpuSeconds": round(own_cpu, 2),
        "brokerCpuSeconds": None if broker_cpu != broker_cpu else round(broker_cpu, 2),
        "stealPercent": round(100 * (steal1 - steal0) / max(1, ticks1 - ticks0), 1),
        "elapsedSeconds": round(elapsed, 2),
        "brokerGcPauses": pause_summary(stalls["brokerGcPause"], acked_wall[measured_keys[0]],
                                        acked_wall[measured_keys[-1]]) if broker_logs and measured_keys else None,
        "tailOverlaps": tail_overlaps(measured_keys, lat, acked_wall, produced, stalls) if lat else None,
        "schedulerCycleStats": [{k: v for k, v in r.items() if k not in ("event", "shard", "instance")}
                                for r in stats],
        "schedulerSnapshots": snapshots,
    }


# --- what the slowest workloads waited on -----------------------------------------------------------------------


def broker_logs_dir(args: argparse.Namespace, bootstrap: str) -> Path | None:
    """Where the broker's gc.log is: --broker-logs, else scripts/kafka.sh's data dir for that port, if local."""
    if args.broker_logs:
        return Path(args.broker_logs)
    port = bootstrap.rsplit(":", 1)[1]
    cache = Path(os.environ.get("KUEUE_ES_CACHE", Path.home() / ".cache" / "kueue-es"))
    for d in (getattr(args, "broker_dir", None), cache / "kafka" / f"data-{port}"):
        if d is not None and (Path(d) / "logs" / "gc.log").exists():
            return Path(d) / "logs"
    return None


_GC_LINE = re.compile(r"^\[([^\]]+)\]\[[^\]]+\] GC\(\d+\) Pause .* (\d+\.\d+)ms$")


def broker_gc_pauses(logs: Path, since_ms: float, until_ms: float) -> list[tuple[float, float]]:
    """The broker JVM's stop-the-world pauses between two wall times, as (start, end) ms, from its gc.log
    (``-Xlog:gc`` with the ``time`` decorator: a line is written when its pause ends)."""
    pauses = []
    for f in sorted(logs.glob("gc.log*")):
        for line in f.read_text(errors="replace").splitlines():
            m = _GC_LINE.match(line)
            if not m:
                continue
            end = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp() * 1000
            if since_ms <= end <= until_ms:
                pauses.append((end - float(m.group(2)), end))
    return sorted(pauses)


def pause_summary(pauses: list[tuple[float, float]], since_ms: float, until_ms: float) -> dict[str, Any]:
    mine = [b - a for a, b in pauses if since_ms <= b <= until_ms]
    return {"count": len(mine), "totalMs": round(sum(mine), 1), "maxMs": round(max(mine, default=0.0), 1)}


def tail_overlaps(keys: list[str], lat: list[float], acked_wall: dict[str, float],
                  produced: dict[str, tuple[int, float]],
                  stalls: dict[str, list[tuple[float, float]]]) -> dict[str, Any]:
    """For the slowest 1% of the measured workloads and for all of them: the share whose wait (acknowledged →
    decision read) overlapped a broker GC pause, or a scheduler snapshot being encoded. A cause of the tail shows
    as a much higher share among the slowest than among all."""
    spans = [(acked_wall[k], produced[k][1]) for k in keys]
    order = sorted(range(len(keys)), key=lambda i: -lat[i])
    slowest = order[:max(1, len(order) // 100)]

    def share(idx: list[int], intervals: list[tuple[float, float]]) -> float:
        hit = sum(1 for i in idx if any(a < spans[i][1] and spans[i][0] < b for a, b in intervals))
        return round(100 * hit / len(idx), 1)

    every = list(range(len(keys)))
    return {name: {"slowestPercent": share(slowest, iv), "allPercent": share(every, iv)}
            for name, iv in stalls.items() if iv}


# --- main ------------------------------------------------------------------------------------------------------


async def run(args: argparse.Namespace, bootstrap: str) -> dict[str, Any]:
    tag = f"{os.getpid()}-{int(time.time())}"
    out: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                    "loadAverage": [round(x, 2) for x in os.getloadavg()]},
    }
    out["ingestSingle"] = await ingest(bootstrap, args.ingest_events, 1, args.inflight, f"bench-ingest1-{tag}")
    out["ingestBatched"] = await ingest(bootstrap, args.ingest_events, args.batch, 8, f"bench-ingestb-{tag}")
    out["foldFromKafka"] = await fold_rate(bootstrap, f"bench-ingestb-{tag}")
    if args.broker_warmup > 0:  # the broker's JIT warms up on the transactional paths; not measured
        warm = await end_to_end(bootstrap, f"bench-warm-{tag}", args.rate, args.broker_warmup, 0.0,
                                args.runtime_ms, args.cqs, args.cohorts, args.quota_cpu, args.snapshot_every_events)
        out["brokerWarmup"] = {"seconds": args.broker_warmup, "latencyMs": warm["latencyMs"]}
    out["endToEnd"] = await end_to_end(bootstrap, f"bench-e2e-{tag}", args.rate, args.seconds, args.warmup,
                                       args.runtime_ms, args.cqs, args.cohorts, args.quota_cpu,
                                       args.snapshot_every_events, args.profile, args.dump_latencies,
                                       broker_logs_dir(args, bootstrap))
    out["machine"]["loadAverageAfter"] = [round(x, 2) for x in os.getloadavg()]
    if not args.keep_topics:  # a long-running broker would keep every run's partitions
        await delete_topics(bootstrap, tag)
    return out


async def delete_topics(bootstrap: str, tag: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        mine = [t for t in await admin.list_topics() if t.startswith("bench-") and tag in t]
        if mine:
            await admin.delete_topics(mine)
    finally:
        await admin.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", help="an existing broker (default: start a temporary one)")
    p.add_argument("--ingest-events", type=int, default=200_000)
    p.add_argument("--batch", type=int, default=100, help="events per append in the batched ingest run")
    p.add_argument("--inflight", type=int, default=512, help="appends in flight in the single-event ingest run")
    p.add_argument("--rate", type=int, default=1000, help="workloads offered per second")
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--warmup", type=float, default=3.0, help="seconds at the start of the measured run left out")
    p.add_argument("--broker-warmup", type=float, default=20.0,
                   help="seconds of the same load on another topic first, not measured (JIT of a fresh broker)")
    p.add_argument("--runtime-ms", type=int, default=1000, help="how long an admitted workload runs")
    p.add_argument("--cqs", type=int, default=100)
    p.add_argument("--cohorts", type=int, default=10)
    p.add_argument("--quota-cpu", type=int, default=20, help="nominal cpu per ClusterQueue")
    p.add_argument("--snapshot-every-events", type=int, default=None,
                   help="the scheduler's snapshot cadence (default: the service's default, 50,000 events)")
    p.add_argument("--profile", metavar="FILE",
                   help="run the measured scheduler under cProfile and write its stats to FILE (slows it down)")
    p.add_argument("--dump-latencies", metavar="FILE",
                   help="write each measured workload's acknowledged, produced and read times (wall ms) to FILE")
    p.add_argument("--broker-logs", metavar="DIR",
                   help="the broker's log dir, for its gc.log (default: scripts/kafka.sh's for that port)")
    p.add_argument("--keep-topics", action="store_true", help="keep the run's topics (deleted by default)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    broker = None if args.bootstrap else Broker()
    args.broker_dir = broker.dir if broker is not None else None
    try:
        result = asyncio.run(run(args, args.bootstrap or broker.bootstrap))  # type: ignore[union-attr]
    finally:
        if broker is not None:
            broker.close()
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    m, e2e = result["machine"], result["endToEnd"]
    print(f"machine: {m['cpus']} CPUs, Python {m['python']}, load average {m['loadAverage']} -> "
          f"{m['loadAverageAfter']}")
    for name in ("ingestSingle", "ingestBatched"):
        r = result[name]
        print(f"ingest, {r['batch']} event(s) per append, {r['inflight']} in flight: {r['eventsPerSecond']:,} events/s "
              f"({r['events']:,} events in {r['seconds']} s)")
    f = result["foldFromKafka"]
    print(f"read + decode + fold from Kafka: {f['eventsPerSecond']:,} events/s ({f['eventsPerCpuSecond']:,} per CPU-s)")
    if "brokerWarmup" in result:
        print(f"broker warm-up run ({result['brokerWarmup']['seconds']} s, not measured): latency ms "
              f"{result['brokerWarmup']['latencyMs']}")
    print(f"end to end at {e2e['offeredWorkloadsPerSecond']} workloads/s offered ({e2e['achievedOfferRate']} achieved): "
          f"{e2e['decided']}/{e2e['workloads']} decided; latency ms {e2e['latencyMs']}; "
          f"{e2e['decisionsPerSecond']:,} decisions/s in {e2e['decisionBatchesPerSecond']} decision batches/s; "
          f"CPU seconds: scheduler {e2e['schedulerCpuSeconds']}, generator {e2e['generatorCpuSeconds']}, "
          f"broker {e2e['brokerCpuSeconds']}; CPU steal {e2e['stealPercent']}%")
    if e2e["latencySplitMs"]:
        print(f"  latency split ms: {e2e['latencySplitMs']}")
    if e2e["brokerGcPauses"]:
        print(f"  broker GC pauses while measured: {e2e['brokerGcPauses']}")
    if e2e["tailOverlaps"]:
        print(f"  waits overlapping a stall, slowest 1% vs all: {e2e['tailOverlaps']}")
    for r in e2e["schedulerCycleStats"]:
        print(f"  scheduler cycles: {r}")
    for r in e2e["schedulerSnapshots"]:
        print(f"  scheduler snapshot: {r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
