"""Admitted=False on a workload short of admission (:mod:`projections.admitted_condition`): the reasons Kueue's
``SyncAdmittedCondition`` gives with UnadmittedWorkloadsObservability on and off, and when it writes them."""

from __future__ import annotations

import pytest

from events import objects as o
from projections.admitted_condition import sync_unadmitted, unadmitted
from projections.workloads import ADMITTED, PENDING, RESERVED, WorkloadInfo

T = 1_704_067_200_000
NO_RES = ("NoReservation", "The workload has no reservation")
CHECKS = ("UnsatisfiedAdmissionChecks", "The workload has not all checks ready")
DELAYED = ("PendingDelayedTopologyRequests", "There are pending delayed topology requests")
BOTH = ("NoReservationUnsatisfiedChecks", "The workload has no reservation and not all checks ready")
LEGACY_CHECKS = ("UnsatisfiedChecks", "The workload has not all checks ready")


def _wl(phase: str, check: str | None = None, *, delayed: bool = False,
        conditions: tuple[o.Condition, ...] = ()) -> WorkloadInfo:
    wl = WorkloadInfo(key="ns/w", uid="u", namespace="ns", name="w", queue_name="lq", created=T, priority=0,
                      priority_class="", pod_sets=())
    wl.phase = phase
    if check is not None:
        wl.check_states = {"c": o.AdmissionCheckState(name="c", state=check)}
    if phase != PENDING:
        wl.admission = o.Admission(cluster_queue="cq", pod_set_assignments=[o.PodSetAssignment(
            name="main", delayed_topology_request="Pending" if delayed else None)])
    wl.conditions = conditions
    return wl


def _cond(type_: str, status: str, reason: str = "R", message: str = "m", at: str = "2024-01-01T00:00:00Z"):
    return o.Condition(type=type_, status=status, reason=reason, message=message, last_transition_time=at)


@pytest.mark.parametrize(("phase", "check", "delayed", "on", "off"), [
    (PENDING, None, False, NO_RES, NO_RES),
    (PENDING, "Pending", False, NO_RES, BOTH),  # KEP-10852 drops the hybrid reason
    (PENDING, "Ready", False, NO_RES, NO_RES),
    (RESERVED, "Pending", False, CHECKS, LEGACY_CHECKS),
    (RESERVED, "Rejected", True, CHECKS, LEGACY_CHECKS),  # checks before the delayed topology
    (RESERVED, "Ready", True, DELAYED, DELAYED),
    (RESERVED, None, True, DELAYED, DELAYED),
    (RESERVED, "Ready", False, None, None),  # all it needs: Admitted=True is the admission's to write
])
def test_the_reason_in_kueues_order(phase, check, delayed, on, off) -> None:
    wl = _wl(phase, check, delayed=delayed)
    assert unadmitted(wl, True) == on
    assert unadmitted(wl, False) == off


def test_under_the_gate_it_comes_with_the_quota_reserved_condition() -> None:
    fresh = _wl(PENDING)
    assert not sync_unadmitted(fresh, T, True), "no status yet: none (UnadmittedWorkloadsExplicitStatus off)"
    assert fresh.condition("Admitted") is None
    tried = _wl(PENDING, conditions=(_cond("QuotaReserved", "False", "WaitingForQuota"),))
    assert sync_unadmitted(tried, T, True)
    assert [c.type for c in tried.conditions] == ["QuotaReserved", "Admitted"]
    adm = tried.condition("Admitted")
    assert (adm.status, adm.reason, adm.message, adm.last_transition_time) == ("False", *NO_RES,
                                                                              "2024-01-01T00:00:00Z")


def test_under_the_gate_the_reason_follows_and_the_transition_time_stays() -> None:
    wl = _wl(RESERVED, "Pending", conditions=(_cond("QuotaReserved", "True"), _cond("Admitted", "False", *NO_RES)))
    assert sync_unadmitted(wl, T + 9000, True)
    adm = wl.condition("Admitted")
    assert (adm.reason, adm.last_transition_time) == (CHECKS[0], "2024-01-01T00:00:00Z")
    assert not sync_unadmitted(wl, T + 10_000, True), "nothing to change: no write"


def test_gate_off_only_admitted_true_goes_down() -> None:
    never = _wl(RESERVED, "Pending", conditions=(_cond("QuotaReserved", "True"),))
    assert not sync_unadmitted(never, T, False) and never.condition("Admitted") is None
    was = _wl(ADMITTED, "Rejected", conditions=(_cond("QuotaReserved", "True"), _cond("Admitted", "True")))
    assert sync_unadmitted(was, T + 5000, False)
    adm = was.condition("Admitted")
    assert (adm.status, adm.reason, adm.last_transition_time) == ("False", "UnsatisfiedChecks", "2024-01-01T00:00:05Z")
    was.phase, was.admission = PENDING, None
    assert not sync_unadmitted(was, T + 6000, False), "a False condition is left as it is"
    assert was.condition("Admitted").reason == "UnsatisfiedChecks"
