"""The projection's derived structures equal recomputation, whatever happened before.

The scheduler reads a quota tree the projection keeps incrementally (charged and released as reservations come
and go, rebuilt when ClusterQueue or Cohort specs change) and ClusterQueue specs compiled once per spec
generation. Over random histories that mix spec changes (quotas, cohorts, parents, flavors, stop policies,
deletions) with workloads, decisions and finishes, after every step:

* the incremental tree has the usage, subtree quota and guarantees of a tree built from scratch;
* every compiled ClusterQueue says what a fresh compilation says (activity, groups, flavors);
* a scheduling cycle leaves the projection exactly as it found it (same digest, same tree usage);
* a state whose caches are warm decides exactly what a restored (cold) copy of it decides.
"""

from __future__ import annotations

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import objects as o
from events import schema as ev
from kueue_es.scheduler import DEFAULT, decide
from kueue_es.scheduler.cycle import run_cycle
from kueue_es.scheduler.quota import build_quota_tree
from projections import snapshot
from projections.cluster import ClusterState
from projections.clusterqueues import ClusterQueueInfo

T0 = 1_704_067_200_000
KQ = "kueue.x-k8s.io/v1beta2"


def _cq(name: str, cohort: str | None, nominal: int, borrow: int | None, lend: int | None, stop: str,
        flavors: list[str]) -> dict:
    fqs = []
    for f in flavors:
        res: dict = {"name": "cpu", "nominalQuota": nominal}
        if cohort and borrow is not None:
            res["borrowingLimit"] = borrow
        if cohort and lend is not None:
            res["lendingLimit"] = min(lend, nominal)
        fqs.append({"name": f, "resources": [res]})
    spec: dict = {"namespaceSelector": {}, "stopPolicy": stop,
                  "resourceGroups": [{"coveredResources": ["cpu"], "flavors": fqs}],
                  "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}}
    if cohort:
        spec["cohortName"] = cohort
    return {"apiVersion": KQ, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def _cohort(name: str, parent: str | None, nominal: int | None) -> dict:
    spec: dict = {}
    if parent:
        spec["parentName"] = parent
    if nominal is not None:
        spec["resourceGroups"] = [{"coveredResources": ["cpu"], "flavors": [
            {"name": "f1", "resources": [{"name": "cpu", "nominalQuota": nominal}]}]}]
    return {"apiVersion": KQ, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


CQS = ("cq0", "cq1", "cq2")
COHORTS = ("co-a", "co-b", "co-c")

cq_ops = st.builds(
    lambda name, cohort, nominal, borrow, lend, stop, flavors: ("upsert", _cq(name, cohort, nominal, borrow, lend,
                                                                              stop, flavors)),
    st.sampled_from(CQS), st.sampled_from([None, *COHORTS]), st.integers(0, 6), st.one_of(st.none(), st.integers(0, 4)),
    st.one_of(st.none(), st.integers(0, 4)), st.sampled_from(["None", "None", "Hold"]),
    st.sampled_from([["f1"], ["f1", "f2"], ["f2"], ["f3"]]),
)
cohort_ops = st.builds(
    lambda name, parent, nominal: ("upsert", _cohort(name, parent, nominal)),
    st.sampled_from(COHORTS), st.sampled_from([None, *COHORTS]), st.one_of(st.none(), st.integers(0, 4)),
)
flavor_ops = st.sampled_from([
    ("upsert", {"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": "f2"}}),
    ("delete", ("ResourceFlavor", "f2")),
])
delete_ops = st.builds(lambda kind, name: ("delete", (kind, name)),
                       st.just("ClusterQueue"), st.sampled_from(CQS)) | st.builds(
    lambda name: ("delete", ("Cohort", name)), st.sampled_from(COHORTS))
workload_ops = st.builds(
    lambda i, lq, prio, cpu: ("upsert", {
        "apiVersion": KQ, "kind": "Workload",
        "metadata": {"name": f"w{i}", "namespace": "ns", "uid": f"u{i}", "creationTimestamp": "2024-01-01T00:00:00Z"},
        "spec": {"queueName": f"lq-{lq}", "priority": prio, "podSets": [{"name": "main", "count": 1, "template": {
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}]}}}]}}),
    st.integers(0, 40), st.sampled_from(CQS), st.integers(0, 3), st.integers(1, 4),
)
WEIGHTED = [(30, workload_ops), (20, st.just(("decide", None))), (8, st.just(("finish", None))),
            (6, st.just(("stop-jobs", None))), (12, cq_ops), (8, cohort_ops), (6, flavor_ops), (6, delete_ops)]


@st.composite
def _op(draw):
    pick = draw(st.integers(0, sum(w for w, _ in WEIGHTED) - 1))
    for weight, strategy in WEIGHTED:
        if pick < weight:
            return draw(strategy)
        pick -= weight
    raise AssertionError


ops = st.lists(_op(), min_size=4, max_size=40)


def _fresh_info(state: ClusterState, cq: str) -> ClusterQueueInfo:
    return ClusterQueueInfo(cq, state.cluster_queues[cq], state.flavors, state.admission_checks, state.topologies,
                            state.forest)


def _tree_facts(tree) -> dict:
    nodes = {("cq", k): n for k, n in tree.cluster_queues.items()} | {("co", k): n for k, n in tree.cohorts.items()}
    return {k: (sorted((fr, v) for fr, v in n.usage.items() if v), sorted(n.subtree.items()),
                sorted(n.guaranteed.items()), n.height, n.parent.name if n.parent else None)
            for k, n in sorted(nodes.items())}


def check(state: ClusterState) -> None:
    assert _tree_facts(state.quota) == _tree_facts(build_quota_tree(state))
    for cq in sorted(state.cluster_queues):
        got, want = state.cq_info(cq), _fresh_info(state, cq)
        assert got is not None
        assert got.inactive == want.inactive, cq
        assert [(g.covered, [(s.name, s.frs, s.plain) for s in g.flavors]) for g in got.groups] == [
            (g.covered, [(s.name, s.frs, s.plain) for s in g.flavors]) for g in want.groups]
    digest, facts = snapshot.digest(state), _tree_facts(state.quota)
    run_cycle(state, DEFAULT, state.time, state.last_cycle + 1)
    assert snapshot.digest(state) == digest, "a cycle changed the projection"
    assert _tree_facts(state.quota) == facts, "a cycle left usage behind in the quota tree"
    cold = snapshot.decode(snapshot.encode(state))
    assert msgspec.json.encode(decide(state)) == msgspec.json.encode(decide(cold))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_cached_structures_equal_recomputation(history) -> None:
    state = ClusterState()
    t = T0

    def apply(events):
        for e in events:
            state.apply(ev.Record(state.offset + 1, e))

    base = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}},
        {"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": "f1"}},
        *({"apiVersion": KQ, "kind": "LocalQueue", "metadata": {"name": f"lq-{c}", "namespace": "ns"},
           "spec": {"clusterQueue": c}} for c in CQS),
        _cq("cq0", "co-a", 4, None, None, "None", ["f1"]),
        _cq("cq1", "co-a", 3, 2, 1, "None", ["f1"]),
        _cq("cq2", None, 5, None, None, "None", ["f1"]),
    ]
    apply([ev.ObjectUpserted(time=t, key=msgspec.convert(d, o.KueueObject).key, obj=msgspec.convert(d, o.KueueObject))
           for d in base])
    check(state)
    for op, arg in history:
        t += 1000
        if op == "upsert":
            obj = msgspec.convert(arg, o.KueueObject)
            apply([ev.ObjectUpserted(time=t, key=obj.key, uid=obj.metadata.uid, obj=obj)])
        elif op == "delete":
            kind, name = arg
            apply([ev.ObjectDeleted(time=t, key=name, kind=kind)])
        elif op == "decide":
            for _ in range(50):
                batch = decide(state, now=t)
                if not batch:
                    break
                apply(batch)
        elif op == "finish":
            running = sorted(k for k, w in state.workloads.items() if w.reserving)
            apply([ev.WorkloadFinished(time=t, key=k) for k in running[::2]])
        elif op == "stop-jobs":
            apply([ev.JobStopped(time=t, key=k) for k in sorted(state.workloads)
                   if state.workloads[k].evicted and state.workloads[k].reserving])
        check(state)
