"""The projected workloads stay out of the cyclic garbage collector's way.

A scheduler holds tens of thousands of workloads, and a full collection walks every object the collector
tracks, holding the event loop (and every decision waiting on it) the while: with three tracked objects per
workload that was 100-300 ms per collection on the benchmark machine. A workload refers to nothing that refers
back to it, so none of it needs tracking: ``WorkloadInfo`` and ``PodSetInfo`` are ``gc=False`` structs, their
conditions a tuple of immutable views. What is left tracked is what the log's objects carry (an admission's
list of pod-set assignments, check updates).
"""

from __future__ import annotations

import gc
import random

from fixtures.eventgen import fold, interpret, random_ops, records

from projections import snapshot


def test_no_workload_and_none_of_its_own_parts_is_tracked() -> None:
    for seed in range(10):
        state = fold(records(interpret(random_ops(random.Random(seed), 300))))
        for s in (state, snapshot.decode(snapshot.encode(state))):
            gc.collect()  # tuples of untracked objects are untracked by a collection
            for wl in s.workloads.values():
                parts = (wl, wl.conditions, wl.pod_sets, *wl.pod_sets, wl.labels, wl.usage, wl.check_states,
                         wl.provreq_parameters, wl.unhealthy_nodes)
                assert not any(gc.is_tracked(p) for p in parts), wl.key
            assert any(wl.conditions for wl in s.workloads.values())
