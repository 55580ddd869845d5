"""The quota tree and usage accounting checked against the cases of Kueue's own cache tests.

Each test names the Kueue test (``pkg/cache/scheduler/cache_test.go``, ``snapshot_test.go``,
``resource_node_test.go``) whose setup it rebuilds from objects a user would apply, and checks what Kueue's
case expects of the nodes: subtree quotas, usage above the guarantees bubbling up to the Cohorts, what a
Cohort could lend, and the usage a ClusterQueue's status reports.
"""

from __future__ import annotations

from typing import Any

import pytest

from events import schema as ev
from kueue_es.statefile import ObjectFolder
from projections import fair_share
from projections.queue_status import cluster_queue_status, local_queue_status

T = 1_704_067_200_000
API = "kueue.x-k8s.io/v1beta2"
GPU = "example.com/gpu"


def _quotas(flavors: list[tuple[str, dict[str, Any]]]) -> list[dict]:
    """``[(flavor, {resource: nominal or (nominal, borrowingLimit, lendingLimit)})]`` as one resource group
    per set of covered resources, in the order given."""
    groups: dict[tuple[str, ...], list[dict]] = {}
    for name, resources in flavors:
        rows = []
        for r, q in resources.items():
            nominal, borrowing, lending = q if isinstance(q, tuple) else (q, None, None)
            row: dict[str, Any] = {"name": r, "nominalQuota": nominal}
            if borrowing is not None:
                row["borrowingLimit"] = borrowing
            if lending is not None:
                row["lendingLimit"] = lending
            rows.append(row)
        groups.setdefault(tuple(resources), []).append({"name": name, "resources": rows})
    return [{"coveredResources": list(c), "flavors": f} for c, f in groups.items()]


def cq(name: str, cohort: str = "", *flavors: tuple[str, dict[str, Any]]) -> dict:
    spec: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": _quotas(list(flavors))}
    if cohort:
        spec["cohortName"] = cohort
    return {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def cohort(name: str, parent: str = "", *flavors: tuple[str, dict[str, Any]]) -> dict:
    spec: dict[str, Any] = {"resourceGroups": _quotas(list(flavors))} if flavors else {}
    if parent:
        spec["parentName"] = parent
    return {"apiVersion": API, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def holding(name: str, queue: str, usage: dict[str, tuple[str, str]], *, admitted: bool = False,
            finished: bool = False, count: int = 1, requests: dict[str, str] | None = None,
            pods: int | None = None, lq: str = "lq") -> dict:
    """A workload of namespace ``ns`` reserving ``usage`` (resource -> (flavor, quantity)) in ``queue``."""
    stamp = "2024-01-01T00:00:00Z"
    conditions = [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "",
                   "lastTransitionTime": stamp}]
    if admitted:
        conditions.append({"type": "Admitted", "status": "True", "reason": "Admitted", "message": "",
                           "lastTransitionTime": stamp})
    if finished:
        conditions.append({"type": "Finished", "status": "True", "reason": "Succeeded", "message": "",
                           "lastTransitionTime": stamp})
    per_pod = requests if requests is not None else {r: q for r, (_, q) in usage.items()}
    return {
        "apiVersion": API, "kind": "Workload", "metadata": {"name": name, "namespace": "ns", "uid": name},
        "spec": {"queueName": lq, "podSets": [{"name": "main", "count": pods or count, "template": {"spec": {
            "containers": [{"name": "c", "resources": {"requests": per_pod}}]}}}]},
        "status": {"admission": {"clusterQueue": queue, "podSetAssignments": [{
            "name": "main", "count": count, "flavors": {r: f for r, (f, _) in usage.items()},
            "resourceUsage": {r: q for r, (_, q) in usage.items()}}]}, "conditions": conditions},
    }


def fold(*objects: dict, flavors: tuple[str, ...] = ("default",)) -> ObjectFolder:
    folder = ObjectFolder(T)
    folder.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}})
    for f in flavors:
        folder.put({"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": f}})
    for obj in objects:
        folder.put(obj)
    return folder


def local_queue(name: str, queue: str) -> dict:
    return {"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": name, "namespace": "ns"},
            "spec": {"clusterQueue": queue}}


def delete(folder: ObjectFolder, kind: str, key: str) -> None:
    folder.state.apply(ev.Record(folder.state.offset + 1, ev.ObjectDeleted(time=T, kind=kind, key=key)))


def subtrees(folder: ObjectFolder) -> dict[str, dict[str, int]]:
    return {name: {fr: v for fr, v in node.subtree.items()}
            for name, node in folder.state.quota.cohorts.items()}


def cohort_usage(folder: ObjectFolder, name: str) -> dict[str, int]:
    return {fr: v for fr, v in folder.state.quota.cohorts[name].usage.items() if v}


# --- resource_node_test.go --------------------------------------------------------------------------------


def test_cohort_lendable_sums_what_each_member_lends() -> None:
    """TestCohortLendable: cq1 lends all of its 8 cpu and 3 gpu, cq2 all of its 2 cpu."""
    folder = fold(cq("cq1", "test-cohort", ("default", {"cpu": ("8", None, "8"), GPU: ("3", None, "3")})),
                  cq("cq2", "test-cohort", ("default", {"cpu": ("2", None, "2")})))
    assert fair_share.lendable(folder.state.quota.cohorts["test-cohort"]) == {"cpu": 10_000, GPU: 3}


# --- cache_test.go: TestDeleteCohortUpdatesAncestorSubtreeQuota, TestCohortCycles ---------------------------


def test_deleting_a_child_cohort_takes_its_quota_from_the_parent() -> None:
    """"deleting child cohort updates parent SubtreeQuota"."""
    folder = fold(cohort("root", "", ("default", {"cpu": "10"})),
                  cohort("child", "root", ("default", {"cpu": "5"})))
    assert subtrees(folder)["root"] == {"default/cpu": 15_000}
    delete(folder, "Cohort", "child")
    assert subtrees(folder)["root"] == {"default/cpu": 10_000}


def test_deleting_a_grandchild_cohort_updates_every_ancestor() -> None:
    """"deleting grandchild cohort updates all ancestors SubtreeQuota"."""
    folder = fold(cohort("root", "", ("default", {"cpu": "10"})),
                  cohort("mid", "root", ("default", {"cpu": "5"})),
                  cohort("leaf", "mid", ("default", {"cpu": "3"})))
    assert {k: subtrees(folder)[k] for k in ("mid", "root")} == {
        "mid": {"default/cpu": 8_000}, "root": {"default/cpu": 18_000}}
    delete(folder, "Cohort", "leaf")
    assert {k: subtrees(folder)[k] for k in ("mid", "root")} == {
        "mid": {"default/cpu": 5_000}, "root": {"default/cpu": 15_000}}


def test_deleting_a_cohort_with_a_queue_cuts_it_off_the_root() -> None:
    """"deleting cohort with children updates parent SubtreeQuota": root keeps only its own 10 cpu; mid lives
    on as the implicit cohort of its ClusterQueue."""
    folder = fold(cohort("root", "", ("default", {"cpu": "10"})),
                  cohort("mid", "root", ("default", {"cpu": "5"})),
                  cq("cq", "mid", ("default", {"cpu": "7"})))
    assert subtrees(folder)["root"] == {"default/cpu": 22_000}
    delete(folder, "Cohort", "mid")
    assert subtrees(folder)["root"] == {"default/cpu": 10_000}


def test_a_queue_joining_a_cyclic_cohort_leaves_its_old_cohort_and_stops() -> None:
    """"clusterqueue joining cohort with cycle successfully updates old cohort" (and "leaving", read
    backwards)."""
    folder = fold(cohort("cycle", "cycle"), cohort("cohort", "", ("default", {"cpu": "10"})),
                  cq("cq", "cohort", ("default", {"cpu": "5"})))
    assert subtrees(folder)["cohort"] == {"default/cpu": 15_000}
    folder.put(cq("cq", "cycle", ("default", {"cpu": "5"})))
    assert subtrees(folder)["cohort"] == {"default/cpu": 10_000}
    assert folder.state.inactive_reason("cq") == "CohortCycleDetected"
    folder.put(cq("cq", "cohort", ("default", {"cpu": "5"})))
    assert subtrees(folder)["cohort"] == {"default/cpu": 15_000}
    assert folder.state.inactive_reason("cq") is None


def test_a_cohort_switching_parents_moves_its_quota() -> None:
    """"cohort switching cohorts updates both cohort trees"."""
    folder = fold(cohort("root1"), cohort("root2"), cohort("cohort", "root1", ("default", {"cpu": "10"})))
    assert (subtrees(folder)["root1"], subtrees(folder)["root2"]) == ({"default/cpu": 10_000}, {})
    folder.put(cohort("cohort", "root2", ("default", {"cpu": "10"})))
    assert (subtrees(folder)["root1"], subtrees(folder)["root2"]) == ({}, {"default/cpu": 10_000})


def test_a_cohort_joining_a_cycle_leaves_its_old_parent() -> None:
    """"cohort joining cohort with cycle successfully updates old cohort"."""
    folder = fold(cohort("cycle-root", "cycle-root"), cohort("root"),
                  cohort("cohort", "root", ("default", {"cpu": "10"})))
    assert subtrees(folder)["root"] == {"default/cpu": 10_000}
    folder.put(cohort("cohort", "cycle-root", ("default", {"cpu": "10"})))
    assert subtrees(folder)["root"] == {}


# --- snapshot_test.go: TestSnapshot ------------------------------------------------------------------------


def test_cohort_usage_counts_only_what_is_used_beyond_the_guarantees() -> None:
    """"lendingLimit with 2 clusterQueues and 2 flavors": a keeps 5 arm and 10 x86 for itself (lending limits
    5 and 10), so its 15 arm put 10 on the cohort and its 10 x86 none; the cohort's quota is what both
    lend."""
    a = cq("a", "lending", ("arm", {"cpu": ("10", None, "5")}), ("x86", {"cpu": ("20", None, "10")}))
    b = cq("b", "lending", ("arm", {"cpu": ("10", None, "5")}), ("x86", {"cpu": ("20", None, "10")}))
    folder = fold(a, b, local_queue("lq", "a"),
                  holding("alpha", "a", {"cpu": ("arm", "10")}, count=5, requests={"cpu": "2"}),
                  holding("beta", "a", {"cpu": ("arm", "5")}, count=5, requests={"cpu": "1"}),
                  holding("gamma", "a", {"cpu": ("x86", "10")}, count=5, requests={"cpu": "2"}),
                  flavors=("arm", "x86"))
    tree = folder.state.quota
    assert subtrees(folder)["lending"] == {"arm/cpu": 10_000, "x86/cpu": 20_000}
    assert cohort_usage(folder, "lending") == {"arm/cpu": 10_000}
    assert {fr: v for fr, v in tree.cluster_queues["a"].usage.items() if v} == {
        "arm/cpu": 15_000, "x86/cpu": 10_000}


def test_a_cohort_with_its_own_quota_adds_what_its_queues_lend() -> None:
    """"cohort provides resources": 10 arm + the 3 cq lends, 20 x86 + cq's 5, 42 mips of its own."""
    folder = fold(cq("cq", "cohort", ("arm", {"cpu": ("7", None, "3")}), ("x86", {"cpu": "5"})),
                  cohort("cohort", "", ("arm", {"cpu": "10"}), ("x86", {"cpu": "20"}),
                         ("mips", {"cpu": "42"})),
                  flavors=("arm", "x86", "mips"))
    assert subtrees(folder)["cohort"] == {"arm/cpu": 13_000, "x86/cpu": 25_000, "mips/cpu": 42_000}


def test_cohorts_in_cycles_and_their_queues_are_left_out() -> None:
    """"cohorts with cycles and their cqs excluded from snapshot"."""
    folder = fold(cohort("autocycle", "autocycle"), cohort("cycle-a", "cycle-b"),
                  cohort("cycle-b", "cycle-a"), cohort("nocycle"),
                  *(cq(f"cq-{c}", c2, ("arm", {"cpu": "0"})) for c, c2 in (
                      ("autocycle", "autocycle"), ("a", "cycle-a"), ("b", "cycle-b"),
                      ("nocycle", "nocycle"))),
                  flavors=("arm",))
    tree = folder.state.quota
    assert sorted(tree.cohorts) == ["nocycle"]
    assert sorted(tree.cluster_queues) == ["cq-nocycle"]
    assert [folder.state.inactive_reason(f"cq-{c}") for c in ("autocycle", "a", "b", "nocycle")] == [
        "CohortCycleDetected", "CohortCycleDetected", "CohortCycleDetected", None]


# --- snapshot_test.go: TestSnapshotAddRemoveWorkloadWithLendingLimit ----------------------------------------

LEND_USAGE = {"lend-a-1": ("lend-a", 1_000), "lend-a-2": ("lend-a", 9_000), "lend-a-3": ("lend-a", 6_000),
              "lend-b-1": ("lend-b", 4_000)}
ALL = tuple(LEND_USAGE)

# name -> (removed, added, {lend-a, lend-b, cohort lend: cpu usage})
LEND_CASES = {
    "remove all then add all": (ALL, ALL, (16_000, 4_000, 10_000)),
    "remove all": (ALL, (), (0, 0, 0)),
    "remove workload, but still using quota over GuaranteedQuota": (("lend-a-2",), (), (7_000, 4_000, 1_000)),
    "remove wokload, using same quota as GuaranteedQuota": (("lend-a-1", "lend-a-2"), (), (6_000, 4_000, 0)),
    "remove workload, using less quota than GuaranteedQuota": (
        ("lend-a-2", "lend-a-3"), (), (1_000, 4_000, 0)),
    "remove all then add workload, using less quota than GuaranteedQuota": (
        ALL, ("lend-a-1",), (1_000, 0, 0)),
    "remove all then add workload, using same quota as GuaranteedQuota": (ALL, ("lend-a-3",), (6_000, 0, 0)),
    "remove all then add workload, using quota over GuaranteedQuota": (ALL, ("lend-a-2",), (9_000, 0, 3_000)),
}


@pytest.mark.parametrize("name", sorted(LEND_CASES))
def test_removing_and_adding_usage_in_a_cycle_moves_only_what_is_beyond_the_guarantee(name: str) -> None:
    """lend-a keeps 6 of its 10 cpu (lends 4), lend-b keeps 4 (lends 6); a cycle's overlay takes workloads out
    and puts them back, and the cohort sees only what goes beyond the guarantees. The overlay rolls back to
    where it started."""
    removed, added, want = LEND_CASES[name]
    folder = fold(cq("lend-a", "lend", ("default", {"cpu": ("10", None, "4")})),
                  cq("lend-b", "lend", ("default", {"cpu": ("10", None, "6")})))
    tree = folder.state.quota
    start = (tree.cluster_queues["lend-a"].usage.get("default/cpu", 0),
             tree.cluster_queues["lend-b"].usage.get("default/cpu", 0),
             tree.cohorts["lend"].usage.get("default/cpu", 0))
    for wl in ALL:
        queue, amount = LEND_USAGE[wl]
        tree.charge(queue, {"default/cpu": amount})
    tree.begin()
    for wl in removed:
        queue, amount = LEND_USAGE[wl]
        tree.charge(queue, {"default/cpu": amount}, -1)
    for wl in added:
        queue, amount = LEND_USAGE[wl]
        tree.charge(queue, {"default/cpu": amount})
    got = (tree.cluster_queues["lend-a"].usage.get("default/cpu", 0),
           tree.cluster_queues["lend-b"].usage.get("default/cpu", 0),
           tree.cohorts["lend"].usage.get("default/cpu", 0))
    tree.rollback()
    assert got == want
    assert tree.cohorts["lend"].usage.get("default/cpu", 0) == 10_000
    for wl in ALL:
        queue, amount = LEND_USAGE[wl]
        tree.charge(queue, {"default/cpu": amount}, -1)
    assert (tree.cluster_queues["lend-a"].usage.get("default/cpu", 0),
            tree.cluster_queues["lend-b"].usage.get("default/cpu", 0),
            tree.cohorts["lend"].usage.get("default/cpu", 0)) == start


# --- cache_test.go: TestClusterQueueUsage, TestLocalQueueUsage, finished workloads --------------------------


def _usage_queue(in_cohort: bool) -> dict:
    return cq("foo", "one" if in_cohort else "", ("default", {"cpu": ("10", "10", None)}),
              ("model_a", {GPU: ("5", "5", None)}), ("model_b", {GPU: "5"}),
              ("interconnect_a", {f"example.com/vf-{i}": ("5", "5", None) for i in range(3)}))


def _flavor_usage(status: dict, field: str) -> dict[str, dict[str, tuple[str, str | None]]]:
    return {f["name"]: {r["name"]: (r["total"], r.get("borrowed")) for r in f["resources"]}
            for f in status[field]}


ONE = dict(usage={"cpu": ("default", "8"), GPU: ("model_a", "5")}, admitted=True)
TWO = dict(usage={"cpu": ("default", "5"), GPU: ("model_b", "6")})
IDLE_VF = {f"example.com/vf-{i}": ("0", "0") for i in range(3)}

# name -> (in a cohort, workloads, reserved {flavor: {resource: (total, borrowed)}}, reserving,
# admitted (cpu total))
USAGE_CASES = {
    "clusterQueue without cohort; single, admitted no borrowing": (False, [("one", ONE)], {
        "default": {"cpu": ("8", "0")}, "model_a": {GPU: ("5", "0")}, "model_b": {GPU: ("0", "0")},
        "interconnect_a": IDLE_VF}, 1, "8"),
    "clusterQueue with cohort; multiple borrowing": (True, [("one", ONE), ("two", TWO)], {
        "default": {"cpu": ("13", "3")}, "model_a": {GPU: ("5", "0")}, "model_b": {GPU: ("6", "1")},
        "interconnect_a": IDLE_VF}, 2, "8"),
    "clusterQueue without cohort; multiple borrowing": (False, [("one", ONE), ("two", TWO)], {
        "default": {"cpu": ("13", "0")}, "model_a": {GPU: ("5", "0")}, "model_b": {GPU: ("6", "0")},
        "interconnect_a": IDLE_VF}, 2, "8"),
    "clusterQueue with cohort; partial admission": (True, [
        ("partial-one", dict(usage={"cpu": ("default", "4")}, admitted=True, count=2, pods=5,
                             requests={"cpu": "2"})),
        ("partial-two", dict(usage={"cpu": ("default", "4")}, count=2, pods=5, requests={"cpu": "2"}))], {
        "default": {"cpu": ("8", "0")}, "model_a": {GPU: ("0", "0")}, "model_b": {GPU: ("0", "0")},
        "interconnect_a": IDLE_VF}, 2, "4"),
}


@pytest.mark.parametrize("name", sorted(USAGE_CASES))
def test_cluster_queue_status_usage_as_kueue_counts_it(name: str) -> None:
    """TestClusterQueueUsage: every flavor-resource of the queue listed, in the spec's order; ``borrowed`` is
    what is used beyond the nominal quota, and only in a cohort."""
    in_cohort, workloads, reserved, reserving, admitted_cpu = USAGE_CASES[name]
    folder = fold(_usage_queue(in_cohort), local_queue("lq", "foo"),
                  *(holding(n, "foo", **kw) for n, kw in workloads),
                  flavors=("default", "model_a", "model_b", "interconnect_a"))
    status = cluster_queue_status(folder.state, "foo", T)
    assert status is not None
    assert _flavor_usage(status, "flavorsReservation") == reserved
    assert (status["reservingWorkloads"], status["admittedWorkloads"]) == (reserving, 1)
    assert _flavor_usage(status, "flavorsUsage")["default"] == {"cpu": (admitted_cpu, "0")}


def test_local_queue_status_counts_its_reservations_per_flavor() -> None:
    """TestLocalQueueUsage "all workloads are admitted" (both reserve quota): every flavor-resource of the
    ClusterQueue, the ones the queue does not use at 0."""
    folder = fold(_usage_queue(False), local_queue("lq", "foo"),
                  holding("one", "foo", {"cpu": ("default", "5"), GPU: ("model_a", "5")}),
                  holding("two", "foo", {"cpu": ("default", "3"), GPU: ("model_b", "3")}),
                  flavors=("default", "model_a", "model_b", "interconnect_a"))
    status = local_queue_status(folder.state, "ns/lq", T)
    assert status is not None
    got = {f["name"]: {r["name"]: r["total"] for r in f["resources"]} for f in status["flavorsReservation"]}
    assert got == {"default": {"cpu": "8"}, "model_a": {GPU: "5"}, "model_b": {GPU: "3"},
                   "interconnect_a": {f"example.com/vf-{i}": "0" for i in range(3)}}


def test_a_queue_created_after_its_workloads_counts_the_unfinished_ones() -> None:
    """TestCacheClusterQueueOperations "add cluster queue after finished workloads": the reserving and
    admitted workloads count (2 cpu reserved, 1 admitted), the finished one does not."""
    folder = fold(local_queue("lq1", "cq1"),
                  {"apiVersion": API, "kind": "Workload", "metadata": {"name": "pending", "namespace": "ns"},
                   "spec": {"queueName": "lq1", "podSets": [{"name": "main", "count": 1, "template": {
                       "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]}},
                  holding("reserving", "cq1", {"cpu": ("f1", "1")}, lq="lq1"),
                  holding("admitted", "cq1", {"cpu": ("f1", "1")}, admitted=True, lq="lq1"),
                  holding("finished", "cq1", {"cpu": ("f1", "1")}, admitted=True, finished=True, lq="lq1"),
                  {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "f1"}},
                  cq("cq1", "", ("f1", {"cpu": "10"})), flavors=())
    assert folder.state.quota.cluster_queues["cq1"].usage == {"f1/cpu": 2_000}
    status = cluster_queue_status(folder.state, "cq1", T)
    assert status is not None
    assert _flavor_usage(status, "flavorsUsage") == {"f1": {"cpu": ("1", "0")}}
    assert (status["reservingWorkloads"], status["admittedWorkloads"]) == (2, 1)
