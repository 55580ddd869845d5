"""One visibility request deep into a 100,000-workload ClusterQueue, as the event loop pays for it.

One ClusterQueue, 20 LocalQueues (5 names in 4 namespaces), ``--pending`` workloads of three priorities and
spread creation times, ``--parked`` of them parked as inadmissible. Each run answers one ClusterQueue page and
one LocalQueue page (``answer`` of :mod:`connectors.k8s.visibility` plus its JSON encoding) two ways,
interleaved: ``indexed`` (the served path: bisection in the queue's index) and ``full`` (the page by definition:
the whole queue order, then a pass to the page, as every request cost before the index — the memo on the state
is cleared first, as a live log's next record clears it). Medians of ``--repeat`` runs, ms; the ratio full/indexed.

``--afs``: the ClusterQueue is ordered by Admission Fair Sharing, and LocalQueue ``lq-K`` of every namespace has K
workloads admitted, so the 20 LocalQueues rank in 5 usage groups of 4 tied LocalQueues each (whose workloads
interleave). ``full`` is then also what the served path cost before it read AFS pages from the index.

    python benchmarks/visibility.py [--pending 100000] [--parked 0.5] [--offset 90000] [--repeat 15] [--afs]
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import time
from typing import Any

import msgspec

from connectors.k8s import visibility as cv
from kueue_es.scheduler import visibility as vis
from kueue_es.scheduler.config import DEFAULT, load_config
from kueue_es.statefile import ObjectFolder
from projections.cluster import ClusterState

T0 = 1_704_067_200_000


AFS = load_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                   "admissionFairSharing": {"usageHalfLifeTime": "10m", "usageSamplingInterval": "1m"}})
STAMP = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(T0 // 1000))


def _admitted(ns: int, lq: int, i: int) -> dict[str, Any]:
    """A workload of LocalQueue ``ns-<ns>/lq-<lq>`` holding 1 cpu of the ClusterQueue, admitted."""
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": f"running-{lq}-{i}", "namespace": f"ns-{ns}", "uid": f"r-{ns}-{lq}-{i}",
                         "creationTimestamp": STAMP},
            "spec": {"queueName": f"lq-{lq}", "priority": 0, "podSets": [{"name": "main", "count": 1, "template": {
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]},
            "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1"}, "count": 1}]},
                "conditions": [{"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": STAMP}
                               for t in ("QuotaReserved", "Admitted")]}}


def build(n: int, parked: float, afs: bool = False) -> ClusterState:
    folder = ObjectFolder(T0)
    state, put = folder.state, folder.put

    put({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}})
    scope = {"admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"}} if afs else {}
    put({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
         "spec": {"namespaceSelector": {}, **scope, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
             {"name": "default", "resources": [{"name": "cpu", "nominalQuota": 20}]}]}]}})
    for ns in range(4):
        put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"ns-{ns}"}})
        for lq in range(5):
            put({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                 "metadata": {"name": f"lq-{lq}", "namespace": f"ns-{ns}"}, "spec": {"clusterQueue": "cq"}})
            for i in range(lq if afs else 0):
                put(_admitted(ns, lq, i))
    rnd = random.Random(1)
    for j in range(n):
        t = time.gmtime(T0 // 1000 + rnd.randrange(86_400))
        put({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
             "metadata": {"name": f"w-{j}", "namespace": f"ns-{j % 4}", "uid": f"u-{j:06d}",
                          "creationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", t)},
             "spec": {"queueName": f"lq-{rnd.randrange(5)}", "priority": rnd.choice([50, 100, 200]),
                      "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
                          {"name": "c", "resources": {"requests": {"cpu": "1000"}}}]}}}]}})
    q = state.queues["cq"]
    for key in sorted(q.entries):
        if rnd.random() < parked:
            q.park(key, bulk=False)
    return state


class Query(dict):
    def getall(self, name: str, default: list[str]) -> list[str]:
        return [self[name]] if name in self else default


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pending", type=int, default=100_000)
    ap.add_argument("--parked", type=float, default=0.5, help="share of the workloads parked as inadmissible")
    ap.add_argument("--offset", type=int, default=90_000, help="ClusterQueue page offset (limit: the default 1000)")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--afs", action="store_true", help="Admission Fair Sharing orders the ClusterQueue")
    args = ap.parse_args()
    t = time.perf_counter()
    state = build(args.pending, args.parked, args.afs)
    config = AFS if args.afs else DEFAULT
    q = state.queues["cq"]
    print(f"{len(q)} pending ({len(q.inadmissible)} parked), built in {time.perf_counter() - t:.1f}s; "
          f"python {platform.python_version()}, {platform.machine()}"
          + (f"; AFS usage groups {_groups(state, config)}" if args.afs else ""))
    lq_offset = args.offset // 20  # about as deep in one of the 20 LocalQueues
    real = vis.in_cluster_queue, vis.in_local_queue

    def full_cq(s: ClusterState, c: Any, cq: str, **kw: Any) -> Any:
        return vis.straightforward(s, c, cq, **kw)

    def full_lq(s: ClusterState, c: Any, ns: str, name: str, **kw: Any) -> Any:
        return vis.straightforward(s, c, namespace=ns, name=name, **kw)

    def request(**kw: Any) -> float:
        state.derived.clear()
        t = time.perf_counter()
        code, doc = cv.answer(cv.Source(state, config, lambda key: []), "v1beta2", **kw)
        msgspec.json.encode(doc)
        assert code == 200 and doc["items"], doc
        return (time.perf_counter() - t) * 1000

    times: dict[str, list[float]] = {}
    for _ in range(args.repeat):
        for mode, (in_cq, in_lq) in (("full", (full_cq, full_lq)), ("indexed", real)):
            vis.in_cluster_queue, vis.in_local_queue = in_cq, in_lq  # type: ignore[assignment]
            try:
                times.setdefault(f"cq {mode}", []).append(
                    request(cluster_queue="cq", query=Query(offset=str(args.offset))))
                times.setdefault(f"lq {mode}", []).append(
                    request(namespace="ns-1", local_queue="lq-2", query=Query(offset=str(lq_offset))))
            finally:
                vis.in_cluster_queue, vis.in_local_queue = real
    med = {k: statistics.median(v) for k, v in times.items()}
    for what in ("cq", "lq"):
        print(f"{what} page: full {med[f'{what} full']:.1f} ms, indexed {med[f'{what} indexed']:.1f} ms, "
              f"ratio {med[f'{what} full'] / med[f'{what} indexed']:.1f}x")


def _groups(state: ClusterState, config: Any) -> list[int]:
    """How many LocalQueues tie in each usage group, lower usage first."""
    order = vis.order_of(state, config, "cq")
    assert order is not None
    return [len(group) for group in order.groups]


if __name__ == "__main__":
    main()
