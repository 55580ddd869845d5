"""Cost of the topologyAssignment wire form: :func:`events.tas_assignment.encode` and ``decode``.

The encoder runs once per admitted TAS pod set (and per second pass or node replacement); decode runs wherever
an admitted assignment is read (TAS usage, pod ungating). Shapes: a pod set on one rack of 64 nodes and on the
640 nodes of Kueue's TAS performance topology (hostnames ``rack-R-node-NN``, pod counts varying), 16 racks at
rack level, and 10^4 / 10^5 hostnames in node pools (the hostname-prefix search at scale). Medians of
``--repeat`` runs, in ms, as JSON; ``encode_ms`` with the hostname cache warm (a cluster's node names recur in
every assignment), ``encode_cold_ms`` with it emptied first.

    python benchmarks/tas_encoding.py
    python benchmarks/tas_encoding.py --repeat 50
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from functools import partial

from events import objects as o
from events import tas_assignment as tas


def _hosts(racks: int, nodes: int) -> list[o.TopologyDomainAssignment]:
    return [o.TopologyDomainAssignment(values=[f"rack-{r}-node-{n:02d}"], count=1 + n % 3)
            for r in range(racks) for n in range(nodes)]


def _pools(pools: int, nodes: int) -> list[o.TopologyDomainAssignment]:
    return [o.TopologyDomainAssignment(values=[f"gke-cluster-pool-{p:04d}-{p:08x}-{n:04x}"], count=1)
            for p in range(pools) for n in range(nodes)]


SHAPES = {
    "64 hostnames (1 rack)": ([tas.HOSTNAME_LEVEL], _hosts(1, 64)),
    "640 hostnames (10 racks)": ([tas.HOSTNAME_LEVEL], _hosts(10, 64)),
    "16 racks (block, rack)": (["block", "rack"], [o.TopologyDomainAssignment(values=[f"block-{r // 4}", f"rack-{r}"],
                                                                              count=8) for r in range(16)]),
    "10,000 hostnames (100 pools)": ([tas.HOSTNAME_LEVEL], _pools(100, 100)),
    "100,000 hostnames (1,000 pools)": ([tas.HOSTNAME_LEVEL], _pools(1000, 100)),
}


def _median_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _cold_encode(levels: list[str], domains: list[o.TopologyDomainAssignment]) -> None:
    tas._candidates.cache_clear()  # as the first assignment on a cluster: no hostname seen yet
    tas.encode(levels, domains)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=21)
    args = ap.parse_args()
    out = []
    for name, (levels, domains) in SHAPES.items():
        repeat = args.repeat if len(domains) < 10_000 else max(3, args.repeat // 5)
        ta = tas.encode(levels, domains)
        assert tas.decode(ta) == domains
        out.append({"shape": name, "domains": len(domains), "slices": len(ta.slices),
                    "encode_ms": round(_median_ms(partial(tas.encode, levels, domains), repeat), 3),
                    "encode_cold_ms": round(_median_ms(partial(_cold_encode, levels, domains), repeat), 3),
                    "decode_ms": round(_median_ms(partial(tas.decode, ta), repeat), 3)})
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
