"""Kueue's ``pkg/workload`` unit tests, case by case, on kueue-es's own functions for the same rules.

``workload_test.go``: ``TestNewInfo`` (what a workload counts: its pod sets' requests under the
Configuration's ``resources`` rules, less reclaimable pods while pending; its admission's usage, scaled down
to the pods left, while reserving), ``TestGetQueueOrderTimestamp``, ``TestReclaimablePodsAreEqual``,
``TestLimitReclaimablePodsToPodSetSizes``, ``TestIsOnHold``, ``TestNeedsSecondPass``. Each parameter id is
Kueue's case name.
"""

from __future__ import annotations

import pytest

from connectors.k8s.jobframework import within_pod_sets
from events import objects as o
from events.quantity import MAX_INT64, to_int
from events.timefmt import parse_time
from projections.queue_order import QueueOrder
from projections.request_rules import ResourceTransformation, compile_rules
from projections.secondpass import needs_second_pass
from projections.workloads import (
    ADMITTED,
    FINISHED,
    PENDING,
    RESERVED,
    PodSetInfo,
    WorkloadInfo,
    admission_usage,
    after_reclaim,
    on_hold,
    pod_set_info,
    reclaimable_of,
    resource_requests,
)


def _pod_set(name: str, count: int, **requests: str) -> o.PodSet:
    return o.PodSet(name=name, count=count, template=o.PodTemplateSpec(spec=o.PodSpec(containers=[
        o.Container(name="c", resources=o.ResourceRequirements(requests=requests))])))


def _workload(pod_sets: tuple[PodSetInfo, ...], conditions: tuple[o.Condition, ...] = (),
              reclaimable: tuple[tuple[str, int], ...] = (), created: int = 1000) -> WorkloadInfo:
    return WorkloadInfo(key="ns/wl", uid="u", namespace="ns", name="wl", queue_name="lq", created=created,
                        priority=0, priority_class="", pod_sets=after_reclaim(pod_sets, reclaimable),
                        spec_pod_sets=pod_sets, conditions=conditions)


# --- TestNewInfo: a pending workload ------------------------------------------------------------------------


def test_pending() -> None:
    """"pending": 10m cpu, 512Ki memory, one pod."""
    ps = pod_set_info(_pod_set("main", 1, cpu="10m", memory="512Ki"))
    assert dict(ps.requests) == {"cpu": 10, "memory": 512 * 1024} and ps.count == 1


def test_negative_request_floored_to_zero_in_total_requests() -> None:
    """"negative request floored to zero in total requests": cpu -10m on 2 pods counts 0."""
    ps = pod_set_info(_pod_set("main", 2, cpu="-10m", memory="512Ki"))
    assert dict(ps.requests) == {"cpu": 0, "memory": 512 * 1024} and ps.count == 2


@pytest.mark.parametrize(("reclaim_on", "count"), [
    pytest.param(True, 3, id="pending with reclaim; reclaimablePods on"),
    pytest.param(False, 5, id="pending with reclaim; reclaimablePods off"),
])
def test_pending_with_reclaim(reclaim_on: bool, count: int) -> None:
    """5 pods, 2 reclaimable: counted for 3 under the ReclaimablePods gate, for all 5 without it."""
    spec = (pod_set_info(_pod_set("main", 5, cpu="10m", memory="512Ki")),)
    (ps,) = after_reclaim(spec, (("main", 2),) if reclaim_on else ())
    assert ps.count == count and dict(ps.requests) == {"cpu": 10, "memory": 512 * 1024}


def test_prevent_int_overflow_in_total_requests() -> None:
    """"prevent int overflow in total requests": 2147483647 pods of 4300000 cpu total MaxInt64 (what Kueue
    writes as ``status.resourceRequests``)."""
    ps = pod_set_info(_pod_set("main", 2147483647, cpu="4300000"))
    (entry,) = resource_requests(_workload((ps,)))
    assert to_int("cpu", entry["resources"]["cpu"]) == MAX_INT64


# --- TestNewInfo: a reserving workload counts its admission -------------------------------------------------


def _reserving(spec_count: int, reclaim: int) -> WorkloadInfo:
    ps = pod_set_info(_pod_set("main", spec_count, cpu="10m", memory="10Ki"))
    return _workload((ps,), reclaimable=(("main", reclaim),) if reclaim else ())


def _admitted(count: int) -> o.Admission:
    return o.Admission(cluster_queue="cq", pod_set_assignments=[o.PodSetAssignment(
        name="main", flavors={"cpu": "f1", "memory": "f1"}, count=count,
        resource_usage={"cpu": f"{10 * count}m", "memory": f"{10 * count}Ki"})])


@pytest.mark.parametrize(("spec_count", "reclaim", "admitted", "pods"), [
    pytest.param(5, 2, 3, 3, id="admitted with reclaim; reclaimablePods on"),
    pytest.param(5, 0, 5, 5, id="admitted with reclaim; reclaimablePods off"),
    pytest.param(5, 3, 3, 2, id="admitted with reclaim and increased reclaim"),
    pytest.param(2, 5, 5, 0, id="admitted with stale reclaim exceeding scaled-down podSet count"),
    pytest.param(5, 0, 3, 3, id="partially admitted"),
])
def test_admitted_usage_scales_to_the_pods_left(spec_count: int, reclaim: int, admitted: int,
                                                pods: int) -> None:
    """The admission's usage (10m cpu, 10Ki memory a pod, ``admitted`` pods) scaled down to the pods the spec
    has left after its reclaimable ones — never up: a partial admission keeps what it was given. (The gate
    off, Kueue ignores the reclaimable pods: here, none are given.)"""
    usage = admission_usage(_admitted(admitted), _reserving(spec_count, reclaim))
    assert usage == {"f1/cpu": 10 * pods, "f1/memory": 10 * 1024 * pods}


# --- TestNewInfo: the Configuration's resources rules -------------------------------------------------------


def _rules(*transformations: dict, exclude: tuple[str, ...] = ()):
    return compile_rules(list(exclude), [ResourceTransformation(**t) for t in transformations], "test")


def _t(input_: str, outputs: dict[str, str], strategy: str | None = None, multiply_by: str = "") -> dict:
    return {"input": input_, "outputs": outputs, "strategy": strategy, "multiply_by": multiply_by}


_MIG = (
    _t("nvidia.com/mig-1g.5gb", {"example.com/accelerator-memory": "5Ki", "example.com/credits": "10"},
       "Replace"),
    _t("nvidia.com/mig-2g.10gb", {"example.com/accelerator-memory": "10Ki", "example.com/credits": "15"},
       "Replace"),
    _t("nvidia.com/gpu", {"example.com/accelerator-memory": "40Ki", "example.com/credits": "100"}, "Retain"),
    _t("nvidia.com/vgpucores", {"nvidia.com/total-vgpucores": "1"}, "Replace", "nvidia.com/vgpu"),
    _t("nvidia.com/vgpumem", {"nvidia.com/total-vgpumem": "1"}, "Replace", "nvidia.com/vgpu"),
)
_ALLOWANCE = (
    _t("nvidia.com/gpumem", {"quota.example.com/gpu-memory-overage": "1"}, "Replace", "nvidia.com/gpu"),
    _t("nvidia.com/gpu", {"quota.example.com/gpu-memory-overage": "-1024"}, "Retain"),
)


@pytest.mark.parametrize(("rules", "requests", "want"), [
    pytest.param(_rules(exclude=("dummyPrefix", "networking.example.com/")),
                 {"cpu": 10, "memory": 524288, "networking.example.com/vpc1": 1},
                 {"cpu": 10, "memory": 524288}, id="filterResources"),
    pytest.param(_rules(*_MIG), {"nvidia.com/mig-1g.5gb": 2, "nvidia.com/mig-2g.10gb": 1, "cpu": 1000},
                 {"cpu": 1000, "example.com/accelerator-memory": 20 * 1024, "example.com/credits": 35},
                 id="transformResources (a)"),
    pytest.param(_rules(*_MIG), {"nvidia.com/gpu": 1, "cpu": 2000},
                 {"cpu": 2000, "example.com/accelerator-memory": 40 * 1024, "example.com/credits": 100,
                  "nvidia.com/gpu": 1}, id="transformResources (b), per pod"),
    pytest.param(_rules(*_MIG),
                 {"nvidia.com/vgpu": 2, "nvidia.com/vgpucores": 20, "nvidia.com/vgpumem": 1024},
                 {"nvidia.com/vgpu": 2, "nvidia.com/total-vgpucores": 40, "nvidia.com/total-vgpumem": 2048},
                 id="transformResources (c)"),
    pytest.param(_rules(*_MIG),
                 {"nvidia.com/vgpu": 2, "nvidia.com/vgpucores": 30, "nvidia.com/vgpumem": 2048},
                 {"nvidia.com/vgpu": 2, "nvidia.com/total-vgpucores": 60, "nvidia.com/total-vgpumem": 4096},
                 id="transformResources (d), per pod"),
    pytest.param(_rules(*_ALLOWANCE), {"nvidia.com/gpumem": 2048, "nvidia.com/gpu": 2},
                 {"quota.example.com/gpu-memory-overage": 2048, "nvidia.com/gpu": 2},
                 id="transformAllowanceAboveIt"),
    pytest.param(_rules(*_ALLOWANCE), {"nvidia.com/gpumem": 1024, "nvidia.com/gpu": 2},
                 {"quota.example.com/gpu-memory-overage": 0, "nvidia.com/gpu": 2},
                 id="transformAllowanceExactlyAtIt"),
    pytest.param(_rules(*_ALLOWANCE), {"nvidia.com/gpumem": 512, "nvidia.com/gpu": 2},
                 {"quota.example.com/gpu-memory-overage": 0, "nvidia.com/gpu": 2},
                 id="transformAllowanceUnderIt"),
    pytest.param(_rules(_t("example.com/credit", {"example.com/gpu": "-1"}, "Replace")),
                 {"example.com/gpu": 8, "example.com/credit": 3}, {"example.com/gpu": 8},
                 id="transformAllowanceDoesNotReachADirectRequest"),
    pytest.param(_rules(_t("example.com/credit", {"example.com/gpu": "1"}, "Replace")),
                 {"example.com/gpu": 1, "example.com/credit": 1}, {"example.com/gpu": 2},
                 id="transformOutputSharingANameWithARequestIsAdded"),
    pytest.param(_rules(_t("example.com/gpu", {"example.com/gpu": "5"}, "Retain")),
                 {"example.com/gpu": 1}, {"example.com/gpu": 6},
                 id="transformOutputSharingANameWithItsRetainedInputIsAdded"),
    pytest.param(_rules(_t("example.com/gpumem", {"example.com/gpumem-quota": "1"}, "Retain",
                           "example.com/gpu")),
                 {"example.com/gpumem": 1024, "example.com/gpu": 2},
                 {"example.com/gpumem": 1024, "example.com/gpumem-quota": 2048, "example.com/gpu": 2},
                 id="transformRetainWithMultiplyBy"),
    pytest.param(_rules(_t("example.com/gpumem", {"example.com/gpumem-quota": "1"}, None, "cpu")),
                 {"example.com/gpumem": 1024, "cpu": 500},
                 {"example.com/gpumem": 1024, "example.com/gpumem-quota": 512, "cpu": 500},
                 id="transformRetainWithMultiplyByUnderOne"),
    pytest.param(_rules(_t("example.com/gpu", {"example.com/gpu": "1"}, "Retain", "example.com/node")),
                 {"example.com/gpu": 1, "example.com/node": 2}, {"example.com/gpu": 3, "example.com/node": 2},
                 id="transformOutputSharingANameWithItsRetainedInputIsAddedToTheAmountRequested"),
    pytest.param(_rules(_t("example.com/credit", {"example.com/gpu": "10000000000"}, "Replace")),
                 {"example.com/credit": 10000000000}, {"example.com/gpu": MAX_INT64},
                 id="transformProductPastTheRangeIsNotFlooredAway"),
    pytest.param(_rules(_t("cpu", {"example.com/cpu-credits": "3000"}, "Replace"),
                        _t("memory", {"example.com/memory-credits": "3m"}, "Replace")),
                 {"cpu": 100, "memory": 100_000_000},
                 {"example.com/cpu-credits": 300, "example.com/memory-credits": 300_000},
                 id="transformMilliValues"),
])
def test_request_rules(rules, requests: dict[str, int], want: dict[str, int]) -> None:
    """Per-pod requests (Kueue units) under the rules; Kueue's totals are these times the pod count."""
    assert rules.apply(requests) == want


# --- TestGetQueueOrderTimestamp -----------------------------------------------------------------------------

_CREATED, _CONDITION = "2024-01-01T00:00:00Z", "2024-01-01T01:00:00Z"


@pytest.mark.parametrize(("condition", "eviction_ordering", "creation_ordering"), [
    pytest.param(None, _CREATED, _CREATED, id="no condition"),
    pytest.param(o.Condition(type="Evicted", status="True", reason="Preempted",
                             last_transition_time=_CONDITION),
                 _CREATED, _CREATED, id="evicted by preemption"),
    pytest.param(o.Condition(type="Evicted", status="True", reason="PodsReadyTimeout",
                             last_transition_time=_CONDITION), _CONDITION, _CREATED,
                 id="evicted by PodsReady timeout"),
    pytest.param(o.Condition(type="Evicted", status="False", reason="PodsReadyTimeout",
                             last_transition_time=_CONDITION), _CREATED, _CREATED, id="after eviction"),
])
def test_queue_order_timestamp(condition: o.Condition | None, eviction_ordering: str,
                               creation_ordering: str) -> None:
    """Under ``requeuingStrategy.timestamp: Eviction`` a PodsReady-timeout eviction restarts the queue time;
    under ``Creation``, and for any other eviction, creation counts."""
    wl = _workload((), (condition,) if condition else (), created=parse_time(_CREATED))
    assert QueueOrder(eviction_timestamp=True).time(wl) == parse_time(eviction_ordering)
    assert QueueOrder(eviction_timestamp=False).time(wl) == parse_time(creation_ordering)


# --- TestReclaimablePodsAreEqual, TestLimitReclaimablePodsToPodSetSizes -------------------------------------


def _reclaimable(*pairs: tuple[str, int]) -> list[o.ReclaimablePod]:
    return [o.ReclaimablePod(name=n, count=c) for n, c in pairs]


@pytest.mark.parametrize(("a", "b", "equal"), [
    pytest.param([], [], True, id="both empty"),
    pytest.param([], [("rp1", 1)], False, id="one empty"),
    pytest.param([("rp1", 1), ("rp2", 2)], [("rp2", 1), ("rp1", 1)], False, id="one value mismatch"),
    pytest.param([("rp1", 1), ("rp2", 2)], [("rp3", 3), ("rp1", 1)], False, id="one name mismatch"),
    pytest.param([("rp1", 1), ("rp2", 2)], [("rp1", 1)], False, id="length mismatch"),
    pytest.param([("rp1", 1), ("rp2", 2)], [("rp2", 2), ("rp1", 1)], True, id="equal"),
])
def test_reclaimable_pods_are_equal(a, b, equal: bool) -> None:
    """Kueue compares the lists as maps: their order means nothing."""
    assert (reclaimable_of(_reclaimable(*a)) == reclaimable_of(_reclaimable(*b))) is equal


@pytest.mark.parametrize(("reclaimable", "want"), [
    pytest.param((), (), id="empty"),
    pytest.param((("ps1", 3), ("ps2", 1)), (("ps1", 3), ("ps2", 1)), id="within podSet sizes"),
    pytest.param((("ps1", 4), ("ps2", 6)), (("ps1", 3), ("ps2", 5)),
                 id="count exceeding its podSet size is lowered"),
    pytest.param((("ps3", 10),), (("ps3", 10),), id="unknown podSet is left as is"),
])
def test_limit_reclaimable_pods_to_pod_set_sizes(reclaimable, want) -> None:
    """Pod sets ps1 (3) and ps2 (5)."""
    obs = o.Workload(metadata=o.ObjectMeta(name="wl", namespace="ns"),
                     spec=o.WorkloadSpec(pod_sets=[_pod_set("ps1", 3), _pod_set("ps2", 5)]))
    assert within_pod_sets(reclaimable, obs) == want


# --- TestIsOnHold -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("condition", "held"), [
    pytest.param(None, False, id="false without QuotaReserved condition"),
    pytest.param(o.Condition(type="QuotaReserved", status="False", reason="OnHold",
                             message="StatefulSet scaled to zero; workload on hold"), True,
                 id="true with QuotaReserved=False and reason OnHold"),
    pytest.param(o.Condition(type="QuotaReserved", status="False", reason="Inadmissible"), False,
                 id="false when QuotaReserved=False with other reason"),
    pytest.param(o.Condition(type="QuotaReserved", status="True", reason="OnHold"), False,
                 id="false when QuotaReserved=True"),
])
def test_is_on_hold(condition: o.Condition | None, held: bool) -> None:
    assert on_hold(_workload((), (condition,) if condition else ())) is held


# --- TestNeedsSecondPass ------------------------------------------------------------------------------------


def _on_node(node: str, delayed: bool = False) -> o.Admission:
    """A one-pod-set TAS admission placing its pod on ``node`` (or, ``delayed``, waiting for the second
    pass)."""
    if delayed:
        psa = o.PodSetAssignment(name="one", flavors={"cpu": "tas-default"}, resource_usage={"cpu": "1"},
                                 count=1, delayed_topology_request="Pending")
    else:
        ta = o.TopologyAssignment(levels=["kubernetes.io/hostname"], slices=[o.TopologyAssignmentSlice(
            domain_count=1, values_per_level=[o.TopologyAssignmentSliceLevelValues(universal=node)],
            pod_counts=o.TopologyAssignmentSlicePodCounts(universal=1))])
        psa = o.PodSetAssignment(name="one", flavors={"cpu": "tas-default"}, resource_usage={"cpu": "1"},
                                 count=1, topology_assignment=ta)
    return o.Admission(cluster_queue="tas-main", pod_set_assignments=[psa])


def _check(state: str) -> dict[str, o.AdmissionCheckState]:
    return {"prov-check": o.AdmissionCheckState(name="prov-check", state=state)}


@pytest.mark.parametrize(("phase", "admission", "unhealthy", "evicted", "checks", "want"), [
    pytest.param(ADMITTED, _on_node("x0"), ("x0",), "", {}, True, id="admitted workload with UnhealthyNode"),
    pytest.param(ADMITTED, _on_node("x0"), (), "", {}, False, id="admitted workload without UnhealthyNode"),
    pytest.param(ADMITTED, _on_node("x1"), ("x0",), "", {}, False,
                 id="admitted workload with UnhealthyNode, but no node in the assignment"),
    pytest.param(FINISHED, _on_node("x0"), ("x0",), "", {}, False, id="finished workload with UnhealthyNode"),
    pytest.param(ADMITTED, _on_node("x0"), ("x0",), "Evicted", {}, False,
                 id="evicted workload with UnhealthyNode"),
    pytest.param(RESERVED, _on_node("", delayed=True), (), "", _check("Ready"), True,
                 id="quotaReserved and admission checks Ready when workload delayedTopologyRequest=Pending"),
    pytest.param(RESERVED, _on_node("", delayed=True), (), "", _check("Pending"), False,
                 id="quotaReserved and admission checks Pending"),
    pytest.param(PENDING, None, (), "", {}, False, id="workload without quota"),
])
def test_needs_second_pass(phase: str, admission: o.Admission | None, unhealthy: tuple[str, ...],
                           evicted: str, checks: dict[str, o.AdmissionCheckState], want: bool) -> None:
    """(Kueue's "on-hold workload with UnhealthyNode": a Workload put on hold gives back its quota and its
    admission in kueue-es, so it is the last case here; tests/projections/test_proj_on_hold.py folds it.)"""
    wl = _workload(())
    wl.phase, wl.admission, wl.unhealthy_nodes, wl.evicted, wl.check_states = (
        phase, admission, unhealthy, evicted, checks)
    assert needs_second_pass(wl, lambda _: sorted(checks)) is want
