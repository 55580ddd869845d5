"""The fast paths of placement agree with their plain definitions.

* ``order`` (packed integer keys) sorts like Kueue's (slices, pods, level values) tuple order;
* ``tightest_fitting`` finds the domain minimising (slices, pods, index) among those that fit;
* the per-shape fit cache of a snapshot, caught up leaf by leaf after charges, equals a recount.
"""

from __future__ import annotations

from fixtures.tasbuild import flavor_obj, node_obj, topology_obj, upsert
from hypothesis import given, settings
from hypothesis import strategies as st

from events import schema as ev
from kueue_es.scheduler.tas.counts import Counts
from kueue_es.scheduler.tas.search import order, tightest_fitting
from projections.cluster import ClusterState
from projections.topology import fit_in_leaves, tas_snapshots

counts_st = st.lists(st.tuples(st.integers(0, 50), st.integers(0, 500)), min_size=1, max_size=40)


@given(cs=counts_st, lfc=st.booleans())
def test_order_is_kueues_tuple_order(cs: list[tuple[int, int]], lfc: bool) -> None:
    sc, pc = [s for s, _ in cs], [max(s, p) for s, p in cs]
    counts = Counts([pc], [sc], {})
    want = sorted(range(len(cs)), key=(lambda i: (sc[i], pc[i], i)) if lfc else (lambda i: (-sc[i], pc[i], i)))
    assert order(counts, 0, range(len(cs)), lfc) == want


@given(cs=counts_st, need=st.integers(0, 60), same=st.booleans())
def test_tightest_fitting_is_the_minimum_of_the_fitting(cs: list[tuple[int, int]], need: int, same: bool) -> None:
    sc = [s for s, _ in cs]
    pc = sc if same else [max(s, p) for s, p in cs]
    fitting = [i for i in range(len(sc)) if sc[i] >= need]
    want = min(fitting, key=lambda i: (sc[i], pc[i], i)) if fitting else None
    assert tightest_fitting(sc, pc, need) == want


@settings(max_examples=50, deadline=None)
@given(cpus=st.lists(st.integers(0, 8), min_size=1, max_size=12),
       charges=st.lists(st.tuples(st.integers(0, 11), st.integers(-2, 3)), max_size=20),
       shape=st.sampled_from([(("cpu", 1000), ("pods", 1)), (("cpu", 0), ("pods", 1)), (("cpu", 2500), ("pods", 1))]))
def test_fit_cache_catches_up_with_charges(cpus: list[int], charges: list[tuple[int, int]],
                                           shape: tuple[tuple[str, int], ...]) -> None:
    state = ClusterState()
    events = [upsert(topology_obj("default", ["hostname"])), upsert(flavor_obj("tas", "default"))]
    events += [upsert(node_obj({"name": f"h{i}", "labels": {"hostname": f"h{i}"},
                                "allocatable": {"cpu": c, "pods": 5}})) for i, c in enumerate(cpus)]
    for i, e in enumerate(events):
        state.apply(ev.Record(i, e))
    snaps = tas_snapshots(state)
    snap = snaps["tas"]
    snap.pods_fitting(shape)  # cached before the charges
    for leaf, pods in charges:
        if leaf < len(cpus) and pods:
            snaps.charge("tas", [((f"h{leaf}",), abs(pods))], {"cpu": 1000}, 1 if pods > 0 else -1)
        assert snap.pods_fitting(shape) == fit_in_leaves(snap.remaining, len(cpus), shape)
    fresh = tas_snapshots(state)["tas"]
    assert fresh.pods_fitting(shape) == fit_in_leaves(fresh.remaining, len(cpus), shape), "forks share no charges"
