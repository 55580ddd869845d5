"""What the fold keeps and does for elastic Jobs' workload slices (ElasticJobsViaWorkloadSlices): the slice a
workload replaces (its ``kueue.x-k8s.io/workload-slice-replacement-for`` annotation), and the scheduler's
``WorkloadSliceReplaced``, which finishes the old slice and gives its quota back."""

from __future__ import annotations

from fixtures.eventgen import T0, admission, cluster_queue, flavor, local_queue, meta, namespace, upsert

from events import objects as o
from events import schema as ev
from projections import snapshot
from projections.cluster import ClusterState
from projections.metrics import FINISHED_TOTAL, REPLACED_SLICES
from projections.workloads import FINISHED

OLD, NEW = "team/old", "team/new"
REPLACES = {"kueue.x-k8s.io/workload-slice-replacement-for": OLD}


def workload(name: str, annotations: dict[str, str] | None = None) -> o.Workload:
    return o.Workload(metadata=meta(name, "team", uid=f"uid-{name}", annotations=annotations or {}),
                      spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(name="main", count=1)]))


def folded() -> ClusterState:
    state = ClusterState()
    for e in (upsert(namespace("team"), T0), upsert(flavor("f0"), T0),
              upsert(cluster_queue("cq", quotas={"f0": 4}), T0), upsert(local_queue("team", "lq", "cq"), T0),
              upsert(workload("old"), T0),
              ev.QuotaReserved(time=T0, key=OLD, admission=admission("cq", "f0", 2000), cycle=1, input=0),
              ev.WorkloadAdmitted(time=T0, key=OLD, cycle=1, input=0),
              upsert(workload("new", REPLACES), T0 + 1)):
        state.apply(ev.Record(state.offset + 1, e))
    return state


def test_the_fold_keeps_the_slice_a_workload_replaces() -> None:
    state = folded()
    assert state.workloads[NEW].replaces == OLD and state.workloads[OLD].replaces == ""
    state.apply(ev.Record(state.offset + 1, upsert(workload("new"), T0 + 2)))
    assert state.workloads[NEW].replaces == "", "the annotation removed"
    state.apply(ev.Record(state.offset + 1, upsert(workload("new", REPLACES), T0 + 3)))
    assert snapshot.decode(snapshot.encode(state)).workloads[NEW].replaces == OLD, "kept in a snapshot"


def test_the_fold_keeps_whether_a_workload_is_an_elastic_jobs_slice() -> None:
    """``kueue.x-k8s.io/elastic-job: "true"`` (read under ElasticJobsViaWorkloadSlicesWithTAS): taken at creation and at
    every upsert, kept in a snapshot."""
    state = folded()
    assert not state.workloads[NEW].elastic
    elastic = {**REPLACES, "kueue.x-k8s.io/elastic-job": "true"}
    state.apply(ev.Record(state.offset + 1, upsert(workload("new", elastic), T0 + 2)))
    assert state.workloads[NEW].elastic
    assert snapshot.decode(snapshot.encode(state)).workloads[NEW].elastic, "kept in a snapshot"
    state.apply(ev.Record(state.offset + 1, upsert(workload("new", {**REPLACES, "kueue.x-k8s.io/elastic-job": "no"}),
                                                   T0 + 3)))
    assert not state.workloads[NEW].elastic, "only \"true\" makes a slice elastic"
    state.apply(ev.Record(state.offset + 1, upsert(workload("brand-new", elastic), T0 + 4)))
    assert state.workloads["team/brand-new"].elastic, "taken at creation"


def test_a_replaced_slice_is_finished_and_gives_its_quota_back() -> None:
    state = folded()
    assert state.quota.cluster_queues["cq"].usage == {"f0/cpu": 2000}
    state.apply(ev.Record(state.offset + 1, ev.WorkloadSliceReplaced(
        time=T0 + 5, key=OLD, uid="uid-old", replacement=NEW, message="Replaced to accommodate a workload", cycle=2,
        input=state.offset)))
    old = state.workloads[OLD]
    fin = old.condition("Finished")
    assert old.phase == FINISHED and not old.reserving
    assert fin is not None and (fin.status, fin.reason, fin.message) == (
        "True", "WorkloadSliceReplaced", "Replaced to accommodate a workload")
    assert state.quota.cluster_queues["cq"].usage.get("f0/cpu", 0) == 0
    assert state.metrics.counters[FINISHED_TOTAL.name] == {("cq", ""): 1}
    assert state.metrics.counters[REPLACED_SLICES.name] == {("cq",): 1}, "kueue_replaced_workload_slices_total"
    state.apply(ev.Record(state.offset + 1, ev.WorkloadSliceReplaced(
        time=T0 + 6, key=OLD, uid="uid-old", replacement=NEW, message="again", cycle=3, input=state.offset)))
    assert state.metrics.counters[REPLACED_SLICES.name] == {("cq",): 1}, "a finished slice is not replaced twice"
