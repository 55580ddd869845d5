"""The Events Kueue's job reconciler records on a batch/v1 Job (connectors/k8s/job_events.py), and how the Event
ledger holds them: ready as the job integration's records are folded, on the Job they are about, named from
the record so that folding the log again names them the same.

Expected messages are Kueue's own (``pkg/controller/jobframework/reconciler.go``: ``handleJobWithNoWorkload``,
``startJob``, ``stopJob`` and its callers, the finished-workload branches).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from connectors.k8s.decision_events import JOB_CONTROLLER, Involved, event_name
from connectors.k8s.job_events import (
    MISSING_WORKLOAD,
    NOT_ADMITTED,
    job_events,
    pending_checks_message,
    stop_message,
)
from connectors.k8s.journal import LocalJournal
from connectors.k8s.mirror import Mirror
from connectors.k8s.recorder import EventRecorder, events_of
from events import objects as o
from events import schema as ev
from events.log import MemoryLog
from events.timefmt import format_time, parse_time
from projections.workloads import ADMITTED, WorkloadInfo

T0 = parse_time("2026-01-01T00:00:00Z")
JOB = Involved("batch/v1", "Job", "ns", "train", "job-uid")
PREEMPTED = ("Preempted to accommodate a workload (UID: hi-uid, JobUID: hi-job) due to prioritization in the "
             "ClusterQueue; preemptor path: /cq; preemptee path: /cq")


def _wl(*conditions: o.Condition) -> WorkloadInfo:
    return WorkloadInfo(key="ns/job-train-1a2b3", uid="wl-uid", namespace="ns", name="job-train-1a2b3",
                        queue_name="lq", created=T0, priority=0, priority_class="", pod_sets=(), phase=ADMITTED,
                        conditions=conditions)


def acted(action: str, **kw: Any) -> ev.JobActed:
    return ev.JobActed(time=T0, key="ns/train", uid="job-uid", action=action, **kw)


@pytest.mark.parametrize(("wl", "why"), [
    (None, MISSING_WORKLOAD),
    (_wl(), NOT_ADMITTED),
    (_wl(o.Condition(type="Evicted", status="True", reason="Preempted", message=PREEMPTED)), PREEMPTED),
    (_wl(o.Condition(type="Evicted", status="True", reason="Deactivated", message="The workload is deactivated")),
     "The workload is deactivated"),
    (_wl(o.Condition(type="Evicted", status="False", reason="QuotaReserved", message="Previously: x")),
     NOT_ADMITTED),
], ids=["no workload", "not admitted", "preempted", "deactivated", "evicted before, admitted again"])
def test_why_a_running_job_is_stopped(wl: WorkloadInfo | None, why: str) -> None:
    assert stop_message(wl) == why
    assert MISSING_WORKLOAD == "Missing Workload; unable to restore pod templates"
    assert NOT_ADMITTED == "Not admitted by cluster queue"


@pytest.mark.parametrize(("record", "reason", "message"), [
    (acted("CreatedWorkload", workload="ns/job-train-1a2b3"), "CreatedWorkload",
     "Created Workload: ns/job-train-1a2b3"),
    (acted("Started", workload="ns/job-train-1a2b3", cluster_queue="team-cq"), "Started",
     "Admitted by clusterQueue team-cq"),
    (acted("Stopped", workload="ns/job-train-1a2b3", message=PREEMPTED), "Stopped", PREEMPTED),
    (ev.WorkloadFinished(time=T0, key="ns/job-train-1a2b3", reason="Succeeded", message="done"),
     "FinishedWorkload", "Workload 'ns/job-train-1a2b3' is declared finished"),
])
def test_each_record_maps_to_kueues_job_event(record: ev.AnyEvent, reason: str, message: str) -> None:
    (e,) = job_events(record, JOB)
    assert (e.involved, e.type, e.reason, e.action, e.message, e.component) == (
        JOB, "Normal", reason, reason, message, "batch/job-kueue-controller")
    assert JOB_CONTROLLER == "batch/job-kueue-controller"


def test_a_missing_workload_priority_class_is_a_warning_on_the_job() -> None:
    message = 'WorkloadPriorityClass "later" not found'
    (e,) = job_events(acted("WorkloadPriorityClassNotFound", message=message), JOB)
    assert (e.involved, e.type, e.reason, e.action, e.message, e.component) == (
        JOB, "Warning", "WorkloadPriorityClassNotFound", "WorkloadPriorityClassNotFound", message,
        "batch/job-kueue-controller")


def test_an_unknown_action_records_nothing() -> None:
    assert job_events(acted("Scaled"), JOB) == ()  # a newer writer's action this version does not know


# --- the ledger -------------------------------------------------------------------------------------------------


def _job(uid: str = "job-uid") -> o.Job:
    return o.Job(metadata=o.ObjectMeta(name="train", namespace="ns", uid=uid, resource_version="1"),
                 spec=o.JobSpec(suspend=True))


def _workload_object(job_uid: str = "job-uid") -> o.Workload:
    return o.Workload(
        metadata=o.ObjectMeta(name="job-train-1a2b3", namespace="ns", uid="wl-uid", resource_version="1",
                              creation_timestamp=format_time(T0), labels={"kueue.x-k8s.io/job-uid": job_uid},
                              owner_references=[o.OwnerReference(api_version="batch/v1", kind="Job", name="train",
                                                                 uid=job_uid, controller=True)]),
        spec=o.WorkloadSpec(queue_name="lq", pod_sets=[o.PodSet(count=1)]))


def _fold(mirror: Mirror, *events: ev.AnyEvent) -> list[int]:
    start = mirror.offset + 1
    mirror.apply_batch([ev.Record(start + i, e) for i, e in enumerate(events)])
    return list(range(start, start + len(events)))


FINISHED = ev.WorkloadFinished(time=T0 + 9_000, key="ns/job-train-1a2b3", uid="wl-uid", reason="Succeeded")


def test_job_actions_are_ready_as_they_are_folded_on_the_job_they_are_about() -> None:
    mirror = Mirror()
    ledger = mirror.kube_events
    _fold(mirror, ev.ObjectUpserted(time=T0, key="ns/train", uid="job-uid", obj=_job()),
          ev.ObjectUpserted(time=T0, key="ns/job-train-1a2b3", uid="wl-uid", obj=_workload_object()))
    created, started = _fold(mirror, acted("CreatedWorkload", workload="ns/job-train-1a2b3"),
                             acted("Started", workload="ns/job-train-1a2b3", cluster_queue="cq"))
    (finished,) = _fold(mirror, FINISHED)
    assert list(ledger.ready) == [created, started, finished] and ledger.dirty == {created, started, finished}
    assert not ledger.awaiting, "nothing to wait for: the records say the action was done"
    assert {r.before for r in ledger.ready.values()} == {JOB}
    assert [e.reason for r in ledger.ready.values() for e in events_of(r)] == [
        "CreatedWorkload", "Started", "FinishedWorkload"]
    # two records of the same millisecond keep the log's order in eventTime
    assert ledger.ready[started].micros == ledger.ready[created].micros + 4
    # finished again (a second report of the same finish): Kueue's condition does not change, no second Event
    (again,) = _fold(mirror, FINISHED)
    assert again not in ledger.ready


def test_no_finished_workload_event_without_its_job() -> None:
    mirror = Mirror()
    ledger = mirror.kube_events
    _fold(mirror, ev.ObjectUpserted(time=T0, key="ns/train", uid="job-uid", obj=_job()),
          ev.ObjectUpserted(time=T0, key="ns/job-train-1a2b3", uid="wl-uid", obj=_workload_object()),
          ev.ObjectDeleted(time=T0 + 1, key="ns/train", uid="job-uid", kind="Job"))
    (gone,) = _fold(mirror, FINISHED)  # the owner is gone (OwnerNotFound): nothing to record it on
    assert gone not in ledger.ready
    # a Job recreated under the same name is another Job: the old Workload's finish is not its Event
    mirror = Mirror()
    _fold(mirror, ev.ObjectUpserted(time=T0, key="ns/job-train-1a2b3", uid="wl-uid", obj=_workload_object()),
          ev.ObjectUpserted(time=T0, key="ns/train", uid="other-uid", obj=_job("other-uid")))
    (other,) = _fold(mirror, FINISHED)
    assert other not in mirror.kube_events.ready


def test_folding_the_log_again_names_each_event_the_same() -> None:
    records = [ev.ObjectUpserted(time=T0, key="ns/train", uid="job-uid", obj=_job()),
               acted("CreatedWorkload", workload="ns/job-train-1a2b3"),
               acted("Stopped", workload="ns/job-train-1a2b3", message=PREEMPTED)]

    def names() -> list[str]:
        mirror = Mirror()
        _fold(mirror, *records)
        return [event_name(e, r.event, off, i) for off, r in mirror.kube_events.ready.items()
                for i, e in enumerate(events_of(r))]

    first = names()
    assert len(first) == 2 and len(set(first)) == 2 and all(n.startswith("train.") for n in first)
    assert names() == first


# --- the recorder -----------------------------------------------------------------------------------------------


class Client:
    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []

    async def create(self, resource: Any, body: dict[str, Any], namespace: str = "") -> bytes:
        assert resource.plural == "events" and namespace == "ns"
        self.created.append(body)
        return b"{}"


@pytest.mark.asyncio
async def test_the_recorder_creates_them_on_the_job_as_kueues_job_reconciler() -> None:
    journal = LocalJournal(MemoryLog(), Mirror())
    await journal.append([ev.ObjectUpserted(time=T0, key="ns/train", uid="job-uid", obj=_job())])
    await journal.append([acted("CreatedWorkload", workload="ns/job-train-1a2b3")])
    await journal.append([ev.JobActed(time=T0 + 2_000, key="ns/train", uid="job-uid", action="Started",
                                      workload="ns/job-train-1a2b3", cluster_queue="cq")])
    client = Client()
    recorder = EventRecorder(client, journal, instance="r0", clock=lambda: T0 / 1000 + 10)  # type: ignore[arg-type]
    task = asyncio.create_task(recorder.run())
    try:
        async with asyncio.timeout(5):
            while journal.mirror.kube_events.ready:
                await asyncio.sleep(0.01)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    created, started = sorted(client.created, key=lambda b: b["eventTime"])
    assert created["involvedObject"] == {"apiVersion": "batch/v1", "kind": "Job", "namespace": "ns",
                                         "name": "train", "uid": "job-uid"}
    assert (created["reason"], created["message"]) == ("CreatedWorkload", "Created Workload: ns/job-train-1a2b3")
    assert (started["reason"], started["message"]) == ("Started", "Admitted by clusterQueue cq")
    assert created["reportingComponent"] == "batch/job-kueue-controller"
    assert created["reportingInstance"] == "batch/job-kueue-controller-r0"
    assert (created["eventTime"], started["eventTime"]) == ("2026-01-01T00:00:00.000000Z",
                                                            "2026-01-01T00:00:02.000000Z")


# --- UpdatedAdmissionCheck --------------------------------------------------------------------------------------
# Kueue's reconcile of a suspended Job whose Workload holds quota but is not admitted records the messages of the
# Workload's Pending checks (``recordAdmissionCheckUpdate``); kueue-es, from the log, each time that message
# changes.

WL_KEY = "ns/job-train-1a2b3"


def _queued_job(suspend: bool = True, uid: str = "job-uid", **status: Any) -> o.Job:
    return o.Job(metadata=o.ObjectMeta(name="train", namespace="ns", uid=uid, resource_version="1",
                                       labels={"kueue.x-k8s.io/queue-name": "lq"}),
                 spec=o.JobSpec(suspend=suspend), status=o.JobStatus(**status))


def _check(name: str, state: str, message: str = "") -> o.AdmissionCheckState:
    return o.AdmissionCheckState(name=name, state=state, message=message)


def _reserved_wl(*checks: o.AdmissionCheckState, phase: str = "QuotaReserved", evicted: str = "",
                 job_uid: str = "job-uid") -> WorkloadInfo:
    return WorkloadInfo(key=WL_KEY, uid="wl-uid", namespace="ns", name="job-train-1a2b3", queue_name="lq",
                        created=T0, priority=0, priority_class="", pod_sets=(), phase=phase, evicted=evicted,
                        labels={"kueue.x-k8s.io/job-uid": job_uid}, check_states={c.name: c for c in checks})


CHECKS = (_check("zeta", "Pending", "waiting for zeta"), _check("alpha", "Pending", "ETA 10m"),
          _check("quiet", "Pending"), _check("done", "Ready", "Provisioned"), _check("bad", "Retry", "try again"))


def test_the_message_joins_the_pending_checks_messages_in_status_order() -> None:
    assert pending_checks_message(_queued_job(), _reserved_wl(*CHECKS)) == "alpha: ETA 10m; zeta: waiting for zeta"
    assert pending_checks_message(_queued_job(), _reserved_wl(_check("quiet", "Pending"))) == "", \
        "no Pending check with a message: nothing recorded"


@pytest.mark.parametrize(("job", "wl"), [
    (_queued_job(suspend=False), _reserved_wl(*CHECKS)),
    (_queued_job(), _reserved_wl(*CHECKS, phase="Admitted")),
    (_queued_job(), _reserved_wl(*CHECKS, phase="Pending")),
    (_queued_job(), _reserved_wl(*CHECKS, phase="Finished")),
    (_queued_job(), _reserved_wl(*CHECKS, evicted="Preempted")),
    (_queued_job(conditions=[o.Condition(type="Failed", status="True")]), _reserved_wl(*CHECKS)),
    (_queued_job(uid="other-uid"), _reserved_wl(*CHECKS)),
    (o.Job(metadata=o.ObjectMeta(name="train", namespace="ns", uid="job-uid"), spec=o.JobSpec(suspend=True)),
     _reserved_wl(*CHECKS)),
    (None, _reserved_wl(*CHECKS)),
    (_queued_job(), None),
], ids=["running (started or stopping)", "admitted (started instead)", "no quota", "finished", "evicted",
        "job failed", "another job's workload", "no queue label", "no job", "no workload"])
def test_no_message_unless_the_job_waits_on_its_checks(job: o.Job | None, wl: WorkloadInfo | None) -> None:
    assert pending_checks_message(job, wl) == ""


def _reserve(mirror: Mirror) -> None:
    _fold(mirror, ev.ObjectUpserted(time=T0, key="ns/train", uid="job-uid", obj=_queued_job()),
          ev.ObjectUpserted(time=T0, key=WL_KEY, uid="wl-uid", obj=_workload_object()))
    (reserved,) = _fold(mirror, ev.QuotaReserved(time=T0 + 1_000, key=WL_KEY, uid="wl-uid", cycle=1, input=0,
                                                 admission=o.Admission(cluster_queue="cq")))
    _fold(mirror, ev.DecisionApplied(time=T0 + 1_500, key=WL_KEY, uid="wl-uid", decision=reserved))


def _observed(t: int, state: str, message: str, check: str = "prov") -> ev.AdmissionCheckStateChanged:
    return ev.AdmissionCheckStateChanged(time=T0 + t, key=WL_KEY, uid="wl-uid", check=check, state=state,
                                         message=message)


def _check_events(mirror: Mirror) -> list[tuple[int, str]]:
    return [(off, e.message) for off, r in mirror.kube_events.ready.items() for e in events_of(r)
            if e.reason == "UpdatedAdmissionCheck"]


def test_each_new_message_is_one_event_on_the_job_and_a_repeat_none() -> None:
    mirror = Mirror()
    _reserve(mirror)
    assert _check_events(mirror) == []
    (first,) = _fold(mirror, _observed(2_000, "Pending", "ETA 10m"))
    (event,) = [e for r in mirror.kube_events.ready.values() for e in events_of(r)
                if e.reason == "UpdatedAdmissionCheck"]
    assert (event.involved, event.type, event.reason, event.action, event.message, event.component) == (
        JOB, "Normal", "UpdatedAdmissionCheck", "UpdatedAdmissionCheck", "prov: ETA 10m", JOB_CONTROLLER)
    assert mirror.kube_events.ready[first].applied == T0 + 2_000
    # the same message again, the Job or Workload seen again: Kueue's recorder counts it on the same Event
    _fold(mirror, _observed(3_000, "Pending", "ETA 10m"),
          ev.ObjectUpserted(time=T0 + 3_000, key="ns/train", uid="job-uid", obj=_queued_job()),
          ev.ObjectUpserted(time=T0 + 3_000, key=WL_KEY, uid="wl-uid", obj=_workload_object()))
    assert _check_events(mirror) == [(first, "prov: ETA 10m")]
    # another check joins in: a new message
    (joined,) = _fold(mirror, _observed(4_000, "Pending", "queued", check="another"))
    # kueue-es's own check: seen once its decision is written, as Kueue sees the written status
    (decided,) = _fold(mirror, ev.AdmissionCheckUpdated(time=T0 + 5_000, key=WL_KEY, uid="wl-uid", cycle=2,
                                                        input=0, check="prov", state="Pending", message="ETA 5m"))
    assert [off for off, _ in _check_events(mirror)] == [first, joined]
    (applied,) = _fold(mirror, ev.DecisionApplied(time=T0 + 5_500, key=WL_KEY, uid="wl-uid", decision=decided))
    assert _check_events(mirror) == [(first, "prov: ETA 10m"), (joined, "another: queued; prov: ETA 10m"),
                                     (applied, "another: queued; prov: ETA 5m")]
    # one check no longer pending: the message changes
    (left,) = _fold(mirror, _observed(6_000, "Ready", "", check="another"))
    assert _check_events(mirror)[-1] == (left, "prov: ETA 5m")
    # no message for a while, then the same one: recorded again
    _fold(mirror, _observed(6_500, "Ready", "Provisioned"))
    (again,) = _fold(mirror, _observed(7_000, "Pending", "ETA 5m"))
    assert [off for off, _ in _check_events(mirror)][-2:] == [left, again] and len(_check_events(mirror)) == 5
    # the Job started (or deleted): nothing more for it
    _fold(mirror, ev.ObjectUpserted(time=T0 + 8_000, key="ns/train", uid="job-uid", obj=_queued_job(suspend=False)),
          _observed(8_000, "Pending", "ETA 1m"))
    assert len(_check_events(mirror)) == 5


def test_folding_the_log_again_gives_the_same_check_events_under_the_same_names() -> None:
    def names() -> list[str]:
        mirror = Mirror()
        _reserve(mirror)
        _fold(mirror, _observed(2_000, "Pending", "ETA 10m"), _observed(3_000, "Pending", "ETA 10m"),
              _observed(4_000, "Pending", "ETA 5m"))
        return [event_name(e, r.event, off, i) for off, r in mirror.kube_events.ready.items()
                for i, e in enumerate(events_of(r)) if e.reason == "UpdatedAdmissionCheck"]

    first = names()
    assert len(first) == 2 and len(set(first)) == 2 and all(n.startswith("train.") for n in first)
    assert names() == first
