"""Dominant resource shares checked against the cases of Kueue's own table test.

The cases come from Kueue's ``pkg/cache/scheduler/fair_sharing_test.go``, ``TestDominantResourceShare`` (and
``TestIsBorrowingOn``): a ClusterQueue ``cq`` with quota and usage, usually a second ClusterQueue that lends
to the same cohort, sometimes a tree of Cohort objects, and optionally a request counted on top of the usage.
Each expects, for every node, the weighted share as the status field holds it (rounded up, an int64), the
dominant resource and whether the node borrows. The setups are rebuilt here as objects a user would apply.
"""

from __future__ import annotations

from typing import Any

import pytest

from kueue_es.statefile import ObjectFolder
from projections import fair_share
from projections.queue_status import weighted_share

T = 1_704_067_200_000
GPU = "example.com/gpu"
MAX_INT64 = 9_223_372_036_854_775_807


def _groups(quotas: dict[str, dict[str, Any]]) -> list[dict]:
    """``{flavor: {resource: nominal or (nominal, borrowingLimit, lendingLimit)}}`` as resource groups (one
    group per set of covered resources, as Kueue requires)."""
    by_covered: dict[tuple[str, ...], list[dict]] = {}
    for flavor, resources in quotas.items():
        rows = []
        for name, q in resources.items():
            nominal, borrowing, lending = q if isinstance(q, tuple) else (q, None, None)
            row = {"name": name, "nominalQuota": nominal}
            if borrowing is not None:
                row["borrowingLimit"] = borrowing
            if lending is not None:
                row["lendingLimit"] = lending
            rows.append(row)
        by_covered.setdefault(tuple(resources), []).append({"name": flavor, "resources": rows})
    return [{"coveredResources": list(c), "flavors": f} for c, f in by_covered.items()]


def _cq(name: str, cohort: str, quotas: dict, weight: str | None = None) -> dict:
    spec: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": _groups(quotas)}
    if cohort:
        spec["cohortName"] = cohort
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": spec}


def _cohort(name: str, parent: str = "", quotas: dict | None = None, weight: str | None = None) -> dict:
    spec: dict[str, Any] = {}
    if parent:
        spec["parentName"] = parent
    if quotas:
        spec["resourceGroups"] = _groups(quotas)
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": name},
            "spec": spec}


def _holding(i: int, flavor: str, resource: str, quantity: str) -> dict:
    """A workload of ``cq`` holding ``quantity`` of ``flavor``/``resource``, as Kueue's test reserves one per
    usage entry."""
    stamp = "2024-01-01T00:00:00Z"
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": f"workload-{i}", "namespace": "default", "uid": f"uid-{i}"},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "containers": [{"name": "c", "resources": {"requests": {resource: quantity}}}]}}}]},
        "status": {
            "admission": {"clusterQueue": "cq", "podSetAssignments": [{
                "name": "main", "count": 1, "flavors": {resource: flavor},
                "resourceUsage": {resource: quantity}}]},
            "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                            "message": "", "lastTransitionTime": stamp}]},
    }


def _state(cq: dict, lender: dict | None, cohorts: list[dict], usage: dict[tuple[str, str], str]):
    folder = ObjectFolder(T)
    folder.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    for f in ("default", "on-demand", "spot"):
        folder.put({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                    "metadata": {"name": f}})
    for c in cohorts:
        folder.put(c)
    folder.put(cq)
    if lender is not None:
        folder.put(lender)
    folder.put({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                "metadata": {"name": "lq", "namespace": "default"}, "spec": {"clusterQueue": "cq"}})
    for i, ((flavor, resource), quantity) in enumerate(sorted(usage.items())):
        folder.put(_holding(i, flavor, resource, quantity))
    return folder.state


def _rounded(d: fair_share.DRS) -> int:
    """The int64 Kueue's roundedWeightedShare gives for a share computed with a request on top."""
    w = d.weighted
    if w == float("inf"):
        return MAX_INT64
    return -int(-w // 1)


LEND_CPU_GPU = _cq("lending-cq", "test-cohort", {"default": {"cpu": "8", GPU: "5"}}, "1")
CQ_CPU_GPU = _cq("cq", "test-cohort", {"default": {"cpu": "2", GPU: "5"}}, "1")
IDLE = (0, "", False)

# name -> (cq, lender, cohorts, usage {(flavor, resource): quantity}, request {fr: int}, want {node: (share,
# dominant resource, borrowing)})
CASES: dict[str, tuple] = {
    "no cohort": (
        _cq("cq", "", {"default": {"cpu": "2000", GPU: "5"}}), None, [],
        {("default", "cpu"): "1", ("default", GPU): "2"}, {}, {"cq": IDLE}),
    "usage below nominal": (
        CQ_CPU_GPU, LEND_CPU_GPU, [], {("default", "cpu"): "1", ("default", GPU): "2"}, {},
        {"cq": IDLE, "lending-cq": IDLE, "test-cohort": IDLE}),
    "usage above nominal": (
        CQ_CPU_GPU, LEND_CPU_GPU, [], {("default", "cpu"): "3", ("default", GPU): "7"}, {},
        {"cq": (200, GPU, True), "lending-cq": IDLE, "test-cohort": IDLE}),
    "usage slightly above nominal in a cohort with large quotas": (
        _cq("cq", "test-cohort", {"default": {GPU: "500"}}, "1"),
        _cq("lending-cq", "test-cohort", {"default": {GPU: "1000"}}, "300"), [],
        {("default", GPU): "501"}, {}, {"cq": (1, GPU, True), "lending-cq": IDLE, "test-cohort": IDLE}),
    "usage way above nominal in a cohort with large quotas and weights": (
        _cq("cq", "test-cohort", {"default": {GPU: "500"}}, "300"),
        _cq("lending-cq", "test-cohort", {"default": {GPU: "1000"}}, "300"), [],
        {("default", GPU): "800"}, {}, {"cq": (1, GPU, True), "lending-cq": IDLE, "test-cohort": IDLE}),
    "one resource above nominal": (
        CQ_CPU_GPU, LEND_CPU_GPU, [], {("default", "cpu"): "3", ("default", GPU): "3"}, {},
        {"cq": (100, "cpu", True), "lending-cq": IDLE, "test-cohort": IDLE}),
    "usage with workload above nominal": (
        CQ_CPU_GPU, LEND_CPU_GPU, [], {("default", "cpu"): "1", ("default", GPU): "2"},
        {"default/cpu": 4000, f"default/{GPU}": 4},
        {"cq": (300, "cpu", True), "lending-cq": IDLE, "test-cohort": IDLE}),
    "A resource with zero lendable": (
        _cq("cq", "test-cohort", {"default": {"cpu": "2", GPU: ("2", None, "0")}}, "1"),
        _cq("lending-cq", "test-cohort", {"default": {"cpu": "8", GPU: ("64", None, "0")}}, "1"), [],
        {("default", "cpu"): "1", ("default", GPU): "1"}, {"default/cpu": 4000, f"default/{GPU}": 4},
        {"cq": (300, "cpu", True), "lending-cq": IDLE, "test-cohort": IDLE}),
    "a zero-weight ClusterQueue borrowing only what nobody lends": (
        _cq("cq", "test-cohort", {"default": {GPU: ("2", None, "0")}}, "0"),
        _cq("lending-cq", "test-cohort", {"default": {GPU: ("64", None, "0")}}, "1"), [],
        {("default", GPU): "3"}, {},
        {"cq": (MAX_INT64, "", True), "lending-cq": IDLE, "test-cohort": IDLE}),
    "multiple flavors": (
        _cq("cq", "test-cohort", {"on-demand": {"cpu": "20"}, "spot": {"cpu": "80"}}, "1"),
        _cq("lending-cq", "test-cohort", {"default": {"cpu": "100"}}, "1"), [],
        {("on-demand", "cpu"): "15", ("spot", "cpu"): "5"}, {"on-demand/cpu": 10_000},
        {"cq": (25, "cpu", True), "lending-cq": IDLE, "test-cohort": IDLE}),
    "above nominal with integer weight": (
        _cq("cq", "test-cohort", {"default": {GPU: "5"}}, "2"),
        _cq("lending-cq", "test-cohort", {"default": {GPU: "5"}}, "1"), [],
        {("default", GPU): "7"}, {}, {"cq": (100, GPU, True), "lending-cq": IDLE, "test-cohort": IDLE}),
    "above nominal with decimal weight": (
        _cq("cq", "test-cohort", {"default": {GPU: "5"}}, "0.5"),
        _cq("lending-cq", "test-cohort", {"default": {GPU: "5"}}, "1"), [],
        {("default", GPU): "7"}, {}, {"cq": (400, GPU, True), "lending-cq": IDLE, "test-cohort": IDLE}),
    "above nominal with zero weight": (
        _cq("cq", "test-cohort", {"default": {GPU: "5"}}, "0"),
        _cq("lending-cq", "test-cohort", {"default": {GPU: "10"}}, "1"), [],
        {("default", GPU): "7"}, {}, {"cq": (MAX_INT64, GPU, True), "lending-cq": IDLE, "test-cohort": IDLE}),
    "cohort has resource share": (
        _cq("cq", "child-cohort", {"default": {GPU: "5"}}, "1"), None,
        [_cohort("root", quotas={"default": {GPU: "45"}}), _cohort("child-cohort", "root", weight="2")],
        {("default", GPU): "10"}, {},
        {"cq": (100, GPU, True), "child-cohort": (50, GPU, True), "root": IDLE}),
    "resource share defined for resources only available at the root cohort": (
        _cq("cq", "child-cohort", {"default": {GPU: "0"}}, "1"), None,
        [_cohort("root", quotas={"default": {GPU: "50"}}), _cohort("child-cohort", "root", weight="2")],
        {("default", GPU): "10"}, {},
        {"cq": (200, GPU, True), "child-cohort": (100, GPU, True), "root": IDLE}),
    "resource share affected by borrowing limit": (
        _cq("cq", "child-cohort", {"default": {GPU: "0"}}), None,
        [_cohort("root", quotas={"default": {GPU: "50"}}),
         _cohort("child-cohort", "root", quotas={"default": {GPU: ("0", "10", None)}})],
        {("default", GPU): "10"}, {},
        {"cq": (1000, GPU, True), "child-cohort": (200, GPU, True), "root": IDLE}),
    "borrowing against unlimited lendable capacity (exabyte-scale quota)": (
        _cq("cq", "test-cohort", {"default": {"cpu": "0"}}, "1"),
        _cq("lending-cq", "test-cohort", {"default": {"cpu": "1E"}}, "1"), [],
        {("default", "cpu"): "1"}, {}, {"cq": (1, "cpu", True), "lending-cq": IDLE, "test-cohort": IDLE}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_dominant_resource_share_as_kueue_computes_it(name: str) -> None:
    cq, lender, cohorts, usage, request, want = CASES[name]
    state = _state(cq, lender, cohorts, usage)
    tree = state.quota
    got = {}
    for node_name in want:
        is_cq = node_name in tree.cluster_queues
        node = tree.cluster_queues[node_name] if is_cq else tree.cohorts[node_name]
        d = fair_share.dominant_share(node, request or None)
        share = _rounded(d) if request else weighted_share(
            state, "ClusterQueue" if is_cq else "Cohort", node_name)
        got[node_name] = (share, d.dominant, d.borrowing)
    assert got == want


# Kueue's TestIsBorrowingOn: "cq" (cpu 2, gpu 5) and "lending-cq" (cpu 8, gpu 5) in one cohort; whether cq
# borrows at all, and whether it borrows on a flavor-resource the request asks for.
BORROWING_ON = {
    "borrows on requested flavor": ({("default", "cpu"): "3"}, {"default/cpu": 1000}, True, True),
    "borrows on unrequested flavor only": (
        {("default", "cpu"): "1", ("default", GPU): "7"}, {"default/cpu": 1000}, False, True),
    "borrows on both, requests one": (
        {("default", "cpu"): "3", ("default", GPU): "7"}, {f"default/{GPU}": 1}, True, True),
    "no borrowing": ({("default", "cpu"): "1", ("default", GPU): "2"}, {"default/cpu": 1000}, False, False),
    "nil requestedFRs": ({("default", "cpu"): "3"}, {}, False, True),
}


@pytest.mark.parametrize("name", sorted(BORROWING_ON))
def test_borrowing_on_the_requested_flavor_resources(name: str) -> None:
    usage, requested, want_on, want_borrowing = BORROWING_ON[name]
    lender = _cq("lending-cq", "cohort", {"default": {"cpu": "8", GPU: "5"}})
    state = _state(_cq("cq", "cohort", {"default": {"cpu": "2", GPU: "5"}}, "1"), lender, [], usage)
    d = fair_share.dominant_share(state.quota.cluster_queues["cq"])
    assert (d.borrowing_on(requested), d.borrowing) == (want_on, want_borrowing)
