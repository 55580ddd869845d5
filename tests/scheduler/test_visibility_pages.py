"""The visibility pages read from the queue's sorted index agree with the pages by definition (the whole queue
order, filtered and counted): for random queues — workloads of several priorities and creation times in
same-named LocalQueues of two namespaces, some parked, some gone again, one perhaps the sticky preemptor — and
random offsets and limits, on both endpoints, and after a snapshot restore; with the index built when first
read, or earlier and kept up to date through later arrivals, parkings and removals."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kueue_es.scheduler import afs, visibility
from kueue_es.scheduler.config import DEFAULT, load_config
from kueue_es.statefile import ObjectFolder
from projections.cluster import ClusterState
from projections.snapshot import decode, encode

T0 = 1_704_067_200_000
NAMESPACES = ("ns-a", "ns-b")
NAMES = ("lq-x", "lq-y", "lq-z")


def _state(workloads: list[tuple[int, int, int, int]], index_after: int | None = None, *,
           fair: bool = False) -> ClusterState:
    """``index_after``: build the queue's visibility index once that many workloads are queued, so that the
    rest are added to an index kept up to date rather than to one built when first read. ``fair``: the
    ClusterQueue is ordered by Admission Fair Sharing (under :data:`FAIR`)."""
    folder = ObjectFolder(T0)
    state, put = folder.state, folder.put

    put({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}})
    scope = {"admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"}} if fair else {}
    put({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
         "spec": {"namespaceSelector": {}, **scope, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
             {"name": "default", "resources": [{"name": "cpu", "nominalQuota": 1}]}]}]}})
    for ns in NAMESPACES:
        put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for name in NAMES[:2] if ns == "ns-b" else NAMES:
            put({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                 "metadata": {"name": name, "namespace": ns}, "spec": {"clusterQueue": "cq"}})
    for i, (ns, name, priority, second) in enumerate(workloads):
        if i == index_after and "cq" in state.queues:
            state.queues["cq"].indexed()
        namespace = NAMESPACES[ns]
        put({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
             "metadata": {"name": f"w-{i}", "namespace": namespace, "uid": f"u-{i:03d}",
                          "creationTimestamp": f"2024-01-01T00:00:{second:02d}Z"},
             "spec": {"queueName": NAMES[name if namespace == "ns-a" else name % 2], "priority": priority,
                      "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
                          {"name": "c", "resources": {"requests": {"cpu": "5"}}}]}}}]}})
    return state


workload = st.tuples(st.integers(0, 1), st.integers(0, 2), st.sampled_from([0, 10, 100]), st.integers(0, 3))
page = st.tuples(st.one_of(st.none(), st.integers(-2, 40)), st.one_of(st.none(), st.integers(-2, 40)))


FAIR = load_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                    "admissionFairSharing": {"usageHalfLifeTime": "10m"}})
assert FAIR.admission_fair_sharing is not None


@settings(max_examples=150, deadline=None)
@given(workloads=st.lists(workload, max_size=30), data=st.data())
def test_indexed_pages_match_the_definition(workloads: list[tuple[int, int, int, int]], data: st.DataObject) -> None:
    _check_pages(workloads, data, fair=False)


USAGES = st.sampled_from([0.0, 0.5, 2.0, float("inf")])


@settings(max_examples=150, deadline=None)
@given(workloads=st.lists(workload, max_size=30), data=st.data())
def test_admission_fair_sharing_pages_match_the_definition(workloads: list[tuple[int, int, int, int]],
                                                           data: st.DataObject) -> None:
    """The same under Admission Fair Sharing, each LocalQueue's usage drawn from a few values so that LocalQueues
    tie (their workloads interleave in the queue's own order) as often as they differ; the usage itself is
    :func:`afs.lq_usage`'s business, replaced here."""
    usage = {f"{ns}/{name}": data.draw(USAGES, label=f"usage of {ns}/{name}") for ns in NAMESPACES for name in NAMES}
    real = afs.lq_usage
    afs.lq_usage = lambda state, config, lq, cq, now, fold_=None: usage[lq]  # type: ignore[assignment]
    try:
        _check_pages(workloads, data, fair=True)
    finally:
        afs.lq_usage = real


def _check_pages(workloads: list[tuple[int, int, int, int]], data: st.DataObject, *, fair: bool) -> None:
    config = FAIR if fair else DEFAULT
    index_after = data.draw(st.one_of(st.none(), st.integers(1, max(1, len(workloads) - 1))), label="index after")
    state = _state(workloads, index_after, fair=fair)
    q = state.queues.get("cq")
    if q is not None and len(q):
        keys = sorted(q.entries)
        for key in data.draw(st.lists(st.sampled_from(keys), max_size=5), label="parked"):
            q.park(key, bulk=False)
        for key in data.draw(st.lists(st.sampled_from(keys), max_size=3), label="removed"):
            q.remove(key)
        left = sorted((*q.entries, *q.inadmissible))
        if left and data.draw(st.booleans(), label="sticky"):
            q.sticky = data.draw(st.sampled_from(left), label="sticky key")
    restored = decode(encode(state))
    for s in (state, restored):
        for limit, offset in data.draw(st.lists(page, min_size=1, max_size=4), label="pages"):
            kw = {"limit": limit, "offset": offset}
            assert visibility.in_cluster_queue(s, config, "cq", **kw) == visibility.straightforward(
                s, config, "cq", **kw)
            for ns in NAMESPACES:
                for name in NAMES:
                    got = visibility.in_local_queue(s, config, ns, name, **kw)
                    assert got == visibility.straightforward(s, config, namespace=ns, name=name, **kw)
