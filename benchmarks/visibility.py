"""One visibility request deep into a 100,000-workload ClusterQueue, as the event loop pays for it.

One ClusterQueue, 20 LocalQueues (5 names in 4 namespaces), ``--pending`` workloads of three priorities and
spread creation times, ``--parked`` of them parked as inadmissible. Each run answers one ClusterQueue page and
one LocalQueue page (``answer`` of :mod:`connectors.k8s.visibility` plus its JSON encoding) two ways,
interleaved: ``indexed`` (the served path: bisection in the queue's index) and ``full`` (the page by definition:
the whole queue order, then a pass to the page, as every request cost before the index — the memo on the state
is cleared first, as a live log's next record clears it). Medians of ``--repeat`` runs, ms; the ratio full/indexed.

    python benchmarks/visibility.py [--pending 100000] [--parked 0.5] [--offset 90000] [--repeat 15]
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
from kueue_es.scheduler.config import DEFAULT
from kueue_es.statefile import ObjectFolder
from projections.cluster import ClusterState

T0 = 1_704_067_200_000


def build(n: int, parked: float) -> ClusterState:
    folder = ObjectFolder(T0)
    state, put = folder.state, folder.put

    put({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}})
    put({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
             {"name": "default", "resources": [{"name": "cpu", "nominalQuota": 20}]}]}]}})
    for ns in range(4):
        put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"ns-{ns}"}})
        for lq in range(5):
            put({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                 "metadata": {"name": f"lq-{lq}", "namespace": f"ns-{ns}"}, "spec": {"clusterQueue": "cq"}})
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
    args = ap.parse_args()
    t = time.perf_counter()
    state = build(args.pending, args.parked)
    q = state.queues["cq"]
    print(f"{len(q)} pending ({len(q.inadmissible)} parked), built in {time.perf_counter() - t:.1f}s; "
          f"python {platform.python_version()}, {platform.machine()}")
    lq_offset = args.offset // 20  # about as deep in one of the 20 LocalQueues
    real = vis.in_cluster_queue, vis.in_local_queue

    def full_cq(s: ClusterState, c: Any, cq: str, **kw: Any) -> Any:
        return vis.straightforward(s, c, cq, **kw)

    def full_lq(s: ClusterState, c: Any, ns: str, name: str, **kw: Any) -> Any:
        return vis.straightforward(s, c, namespace=ns, name=name, **kw)

    def request(**kw: Any) -> float:
        state.derived.clear()
        t = time.perf_counter()
        code, doc = cv.answer(cv.Source(state, DEFAULT, lambda key: []), "v1beta2", **kw)
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


if __name__ == "__main__":
    main()
