"""A Workload rewritten with other pod sets while the log holds a reservation of it.

Kueue's webhook keeps the pod sets of a Workload holding quota as they are, so a rewrite that shows no reservation
landed before the reservation's status write, which then conflicts: Kueue's scheduler forgets the assumed workload
and requeues it with the new pod sets. The fold does the same; a rewrite that shows the reservation (an elastic
Job scaled down in place) keeps it, and so does the watch's echo of the Workload as it was before the reservation
was written (the same spec, even where what adjusts its pod sets changed since).
"""

from __future__ import annotations

import msgspec
from fixtures.eventgen import (
    RESOURCE_CONFIGS,
    T0,
    admission,
    cluster_queue,
    fold,
    local_queue,
    meta,
    prelude,
    records,
    shown_reserved,
    upsert,
    workload,
)

from events import objects as o
from events import schema as ev
from projections.admissionchecks import PROVISIONING_CONTROLLER
from projections.audit import AuditTrail
from projections.cluster import ClusterState
from projections.metrics import families
from projections.workloads import ADMITTED, PENDING

KEY = "ns0/w0"
PENDING_SHOWN = o.Condition(type="QuotaReserved", status="False", reason="Pending", message="no quota yet",
                            last_transition_time="2024-05-01T08:00:00Z")


def _first(count: int = 3) -> o.Workload:
    return workload("ns0", "w0", uid="u0", queue="lq0", cpu="1", count=count)


def _admitted() -> ClusterState:
    """``w0`` (3 pods, 1 cpu each) reserved and admitted in cq0, and a second workload parked there for want of
    quota (cq0 holds 4 cpu of f0)."""
    batches: list[ev.AnyEvent] = [*prelude(T0), upsert(_first(), T0),
                                  upsert(workload("ns0", "w1", uid="u1", queue="lq0", cpu="2"), T0)]
    state = fold(records([batches]))
    for e in (ev.QuotaReserved(key=KEY, admission=admission("cq0", "f0", 3000, count=3), time=T0 + 1000, cycle=1,
                               input=state.offset),
              ev.WorkloadAdmitted(key=KEY, time=T0 + 1000, cycle=1, input=state.offset),
              ev.WorkloadPending(key="ns0/w1", reason="Pending", message="insufficient quota", parked=True,
                                 requeue_reason="NoFit", time=T0 + 1000, cycle=1, input=state.offset)):
        state.apply(ev.Record(state.offset + 1, e))
    assert state.workloads[KEY].phase == ADMITTED and state.usage["cq0"] == {"f0/cpu": 3000}
    assert "ns0/w1" in state.queues["cq0"].inadmissible
    return state


def _upsert(state: ClusterState, w: o.Workload) -> None:
    state.apply(ev.Record(state.offset + 1, upsert(w, T0 + 2000)))


def test_a_rewrite_that_shows_no_reservation_drops_the_one_never_written() -> None:
    kept = _admitted()  # the contrast: the same rewrite showing the reservation written holds it, scaled down
    adm = kept.workloads[KEY].admission
    assert adm is not None
    _upsert(kept, shown_reserved(_first(count=2), adm, admitted=True))
    assert kept.workloads[KEY].phase == ADMITTED and kept.usage["cq0"] == {"f0/cpu": 2000}

    shown = msgspec.structs.replace(_first(), status=o.WorkloadStatus(conditions=[PENDING_SHOWN]))
    echoed = _admitted()  # and so does an echo of the spec it was decided on, counted under other rules since
    echoed.apply(ev.Record(echoed.offset + 1, ev.ConfigRecorded(time=T0 + 1500, document=RESOURCE_CONFIGS[2])))
    _upsert(echoed, shown)
    assert echoed.workloads[KEY].phase == ADMITTED and echoed.workloads[KEY].usage == {"f0/cpu": 3000}

    state = _admitted()
    _upsert(state, shown)  # the watch's echo of the Workload as it was before the reservation: kept
    assert state.workloads[KEY].phase == ADMITTED and state.usage["cq0"] == {"f0/cpu": 3000}
    _upsert(state, msgspec.structs.replace(_first(count=2), status=shown.status))
    wl = state.workloads[KEY]
    assert wl.phase == PENDING and wl.admission is None and not wl.usage
    assert wl.reserved_at is None and wl.admitted_at is None
    assert not any(state.usage["cq0"].values()) and KEY not in state.reserving.get("cq0", {})
    assert [p.count for p in wl.pod_sets] == [2], "queued with the new pod sets"
    assert KEY in state.queues["cq0"].shapes and wl.cluster_queue == "cq0"
    assert wl.conditions == (PENDING_SHOWN,), "the conditions the reservation set are as the Workload shows them"
    assert "ns0/w1" not in state.queues["cq0"].inadmissible, "the quota it held is free: parked workloads retry"


def test_a_check_set_on_the_reservation_forgotten_is_as_the_workload_shows_it() -> None:
    """kueue-es's own check controller acts on the log's reservation before it is written (provisioning not
    needed: Ready at once). Nothing of that reservation reached the apiserver, so once it is forgotten the check is
    as the rewritten Workload shows it (Pending), not Ready: a later reservation for the new pod sets must wait
    for the check again, and the pending workload's status shows no check Kueue never set."""
    check = o.AdmissionCheck(metadata=meta("prov"), spec=o.AdmissionCheckSpec(controller_name=PROVISIONING_CONTROLLER))
    first = workload("ns0", "w0", uid="u0", queue="lqa", cpu="1", count=3)
    state = fold(records([[*prelude(T0), upsert(check, T0),
                           upsert(cluster_queue("cqa", quotas={"f0": 4}, checks=["prov"]), T0),
                           upsert(local_queue("ns0", "lqa", "cqa"), T0), upsert(first, T0)]]))
    listed = dict(state.workloads[KEY].check_states)
    assert [s.state for s in listed.values()] == ["Pending"]
    base = {"time": T0 + 1000, "cycle": 1, "input": state.offset}
    for e in (ev.QuotaReserved(key=KEY, admission=admission("cqa", "f0", 3000, count=3), **base),
              ev.AdmissionCheckUpdated(key=KEY, uid="u0", check="prov", state="Ready", message="not needed", **base),
              ev.WorkloadAdmitted(key=KEY, **base)):
        state.apply(ev.Record(state.offset + 1, e))
    assert state.workloads[KEY].phase == ADMITTED
    assert _samples(state, "kueue_admission_checks_wait_time_seconds")
    rewritten = msgspec.structs.replace(workload("ns0", "w0", uid="u0", queue="lqa", cpu="1", count=2),
                                        status=o.WorkloadStatus(admission_checks=list(listed.values())))
    _upsert(state, rewritten)
    wl = state.workloads[KEY]
    assert wl.phase == PENDING and wl.check_states == listed
    assert not _samples(state, "kueue_admission_checks_wait_time_seconds"), "nor is its check wait counted"


def test_the_audit_shows_the_reservation_forgotten_and_the_workload_queued_again() -> None:
    """The audit, with the fold beside it, shows the forget as a release at the rewrite's offset (``SpecChanged``,
    as the writer's rejection words it), and follows the workload back to pending in its queue."""
    shown = msgspec.structs.replace(_first(count=2), status=o.WorkloadStatus(conditions=[PENDING_SHOWN]))
    batch: list[ev.AnyEvent] = [*prelude(T0), upsert(_first(), T0)]
    base = {"time": T0 + 1000, "cycle": 1, "input": len(batch) - 1}
    batch += [ev.QuotaReserved(key=KEY, admission=admission("cq0", "f0", 3000, count=3), **base),
              ev.WorkloadAdmitted(key=KEY, **base), upsert(shown, T0 + 2000)]
    trail = AuditTrail(keys=[KEY], state=ClusterState())
    for r in records([batch]):
        trail.apply(r)
    assert trail.state is not None and trail.state.workloads[KEY].phase == PENDING
    last = trail.timeline(KEY)[-1]
    assert (last.offset, last.step, last.reason, last.released, last.cluster_queue) == (
        len(batch) - 1, "Requeued", "SpecChanged", True, "cq0")
    tracked = trail.workloads[KEY]
    assert (tracked.phase, tracked.reserved_in, tracked.queued_in) == ("Pending", "", "cq0")


def _samples(state: ClusterState, name: str) -> list:
    return next(f.samples for f in families(state) if f.spec.name == name)


def _counted(state: ClusterState) -> dict[str, object]:
    """The reservation and admission counters and wait-time histograms (ClusterQueue, LocalQueue, cohort), and
    the admission attempts."""
    wanted = {"kueue_quota_reserved_workloads_total", "kueue_admitted_workloads_total",
              "kueue_quota_reserved_wait_time_seconds", "kueue_admission_wait_time_seconds",
              "kueue_local_queue_quota_reserved_workloads_total", "kueue_local_queue_admitted_workloads_total",
              "kueue_local_queue_quota_reserved_wait_time_seconds", "kueue_local_queue_admission_wait_time_seconds",
              "kueue_cohort_subtree_admitted_workloads_total", "kueue_admission_attempts_total"}
    return {f.spec.name: sorted(f.samples) for f in families(state) if f.spec.name in wanted and f.samples}


def test_the_metrics_do_not_count_a_reservation_that_was_never_written() -> None:
    """Kueue counts a reservation and an admission (quota_reserved/admitted_workloads_total, their wait times)
    once their status write succeeds; the write of a reservation the fold forgets lost to the rewrite, so
    Kueue never counted it. The admission attempt stays counted: Kueue counts it when it assumes the workload."""
    state = _admitted()
    counted = _counted(state)
    assert counted["kueue_quota_reserved_workloads_total"] == [(("cq0", ""), 1)]
    assert counted["kueue_admitted_workloads_total"] == [(("cq0", ""), 1)]
    assert counted["kueue_local_queue_admitted_workloads_total"] == [(("lq0", "ns0", ""), 1)]
    assert counted["kueue_cohort_subtree_admitted_workloads_total"] == [(("co0", ""), 1)]
    shown = o.WorkloadStatus(conditions=[PENDING_SHOWN])
    _upsert(state, msgspec.structs.replace(_first(count=2), status=shown))
    assert state.workloads[KEY].phase == PENDING
    after = _counted(state)
    assert after == {"kueue_admission_attempts_total": counted["kueue_admission_attempts_total"]}, (
        "no series of a reservation or admission Kueue never counted")
