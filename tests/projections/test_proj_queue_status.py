"""ClusterQueue and LocalQueue status as Kueue writes it, computed from plain projected state."""

from __future__ import annotations

import msgspec
from fixtures.eventgen import (
    T0,
    cohort,
    flavor,
    fold,
    local_queue,
    meta,
    namespace,
    records,
    upsert,
    workload,
)

from events import objects as o
from events import schema as ev
from events.timefmt import format_time
from projections.queue_status import (
    COHORT_FIELDS,
    CQ_FIELDS,
    cluster_queue_status,
    cohort_status,
    local_queue_status,
    set_condition,
)

S = 1000
NOW = T0 + 100 * S


def cq(name: str = "cq", *, cohort: str = "", stop: str = "None", flavors=("on-demand", "spot"),
       checks: tuple[str, ...] = (), deleting: bool = False, status: dict | None = None) -> o.ClusterQueue:
    groups = [o.ResourceGroup(covered_resources=["memory", "cpu"], flavors=[
        o.FlavorQuotas(name=f, resources=[o.ResourceQuota(name="memory", nominal_quota="4Gi"),
                                          o.ResourceQuota(name="cpu", nominal_quota=2)]) for f in flavors])]
    strategy = o.AdmissionChecksStrategy(admission_checks=[o.AdmissionCheckStrategyRule(name=c) for c in checks]) \
        if checks else None
    return o.ClusterQueue(
        metadata=meta(name, generation=3, deletion_timestamp=format_time(T0) if deleting else None),
        spec=o.ClusterQueueSpec(resource_groups=groups, cohort_name=cohort, namespace_selector=o.LabelSelector(),
                                stop_policy=stop, admission_checks_strategy=strategy),
        status=status or {})


def two_flavor_admission(cpu_millis: int, flv: str = "on-demand") -> o.Admission:
    return o.Admission(cluster_queue="cq", pod_set_assignments=[o.PodSetAssignment(
        name="main", flavors={"cpu": flv, "memory": flv}, count=1,
        resource_usage={"cpu": f"{cpu_millis}m", "memory": "1Gi"})])


def state_with(*events: ev.AnyEvent, queue: o.ClusterQueue | None = None):
    base: list[ev.AnyEvent] = [upsert(namespace("team"), T0), upsert(flavor("on-demand"), T0),
                               upsert(flavor("spot"), T0), upsert(queue or cq(), T0),
                               upsert(local_queue("team", "lq", "cq"), T0)]
    return fold(records([base + list(events)]))


def d(t: int) -> dict[str, int]:
    return {"time": T0 + t * S, "cycle": t, "input": 0}


def busy() -> list[ev.AnyEvent]:
    """One admitted (3 cpu: borrowing 1 in a cohort), one only reserving (on spot), one pending, one parked."""
    return [
        upsert(workload("team", "a", queue="lq", cpu="3"), T0),
        upsert(workload("team", "r", queue="lq", cpu="500m"), T0),
        upsert(workload("team", "p", queue="lq"), T0),
        upsert(workload("team", "q", queue="lq"), T0),
        ev.QuotaReserved(key="team/a", admission=two_flavor_admission(3000), **d(1)),
        ev.WorkloadAdmitted(key="team/a", **d(1)),
        ev.QuotaReserved(key="team/r", admission=two_flavor_admission(500, "spot"), **d(2)),
        ev.WorkloadPending(key="team/q", reason="Pending", message="no", parked=True, requeue_reason="NoFit", **d(3)),
    ]


def test_active_cluster_queue_counts_and_flavor_usage_in_kueues_order_and_format() -> None:
    state = state_with(*busy(), queue=cq(cohort="research"))
    s = cluster_queue_status(state, "cq", NOW)
    assert s == {
        "conditions": [{"type": "Active", "status": "True", "reason": "Ready", "message": "Can admit new workloads",
                        "observedGeneration": 3, "lastTransitionTime": format_time(NOW)}],
        "pendingWorkloads": 2,  # one queued, one parked
        "reservingWorkloads": 2,
        "admittedWorkloads": 1,
        "flavorsReservation": [
            {"name": "on-demand", "resources": [{"name": "cpu", "total": "3", "borrowed": "1"},
                                                {"name": "memory", "total": "1Gi", "borrowed": "0"}]},
            {"name": "spot", "resources": [{"name": "cpu", "total": "500m", "borrowed": "0"},
                                           {"name": "memory", "total": "1Gi", "borrowed": "0"}]}],
        "flavorsUsage": [
            {"name": "on-demand", "resources": [{"name": "cpu", "total": "3", "borrowed": "1"},
                                                {"name": "memory", "total": "1Gi", "borrowed": "0"}]},
            {"name": "spot", "resources": [{"name": "cpu", "total": "0", "borrowed": "0"},
                                           {"name": "memory", "total": "0", "borrowed": "0"}]}],
    }


def test_borrowed_is_zero_outside_a_cohort() -> None:
    s = cluster_queue_status(state_with(*busy()), "cq", NOW)
    assert s is not None
    assert s["flavorsReservation"][0]["resources"][0] == {"name": "cpu", "total": "3", "borrowed": "0"}


def test_usage_is_written_as_kueues_resource_formatter_writes_it() -> None:
    """1G of memory is not a whole number of KiB: Kueue writes ``1G`` (not ``1000000000``); 1,500 cores ``1500``."""
    admission = o.Admission(cluster_queue="cq", pod_set_assignments=[o.PodSetAssignment(
        name="main", flavors={"cpu": "on-demand", "memory": "on-demand"}, count=1,
        resource_usage={"cpu": "1500", "memory": "1G"})])
    state = state_with(upsert(workload("team", "a", queue="lq", cpu="1500"), T0),
                       ev.QuotaReserved(key="team/a", admission=admission, **d(1)))
    s = cluster_queue_status(state, "cq", NOW)
    assert s is not None
    assert s["flavorsReservation"][0]["resources"] == [{"name": "cpu", "total": "1500", "borrowed": "0"},
                                                       {"name": "memory", "total": "1G", "borrowed": "0"}]


def test_inactive_cluster_queue_names_every_reason_and_leads_with_the_first() -> None:
    state = state_with(queue=cq(stop="Hold", flavors=("on-demand", "gone", "lost"), checks=("prov", "alpha")))
    s = cluster_queue_status(state, "cq", NOW)
    assert s is not None
    (c,) = s["conditions"]
    assert (c["status"], c["reason"]) == ("False", "Stopped")
    assert c["message"] == ("Can't admit new workloads: is stopped, references missing ResourceFlavor(s): gone,lost, "
                            "references missing AdmissionCheck(s): alpha,prov.")
    state = state_with(queue=cq(flavors=("on-demand", "gone")))
    c = cluster_queue_status(state, "cq", NOW)["conditions"][0]  # type: ignore[index]
    assert (c["reason"], c["message"]) == (
        "FlavorNotFound", "Can't admit new workloads: references missing ResourceFlavor(s): gone.")


def test_tas_flavor_without_its_topology() -> None:
    tas = o.ResourceFlavor(metadata=meta("on-demand"), spec=o.ResourceFlavorSpec(
        node_labels={"pool": "a"}, topology_name="dc"))
    state = state_with(upsert(tas, T0 + S))
    c = cluster_queue_status(state, "cq", NOW)["conditions"][0]  # type: ignore[index]
    assert (c["reason"], c["message"]) == (
        "TopologyNotFound", 'Can\'t admit new workloads: there is no Topology "dc" for TAS flavor "on-demand".')
    assert state.inactive_reason("cq") == "TopologyNotFound", "the scheduler and the status agree"


TAS_OFF = {"TopologyAwareScheduling": False, "TASFailedNodeReplacement": False,
           "TASFailedNodeReplacementFailFast": False, "TASReplaceNodeOnPodTermination": False,
           "TASHandleOverlappingFlavors": False, "TASMultiLayerTopology": False, "TASProfileMixed": False,
           "TASRecomputeAssignmentWithinSchedulingCycle": False, "TASReplaceNodeOnNodeTaints": False}


def _config(gates: dict[str, bool], t: int) -> ev.ConfigRecorded:
    doc = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "featureGates": gates}
    return ev.ConfigRecorded(time=T0 + t * S, document=doc, writer="test", id=f"config-{t}")


def test_a_missing_topology_stops_nothing_while_tas_is_off() -> None:
    """Kueue checks a TAS flavor's Topology only with its TopologyAwareScheduling gate on; the recorded
    Configuration turning the gate off, then on again, flips the ClusterQueue's Active condition both ways."""
    tas = o.ResourceFlavor(metadata=meta("on-demand"), spec=o.ResourceFlavorSpec(
        node_labels={"pool": "a"}, topology_name="dc"))
    state = state_with(upsert(tas, T0 + S))
    assert state.inactive_reason("cq") == "TopologyNotFound"
    state.apply(ev.Record(state.offset + 1, _config(TAS_OFF, 2)))
    c = cluster_queue_status(state, "cq", NOW)["conditions"][0]  # type: ignore[index]
    assert (c["status"], c["reason"], c["message"]) == ("True", "Ready", "Can admit new workloads")
    assert state.inactive_reason("cq") is None
    state.apply(ev.Record(state.offset + 1, _config({}, 3)))
    assert state.inactive_reason("cq") == "TopologyNotFound"


def test_terminating_cluster_queue_is_inactive_for_the_scheduler_too() -> None:
    state = state_with(queue=cq(deleting=True))
    c = cluster_queue_status(state, "cq", NOW)["conditions"][0]  # type: ignore[index]
    assert (c["status"], c["reason"], c["message"]) == (
        "False", "Terminating", "Can't admit new workloads; clusterQueue is terminating")
    assert state.inactive_reason("cq") == "Terminating"


def test_terminating_after_creation_is_seen_without_a_spec_change() -> None:
    state = state_with()
    assert state.inactive_reason("cq") is None
    state.apply(ev.Record(state.offset + 1, upsert(cq(deleting=True), T0 + S)))
    assert state.inactive_reason("cq") == "Terminating"


def test_condition_keeps_its_transition_time_while_the_status_holds() -> None:
    old = [{"type": "Other", "status": "True", "reason": "X", "message": "x", "lastTransitionTime": "T-other"},
           {"type": "Active", "status": "True", "reason": "Ready", "message": "old words", "lastTransitionTime": "T1"}]
    new = set_condition(old, {"type": "Active", "status": "True", "reason": "Ready", "message": "new words"}, NOW)
    assert new == [old[0], {"type": "Active", "status": "True", "reason": "Ready", "message": "new words",
                            "lastTransitionTime": "T1"}]
    flipped = set_condition(new, {"type": "Active", "status": "False", "reason": "Stopped", "message": "m"}, NOW)
    assert flipped[1]["lastTransitionTime"] == format_time(NOW) and flipped[0] == old[0]
    # the status the apiserver shows is what the condition is merged into
    state = state_with(queue=cq(status={"conditions": old, "pendingWorkloads": 7}))
    assert cluster_queue_status(state, "cq", NOW)["conditions"][1]["lastTransitionTime"] == "T1"  # type: ignore[index]


def test_missing_cluster_queue() -> None:
    assert cluster_queue_status(state_with(), "nope", NOW) is None


def test_local_queue_ready_with_its_own_workloads_only() -> None:
    other = [upsert(local_queue("team", "other", "cq"), T0), upsert(workload("team", "o", queue="other", cpu="1"), T0),
             ev.QuotaReserved(key="team/o", admission=two_flavor_admission(1000), **d(4)),
             ev.WorkloadAdmitted(key="team/o", **d(4))]
    s = local_queue_status(state_with(*busy(), *other), "team/lq", NOW)
    assert s == {
        "conditions": [{"type": "Active", "status": "True", "reason": "Ready",
                        "message": "Can submit new workloads to localQueue", "observedGeneration": 0,
                        "lastTransitionTime": format_time(NOW)}],
        "pendingWorkloads": 2, "reservingWorkloads": 2, "admittedWorkloads": 1,
        "flavorsReservation": [{"name": "on-demand", "resources": [{"name": "cpu", "total": "3"},
                                                                    {"name": "memory", "total": "1Gi"}]},
                               {"name": "spot", "resources": [{"name": "cpu", "total": "500m"},
                                                              {"name": "memory", "total": "1Gi"}]}],
        "flavorsUsage": [{"name": "on-demand", "resources": [{"name": "cpu", "total": "3"},
                                                              {"name": "memory", "total": "1Gi"}]},
                         {"name": "spot", "resources": [{"name": "cpu", "total": "0"},
                                                        {"name": "memory", "total": "0"}]}],
    }


def test_local_queue_stopped_shows_no_pending() -> None:
    state = state_with(*busy(), upsert(local_queue("team", "lq", "cq", stop_policy="Hold"), T0 + 5 * S))
    s = local_queue_status(state, "team/lq", NOW)
    assert s is not None
    assert (s["conditions"][0]["reason"], s["conditions"][0]["message"]) == ("Stopped", "LocalQueue is stopped")
    assert (s["pendingWorkloads"], s["reservingWorkloads"], s["admittedWorkloads"]) == (0, 2, 1)


def test_local_queue_of_a_missing_or_inactive_cluster_queue() -> None:
    state = state_with(upsert(local_queue("team", "lost", "nope"), T0), upsert(workload("team", "w", queue="lost"), T0))
    s = local_queue_status(state, "team/lost", NOW)
    assert s == {"conditions": [{"type": "Active", "status": "False", "reason": "ClusterQueueDoesNotExist",
                                 "message": "Can't submit new workloads to clusterQueue", "observedGeneration": 0,
                                 "lastTransitionTime": format_time(NOW)}],
                 "pendingWorkloads": 1, "reservingWorkloads": 0, "admittedWorkloads": 0}
    state = state_with(queue=cq(stop="HoldAndDrain"))
    c = local_queue_status(state, "team/lq", NOW)["conditions"][0]  # type: ignore[index]
    assert (c["status"], c["reason"]) == ("False", "ClusterQueueIsInactive")


def _dynamic(gate: bool, t: int) -> ev.ConfigRecorded:
    return _config({"DynamicQuotaOrchestration": gate}, t)


EFFECTIVE = {"effectiveQuotas": {"orchestratorRef": {"apiGroup": "kueue.x-k8s.io", "kind": "DynamicQuotaOrchestrator",
                                                     "name": "dqo"},
                                 "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [
                                     {"name": "spot", "resources": [{"name": "cpu", "nominalQuota": "100m"},
                                                                    {"name": "memory", "nominalQuota": "4Gi"}]}]}]}}
"""An orchestrator's quotas for ``cq``: only ``spot``, 100m of cpu (the spec has on-demand and spot, 2 cpu each)."""


def test_under_dynamic_quota_orchestration_the_status_lists_the_effective_quotas() -> None:
    """Kueue's ClusterQueue and LocalQueue status list the flavors of the quotas in force (its cache's, compiled
    from ``status.effectiveQuotas`` under DynamicQuotaOrchestration) and count ``borrowed`` above their nominal
    quota; with the gate off, the spec's."""
    state = state_with(_dynamic(True, 0), *busy(), queue=cq(cohort="research", status=EFFECTIVE))
    s = cluster_queue_status(state, "cq", NOW)
    assert s is not None
    assert [f["name"] for f in s["flavorsReservation"]] == ["spot"]
    assert s["flavorsReservation"][0]["resources"][0] == {"name": "cpu", "total": "500m", "borrowed": "400m"}
    lq = local_queue_status(state, "team/lq", NOW)
    assert lq is not None and [f["name"] for f in lq["flavorsReservation"]] == ["spot"]
    state.apply(ev.Record(state.offset + 1, _dynamic(False, 9)))
    s = cluster_queue_status(state, "cq", NOW)
    assert s is not None and [f["name"] for f in s["flavorsReservation"]] == ["on-demand", "spot"]


def test_terminating_cluster_queue_keeps_its_counts_accurate() -> None:
    """Kueue #13680: a ClusterQueue held by its finalizer while workloads reserve quota shows Active=False
    ``Terminating`` and goes on counting: its pending, reserving and admitted workloads as they are, and one that
    finishes meanwhile is no longer counted."""
    state = state_with(*busy(), upsert(cq(deleting=True), T0 + 5 * S))
    s = cluster_queue_status(state, "cq", NOW)
    assert s is not None
    c = s["conditions"][0]
    assert (c["status"], c["reason"], c["message"]) == (
        "False", "Terminating", "Can't admit new workloads; clusterQueue is terminating")
    assert (s["pendingWorkloads"], s["reservingWorkloads"], s["admittedWorkloads"]) == (2, 2, 1)
    assert s["flavorsUsage"][0]["resources"][0] == {"name": "cpu", "total": "3", "borrowed": "0"}
    state.apply(ev.Record(state.offset + 1, ev.WorkloadFinished(key="team/a", time=T0 + 6 * S)))
    s = cluster_queue_status(state, "cq", NOW)
    assert s is not None
    assert (s["pendingWorkloads"], s["reservingWorkloads"], s["admittedWorkloads"]) == (2, 1, 0)
    assert s["flavorsReservation"][0]["resources"][0] == {"name": "cpu", "total": "0", "borrowed": "0"}
    assert s["flavorsReservation"][1]["resources"][0] == {"name": "cpu", "total": "500m", "borrowed": "0"}
    lq = local_queue_status(state, "team/lq", NOW)
    assert lq is not None
    assert (lq["pendingWorkloads"], lq["reservingWorkloads"], lq["admittedWorkloads"]) == (2, 1, 0)


def test_cohort_cycle_makes_the_cluster_queue_inactive_with_cohort_cycle_detected() -> None:
    """Kueue #13774: a ClusterQueue whose Cohort's parent links loop is Active=False ``CohortCycleDetected``,
    its message naming its own Cohort (also when that Cohort only leads into the loop); breaking the loop makes
    it Ready again."""
    state = state_with(upsert(cohort("a"), T0), upsert(cohort("b", parent="a"), T0), queue=cq(cohort="b"))
    assert cluster_queue_status(state, "cq", NOW)["conditions"][0]["reason"] == "Ready"  # type: ignore[index]
    state.apply(ev.Record(state.offset + 1, upsert(cohort("a", parent="b"), T0 + S)))
    c = cluster_queue_status(state, "cq", NOW)["conditions"][0]  # type: ignore[index]
    assert (c["status"], c["reason"], c["message"]) == (
        "False", "CohortCycleDetected", 'Can\'t admit new workloads: Cohort "b" has a cycle in hierarchy.')
    assert state.inactive_reason("cq") == "CohortCycleDetected"
    state.apply(ev.Record(state.offset + 1, upsert(cq(cohort="c"), T0 + 2 * S)))
    state.apply(ev.Record(state.offset + 1, upsert(cohort("c", parent="a"), T0 + 2 * S)))
    c = cluster_queue_status(state, "cq", NOW)["conditions"][0]  # type: ignore[index]
    assert c["message"] == 'Can\'t admit new workloads: Cohort "c" has a cycle in hierarchy.'
    state.apply(ev.Record(state.offset + 1, upsert(cohort("a"), T0 + 3 * S)))
    c = cluster_queue_status(state, "cq", NOW)["conditions"][0]  # type: ignore[index]
    assert (c["status"], c["reason"]) == ("True", "Ready")
    assert state.inactive_reason("cq") is None


# --- Fair Sharing: status.fairSharing.weightedShare (ClusterQueue, Cohort) -------------------------------------


def fair_state(*, fair_sharing: bool = True, weight: str = "2"):
    """Cohort "co" (no parent) holds cq-a (4 cpu, weight ``weight``, 6 cpu in use) and cq-b (4 cpu, idle): cq-a
    borrows 2 of the 8 cpu "co" could lend, a dominant share of 250."""
    from fixtures.eventgen import cluster_queue as plain_cq

    a, b = plain_cq("cq-a", cohort="co", quotas={"on-demand": 4}), plain_cq("cq-b", cohort="co", quotas={"on-demand": 4})
    a = msgspec.structs.replace(a, spec=msgspec.structs.replace(a.spec, fair_sharing=o.FairSharing(weight=weight)))
    admission = o.Admission(cluster_queue="cq-a", pod_set_assignments=[o.PodSetAssignment(
        name="main", flavors={"cpu": "on-demand"}, count=1, resource_usage={"cpu": "6"})])
    events: list[ev.AnyEvent] = [
        upsert(namespace("team"), T0), upsert(flavor("on-demand"), T0), upsert(cohort("co"), T0), upsert(a, T0),
        upsert(b, T0), upsert(local_queue("team", "lq", "cq-a"), T0),
        upsert(workload("team", "big", queue="lq", cpu="6"), T0),
        ev.QuotaReserved(key="team/big", admission=admission, **d(1)),
    ]
    if fair_sharing:
        events.insert(0, ev.ConfigRecorded(time=T0, document={"fairSharing": {}}))
    return fold(records([events]))


def test_cluster_queue_status_carries_its_weighted_share_rounded_up() -> None:
    """Kueue writes ceil(share x 1000 / weight) as an int64: 250 / 2 = 125; 250 / 3 = 83.3 -> 84; an idle
    ClusterQueue 0."""
    assert cluster_queue_status(fair_state(), "cq-a", NOW)["fairSharing"] == {"weightedShare": 125}
    assert cluster_queue_status(fair_state(weight="3"), "cq-a", NOW)["fairSharing"] == {"weightedShare": 84}
    assert cluster_queue_status(fair_state(), "cq-b", NOW)["fairSharing"] == {"weightedShare": 0}


def test_a_zero_weight_borrower_saturates_at_maxint64() -> None:
    assert cluster_queue_status(fair_state(weight="0"), "cq-a", NOW)["fairSharing"] == {
        "weightedShare": 9223372036854775807}


def test_without_fair_sharing_the_field_is_absent_so_the_writer_clears_it() -> None:
    """Kueue sets ``status.fairSharing`` to nil with Fair Sharing off."""
    s = cluster_queue_status(fair_state(fair_sharing=False), "cq-a", NOW)
    assert s is not None and "fairSharing" not in s
    assert cohort_status(fair_state(fair_sharing=False), "co") == {}


def test_cohort_status_carries_its_weighted_share() -> None:
    """A Cohort object gets its share too (a root cohort has none: 0); an implicit cohort has no object."""
    assert cohort_status(fair_state(), "co") == {"fairSharing": {"weightedShare": 0}}
    assert cohort_status(fair_state(), "nowhere") is None
    assert "fairSharing" in COHORT_FIELDS and "fairSharing" in CQ_FIELDS


def test_a_zero_weight_cohort_that_borrows_saturates_at_maxint64() -> None:
    """Kueue's cohort_controller_test.go TestUpdateCohortStatusIfChanged, "fair sharing enabled with zero
    weight borrowing cohort reports NaN metric and MaxInt64 status": Cohort "cohort" (weight 0, no quota)
    under "root" (10 cpu) holds cq (weight 0, 0 cpu) using 2 cpu; the borrowing zero-weight Cohort's share is
    +inf, written as MaxInt64; the root, which has no parent to borrow from, shows 0."""
    from fixtures.eventgen import cluster_queue as plain_cq

    root = o.Cohort(metadata=meta("root"), spec=o.CohortSpec(resource_groups=[o.ResourceGroup(
        covered_resources=["cpu"], flavors=[o.FlavorQuotas(name="red", resources=[
            o.ResourceQuota(name="cpu", nominal_quota=10)])])]))
    zero = o.Cohort(metadata=meta("cohort"), spec=o.CohortSpec(parent_name="root",
                                                               fair_sharing=o.FairSharing(weight="0")))
    q = plain_cq("cq", cohort="cohort", quotas={"red": 0})
    q = msgspec.structs.replace(q, spec=msgspec.structs.replace(q.spec,
                                                                fair_sharing=o.FairSharing(weight="0")))
    admission = o.Admission(cluster_queue="cq", pod_set_assignments=[o.PodSetAssignment(
        name="main", flavors={"cpu": "red"}, count=1, resource_usage={"cpu": "2"})])
    state = fold(records([[
        ev.ConfigRecorded(time=T0, document={"fairSharing": {}}),
        upsert(namespace("ns"), T0), upsert(flavor("red"), T0), upsert(root, T0), upsert(zero, T0),
        upsert(q, T0), upsert(local_queue("ns", "lq", "cq"), T0),
        upsert(workload("ns", "wl", queue="lq", cpu="2"), T0),
        ev.QuotaReserved(key="ns/wl", admission=admission, **d(1)), ev.WorkloadAdmitted(key="ns/wl", **d(1)),
    ]]))
    assert cohort_status(state, "cohort") == {"fairSharing": {"weightedShare": 9223372036854775807}}
    assert cohort_status(state, "root") == {"fairSharing": {"weightedShare": 0}}
