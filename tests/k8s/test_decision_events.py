"""The Events Kueue records for each decision (connectors/k8s/decision_events.py), case by case from Kueue's
formats, and the fold that holds them until the decision is carried out.

Expected messages are Kueue's own: ``pkg/scheduler/scheduler.go`` (QuotaReserved, Admitted, the Pending Warning,
SecondPassFailed, WorkloadSliceReplaced), ``pkg/scheduler/preemption/preemption.go`` (Preempted, PreemptedWorkload; the TAS preemption
case of ``scheduler_test.go`` is reproduced word for word), ``pkg/workload/evict`` (EvictedDueTo...),
``pkg/controller/core/workload_controller.go`` (Admitted after checks, AdmissionCheckRejected,
MaximumExecutionTimeExceeded, Deleted, AdmissionGated, AdmissionGateCleared) and the ProvisioningRequest controller (AdmissionCheckUpdated,
ProvisioningRequestCreated).
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from connectors.k8s.decision_events import (
    ADMISSION,
    JOB_CONTROLLER,
    PROVISIONING_CONTROLLER,
    TAS_CONTROLLER,
    WORKLOAD_CONTROLLER,
    Involved,
    before,
    event_name,
    kueue_events,
)
from connectors.k8s.mirror import Mirror
from events import objects as o
from events import schema as ev
from events.message_limits import truncate_message
from events.timefmt import format_time, parse_time
from projections.workloads import ADMITTED, FINISHED, PENDING, RESERVED, WorkloadInfo

T0 = parse_time("2026-01-01T00:00:00Z")
BASE: dict[str, Any] = {"cycle": 7, "input": 3}
WL_API = "kueue.x-k8s.io/v1beta2"
SLICE_MESSAGE = "Replaced to accommodate a workload (UID: foo-2-uid, JobUID: job-uid) due to workload slice aggregation"


def cond(type_: str, at: int, status: str = "True", reason: str = "R") -> o.Condition:
    return o.Condition(type=type_, status=status, reason=reason, last_transition_time=format_time(at))


def wl(name: str = "foo", *, phase: str = PENDING, priority: int = 0, cq: str = "", created: int = T0,
       conditions: list[o.Condition] | None = None, checks: dict[str, str] | None = None) -> WorkloadInfo:
    return WorkloadInfo(
        key=f"default/{name}", uid=f"{name}-uid", namespace="default", name=name, queue_name="lq", created=created,
        priority=priority, priority_class="", pod_sets=(), phase=phase, cluster_queue=cq,
        admission=o.Admission(cluster_queue=cq) if phase in (RESERVED, ADMITTED) else None,
        conditions=conditions or [],
        check_states={n: o.AdmissionCheckState(name=n, state=s) for n, s in (checks or {}).items()})


def events_for(d: ev.Decision, w: WorkloadInfo, **kw: Any):
    return kueue_events(d, before(d, w, **kw))


def on(w: WorkloadInfo) -> Involved:
    return Involved(WL_API, "Workload", w.namespace, w.name, w.uid)


def rows(events) -> list[tuple]:
    return [(e.involved, e.type, e.reason, e.action, e.message, e.component) for e in events]


PENDING_WL = wl()
REQUEUED_WL = wl(conditions=[cond("Requeued", T0 + 30_000)])
RESERVED_WL = wl(phase=RESERVED, cq="cq", conditions=[cond("QuotaReserved", T0 + 10_000)])
ADMITTED_WL = wl(phase=ADMITTED, cq="cq", conditions=[cond("QuotaReserved", T0), cond("Admitted", T0)])
LIMITED_WL = msgspec.structs.replace(ADMITTED_WL, max_execution_seconds=60)
GATED_WL = wl(conditions=[cond("QuotaReserved", T0, status="False", reason="AdmissionGated")])
VICTIM = wl("low-priority-admitted", phase=ADMITTED, priority=1, cq="tas-main")
PREEMPTOR = wl("foo", priority=3)
PREEMPTION = ("Preempted to accommodate a workload (UID: wl-foo, JobUID: job-foo) due to prioritization in the "
              "ClusterQueue; preemptor path: /tas-main; preemptee path: /tas-main")
PRIOS = "preemptor effective priority: 3 (base: 3, boost: 0); preemptee effective priority: 1 (base: 1, boost: 0)"
BOOSTED_VICTIM = msgspec.structs.replace(VICTIM, priority=1 - 5, boost=-5, boost_annotation="-5")
"""Under PriorityBoost, ``priority`` is the effective priority: base 1 plus the annotation's -5."""
BOOSTED_PREEMPTOR = msgspec.structs.replace(PREEMPTOR, priority=3 + 20, boost=20, boost_annotation="20")
BOOSTED_PRIOS = ("preemptor effective priority: 23 (base: 3, boost: 20); "
                 "preemptee effective priority: -4 (base: 1, boost: -5)")
REQUEST = o.ProvisioningRequest(metadata=o.ObjectMeta(name="foo-prov-1", namespace="default"))
JOB = Involved("batch/v1", "Job", "default", "job", "job-uid")

CASES: list[tuple[str, ev.Decision, WorkloadInfo, dict[str, Any], list[tuple]]] = [
    ("quota reserved: waited since creation",
     ev.QuotaReserved(time=T0 + 42_400, key="default/foo", admission=o.Admission(cluster_queue="cq"), **BASE),
     PENDING_WL, {},
     [(on(PENDING_WL), "Normal", "QuotaReserved", "QuotaReserved",
       "Quota reserved in ClusterQueue cq, wait time since queued was 42s", ADMISSION)]),
    ("quota reserved: waited since the last requeue, rounded as Go's %.0f",
     ev.QuotaReserved(time=T0 + 32_500, key="default/foo", admission=o.Admission(cluster_queue="cq"), **BASE),
     REQUEUED_WL, {},
     [(on(REQUEUED_WL), "Normal", "QuotaReserved", "QuotaReserved",
       "Quota reserved in ClusterQueue cq, wait time since queued was 2s", ADMISSION)]),
    ("quota reserved after considering other flavors: Kueue's summary of them follows",
     ev.QuotaReserved(time=T0 + 9_000, key="default/foo", admission=o.Admission(cluster_queue="tas-main"),
                      considered_flavors='one: default(NoFit;Flavor "default" does not support '
                                         'TopologyAwareScheduling)', **BASE),
     PENDING_WL, {},
     [(on(PENDING_WL), "Normal", "QuotaReserved", "QuotaReserved",
       'Quota reserved in ClusterQueue tas-main, wait time since queued was 9s; Flavors considered: one: '
       'default(NoFit;Flavor "default" does not support TopologyAwareScheduling)', ADMISSION)]),
    ("quota reserved again (a workload holding quota): Kueue records nothing",
     ev.QuotaReserved(time=T0, key="default/foo", admission=o.Admission(cluster_queue="cq"), **BASE),
     RESERVED_WL, {}, []),
    ("admitted by the scheduler in the reserving cycle: 0s",
     ev.WorkloadAdmitted(time=T0 + 99_000, key="default/foo", **BASE), RESERVED_WL, {"by_scheduler": True},
     [(on(RESERVED_WL), "Normal", "Admitted", "Admitted",
       "Admitted by ClusterQueue cq, wait time since reservation was 0s", ADMISSION)]),
    ("admitted by the workload controller once its checks are Ready",
     ev.WorkloadAdmitted(time=T0 + 75_000, key="default/foo", **BASE), RESERVED_WL, {},
     [(on(RESERVED_WL), "Normal", "Admitted", "Admitted",
       "Admitted by ClusterQueue cq, wait time since reservation was 65s", WORKLOAD_CONTROLLER)]),
    ("a failed admission attempt: Warning with the condition's reason",
     ev.WorkloadPending(time=T0, key="default/foo", reason="WaitingForQuota",
                        message="couldn't assign flavors to pod set main: insufficient unused quota for cpu in "
                                "flavor default, 1 more needed", requeue_reason="NoFit", parked=True, **BASE),
     PENDING_WL, {},
     [(on(PENDING_WL), "Warning", "WaitingForQuota", "WaitingForQuota",
       "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 1 more "
       "needed", ADMISSION)]),
    ("a preemptor waiting for its victims",
     ev.WorkloadPending(time=T0, key="default/foo", reason="WaitingForPreemptedWorkloads",
                        message='couldn\'t assign flavors to pod set one: topology "tas-single-level" doesn\'t '
                                'allow to fit any of 1 pod(s). Total nodes: 1; excluded: resource "cpu": 1. '
                                'Pending the preemption of 1 workload(s)', requeue_reason="PendingPreemption",
                        **BASE),
     PREEMPTOR, {},
     [(on(PREEMPTOR), "Warning", "WaitingForPreemptedWorkloads", "WaitingForPreemptedWorkloads",
       'couldn\'t assign flavors to pod set one: topology "tas-single-level" doesn\'t allow to fit any of 1 '
       'pod(s). Total nodes: 1; excluded: resource "cpu": 1. Pending the preemption of 1 workload(s)',
       ADMISSION)]),
    ("the scheduler's namespace mismatch is an attempt too",
     ev.WorkloadPending(time=T0, key="default/foo", reason="Misconfigured",
                        message="Workload namespace doesn't match ClusterQueue selector",
                        requeue_reason="NamespaceMismatch", parked=True, **BASE),
     PENDING_WL, {},
     [(on(PENDING_WL), "Warning", "Misconfigured", "Misconfigured",
       "Workload namespace doesn't match ClusterQueue selector", ADMISSION)]),
    ("the scheduler skipping a workload with failed checks",
     ev.WorkloadPending(time=T0, key="default/foo", reason="PendingEvaluation",
                        message="The workload has failed admission checks", **BASE),
     PENDING_WL, {},
     [(on(PENDING_WL), "Warning", "PendingEvaluation", "PendingEvaluation",
       "The workload has failed admission checks", ADMISSION)]),
    ("the workload controller's queue blocker: no Event",
     ev.WorkloadPending(time=T0, key="default/foo", reason="Misconfigured", message="LocalQueue lq doesn't exist",
                        **BASE),
     PENDING_WL, {}, []),
    ("waitForPodsReady.blockAdmission holding an entry: Kueue patches the status and waits, no Event",
     ev.WorkloadPending(time=T0, key="default/foo", reason="WaitingForPodsReady",
                        message="waiting for all admitted workloads to be in PodsReady condition", **BASE),
     PENDING_WL, {}, []),
    ("the same with UnadmittedWorkloadsObservability off (reason Waiting): no Event",
     ev.WorkloadPending(time=T0, key="default/foo", reason="Waiting",
                        message="waiting for all admitted workloads to be in PodsReady condition", **BASE),
     PENDING_WL, {}, []),
    ("the workload controller's PendingEvaluation: no Event",
     ev.WorkloadPending(time=T0, key="default/foo", reason="PendingEvaluation",
                        message="Workload is pending evaluation in the scheduling queue", **BASE),
     PENDING_WL, {}, []),
    ("the workload controller gating a workload (Kueue's mayUpdateConditionForAdmissionGatedBy)",
     ev.WorkloadPending(time=T0, key="default/foo", reason="AdmissionGated",
                        message="Admission is gated by: example.com/a,example.com/b", **BASE),
     PENDING_WL, {},
     [(on(PENDING_WL), "Normal", "AdmissionGated", "AdmissionGated",
       "Workload admission is gated by: example.com/a,example.com/b", WORKLOAD_CONTROLLER)]),
    ("a gate removed from a workload already gated: the condition follows, no Event",
     ev.WorkloadPending(time=T0, key="default/foo", reason="AdmissionGated",
                        message="Admission is gated by: example.com/b", **BASE),
     GATED_WL, {}, []),
    ("the admission gate cleared",
     ev.WorkloadPending(time=T0, key="default/foo", reason="PendingEvaluation",
                        message="AdmissionGatedBy cleared, waiting for quota reservation", **BASE),
     GATED_WL, {},
     [(on(GATED_WL), "Normal", "AdmissionGateCleared", "AdmissionGateCleared",
       "Admission gate cleared, workload is now admissible", WORKLOAD_CONTROLLER)]),
    ("the same with UnadmittedWorkloadsObservability off (Pending, its fallback reason)",
     ev.WorkloadPending(time=T0, key="default/foo", reason="Pending",
                        message="AdmissionGatedBy cleared, waiting for quota reservation", **BASE),
     GATED_WL, {},
     [(on(GATED_WL), "Normal", "AdmissionGateCleared", "AdmissionGateCleared",
       "Admission gate cleared, workload is now admissible", WORKLOAD_CONTROLLER)]),
    ("the workload controller's queue blocker with UnadmittedWorkloadsObservability off (Inadmissible): no Event",
     ev.WorkloadPending(time=T0, key="default/foo", reason="Inadmissible", message="LocalQueue lq doesn't exist",
                        **BASE),
     PENDING_WL, {}, []),
    ("the scheduler's attempt with UnadmittedWorkloadsObservability off: Warning Pending (requeueAndUpdate)",
     ev.WorkloadPending(time=T0, key="default/foo", reason="Pending",
                        message="couldn't assign flavors to pod set main: insufficient quota for cpu in flavor "
                                "default, request > maximum capacity (3 > 2)", requeue_reason="NoFit", **BASE),
     PENDING_WL, {},
     [(on(PENDING_WL), "Warning", "Pending", "Pending",
       "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default, request > maximum "
       "capacity (3 > 2)", ADMISSION)]),
    ("preempted (Kueue's TAS preemption test case)",
     ev.WorkloadPreempted(time=T0, key="default/low-priority-admitted", reason="InClusterQueue",
                          message=PREEMPTION, preemptor="default/foo", **BASE),
     VICTIM, {"preemptor": PREEMPTOR},
     [(on(VICTIM), "Normal", "EvictedDueToPreempted", "EvictedDueToPreempted", PREEMPTION, ADMISSION),
      (on(VICTIM), "Normal", "Preempted", "Preempted", f"{PREEMPTION}; {PRIOS}", ADMISSION),
      (on(PREEMPTOR), "Normal", "PreemptedWorkload", "PreemptedWorkload",
       "Preempted workload default/low-priority-admitted (UID: low-priority-admitted-uid) in ClusterQueue "
       f"tas-main; {PRIOS}", ADMISSION)]),
    ("preempted, both priorities boosted (PriorityBoost): effective, base and boost of each",
     ev.WorkloadPreempted(time=T0, key="default/low-priority-admitted", reason="InClusterQueue",
                          message=PREEMPTION, preemptor="default/foo", **BASE),
     BOOSTED_VICTIM, {"preemptor": BOOSTED_PREEMPTOR},
     [(on(VICTIM), "Normal", "EvictedDueToPreempted", "EvictedDueToPreempted", PREEMPTION, ADMISSION),
      (on(VICTIM), "Normal", "Preempted", "Preempted", f"{PREEMPTION}; {BOOSTED_PRIOS}", ADMISSION),
      (on(PREEMPTOR), "Normal", "PreemptedWorkload", "PreemptedWorkload",
       "Preempted workload default/low-priority-admitted (UID: low-priority-admitted-uid) in ClusterQueue "
       f"tas-main; {BOOSTED_PRIOS}", ADMISSION)]),
    ("evicted after the PodsReady timeout",
     ev.WorkloadEvicted(time=T0, key="default/foo", reason="PodsReadyTimeout",
                        message="Exceeded the PodsReady timeout default/foo", **BASE),
     ADMITTED_WL, {},
     [(on(ADMITTED_WL), "Normal", "EvictedDueToPodsReadyTimeout", "EvictedDueToPodsReadyTimeout",
       "Exceeded the PodsReady timeout default/foo", WORKLOAD_CONTROLLER)]),
    ("evicted after the PodsReady timeout on the pods' scheduling (WaitForPodsReadyUnscheduledTimeout)",
     ev.WorkloadEvicted(time=T0, key="default/foo", reason="PodsReadyTimeout", underlying_cause="WaitForScheduling",
                        message="Exceeded the PodsReady timeout default/foo", **BASE),
     ADMITTED_WL, {},
     [(on(ADMITTED_WL), "Normal", "EvictedDueToPodsReadyTimeoutDueToWaitForScheduling",
       "EvictedDueToPodsReadyTimeoutDueToWaitForScheduling", "Exceeded the PodsReady timeout default/foo",
       WORKLOAD_CONTROLLER)]),
    ("evicted by a Retry check",
     ev.WorkloadEvicted(time=T0, key="default/foo", reason="AdmissionCheck",
                        message='Evicted due to AdmissionCheck in Retry state: "prov" (Retrying after failure: x)',
                        **BASE),
     RESERVED_WL, {},
     [(on(RESERVED_WL), "Normal", "EvictedDueToAdmissionCheck", "EvictedDueToAdmissionCheck",
       'Evicted due to AdmissionCheck in Retry state: "prov" (Retrying after failure: x)', WORKLOAD_CONTROLLER)]),
    ("evicted by the TAS node controller",
     ev.WorkloadEvicted(time=T0, key="default/foo", reason="NodeFailures",
                        message="Workload eviction triggered due to multiple TAS assigned node failures, including: "
                                "n1, n2", **BASE),
     ADMITTED_WL, {},
     [(on(ADMITTED_WL), "Normal", "EvictedDueToNodeFailures", "EvictedDueToNodeFailures",
       "Workload eviction triggered due to multiple TAS assigned node failures, including: n1, n2",
       TAS_CONTROLLER)]),
    ("evicted by the scheduler: no replacement node",
     ev.WorkloadEvicted(time=T0, key="default/foo", reason="NodeFailures",
                        message="Workload was evicted as there was no replacement for unhealthy node(s): n1",
                        **BASE),
     ADMITTED_WL, {},
     [(on(ADMITTED_WL), "Normal", "EvictedDueToNodeFailures", "EvictedDueToNodeFailures",
       "Workload was evicted as there was no replacement for unhealthy node(s): n1", ADMISSION)]),
    ("deactivated by the user",
     ev.WorkloadDeactivated(time=T0, key="default/foo", reason="Deactivated", message="The workload is deactivated",
                            **BASE),
     ADMITTED_WL, {},
     [(on(ADMITTED_WL), "Normal", "EvictedDueToDeactivated", "EvictedDueToDeactivated",
       "The workload is deactivated", WORKLOAD_CONTROLLER)]),
    ("deactivated by a rejected check: the rejection Warning, then the eviction",
     ev.WorkloadDeactivated(time=T0, key="default/foo", reason="DeactivatedDueToAdmissionCheck",
                            message='The workload is deactivated due to AdmissionCheck in Rejected state: "prov" '
                                    '(no capacity)', **BASE),
     RESERVED_WL, {},
     [(on(RESERVED_WL), "Warning", "AdmissionCheckRejected", "AdmissionCheckRejected",
       'Deactivated due to AdmissionCheck in Rejected state: "prov" (no capacity)', WORKLOAD_CONTROLLER),
      (on(RESERVED_WL), "Normal", "EvictedDueToDeactivatedDueToAdmissionCheck",
       "EvictedDueToDeactivatedDueToAdmissionCheck",
       'The workload is deactivated due to AdmissionCheck in Rejected state: "prov" (no capacity)',
       WORKLOAD_CONTROLLER)]),
    ("deactivated after too many requeues",
     ev.WorkloadDeactivated(time=T0, key="default/foo", reason="DeactivatedDueToRequeuingLimitExceeded",
                            message="The workload is deactivated due to exceeding the maximum number of re-queuing "
                                    "retries", **BASE),
     ADMITTED_WL, {},
     [(on(ADMITTED_WL), "Normal", "EvictedDueToDeactivatedDueToRequeuingLimitExceeded",
       "EvictedDueToDeactivatedDueToRequeuingLimitExceeded",
       "The workload is deactivated due to exceeding the maximum number of re-queuing retries",
       WORKLOAD_CONTROLLER)]),
    ("deactivated when its maximum execution time ran out: the Warning, then the eviction",
     ev.WorkloadDeactivated(time=T0, key="default/foo", reason="DeactivatedDueToMaximumExecutionTimeExceeded",
                            message="The workload is deactivated due to exceeding the maximum execution time", **BASE),
     LIMITED_WL, {},
     [(on(LIMITED_WL), "Warning", "MaximumExecutionTimeExceeded", "MaximumExecutionTimeExceeded",
       "The maximum execution time (60s) exceeded", WORKLOAD_CONTROLLER),
      (on(LIMITED_WL), "Normal", "EvictedDueToDeactivatedDueToMaximumExecutionTimeExceeded",
       "EvictedDueToDeactivatedDueToMaximumExecutionTimeExceeded",
       "The workload is deactivated due to exceeding the maximum execution time", WORKLOAD_CONTROLLER)]),
    ("second pass failed",
     ev.SecondPassFailed(time=T0, key="default/foo", message="topology \"t\" doesn't allow to fit any of 2 pod(s)",
                         **BASE),
     RESERVED_WL, {},
     [(on(RESERVED_WL), "Warning", "SecondPassFailed", "SecondPassFailed",
       "topology \"t\" doesn't allow to fit any of 2 pod(s)", ADMISSION)]),
    ("a check's state changed, with a message",
     ev.AdmissionCheckUpdated(time=T0, key="default/foo", check="prov", state="Ready",
                              message="Provisioned", **BASE),
     wl(phase=RESERVED, cq="cq", checks={"prov": "Pending"}), {},
     [(on(RESERVED_WL), "Normal", "AdmissionCheckUpdated", "AdmissionCheckUpdated",
       "Admission check prov updated state from Pending to Ready with message: Provisioned",
       PROVISIONING_CONTROLLER)]),
    ("a check's state changed, no message",
     ev.AdmissionCheckUpdated(time=T0, key="default/foo", check="prov", state="Retry", **BASE),
     wl(phase=RESERVED, cq="cq", checks={"prov": "Pending"}), {},
     [(on(RESERVED_WL), "Normal", "AdmissionCheckUpdated", "AdmissionCheckUpdated",
       "Admission check prov updated state from Pending to Retry", PROVISIONING_CONTROLLER)]),
    ("only a check's message changed: no Event",
     ev.AdmissionCheckUpdated(time=T0, key="default/foo", check="prov", state="Pending", message="ETA 5m", **BASE),
     wl(phase=RESERVED, cq="cq", checks={"prov": "Pending"}), {}, []),
    ("a ProvisioningRequest created",
     ev.ProvisioningRequestCreated(time=T0, key="default/foo", check="prov", attempt=1, request=REQUEST, **BASE),
     RESERVED_WL, {},
     [(on(RESERVED_WL), "Normal", "ProvisioningRequestCreated", "Created",
       'Created ProvisioningRequest: "foo-prov-1"', PROVISIONING_CONTROLLER)]),
    ("a finished workload deleted after its retention",
     ev.RetentionExpired(time=T0, key="default/foo", target="Workload", **BASE), PENDING_WL, {},
     [(on(PENDING_WL), "Normal", "Deleted", "Deleted", "Deleted finished workload due to elapsed retention",
       WORKLOAD_CONTROLLER)]),
    ("a deactivated workload's Job deleted after its retention: the Event is on the Job",
     ev.RetentionExpired(time=T0, key="default/foo", target="Job", **BASE), PENDING_WL, {"job": JOB},
     [(JOB, "Normal", "Deleted", "Deleted", "Deleted job: deactivation retention period expired",
       JOB_CONTROLLER)]),
    ("an elastic Job's slice replaced: the scheduler's Normal Event on the old slice",
     ev.WorkloadSliceReplaced(time=T0, key="default/foo", replacement="default/foo-2", message=SLICE_MESSAGE, **BASE),
     ADMITTED_WL, {},
     [(on(ADMITTED_WL), "Normal", "WorkloadSliceReplaced", "WorkloadSliceReplaced", SLICE_MESSAGE, ADMISSION)]),
    ("a slice finished already: the scheduler leaves it, recording nothing",
     ev.WorkloadSliceReplaced(time=T0, key="default/foo", replacement="default/foo-2", message=SLICE_MESSAGE, **BASE),
     wl(phase=FINISHED), {}, []),
    ("requeued: Kueue records nothing",
     ev.WorkloadRequeued(time=T0, key="default/foo", status=True, reason="Preempted", release=True, **BASE),
     RESERVED_WL, {}, []),
]


@pytest.mark.parametrize(("decision", "wl_before", "kw", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_decision_maps_to_kueues_events(decision, wl_before, kw, expected) -> None:
    assert rows(events_for(decision, wl_before, **kw)) == expected


def test_messages_are_cut_as_kueue_cuts_them() -> None:
    assert truncate_message("x" * 1024) == "x" * 1024
    assert truncate_message("x" * 1025) == "x" * 1020 + " ..."
    # bytes, not characters: a 3-byte character cut after its first byte leaves one U+FFFD per byte left
    cut = truncate_message("x" * 1019 + "€" * 10)
    assert cut == "x" * 1019 + "\ufffd ..."
    assert len(cut.encode()) <= 1024 + 2  # U+FFFD is 3 bytes: Go's encoder writes the same
    pending = ev.WorkloadPending(time=T0, key="default/foo", reason="WaitingForQuota", message="y" * 5000,
                                 requeue_reason="NoFit", **BASE)
    assert events_for(pending, PENDING_WL)[0].message == "y" * 1020 + " ..."


def test_event_names_are_stable_distinct_and_valid() -> None:
    d = ev.QuotaReserved(time=T0, key="default/foo", admission=o.Admission(cluster_queue="cq"), **BASE)
    e = events_for(d, PENDING_WL)[0]
    name = event_name(e, d, 12, 0)
    assert name == event_name(e, d, 12, 0)
    assert name.startswith("foo.") and len(name) == len("foo.") + 16
    assert len({name, event_name(e, d, 13, 0), event_name(e, d, 12, 1),
                event_name(e, ev.QuotaReserved(time=T0 + 1, key="default/foo",
                                               admission=o.Admission(cluster_queue="cq"), **BASE), 12, 0)}) == 4
    long = e._replace(involved=e.involved._replace(name="a" * 235 + "-b" * 9))
    n = event_name(long, d, 12, 0)
    assert len(n) <= 253 and n.split(".")[0][-1].isalnum()


def _wl_object(name: str, priority: int = 0) -> o.Workload:
    return o.Workload(metadata=o.ObjectMeta(name=name, namespace="default", uid=f"{name}-uid", resource_version="1",
                                            creation_timestamp=format_time(T0)),
                      spec=o.WorkloadSpec(queue_name="lq", priority=priority, pod_sets=[o.PodSet(count=1)]))


def _fold(mirror: Mirror, start: int, *events: ev.AnyEvent) -> int:
    mirror.apply_batch([ev.Record(start + i, e) for i, e in enumerate(events)])
    return start + len(events)


def test_ledger_holds_events_until_the_decision_is_carried_out() -> None:
    """The mirror folds each decision's Events from the workload as it was before; they wait for the outcome,
    a rejected decision records nothing, and ready ones leave after the window of log time."""
    mirror = Mirror()
    ledger = mirror.kube_events
    ledger.window_ms = 60_000
    off = _fold(mirror, 0, ev.ObjectUpserted(time=T0, key="default/a", uid="a-uid", obj=_wl_object("a")),
                ev.ObjectUpserted(time=T0, key="default/b", uid="b-uid", obj=_wl_object("b")))
    adm = o.Admission(cluster_queue="cq")
    # cycle 1: a reserved and admitted together, b fails its attempt
    first = off
    off = _fold(mirror, off,
                ev.QuotaReserved(time=T0 + 5_000, key="default/a", uid="a-uid", admission=adm, cycle=1, input=1),
                ev.WorkloadAdmitted(time=T0 + 5_000, key="default/a", uid="a-uid", cycle=1, input=1),
                ev.WorkloadPending(time=T0 + 5_000, key="default/b", uid="b-uid", reason="WaitingForQuota",
                                   message="no", requeue_reason="NoFit", cycle=1, input=1))
    assert sorted(ledger.awaiting) == [first, first + 1, first + 2]
    assert kueue_events(*ledger.awaiting[first])[0].message == (
        "Quota reserved in ClusterQueue cq, wait time since queued was 5s")
    assert kueue_events(*ledger.awaiting[first + 1])[0].component == ADMISSION  # reserved in the same cycle
    assert not ledger.ready
    off = _fold(mirror, off, ev.DecisionApplied(time=T0 + 6_000, key="default/a", decision=first),
                ev.DecisionApplied(time=T0 + 6_000, key="default/a", decision=first + 1),
                ev.DecisionRejected(time=T0 + 6_000, key="default/b", decision=first + 2, reason="NotFound"))
    assert list(ledger.ready) == [first, first + 1] and ledger.dirty == {first, first + 1}
    assert ledger.ready[first].applied == T0 + 6_000
    assert not ledger.awaiting
    # a later WorkloadAdmitted of another cycle is the workload controller's
    later = off
    off = _fold(mirror, off, ev.WorkloadAdmitted(time=T0 + 9_000, key="default/a", uid="a-uid", cycle=2, input=9))
    assert kueue_events(*ledger.awaiting[later])[0].message == (
        "Admitted by ClusterQueue cq, wait time since reservation was 4s")
    assert kueue_events(*ledger.awaiting[later])[0].component == WORKLOAD_CONTROLLER
    # a carried-out decision more than the window after the first ones expires them
    ledger.dirty.clear()
    _fold(mirror, off, ev.DecisionApplied(time=T0 + 70_000, key="default/a", decision=later))
    assert list(ledger.ready) == [later] and ledger.dirty == {later}


def test_a_reservation_the_fold_forgets_records_no_events() -> None:
    """A Workload rewritten with other pod sets before the reservation's write (the fold forgets the reservation
    it does not show): Kueue's scheduler, whose write failed, records neither QuotaReserved nor Admitted, though
    the writer, finding nothing of the reservation to write, carries the decisions out; an earlier attempt's
    Warning stays. A rewrite showing the reservation (it was written) keeps its Events."""
    adm = o.Admission(cluster_queue="cq")
    for shown, kept in ((None, 1), (adm, 3)):
        mirror = Mirror()
        ledger = mirror.kube_events
        off = _fold(mirror, 0, ev.ObjectUpserted(time=T0, key="default/a", uid="a-uid", obj=_wl_object("a")))
        first = off
        off = _fold(mirror, off,
                    ev.WorkloadPending(time=T0 + 1_000, key="default/a", uid="a-uid", reason="WaitingForQuota",
                                       message="no", requeue_reason="NoFit", cycle=1, input=0),
                    ev.QuotaReserved(time=T0 + 5_000, key="default/a", uid="a-uid", admission=adm, cycle=2, input=1),
                    ev.WorkloadAdmitted(time=T0 + 5_000, key="default/a", uid="a-uid", cycle=2, input=1))
        status = o.WorkloadStatus() if shown is None else o.WorkloadStatus(admission=shown, conditions=[
            o.Condition(type="QuotaReserved", status="True", reason="QuotaReserved")])
        rewritten = msgspec.structs.replace(_wl_object("a"), spec=o.WorkloadSpec(
            queue_name="lq", pod_sets=[o.PodSet(count=3)]), status=status)
        off = _fold(mirror, off, ev.ObjectUpserted(time=T0 + 6_000, key="default/a", uid="a-uid", obj=rewritten))
        assert (mirror.state.workloads["default/a"].phase == PENDING) == (shown is None)
        _fold(mirror, off, *[ev.DecisionApplied(time=T0 + 7_000, key="default/a", decision=first + i)
                             for i in range(3)])
        assert list(ledger.ready) == [first + i for i in range(kept)]


def test_preemption_events_show_the_boosts_the_fold_took_from_the_annotations() -> None:
    """Under PriorityBoost the fold reads each workload's ``kueue.x-k8s.io/priority-boost`` annotation; the victim's
    Preempted Event and the preemptor's PreemptedWorkload show each effective priority with its base and boost."""
    def boosted(name: str, priority: int, boost: str) -> o.Workload:
        w = _wl_object(name, priority)
        return msgspec.structs.replace(w, metadata=msgspec.structs.replace(
            w.metadata, annotations={"kueue.x-k8s.io/priority-boost": boost}))

    mirror = Mirror()
    doc = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
           "featureGates": {"PriorityBoost": True}}
    off = _fold(mirror, 0, ev.ConfigRecorded(time=T0, document=doc, writer="test", id="c"),
                ev.ObjectUpserted(time=T0, key="default/victim", uid="victim-uid", obj=boosted("victim", 5, "-10")),
                ev.ObjectUpserted(time=T0, key="default/preemptor", uid="preemptor-uid",
                                  obj=boosted("preemptor", 0, "+3")),
                ev.QuotaReserved(time=T0, key="default/victim", uid="victim-uid", admission=o.Admission(
                    cluster_queue="cq"), cycle=1, input=1))
    _fold(mirror, off, ev.WorkloadPreempted(time=T0, key="default/victim", uid="victim-uid", reason="InClusterQueue",
                                            message="m", preemptor="default/preemptor", cycle=2, input=4))
    prios = "preemptor effective priority: 3 (base: 0, boost: 3); preemptee effective priority: -5 (base: 5, boost: -10)"
    assert [(e.reason, e.message) for e in kueue_events(*mirror.kube_events.awaiting[off])] == [
        ("EvictedDueToPreempted", "m"), ("Preempted", f"m; {prios}"),
        ("PreemptedWorkload", f"Preempted workload default/victim (UID: victim-uid) in ClusterQueue cq; {prios}")]


MK = "kueue.x-k8s.io/multikueue"
ADMITTED_ON = 'The workload was admitted on "worker1"'
WORKER_EVICTED = ('Workload evicted on worker cluster: "worker1", resetting for re-admission. Previously: '
                  '"Ready"')


@pytest.mark.parametrize(("state", "message", "before_state", "recorded"), [
    ("Ready", ADMITTED_ON, "Pending", True),
    ("Retry", WORKER_EVICTED, "Ready", True),
    ("Retry", "Reserving remote lost", "Ready", False),
    ("Retry", "Reserving remote no longer exists or is not admitted", "Ready", False),
    ("Rejected", "No multikueue adapter found", "Pending", False),
])
def test_the_multikueue_check_records_kueue_s_multikueue_event_only_for_an_admission_or_a_worker_eviction(
        state: str, message: str, before_state: str, recorded: bool) -> None:
    """Kueue's MultiKueue controller (workload.go): Normal ``MultiKueue`` with the check's message alone, from the
    workload controller's recorder, when the workload is admitted on a worker and when its copy is evicted there;
    nothing for the updates its ``updateACS`` writes (Rejected, a remote lost or gone). Not the ProvisioningRequest
    controller's ``AdmissionCheckUpdated``."""
    w = wl(phase=RESERVED, cq="cq", checks={"mk": before_state})
    d = ev.AdmissionCheckUpdated(time=T0, key="default/foo", check="mk", state=state, message=message, **BASE)
    want = [(on(w), "Normal", "MultiKueue", "MultiKueue", message, WORKLOAD_CONTROLLER)] if recorded else []
    assert rows(events_for(d, w, check_controller=MK)) == want


SYNC_FAILED = ('Remote workload on worker cluster "worker1" is out of sync with its user job, resetting for '
               're-dispatch, Previously: "Ready"')


def test_a_copy_finished_by_a_sync_failure_records_a_warning_multikueue_event() -> None:
    """Kueue's MultiKueue controller (#13047, #14997): its Retry for a copy finished OutOfSync or OwnerNotFound on
    the worker records a Warning ``MultiKueue`` Event with the check's message, naming that worker."""
    w = wl(phase=RESERVED, cq="cq", checks={"mk": "Ready"})
    d = ev.AdmissionCheckUpdated(time=T0, key="default/foo", check="mk", state="Retry", message=SYNC_FAILED, **BASE)
    assert rows(events_for(d, w, check_controller=MK)) == [
        (on(w), "Warning", "MultiKueue", "MultiKueue", SYNC_FAILED, WORKLOAD_CONTROLLER)]


def test_the_ledger_tells_a_multikueue_check_s_update_from_a_provisioning_one_by_its_controller() -> None:
    """The ledger takes each check's controller from its AdmissionCheck as the decision is folded."""
    from types import SimpleNamespace

    from connectors.k8s.decision_events import EventLedger

    def check(name: str, controller: str) -> o.AdmissionCheck:
        return o.AdmissionCheck(metadata=o.ObjectMeta(name=name), spec=o.AdmissionCheckSpec(controller_name=controller))

    w = wl(phase=RESERVED, cq="cq", checks={"mk": "Pending", "prov": "Pending"})
    state = SimpleNamespace(workloads={w.key: w}, jobs={}, admission_checks={
        "mk": check("mk", MK), "prov": check("prov", "kueue.x-k8s.io/provisioning-request")})
    ledger = EventLedger()
    for off, (name, msg) in enumerate((("mk", ADMITTED_ON), ("prov", "Provisioned")), start=10):
        d = ev.AdmissionCheckUpdated(time=T0, key=w.key, check=name, state="Ready", message=msg, **BASE)
        ledger.fold(ev.Record(off, d), state, {})  # type: ignore[arg-type]
    assert [(e.reason, e.message) for off in (10, 11) for e in kueue_events(*ledger.awaiting[off])] == [
        ("MultiKueue", ADMITTED_ON),
        ("AdmissionCheckUpdated", "Admission check prov updated state from Pending to Ready with message: Provisioned")]


@pytest.mark.parametrize(("reason", "message"), [("ConcurrentAdmission", "No variant is running"),
                                                 ("VariantEvicted", "Admitted variant was evicted")])
def test_a_parent_evicted_by_the_variant_controller_records_no_event(reason: str, message: str) -> None:
    """Kueue's variant controller sets a ConcurrentAdmission parent's Evicted condition by itself, without the
    eviction helper that records ``EvictedDueTo<reason>``: no Event. A workload without the parent label evicted
    for another reason still gets its Event."""
    parent = wl(phase=ADMITTED, cq="cq")
    parent.labels = {"kueue.x-k8s.io/concurrent-admission-parent": "true"}
    d = ev.WorkloadEvicted(time=T0, key="default/foo", reason=reason, message=message, **BASE)
    assert events_for(d, parent) == ()
    other = ev.WorkloadEvicted(time=T0, key="default/foo", reason="PodsReadyTimeout", message="m", **BASE)
    assert [e.reason for e in events_for(other, parent)] == ["EvictedDueToPodsReadyTimeout"]


VARIANT = "job-variant-spot-b3786"
VARIANT_CONTROLLER = "concurrent-admission-controller"


def test_the_variant_controllers_decisions_record_kueues_events() -> None:
    """Kueue's variant controller records Normal Events from ``concurrent-admission-controller``: on the parent
    ``CreatedVariant`` and ``DeletedVariant``, on the variant ``ActivatedVariant``/``DeactivatedVariant`` (its
    decision's message) and ``PreemptionUngatedVariant``."""
    parent, variant = wl("job-8f2a1", phase=ADMITTED, cq="cq"), wl(VARIANT)
    key = f"default/{VARIANT}"
    made = ev.VariantCreated(time=T0, key=key, parent="job-8f2a1", parent_uid="job-8f2a1-uid", flavor="spot",
                             **BASE)
    gone = ev.VariantDeleted(time=T0, key=key, uid=variant.uid, parent="job-8f2a1", flavor="spot", **BASE)
    off = ev.VariantActivation(time=T0, key=key, uid=variant.uid, active=False, **BASE,
                               message='Variant Workload deactivated due to being lower priority than admitted '
                                       'Variant "default/job-variant-od-2f8ae"')
    on_ = ev.VariantActivation(time=T0, key=key, uid=variant.uid, active=True, **BASE,
                               message="Variant Workload activated due to no other Variant being admitted")
    opened = ev.VariantPreemptionGateOpened(time=T0, key=key, uid=variant.uid,
                                            gate="kueue.x-k8s.io/concurrent-admission", **BASE)
    assert rows(events_for(made, parent)) == [
        (on(parent), "Normal", "CreatedVariant", "CreatedVariant", f'Variant Workload "{key}" created',
         VARIANT_CONTROLLER)]
    assert rows(events_for(gone, parent)) == [
        (on(parent), "Normal", "DeletedVariant", "DeletedVariant",
         f'Variant Workload "{key}" deleted; flavor "spot" no longer in ClusterQueue', VARIANT_CONTROLLER)]
    assert rows(events_for(off, variant)) == [
        (on(variant), "Normal", "DeactivatedVariant", "DeactivatedVariant", off.message, VARIANT_CONTROLLER)]
    assert rows(events_for(on_, variant)) == [
        (on(variant), "Normal", "ActivatedVariant", "ActivatedVariant", on_.message, VARIANT_CONTROLLER)]
    assert rows(events_for(opened, variant)) == [
        (on(variant), "Normal", "PreemptionUngatedVariant", "PreemptionUngatedVariant",
         f'Opened preemption gate for variant workload "{key}"', VARIANT_CONTROLLER)]


def test_the_ledger_records_a_variants_creation_on_its_parent() -> None:
    """The variant is not in the log before its creation: the ledger takes its parent, which the Event is about."""
    mirror = Mirror()
    ledger = mirror.kube_events
    off = _fold(mirror, 0, ev.ObjectUpserted(time=T0, key="default/job-8f2a1", uid="job-8f2a1-uid",
                                             obj=_wl_object("job-8f2a1")))
    made = off
    off = _fold(mirror, off, ev.VariantCreated(time=T0 + 1_000, key=f"default/{VARIANT}", parent="job-8f2a1",
                                               parent_uid="job-8f2a1-uid", flavor="spot", cycle=1, input=1))
    _fold(mirror, off, ev.DecisionApplied(time=T0 + 2_000, key=f"default/{VARIANT}", decision=made))
    (entry,) = ledger.ready.values()
    (event,) = kueue_events(entry.event, entry.before)  # type: ignore[arg-type]
    assert (event.involved.name, event.involved.uid, event.reason) == ("job-8f2a1", "job-8f2a1-uid", "CreatedVariant")


def test_each_failed_provisioning_request_creation_records_a_warning_failed_create() -> None:
    """Kueue's check controller records Warning ``FailedCreate`` on the Workload for each failed create of a
    request or its PodTemplate (``handleError``, #4114), with the check's message cut to an Event's 1024
    bytes: one per attempt, ready as the applier appends it (a fact, not a decision awaiting its outcome)."""
    from types import SimpleNamespace

    from connectors.k8s.decision_events import EventLedger
    from connectors.k8s.recorder import events_of

    w = wl(phase=RESERVED, cq="cq", checks={"prov": "Pending"})
    state = SimpleNamespace(workloads={w.key: w}, jobs={}, admission_checks={})
    ledger = EventLedger()
    message = ('Error creating ProvisioningRequest "foo-prov-1": '
               'ProvisioningRequest "foo-prov-1" is invalid: ' + "x" * 2000)
    for off, at in ((20, T0), (21, T0 + 1000), (22, T0 + 3000)):
        failed = ev.ProvisioningRequestCreateFailed(time=at, key=w.key, uid=w.uid, decision=off - 10,
                                                    check="prov", name="foo-prov-1", message=message)
        ledger.fold(ev.Record(off, failed), state, {})  # type: ignore[arg-type]
    other = ev.ProvisioningRequestCreateFailed(time=T0, key=w.key, uid="a-recreated-one", decision=1,
                                               check="prov", name="foo-prov-1", message=message)
    ledger.fold(ev.Record(23, other), state, {})  # type: ignore[arg-type]
    assert list(ledger.ready) == [20, 21, 22] and not ledger.awaiting
    (first,) = events_of(ledger.ready[20])
    assert rows([first]) == [(on(w), "Warning", "FailedCreate", "FailedCreate", truncate_message(message),
                              PROVISIONING_CONTROLLER)]
    assert len(first.message.encode()) == 1024
