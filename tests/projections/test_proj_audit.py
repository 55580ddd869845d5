"""The audit projection: one timeline per workload, folded from records, pure and deterministic."""

from __future__ import annotations

import random

import msgspec
from fixtures.eventgen import (
    T0,
    Op,
    admission,
    claim_template,
    claiming_workload,
    cluster_queue,
    delete,
    flavor,
    fold,
    interpret,
    local_queue,
    meta,
    op_lists,
    random_ops,
    records,
    upsert,
    workload,
)
from fixtures.provflow import retry_then_provision
from hypothesis import example, given, settings

from events import objects as o
from events import schema as ev
from events.timefmt import format_time
from kueue_es.commands.audit import details
from projections.audit import AuditTrail
from projections.cluster import ClusterState
from projections.workloads import ADMITTED, PENDING, RESERVED

S = 1000  # one second in ms


def d(cycle: int, t: int) -> dict[str, int]:
    return {"time": T0 + t * S, "cycle": cycle, "input": 0}


def setup() -> list[ev.AnyEvent]:
    return [
        upsert(flavor("on-demand"), T0),
        upsert(cluster_queue("cq-a", cohort="research", quotas={"on-demand": 4}), T0),
        upsert(local_queue("team", "lq", "cq-a"), T0),
    ]


def lifecycle() -> list[ev.AnyEvent]:
    key = "team/job"
    pending = {"reason": "Pending", "message": "couldn't assign flavors to pod set main: insufficient quota"}
    return setup() + [
        upsert(workload("team", "job", queue="lq", cpu="2", count=2, priority=5, created=T0 + S), T0 + S),  # 3
        ev.WorkloadPending(key=key, **pending, **d(1, 2)),                                                  # 4
        ev.WorkloadPending(key=key, **pending, parked=True, **d(2, 3)),                                     # 5
        ev.WorkloadPending(key=key, **pending, **d(3, 4)),                                                  # 6
        ev.WorkloadPending(key=key, reason="Pending", message="other", **d(4, 5)),                          # 7
        ev.WorkloadPending(key=key, **pending, **d(5, 6)),                                                  # 8
        ev.QuotaReserved(key=key, admission=admission("cq-a", "on-demand", 4000, 2), **d(6, 7)),            # 9
        ev.WorkloadAdmitted(key=key, **d(6, 7)),                                                            # 10
        ev.WorkloadPreempted(key=key, reason="InClusterQueue", message="Preempted to accommodate a workload",
                             preemptor="team/urgent", **d(7, 8)),                                           # 11
        ev.JobStopped(key=key, time=T0 + 9 * S),                                                            # 12
        ev.WorkloadRequeued(key=key, status=True, reason="Preempted", release=True, **d(8, 10)),            # 13
        ev.QuotaReserved(key=key, admission=admission("cq-a", "on-demand", 4000, 2), **d(9, 11)),           # 14
        ev.WorkloadAdmitted(key=key, **d(9, 11)),                                                           # 15
        ev.DecisionRejected(time=T0 + 12 * S, decision=15, reason="Conflict", message="the object changed"),  # 16
        ev.WorkloadFinished(key=key, time=T0 + 20 * S, reason="Succeeded", message="done"),                 # 17
    ]


def trail_of(events: list[ev.AnyEvent], **kw) -> AuditTrail:
    return AuditTrail(**kw).apply_all(records([events]))


def test_full_lifecycle_in_order_with_offsets_and_times() -> None:
    steps = trail_of(lifecycle()).timeline("team/job")
    assert [(s.offset, s.step) for s in steps] == [
        (3, "Submitted"), (3, "Queued"), (4, "Pending"), (7, "Pending"), (8, "Pending"), (9, "QuotaReserved"),
        (10, "Admitted"), (11, "Preempted"), (12, "JobStopped"), (13, "Requeued"), (14, "QuotaReserved"),
        (15, "Admitted"), (16, "Rejected"), (17, "Finished"),
    ]
    by = {(s.offset, s.step): s for s in steps}
    assert by[(3, "Queued")].cluster_queue == "cq-a" and by[(3, "Queued")].local_queue == "lq"
    collapsed = by[(4, "Pending")]
    assert (collapsed.repeat, collapsed.last_offset, collapsed.last_time) == (3, 6, T0 + 4 * S)
    assert collapsed.message.endswith("insufficient quota") and collapsed.time == T0 + 2 * S
    assert by[(7, "Pending")].repeat == 1 and by[(7, "Pending")].message == "other"
    assert by[(8, "Pending")].repeat == 1  # identical to the first, but not consecutive with it
    reserved = by[(9, "QuotaReserved")]
    assert reserved.cluster_queue == "cq-a"
    assert reserved.flavors == {"main": {"cpu": "on-demand"}} and reserved.counts == {"main": 2}
    assert reserved.cycle == 6
    pre = by[(11, "Preempted")]
    assert (pre.reason, pre.preemptor, pre.cluster_queue) == ("InClusterQueue", "team/urgent", "cq-a")
    assert by[(13, "Requeued")].released
    assert (by[(16, "Rejected")].decision, by[(16, "Rejected")].reason) == (15, "Conflict")
    fin = by[(17, "Finished")]
    assert (fin.reason, fin.cluster_queue, fin.time) == ("Succeeded", "cq-a", T0 + 20 * S)
    assert not any(s.ignored for s in steps)


def test_a_configured_preemption_shows_its_underlying_cause() -> None:
    """ConfigurablePreemptions: the Preempted step carries the cause the victim's eviction record gives (the
    PreemptionConfig whose rules chose it); a classical preemption's has none."""
    events = lifecycle()
    events[11] = ev.WorkloadPreempted(key="team/job", reason="ConfigurablePreemption", message="m",
                                      preemptor="team/urgent", preemption_config="defrag",
                                      selected_by=(("tier", (0,)),), **d(7, 8))
    pre = next(s for s in trail_of(events).timeline("team/job") if s.step == "Preempted")
    assert pre.underlying_cause == "defrag"  # the record's: the PreemptionConfig (Kueue v0.20)
    assert msgspec.to_builtins(pre)["underlyingCause"] == pre.underlying_cause
    assert all(not s.underlying_cause for s in trail_of(lifecycle()).timeline("team/job"))
    assert details(pre) == f"ConfigurablePreemption: m; by team/urgent; cause: {pre.underlying_cause}; cycle 7"


def test_queued_follows_the_local_queue() -> None:
    events = [
        upsert(workload("team", "early", queue="lq", created=T0), T0),  # 0: no LocalQueue yet
        upsert(local_queue("team", "lq", "cq-a"), T0 + S),             # 1
        upsert(local_queue("team", "lq", "cq-b"), T0 + 2 * S),         # 2: repointed
        upsert(local_queue("team", "lq", "cq-b"), T0 + 3 * S),         # 3: unchanged: no step
        delete("LocalQueue", "team/lq", T0 + 4 * S),                   # 4
        upsert(local_queue("team", "lq", "cq-a"), T0 + 5 * S),         # 5
    ]
    steps = trail_of(events).timeline("team/early")
    assert [(s.offset, s.step, s.cluster_queue) for s in steps] == [
        (0, "Submitted", ""), (1, "Queued", "cq-a"), (2, "Queued", "cq-b"), (5, "Queued", "cq-a"),
    ]
    assert steps[1].time == T0 + S


def _gated(w, gate: str):
    return msgspec.structs.replace(w, metadata=msgspec.structs.replace(
        w.metadata, annotations={"kueue.x-k8s.io/admission-gated-by": gate}))


def test_a_gated_workload_is_queued_once_its_gate_is_cleared_or_the_gate_turned_off() -> None:
    def config(on: bool) -> ev.ConfigRecorded:
        return ev.ConfigRecorded(time=T0, document={"apiVersion": "config.kueue.x-k8s.io/v1beta2",
                                                    "kind": "Configuration", "featureGates": {"AdmissionGatedBy": on}},
                                 writer="test", id=f"config-{on}")
    w = workload("team", "held", queue="lq", created=T0)
    events = setup() + [
        upsert(_gated(w, "example.com/a"), T0 + S),   # 3: gated: not queued
        upsert(_gated(w, ""), T0 + 2 * S),            # 4: an empty annotation gates nothing
        upsert(_gated(w, "example.com/a"), T0 + 3 * S),  # 5
        config(False),                                # 6: the gate off: queued again
        config(True),                                 # 7
        upsert(w, T0 + 4 * S),                        # 8: the annotation gone
    ]
    steps = trail_of(events).timeline("team/held")
    assert [(s.offset, s.step) for s in steps] == [(3, "Submitted"), (4, "Queued"), (6, "Queued"), (8, "Queued")]


def test_a_workload_whose_dra_claims_kueue_refuses_is_queued_once_they_are_charged() -> None:
    """KueueDRAIntegration: claims Kueue does not charge (a template not there, a DeviceClass no mapping names) keep
    the workload out of its queue, as the state fold keeps it; the template made, or the mapping that charges it,
    queues it; both DRA gates off, claims are ignored and it is queued."""
    def config(doc: dict, n: int) -> ev.ConfigRecorded:
        return ev.ConfigRecorded(time=T0, document={"apiVersion": "config.kueue.x-k8s.io/v1beta2",
                                                    "kind": "Configuration", **doc}, writer="test", id=f"config-{n}")
    mapped = {"resources": {"deviceClassMappings": [{"name": "example.com/gpu", "deviceClassNames": ["dc0"]}]}}
    ignored = {"featureGates": {"KueueDRAIntegration": False, "KueueDRARejectWorkloadsWhenDRADisabled": False}}
    w = claiming_workload("team", "dra", uid="u-dra", queue="lq", claims=[("template", "tmpl0")], created=T0)
    events = setup() + [
        upsert(w, T0 + S),                                           # 3: no template: not queued
        upsert(claim_template("team", "tmpl0", "dc0", 2), T0 + 2 * S),  # 4: dc0 not mapped: still not
        config(mapped, 1),                                           # 5: charged: queued
        delete("ResourceClaimTemplate", "team/tmpl0", T0 + 3 * S),   # 6: gone: out of the queue
        config(ignored, 2),                                          # 7: claims ignored: queued
    ]
    trail = trail_of(events)
    assert [(s.offset, s.step) for s in trail.timeline("team/dra")] == [(3, "Submitted"), (5, "Queued"), (7, "Queued")]
    for n in range(4, len(events) + 1):  # where the state fold has it, after each event
        queued = any("team/dra" in q.shapes for q in fold(records([events[:n]])).queues.values())
        assert trail_of(events[:n]).workloads["team/dra"].queued_in == ("cq-a" if queued else ""), n


def test_decisions_that_do_not_apply_are_marked_ignored() -> None:
    events = setup() + [
        upsert(workload("team", "job", queue="lq", created=T0), T0),
        ev.WorkloadAdmitted(key="team/job", **d(1, 1)),  # no reservation yet
        ev.QuotaReserved(key="team/ghost", admission=admission("cq-a", "on-demand", 1000), **d(1, 1)),
    ]
    trail = trail_of(events)
    assert trail.timeline("team/job")[-1].step == "Admitted" and trail.timeline("team/job")[-1].ignored
    assert trail.timeline("team/ghost")[0].ignored


def test_recreated_workload_is_submitted_again_with_its_new_uid() -> None:
    events = setup() + [
        upsert(workload("team", "job", uid="u1", queue="lq"), T0),
        delete("Workload", "team/job", T0 + S),
        upsert(workload("team", "job", uid="u2", queue="lq"), T0 + 2 * S),
    ]
    steps = trail_of(events).timeline("team/job")
    assert [(s.step, s.uid) for s in steps] == [
        ("Submitted", "u1"), ("Queued", "u1"), ("Deleted", "u1"), ("Submitted", "u2"), ("Queued", "u2"),
    ]


def test_only_the_keys_asked_for_are_kept() -> None:
    events = lifecycle() + [upsert(workload("team", "other", queue="lq"), T0 + 30 * S)]
    trail = trail_of(events, keys=["team/other"])
    assert sorted(trail.timelines) == ["team/other"]
    assert [s.step for s in trail.timeline("team/other")] == ["Submitted", "Queued"]


def test_steps_of_all_workloads_are_in_log_order() -> None:
    events = lifecycle() + [upsert(workload("team", "b", queue="lq"), T0 + 30 * S)]
    steps = trail_of(events).steps()
    assert [s.offset for s in steps] == sorted(s.offset for s in steps)
    assert {s.workload for s in steps} == {"team/job", "team/b"}


@settings(max_examples=100, deadline=None)
@given(ops=op_lists())
@example(ops=[Op("wl_adjusted", 0, 0, 0), Op("mk_remote_finished", 1, 0, 0)])  # MultiKueue's finish, found so
@example(ops=[Op("wl", 12, 0, 1), Op("wl_claims", 52, 0, 0)])  # queued, then claims DRA refuses: queued nowhere
@example(ops=[Op("device_class", 0, 0, 0), Op("wl_extended", 0, 0, 4)])  # 500m of a served resource: refused
@example(ops=[Op("wl_extended", 0, 0, 4), Op("device_class", 0, 0, 0), Op("device_class_delete", 0, 0, 0)])
@example(ops=[Op("wl", 0, 0, 0), Op("ca_family", 0, 0, 0)])  # a variant the log made: submitted to its parent's queue
@example(ops=[Op("wl_variant", 0, 0, 1), Op("config_gates", 0, 0, 0)])  # a labelled parent leaves its queue with the gate
@example(ops=[Op("wl", 0, 0, 0), Op("reserve", 0, 0, 0), Op("on_hold", 0, 0, 0)])  # held: its quota given back
@example(ops=[Op("wl", 0, 0, 0), Op("on_hold", 0, 0, 0), Op("on_hold", 0, 1, 0)])  # held, then queued again
@example(ops=[Op("wl", 0, 0, 1), Op("on_hold", 1, 0, 0), Op("pending", 1, 0, 0), Op("deactivate", 1, 0, 0),
               Op("wl", 0, 0, 1)])  # a held workload's condition rewritten (no longer held), then reactivated
@example(ops=[Op("wl_component", 0, 0, 0), Op("on_hold", 0, 0, 1), Op("pending", 0, 0, 1),
              Op("wl_component", 0, 0, 0)])  # a held pod group's condition rewritten, then upserted again
def test_audit_agrees_with_cluster_state_on_where_each_workload_is(ops) -> None:
    recs = records(interpret(ops))
    state = fold(recs)
    trail = AuditTrail(state=ClusterState()).apply_all(recs)
    assert sorted(trail.workloads) == sorted(state.workloads)
    for key, wl in state.workloads.items():
        t = trail.workloads[key]
        assert (t.phase, t.active) == (wl.phase, wl.active), key
        if wl.phase in (RESERVED, ADMITTED):
            assert t.reserved_in == wl.cluster_queue, key
        elif wl.phase == PENDING and wl.active:
            assert t.queued_in == wl.cluster_queue, key
    # every workload the state knows has a timeline that starts with its submission
    for key in state.workloads:
        assert any(s.step == "Submitted" for s in trail.timeline(key))


def test_audit_is_deterministic_and_independent_of_batching() -> None:
    batches = interpret(random_ops(random.Random(11), 400))
    recs = records(batches)
    a = msgspec.msgpack.encode(AuditTrail().apply_all(recs).steps())
    b = msgspec.msgpack.encode(AuditTrail().apply_all(records([[e for batch in batches for e in batch]])).steps())
    assert a == b
    assert len(msgspec.msgpack.decode(a)) > 50


def test_eviction_deactivation_and_reports_from_the_cluster() -> None:
    key = "team/job"
    events = setup() + [
        upsert(workload("team", "job", queue="lq"), T0),                                                   # 3
        ev.QuotaReserved(key=key, admission=admission("cq-a", "on-demand", 1000), **d(1, 1)),              # 4
        ev.WorkloadAdmitted(key=key, **d(1, 1)),                                                           # 5
        ev.PodsReadyChanged(key=key, ready=False, time=T0 + 2 * S),                                        # 6
        ev.WorkloadEvicted(key=key, reason="PodsReadyTimeout", message="Exceeded the PodsReady timeout",
                           **d(2, 3)),                                                                      # 7
        ev.WorkloadRequeued(key=key, status=True, reason="PodsReadyTimeout", release=True, **d(3, 4)),     # 8
        ev.AdmissionCheckStateChanged(key=key, check="prov", state="Retry", message="capacity",
                                      time=T0 + 5 * S),                                                    # 9
        ev.WorkloadDeactivated(key=key, reason="RequeuingLimitExceeded", message="too many", **d(4, 6)),   # 10
        upsert(workload("team", "job", queue="lq", active=True), T0 + 7 * S),                             # 11 reactivated
    ]
    steps = trail_of(events).timeline(key)
    assert [(s.offset, s.step) for s in steps] == [
        (3, "Submitted"), (3, "Queued"), (4, "QuotaReserved"), (5, "Admitted"), (6, "PodsReady"), (7, "Evicted"),
        (8, "Requeued"), (9, "AdmissionCheck"), (10, "Deactivated"), (11, "Queued"),
    ]
    by = {s.offset: s for s in steps}
    assert (by[7].reason, by[7].cluster_queue) == ("PodsReadyTimeout", "cq-a")
    assert by[8].released and by[8].cluster_queue == "cq-a"
    assert (by[9].reason, by[9].message) == ("prov=Retry", "capacity")
    assert by[6].message == "not ready"
    # the upsert at 11 says active: true again after the deactivation: the workload is queued again
    assert by[11].cluster_queue == "cq-a"


def test_an_inactive_workload_s_requeue_state_cleared_is_a_step() -> None:
    key = "team/job"
    events = setup() + [
        upsert(workload("team", "job", queue="lq"), T0),                                                   # 3
        ev.QuotaReserved(key=key, admission=admission("cq-a", "on-demand", 1000), **d(1, 1)),              # 4
        ev.WorkloadAdmitted(key=key, **d(1, 1)),                                                           # 5
        ev.WorkloadEvicted(key=key, reason="PodsReadyTimeout", message="Exceeded the PodsReady timeout",
                           **d(2, 3)),                                                                     # 6
        ev.WorkloadDeactivated(key=key, reason="InactiveWorkload", message="inactive", **d(3, 4)),         # 7
        ev.RequeueStateCleared(key=key, **d(3, 4)),                                                        # 8
    ]
    last = trail_of(events).timeline(key)[-1]
    assert (last.offset, last.step, last.message) == (
        8, "RequeueStateCleared", "requeueState cleared: inactive")


def test_a_late_retry_s_requeue_at_is_a_step() -> None:
    """A Retry check reporting after the eviction pushes requeueAt out: the step says to when, so the history
    shows why the workload was not requeued at its eviction's backoff."""
    key = "team/job"
    events = setup() + [
        upsert(workload("team", "job", queue="lq"), T0),                                                   # 3
        ev.QuotaReserved(key=key, admission=admission("cq-a", "on-demand", 1000), **d(1, 1)),              # 4
        ev.WorkloadEvicted(key=key, reason="AdmissionCheck", message="Evicted", requeue_at=T0 + 40 * S,
                           **d(2, 10)),                                                                    # 5
        ev.RequeueAtRaised(key=key, requeue_at=T0 + 72 * S, **d(3, 12)),                                   # 6
    ]
    last = trail_of(events).timeline(key)[-1]
    assert (last.offset, last.step, last.message, last.ignored) == (
        6, "RequeueAtRaised", f"requeueAt {format_time(T0 + 72 * S)}: an admission check's retry delay",
        False)


def test_a_passed_requeue_at_cleared_is_a_step() -> None:
    """A late retry's time that passed while the workload waited pending goes: the step says so, as nothing
    else (no Requeued=False backoff ends) shows it."""
    key = "team/job"
    events = setup() + [
        upsert(workload("team", "job", queue="lq"), T0),                                                   # 3
        ev.RequeueAtRaised(key=key, requeue_at=T0 + 35 * S, **d(1, 5)),                                    # 4
        ev.RequeueAtCleared(key=key, **d(2, 35)),                                                          # 5
    ]
    last = trail_of(events).timeline(key)[-1]
    assert (last.offset, last.step, last.message, last.ignored) == (
        5, "RequeueAtCleared", "requeueAt passed: cleared", False)


def test_the_provisioning_controller_s_decisions_show_in_a_workload_s_history() -> None:
    f = retry_then_provision()
    steps = AuditTrail().apply_all(f.records).timeline("default/job-a")
    got = [(s.step, s.reason) for s in steps if s.step in ("ProvisioningRequest", "AdmissionCheck", "Evicted",
                                                            "QuotaReserved", "Admitted", "Finished")]
    assert got == [
        ("QuotaReserved", ""),
        ("ProvisioningRequest", "Created"),
        ("AdmissionCheck", "prov=Retry"),
        ("Evicted", "AdmissionCheck"),
        ("ProvisioningRequest", "Deleted: Evicted"),
        ("QuotaReserved", ""),
        ("ProvisioningRequest", "Created"),
        ("AdmissionCheck", "prov=Ready"),
        ("Admitted", ""),
        ("Finished", "Succeeded"),
        ("ProvisioningRequest", "Deleted: Finished"),
    ]
    by_reason = {(s.step, s.reason, s.offset): s for s in steps}
    created = [s for (step, reason, _), s in sorted(by_reason.items(), key=lambda kv: kv[0][2])
               if step == "ProvisioningRequest" and reason == "Created"]
    assert [s.message for s in created] == [
        "job-a-prov-1 (check prov, attempt 1, class queued-provisioning.gke.io)",
        "job-a-prov-2 (check prov, attempt 2, class queued-provisioning.gke.io)",
    ]
    retry = next(s for s in steps if s.reason == "prov=Retry")
    assert retry.message == "Retrying after failure: no capacity" and retry.cycle is not None
    assert all(not s.ignored for s in steps)


def test_a_check_state_its_controller_set_on_the_workload_shows_once_at_the_upsert_that_carried_it() -> None:
    """A check kueue-es does not run: its controller's states reach the log only in Workload upserts. Each state the
    fold takes is one observed step at that upsert's offset; an upsert showing it again, one read before the reset
    on eviction was written, or the log's own word shown back by the watch add none."""
    key = "team/job"
    job = workload("team", "job", queue="lq")
    check = o.AdmissionCheck(metadata=meta("ext"), spec=o.AdmissionCheckSpec(controller_name="example.com/external"))
    state = ClusterState()
    trail = AuditTrail(state=state)
    offset = 0

    def apply(*events: ev.AnyEvent) -> None:
        nonlocal offset
        for e in events:
            trail.apply(ev.Record(offset, e))
            offset += 1

    def shown(t: int, rv: int, *states: o.AdmissionCheckState) -> ev.ObjectUpserted:
        w = msgspec.structs.replace(job, metadata=msgspec.structs.replace(job.metadata, resource_version=str(rv)),
                                    status=o.WorkloadStatus(admission_checks=list(states)))
        return upsert(w, T0 + t * S)

    def word() -> o.AdmissionCheckState:  # the log's own state of the check, as the writer writes it
        return state.workloads[key].check_states["ext"]

    def ext(t: int, state_: str, message: str) -> o.AdmissionCheckState:
        return o.AdmissionCheckState(name="ext", state=state_, message=message, last_transition_time=format_time(T0 + t * S))

    apply(upsert(flavor("on-demand"), T0), upsert(check, T0),
          upsert(cluster_queue("cq-a", quotas={"on-demand": 4}, checks=["ext"]), T0),
          upsert(local_queue("team", "lq", "cq-a"), T0), upsert(job, T0),
          ev.QuotaReserved(key=key, admission=admission("cq-a", "on-demand", 1000), **d(1, 1)))       # 5
    apply(shown(2, 2, word()),                                                                          # 6 the watch
          shown(3, 3, ext(3, "Ready", "capacity found")),                                               # 7 taken
          shown(4, 4, ext(3, "Ready", "capacity found")),                                               # 8 the same
          ev.WorkloadEvicted(key=key, reason="Preempted", message="by the test", **d(2, 5)))            # 9 reset
    apply(shown(6, 5, ext(3, "Ready", "capacity found again")),                                         # 10 stale
          shown(7, 6, word()),                                                                          # 11 the reset
          shown(8, 7, ext(8, "Retry", "try later")))                                                    # 12 taken
    checks = [(s.offset, s.reason, s.message, s.observed, s.cluster_queue) for s in trail.timeline(key)
              if s.step == "AdmissionCheck"]
    assert checks == [(7, "ext=Ready", "capacity found", True, "cq-a"), (12, "ext=Retry", "try later", True, "cq-a")]


def _variant(ns: str, name: str, parent: str, parent_uid: str, uid: str) -> o.Workload:
    w = workload(ns, name, queue="lq", uid=uid)
    ref = o.OwnerReference(api_version="kueue.x-k8s.io/v1beta2", kind="Workload", name=parent, uid=parent_uid,
                           controller=True)
    return msgspec.structs.replace(w, metadata=msgspec.structs.replace(w.metadata, owner_references=[ref]))


def test_a_concurrent_admission_family_as_the_fold_has_it() -> None:
    """A variant the log made is submitted to its parent's queue, is the same workload when the watch brings it
    back with its uid, and follows its activation, its parent's admission through it, its finish and deletion."""
    parent = workload("team", "job", queue="lq", uid="uid-parent")
    vkey, other = "team/job-variant-on-demand", "team/job-variant-spot"
    made = {"parent": "job", "parent_uid": "uid-parent"}
    events = setup() + [
        upsert(parent, T0),                                                                                # 3
        ev.VariantCreated(key=vkey, uid="", flavor="on-demand", **made, **d(1, 1)),                         # 4
        ev.VariantCreated(key=other, uid="", flavor="spot", **made, **d(1, 1)),                             # 5
        upsert(_variant("team", "job-variant-on-demand", "job", "uid-parent", "uid-v1"), T0 + 2 * S),        # 6
        ev.VariantActivation(key=other, uid="", active=False, message="Deactivated variant", **d(2, 3)),    # 7
        ev.QuotaReserved(key=vkey, uid="uid-v1", admission=admission("cq-a", "on-demand", 1000), **d(3, 4)),  # 8
        ev.WorkloadAdmitted(key=vkey, uid="uid-v1", **d(3, 4)),                                             # 9
        ev.ParentAdmitted(key="team/job", uid="uid-parent", admission=admission("cq-a", "on-demand", 1000),
                          variant="job-variant-on-demand", message="The variant job-variant-on-demand is admitted",
                          **d(4, 5)),                                                                      # 10
        ev.VariantDeleted(key=other, uid="", parent="job", flavor="spot", **d(5, 6)),                       # 11
        ev.WorkloadFinished(key="team/job", time=T0 + 7 * S, reason="Succeeded", message="done"),           # 12
        ev.VariantFinished(key=vkey, uid="uid-v1", reason="Succeeded", message="done", **d(6, 8)),          # 13
    ]
    recs = records([events])
    state = fold(recs)
    trail = AuditTrail(state=ClusterState()).apply_all(recs)
    v = [(s.offset, s.step) for s in trail.timeline(vkey)]
    assert v == [(4, "Submitted"), (4, "Queued"), (8, "QuotaReserved"), (9, "Admitted"), (13, "Finished")], v
    assert [s.uid for s in trail.timeline(vkey)][-1] == "uid-v1"
    assert [(s.offset, s.step) for s in trail.timeline(other)] == [
        (5, "Submitted"), (5, "Queued"), (7, "Deactivated"), (11, "Deleted")]
    p = [(s.offset, s.step) for s in trail.timeline("team/job")]
    assert p == [(3, "Submitted"), (3, "Queued"), (10, "QuotaReserved"), (10, "Admitted"), (12, "Finished")], p
    assert sorted(trail.workloads) == sorted(state.workloads)
    for key, wl in state.workloads.items():
        assert (trail.workloads[key].phase, trail.workloads[key].active) == (wl.phase, wl.active), key


def test_a_workload_on_hold_gives_its_quota_back_and_is_queued_again_once_released() -> None:
    """A StatefulSet's Workload held while the set is at zero replicas (``WorkloadOnHoldChanged``, Kueue #12233)."""
    key = "team/job"
    events = setup() + [
        upsert(workload("team", "job", queue="lq", cpu="1", uid="u1", created=T0 + S), T0 + S),           # 3
        ev.QuotaReserved(key=key, admission=admission("cq-a", "on-demand", 1000, 1), **d(1, 2)),           # 4
        ev.WorkloadOnHoldChanged(key=key, uid="u1", time=T0 + 3 * S, on_hold=True),                        # 5
        ev.WorkloadOnHoldChanged(key=key, uid="u1", time=T0 + 4 * S, on_hold=True),                        # 6: held already
        ev.WorkloadOnHoldChanged(key=key, uid="u1", time=T0 + 5 * S, on_hold=False),                       # 7
    ]
    trail = trail_of(events)
    steps = trail.timeline(key)
    assert [(s.offset, s.step) for s in steps] == [
        (3, "Submitted"), (3, "Queued"), (4, "QuotaReserved"), (5, "Unreserved"), (7, "Queued")]
    held = steps[3]
    assert (held.reason, held.message, held.released, held.cluster_queue) == (
        "OnHold", "StatefulSet scaled to zero; workload on hold", True, "cq-a")
    assert (trail.workloads[key].phase, trail.workloads[key].queued_in) == (PENDING, "cq-a")

