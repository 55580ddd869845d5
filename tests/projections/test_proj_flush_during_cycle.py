"""A failed attempt folded after a flush it was not decided on does not park its workload.

Kueue's ClusterQueue stamps each requeue of its inadmissible workloads (``queueInadmissibleCycle``) and a head
popped before that stamp goes back to the heap however it failed (``requeueIfNotPresent``;
``pkg/queue/cluster_queue_test.go`` TestQueueInadmissibleWorkloadsDuringScheduling,
TestPopMidCycleDoesNotConsumeRequeueSignal). In the log the same race is a decision whose ``input`` precedes
an event that sent the parked workloads back (here a workload finishing and freeing the quota): parked after
it, the workload would wait for the next flush with the quota free."""

from __future__ import annotations

import itertools

from fixtures.eventgen import T0, cluster_queue, cohort, flavor, local_queue, namespace, upsert, workload

from events import objects as o
from events import schema as ev
from kueue_es.scheduler import decide, settle
from kueue_es.scheduler.config import SchedulerConfig
from projections import cluster, snapshot
from projections.cluster import ClusterState
from projections.cohorts import build_forest, spec_root

CONFIG = SchedulerConfig()


def apply(state: ClusterState, e: ev.Event) -> None:
    state.apply(ev.Record(state.offset + 1, e))


def busy(*holders: tuple[str, str, str], quotas: tuple[int, ...] = (1,), want: str = "1") -> ClusterState:
    """ClusterQueues ``cq``, ``cq2``... (one per quota, each its own cohort tree, LocalQueues ``lq``,
    ``lq2``...), ``holders`` (name, LocalQueue, cpu) admitted, then ``team/w`` (``want`` cpu) pending in
    ``cq``."""
    state = ClusterState()
    events = [upsert(namespace("team"), T0), upsert(flavor("f0"), T0)]
    for i, quota in enumerate(quotas):
        suffix = str(i + 1) if i else ""
        events += [upsert(cluster_queue("cq" + suffix, quotas={"f0": quota}), T0),
                   upsert(local_queue("team", "lq" + suffix, "cq" + suffix), T0)]
    events += [upsert(workload("team", name, queue=lq, cpu=cpu), T0) for name, lq, cpu in holders]
    for e in events:
        apply(state, e)
    settle(state, CONFIG)
    assert all(state.workloads["team/" + name].reserving for name, _, _ in holders)
    apply(state, upsert(workload("team", "w", queue="lq", cpu=want, created=T0 + 1000), T0 + 1000))
    return state


def finish(state: ClusterState, name: str) -> None:
    key = "team/" + name
    apply(state, ev.WorkloadFinished(time=T0 + 2000, key=key, uid=state.workloads[key].uid))


def parking(state: ClusterState) -> list[ev.Decision]:
    batch = decide(state, CONFIG)
    assert [(type(d).__name__, d.key, getattr(d, "parked", None)) for d in batch] == [
        ("WorkloadPending", "team/w", True)]
    return batch


def fold(state: ClusterState, batch: list[ev.Decision]) -> None:
    for d in batch:
        apply(state, d)


def test_an_attempt_decided_before_a_flush_goes_back_to_the_heap() -> None:
    state = busy(("run", "lq", "1"))
    batch = parking(state)
    finish(state, "run")  # lands before the attempt decided without it
    fold(state, batch)
    q = state.queues["cq"]
    assert "team/w" in q.entries and "team/w" not in q.inadmissible
    assert [(type(d).__name__, d.key) for d in decide(state, CONFIG)] == [
        ("QuotaReserved", "team/w"), ("WorkloadAdmitted", "team/w")]


def test_a_flush_of_another_cohort_tree_does_not_count() -> None:
    """The mark is per queue, as Kueue's: a flush of a ClusterQueue outside the workload's cohort tree leaves
    it parked."""
    state = busy(("hold", "lq", "1"), ("run", "lq2", "1"), quotas=(1, 1))
    batch = parking(state)
    finish(state, "run")
    fold(state, batch)
    assert "team/w" in state.queues["cq"].inadmissible


def test_an_attempt_decided_after_the_flush_parks() -> None:
    state = busy(("run", "lq", "1"), ("x", "lq", "1"), quotas=(2,), want="2")
    finish(state, "x")  # frees 1 cpu of the 2 w needs: it was seen by the attempt
    fold(state, parking(state))
    assert "team/w" in state.queues["cq"].inadmissible


def test_a_snapshot_keeps_the_marks() -> None:
    state = busy(("run", "lq", "1"))
    batch = parking(state)
    finish(state, "run")
    restored = snapshot.decode(snapshot.encode(state))
    assert restored.flushes == state.flushes != {}
    fold(restored, batch)
    assert "team/w" in restored.queues["cq"].entries


def test_creating_cluster_queues_does_not_rebuild_the_cohort_forest_each_time(monkeypatch) -> None:
    """Each ClusterQueue created drops the cohort forest and marks a flush of its tree: the mark's root comes
    from the spec links, so N creations do not build N growing forests (quadratic at a start without a
    checkpoint, an import or a replay)."""
    builds = []
    real = cluster.build_forest
    monkeypatch.setattr(cluster, "build_forest", lambda *a: builds.append(1) or real(*a))
    state = ClusterState()
    apply(state, upsert(flavor("f0"), T0))
    for i in range(300):
        apply(state, upsert(cluster_queue(f"cq{i}", quotas={"f0": 1}, cohort=f"co{i % 7}"), T0))
    assert len(builds) <= 2
    assert state.flushes[f"co:co{299 % 7}"] == state.offset  # the last creation's tree, the forest's key


def _spec_links() -> list[tuple[dict[str, o.ClusterQueue], dict[str, o.Cohort]]]:
    """Small cohort graphs: parent links among three Cohorts in every combination (loops, self-loops, a parent
    never created), ClusterQueues in each, one without a cohort."""
    names = ("a", "b", "c")
    graphs = []
    for parents in itertools.product(("", "a", "b", "c", "ghost"), repeat=3):
        for created in ((), ("a",), names):
            cohorts = {n: cohort(n, p) for n, p in zip(names, parents, strict=True)
                       if n in created or n == "c"}
            cqs = {f"q{n}": cluster_queue(f"q{n}", quotas={}, cohort=n) for n in (*names, "ghost")}
            cqs["alone"] = cluster_queue("alone", quotas={})
            graphs.append((cqs, cohorts))
    return graphs


def test_the_spec_walk_finds_the_forest_root() -> None:
    """Without a forest the flush mark's root is found by walking the spec links; it must be the forest's
    own key, loops included (a mark under another key would not be seen by
    :meth:`ClusterState._flushed_since`)."""
    for cqs, cohorts_ in _spec_links():
        forest = build_forest(cqs, cohorts_)
        for cq in (*cqs, "unknown"):
            spec = cqs[cq].spec if cq in cqs else None
            assert spec_root(cqs, cohorts_, cq) == forest.cq_root(cq), (cq, spec)
