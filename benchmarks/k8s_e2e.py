"""End-to-end latency and throughput of batch/v1 Jobs through kueue-es on a real kube-apiserver.

Starts etcd + kube-apiserver (``scripts/kube.sh``), installs the CRDs, one ResourceFlavor, one ClusterQueue with
room for every Job and a LocalQueue, then runs the connector and the scheduler in this process over an
embedded log (fsync always, like ``kueue-es run --kube``) and creates N suspended Jobs with the queue label,
``--concurrency`` at a time. For each Job it measures, from a separate watch, the time from its creation to
the moment it is unsuspended (Workload created, admitted, status written, Job started — four apiserver round
trips and three log appends). Reports p50/p90/p99/max and Jobs/s as JSON.

    python benchmarks/k8s_e2e.py                  # 200 Jobs
    python benchmarks/k8s_e2e.py --jobs 1000 --concurrency 50
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from kubernetes_asyncio import config

from connectors.k8s import crds
from connectors.k8s.client import KubeClient
from connectors.k8s.connector import Connector, schedule
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.resources import BY_KIND
from events.filelog import FileLog

REPO = Path(__file__).resolve().parents[1]
KUEUE = "kueue.x-k8s.io/v1beta2"


def _kube(*args: str) -> str:
    return subprocess.run(["bash", str(REPO / "scripts" / "kube.sh"), *args], check=True, capture_output=True,
                          text=True, env=dict(os.environ, KUBE_OWNER_PID=str(os.getpid()))).stdout


def _job(ns: str, name: str) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"suspend": True, "parallelism": 1, "completions": 1, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "10m"}}}]}}}}


async def bench(kubeconfig: str, n: int, concurrency: int, log_dir: Path) -> dict:
    kc = KubeClient(await config.new_client_from_config(config_file=kubeconfig))
    await crds.install(kc)
    ns = "bench"
    await kc.create(BY_KIND["Namespace"], {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    await kc.create(BY_KIND["ResourceFlavor"], {"apiVersion": KUEUE, "kind": "ResourceFlavor",
                                                "metadata": {"name": "default"}, "spec": {"nodeLabels": {"pool": "a"}}})
    await kc.create(BY_KIND["ClusterQueue"], {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "cq"},
                                              "spec": {"namespaceSelector": {}, "resourceGroups": [{
                                                  "coveredResources": ["cpu"], "flavors": [{"name": "default",
                                                  "resources": [{"name": "cpu", "nominalQuota": n}]}]}]}})
    await kc.create(BY_KIND["LocalQueue"], {"apiVersion": KUEUE, "kind": "LocalQueue",
                                            "metadata": {"name": "lq", "namespace": ns}, "spec": {"clusterQueue": "cq"}}, ns)
    log = FileLog.open(log_dir, fsync="always")
    journal = LocalJournal(log, Mirror())
    connector = Connector(kc, journal, watch_timeout_s=300)
    tasks = [asyncio.create_task(connector.run()), asyncio.create_task(schedule(journal, ready=connector.watcher.wait_synced))]
    await connector.watcher.wait_synced()

    created: dict[str, float] = {}
    started: dict[str, float] = {}
    done = asyncio.Event()
    jobs = BY_KIND["Job"]

    async def observe() -> None:
        listed = await kc.list(jobs)
        import msgspec

        async for e in kc.watch(jobs, listed.metadata.resource_version, timeout_seconds=600):
            obj = msgspec.json.decode(e.object)
            name = obj.get("metadata", {}).get("name")
            if e.type == "MODIFIED" and name in created and name not in started and not obj["spec"].get("suspend"):
                started[name] = time.perf_counter()
                if len(started) == n:
                    done.set()
                    return

    watcher = asyncio.create_task(observe())
    await asyncio.sleep(0.5)
    sem = asyncio.Semaphore(concurrency)

    async def make(i: int) -> None:
        async with sem:
            name = f"job-{i:05d}"
            created[name] = time.perf_counter()
            await kc.create(jobs, _job(ns, name), ns)

    t0 = time.perf_counter()
    await asyncio.gather(*(make(i) for i in range(n)))
    await asyncio.wait_for(done.wait(), 600)
    elapsed = time.perf_counter() - t0
    lat = sorted((started[k] - created[k]) * 1000 for k in started)
    for t in (*tasks, watcher):
        t.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await t
    events = await log.end_offset()
    await log.close()
    await kc.close()
    q = statistics.quantiles(lat, n=100)
    return {"jobs": n, "concurrency": concurrency, "elapsed_s": round(elapsed, 2),
            "jobs_per_s": round(n / elapsed, 1), "latency_ms": {"p50": round(q[49], 1), "p90": round(q[89], 1),
                                                                "p99": round(q[98], 1), "max": round(lat[-1], 1)},
            "log_events": events, "status_writes": connector.writer.stats.writes,
            "write_conflicts": connector.writer.stats.conflicts}


def run_on_cluster(bench: Callable[[str, Path], Awaitable[dict]]) -> None:
    """Start the project's kube-apiserver and etcd (``scripts/kube.sh``), run ``bench(kubeconfig, log directory)``
    against them, stop them whatever happens, and print its result as JSON."""
    _kube("install")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "kube"
        work.mkdir()
        try:
            env = dict(line.split("=", 1) for line in _kube("start", str(work)).splitlines() if "=" in line)
            result = asyncio.run(bench(env["KUBECONFIG"], Path(tmp) / "log"))
        finally:
            _kube("stop", str(work))
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=200)
    p.add_argument("--concurrency", type=int, default=20)
    args = p.parse_args()
    run_on_cluster(lambda kubeconfig, log: bench(kubeconfig, args.jobs, args.concurrency, log))


if __name__ == "__main__":
    main()
