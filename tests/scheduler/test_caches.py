"""The projection's derived structures equal recomputation, whatever happened before.

The scheduler reads a quota tree the projection keeps incrementally (charged and released as reservations come
and go, rebuilt when ClusterQueue or Cohort specs change) and ClusterQueue specs compiled once per spec
generation. Over random histories that mix spec changes (quotas, cohorts, parents, flavors, stop policies,
deletions) with workloads, decisions and finishes, after every step:

* the incremental tree has the usage, subtree quota and guarantees of a tree built from scratch;
* every compiled ClusterQueue says what a fresh compilation says (activity, groups, flavors);
* the index of workloads a controller rule may act on (``flagged``) is exactly the workloads it should hold;
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
from kueue_es.scheduler.config import load_config
from kueue_es.scheduler.cycle import run_cycle
from kueue_es.scheduler.quota import build_quota_tree
from projections import snapshot
from projections.cluster import ClusterState, is_flagged
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
    assert sorted(state.flagged) == sorted(k for k, w in state.workloads.items() if is_flagged(w))
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


# --- the Fair Sharing tournament keeps shares incrementally -------------------------------------------------


def _naive_fair_order(ctx, entries):
    """Kueue's iterator as written: at every pick, charge each contender, take the shares on its path, undo."""
    from kueue_es.scheduler.fairsharing import _subtree_cluster_queues, drs

    tree = ctx.tree
    remaining = {e.cq: e for e in entries}
    while remaining:
        first = min(remaining)
        node = tree.cluster_queues[first]
        if node.parent is None:
            yield remaining.pop(first)
            continue
        values = {}
        for q in _subtree_cluster_queues(node.root()):
            e = remaining.get(q.name)
            if e is None:
                continue
            usage = e.assignment.usage if e.assignment is not None else {}
            tree.charge(q.name, usage, 1)
            d, n = drs(ctx, q), q.parent
            while n is not None:
                values[(n.name, e.wl.key)] = (d.borrowing_on(usage), *d.key(), ctx.order.rank(e.wl.priority),
                                              ctx.order.time(e.wl))
                d, n = drs(ctx, n), n.parent
            tree.charge(q.name, usage, -1)

        def play(cohort, values=values):
            cands = [w for c in cohort.children if not c.is_cq for w in [play(c)] if w is not None]
            cands += [remaining[c.name] for c in cohort.children if c.is_cq and c.name in remaining]
            best = cands[0] if cands else None
            for cur in cands[1:]:
                if values[(cohort.name, cur.wl.key)] < values[(cohort.name, best.wl.key)]:
                    best = cur
            return best

        winner = play(node.root())
        del remaining[winner.cq]
        yield winner


def _picks(state, order_fn) -> list[str]:
    """Nominate the heads, then take them in ``order_fn``'s order, charging each that still fits."""
    from kueue_es.scheduler.cycle import CycleContext, heads, nominate

    config = load_config({"fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}})
    out = []
    with CycleContext(state, config, state.time) as ctx:
        entries = heads(state)
        for e in entries:
            nominate(ctx, e)
        for e in order_fn(ctx, entries):
            out.append(e.wl.key)
            a = e.assignment
            if e.status or a is None or a.mode != 3:
                continue
            node = ctx.tree.cluster_queues[e.cq]
            if all(v <= node.available(fr) for fr, v in a.usage.items()):
                ctx.tree.charge(e.cq, a.usage, 1)
    return out


@st.composite
def fair_states(draw):
    """A root cohort with quota, up to two child cohorts (weights, lending limits), up to six ClusterQueues in
    them (weights, borrowing and lending limits, two flavors), running workloads and one head per queue."""
    objs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}},
            {"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": "f1"}},
            {"apiVersion": KQ, "kind": "ResourceFlavor", "metadata": {"name": "f2"}},
            _cohort("root", None, draw(st.integers(0, 6)))]
    weights = st.sampled_from([None, None, 0, "0.5", 2, 3])
    for co in ("x", "y"):
        c = _cohort(co, "root", draw(st.one_of(st.none(), st.integers(0, 4))))
        w = draw(weights)
        if w is not None:
            c["spec"]["fairSharing"] = {"weight": w}
        objs.append(c)
    workloads = []
    for i in range(draw(st.integers(2, 6))):
        name = f"q{i}"
        cq = _cq(name, draw(st.sampled_from(["root", "x", "y"])), draw(st.integers(0, 5)),
                 draw(st.one_of(st.none(), st.integers(0, 6))), draw(st.one_of(st.none(), st.integers(0, 4))),
                 "None", draw(st.sampled_from([["f1"], ["f1", "f2"], ["f2", "f1"]])))
        w = draw(weights)
        if w is not None:
            cq["spec"]["fairSharing"] = {"weight": w}
        objs.append(cq)
        objs.append({"apiVersion": KQ, "kind": "LocalQueue", "metadata": {"name": f"lq-{name}", "namespace": "ns"},
                     "spec": {"clusterQueue": name}})
        for j in range(draw(st.integers(0, 2))):
            cpu, flavor = draw(st.integers(1, 6)), draw(st.sampled_from(["f1", "f2"]))
            if flavor not in [f["name"] for f in cq["spec"]["resourceGroups"][0]["flavors"]]:
                continue
            workloads.append(_workload(f"{name}-run{j}", name, cpu, draw(st.integers(0, 2)),
                                       admitted={"clusterQueue": name, "podSetAssignments": [{
                                           "name": "main", "flavors": {"cpu": flavor},
                                           "resourceUsage": {"cpu": str(cpu)}, "count": 1}]}))
        workloads.append(_workload(f"{name}-head", name, draw(st.integers(1, 6)), draw(st.integers(0, 2)),
                                   created=f"2024-01-01T00:0{draw(st.integers(0, 9))}:00Z"))
    return objs + workloads


def _workload(name, cq, cpu, prio, admitted=None, created="2024-01-01T00:00:00Z"):
    d = {"apiVersion": KQ, "kind": "Workload",
         "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}", "creationTimestamp": created},
         "spec": {"queueName": f"lq-{cq}", "priority": prio, "podSets": [{"name": "main", "count": 1, "template": {
             "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}]}}}]}}
    if admitted is not None:
        d["status"] = {"admission": admitted, "conditions": [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
             "lastTransitionTime": created},
            {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "", "lastTransitionTime": created}]}
    return d


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fair_states())
def test_fair_order_equals_naive_tournament(objects) -> None:
    state = ClusterState()
    for d in objects:
        obj = msgspec.convert(d, o.KueueObject)
        state.apply(ev.Record(state.offset + 1, ev.ObjectUpserted(time=T0, key=obj.key, uid=obj.metadata.uid, obj=obj)))
    from kueue_es.scheduler.fairsharing import fair_order

    assert _picks(state, fair_order) == _picks(state, _naive_fair_order)
