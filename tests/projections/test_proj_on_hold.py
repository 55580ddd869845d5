"""A Workload on hold (``WorkloadOnHoldChanged``, from the pod integration for a StatefulSet scaled to zero): Kueue
v0.20's StatefulSet reconciler (#12233) writes QuotaReserved=False reason ``OnHold`` with
``UnsetQuotaReservationWithCondition``, so the Workload gives its quota back and its admission goes, and Kueue's
queues leave it out (``IsOnHold``) until the hold is cleared, which writes QuotaReserved=False ``PendingEvaluation``
("Workload no longer on hold; waiting for quota reservation"). Folded from the log, so a replay shows the same."""

from __future__ import annotations

import itertools

import msgspec
from fixtures.eventgen import T0, admission, cluster_queue, flavor, local_queue, namespace, upsert, workload

from events import objects as o
from events import schema as ev
from events.codec import decode_event, encode_event
from kueue_es.scheduler import decide, settle
from kueue_es.scheduler.config import load_config
from projections.cluster import ClusterState
from projections.workloads import (
    ADMITTED,
    PENDING,
    WAITING_FOR_REPLACEMENT_PODS,
    WorkloadInfo,
    held_by_conditions,
    on_hold,
    status_of,
)


def waits_for_replacement_pods(wl: WorkloadInfo) -> bool:
    """The plain reading ``held_by_conditions`` is checked against: ``WaitingForReplacementPods`` is True."""
    c = wl.condition(WAITING_FOR_REPLACEMENT_PODS)
    return c is not None and c.status == "True"


HELD = ("False", "OnHold", "StatefulSet scaled to zero; workload on hold")
CLEARED = ("False", "PendingEvaluation", "Workload no longer on hold; waiting for quota reservation")


def _fold(*events: ev.AnyEvent, state: ClusterState | None = None) -> ClusterState:
    state = state if state is not None else ClusterState()
    for e in events:
        state.apply(ev.Record(state.offset + 1, decode_event(encode_event(e), state.offset + 1)))
    return state


def _admitted(*first: ev.AnyEvent) -> ClusterState:
    state = _fold(*first, upsert(namespace("ns0"), T0), upsert(flavor("f0"), T0), upsert(cluster_queue("cq0", quotas={"f0": 4}), T0),
                  upsert(local_queue("ns0", "lq0", "cq0"), T0), upsert(workload("ns0", "g", uid="u0", cpu="3"), T0))
    settle(state)
    assert state.workloads["ns0/g"].phase == ADMITTED
    return state


def _queued(state: ClusterState) -> bool:
    q = state.queues.get("cq0")
    return q is not None and ("ns0/g" in q.entries or "ns0/g" in q.inadmissible)


def _condition(state: ClusterState, kind: str = "QuotaReserved") -> tuple[str, str, str] | None:
    c = state.workloads["ns0/g"].condition(kind)
    return None if c is None else (c.status, c.reason, c.message)


def _used(state: ClusterState) -> int:
    return sum(state.usage.get("cq0", {}).values())


def test_a_workload_put_on_hold_gives_its_quota_back_and_is_not_queued_until_the_hold_is_cleared() -> None:
    state = _admitted()
    assert _used(state) > 0
    _fold(ev.WorkloadOnHoldChanged(time=T0 + 10, key="ns0/g", uid="u0", on_hold=True), state=state)
    wl = state.workloads["ns0/g"]
    assert _condition(state) == HELD and on_hold(wl)
    assert _condition(state, "Admitted")[0] == "False"
    assert wl.phase == PENDING and wl.admission is None and _used(state) == 0, "its quota is given back"
    written = status_of(wl)
    assert "admission" not in written or written["admission"] is None
    assert [(c["status"], c["reason"], c["message"]) for c in written["conditions"] if c["type"] == "QuotaReserved"
            ] == [HELD]
    assert not _queued(state), "Kueue's queues leave a Workload on hold out"
    assert [d for batch in settle(state) for d in batch if getattr(d, "key", "") == "ns0/g"] == []
    assert state.workloads["ns0/g"].phase == PENDING and _condition(state) == HELD, "neither admitted nor requeued"

    _fold(ev.WorkloadOnHoldChanged(time=T0 + 20, key="ns0/g", uid="u0", on_hold=True), state=state)
    assert state.workloads["ns0/g"].condition("QuotaReserved").last_transition_time == wl.condition(
        "QuotaReserved").last_transition_time, "held already: nothing changes"
    _fold(ev.WorkloadOnHoldChanged(time=T0 + 30, key="ns0/g", uid="other"), state=state)
    assert _condition(state) == HELD, "said of another Workload of that name"

    _fold(ev.WorkloadOnHoldChanged(time=T0 + 40, key="ns0/g", uid="u0"), state=state)
    assert _condition(state) == CLEARED and not on_hold(state.workloads["ns0/g"]) and _queued(state)
    settle(state)
    assert state.workloads["ns0/g"].phase == ADMITTED, "queued again, it is admitted"


def test_a_pending_workload_put_on_hold_leaves_its_queue() -> None:
    state = _fold(upsert(namespace("ns0"), T0), upsert(flavor("f0"), T0), upsert(cluster_queue("cq0", quotas={"f0": 1}), T0),
                  upsert(local_queue("ns0", "lq0", "cq0"), T0), upsert(workload("ns0", "g", uid="u0", cpu="3"), T0))
    settle(state)
    assert _queued(state) and state.workloads["ns0/g"].phase == PENDING
    _fold(ev.WorkloadOnHoldChanged(time=T0 + 10, key="ns0/g", uid="u0", on_hold=True), state=state)
    assert _condition(state) == HELD and not _queued(state)
    assert [d for batch in settle(state) for d in batch if getattr(d, "key", "") == "ns0/g"] == []
    assert _condition(state) == HELD, "the workload controller's rules leave the hold alone"


def test_a_pending_decision_taken_before_the_hold_lifts_it_and_queues_the_workload() -> None:
    """The scheduler's Pending write for a cycle that read the workload before its hold rewrites
    QuotaReserved, so the Workload is on hold no more: Kueue's update handler queues it again (until its
    StatefulSet holds it anew)."""
    state = _fold(upsert(namespace("ns0"), T0), upsert(flavor("f0"), T0),
                  upsert(cluster_queue("cq0", quotas={"f0": 1}), T0),
                  upsert(local_queue("ns0", "lq0", "cq0"), T0),
                  upsert(workload("ns0", "g", uid="u0", cpu="3"), T0))
    settle(state)
    _fold(ev.WorkloadOnHoldChanged(time=T0 + 10, key="ns0/g", uid="u0", on_hold=True), state=state)
    assert not _queued(state)
    _fold(ev.WorkloadPending(time=T0 + 11, key="ns0/g", cycle=1, input=1, reason="Pending", message="late"),
          state=state)
    assert _condition(state) == ("False", "Pending", "late") and _queued(state)
    assert state.workloads["ns0/g"].cluster_queue == "cq0"


def test_an_inactive_or_finished_workload_is_not_put_on_hold() -> None:
    state = _admitted()
    _fold(ev.WorkloadFinished(time=T0 + 5, key="ns0/g", uid="u0"),
          ev.WorkloadOnHoldChanged(time=T0 + 10, key="ns0/g", uid="u0", on_hold=True), state=state)
    assert not on_hold(state.workloads["ns0/g"])


def test_a_stopped_queue_does_not_overwrite_the_hold() -> None:
    """The workload controller's queue-blocker condition (``Suspended`` for a stopped LocalQueue) is not written over
    ``OnHold``: the hold is the StatefulSet's to clear, so the Workload stays out of its queue until then."""
    state = _admitted()
    _fold(ev.WorkloadOnHoldChanged(time=T0 + 10, key="ns0/g", uid="u0", on_hold=True),
          upsert(local_queue("ns0", "lq0", "cq0", stop_policy="Hold"), T0 + 11), state=state)
    settle(state)
    assert _condition(state) == HELD


def _seen(state: ClusterState, *, active: bool, time: int) -> None:
    """The Workload as the apiserver shows it once its ``spec.active`` is set so, its status as last written."""
    shown = msgspec.structs.replace(workload("ns0", "g", uid="u0", cpu="3", active=active),
                                    status=msgspec.convert(status_of(state.workloads["ns0/g"]), o.WorkloadStatus))
    _fold(upsert(shown, time), state=state)


def test_a_held_workload_deactivated_shows_deactivated_and_reactivated_is_queued_again() -> None:
    """Kueue v0.20's workload controller (UnadmittedWorkloadsObservability on) words a deactivated Workload's
    QuotaReserved=False ``Deactivated`` before it keeps ``OnHold`` (``resolveGranularUnadmittedQuotaReservedCondition``:
    inactive first, on hold next; the KEP's tiers put deactivation first): a held Workload deactivated shows it, so
    it is no longer on hold, and once reactivated it is queued as any (its StatefulSet, still at zero, puts it on hold
    again: the pod integration's part, test_statefulset_on_hold.py)."""
    state = _admitted()
    _fold(ev.WorkloadOnHoldChanged(time=T0 + 10, key="ns0/g", uid="u0", on_hold=True), state=state)
    settle(state)
    _seen(state, active=False, time=T0 + 20)
    settle(state)
    assert _condition(state) == ("False", "Deactivated", "The workload is deactivated")
    assert _condition(state, "Evicted") == ("True", "Deactivated", "The workload is deactivated")
    assert not on_hold(state.workloads["ns0/g"]) and not _queued(state)

    _seen(state, active=True, time=T0 + 30)
    settle(state)
    assert state.workloads["ns0/g"].phase == ADMITTED, "no longer on hold, it is queued and admitted"


def test_a_held_workload_deactivated_keeps_the_hold_with_unadmitted_workloads_observability_off() -> None:
    """Without the gate Kueue's legacy resolver words only a blocked queue (``Inadmissible``): a held Workload
    deactivated in a usable queue keeps ``OnHold``."""
    doc = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
           "featureGates": {"UnadmittedWorkloadsObservability": False}}
    config = load_config(doc, "kueue.yaml")
    state = _admitted(ev.ConfigRecorded(time=T0, document=doc))
    _fold(ev.WorkloadOnHoldChanged(time=T0 + 10, key="ns0/g", uid="u0", on_hold=True), state=state)
    settle(state, config)
    _seen(state, active=False, time=T0 + 20)
    settle(state, config)
    assert _condition(state) == HELD
    assert _condition(state, "Evicted") == ("True", "Deactivated", "The workload is deactivated")


def _awaiting_second_pass() -> ClusterState:
    """An admitted TAS workload listing an unhealthy node: its node replacement is a second pass to come."""
    ta = o.TopologyAssignment(levels=["kubernetes.io/hostname"], slices=[o.TopologyAssignmentSlice(
        domain_count=1, values_per_level=[o.TopologyAssignmentSliceLevelValues(universal="n1")],
        pod_counts=o.TopologyAssignmentSlicePodCounts(universal=1))])
    adm = admission("cq0", "f0", 1000)
    adm = msgspec.structs.replace(adm, pod_set_assignments=[msgspec.structs.replace(
        adm.pod_set_assignments[0], topology_assignment=ta)])
    state = _fold(upsert(namespace("ns0"), T0), upsert(flavor("f0"), T0),
                  upsert(cluster_queue("cq0", quotas={"f0": 4}), T0), upsert(local_queue("ns0", "lq0", "cq0"), T0),
                  upsert(workload("ns0", "g", uid="u0", cpu="1"), T0),
                  ev.QuotaReserved(time=T0, key="ns0/g", admission=adm, cycle=1, input=0),
                  ev.WorkloadAdmitted(time=T0, key="ns0/g", cycle=1, input=0),
                  ev.UnhealthyNodesChanged(time=T0 + 1, key="ns0/g", nodes=["n1"], cycle=2, input=0))
    assert "ns0/g" in state.second_pass
    return state


def test_a_hold_takes_the_workloads_second_pass_along() -> None:
    """Put on hold, a workload gives its quota back, so no second pass is left for it: the scheduler, once that pass
    came due, would place a workload with no admission."""
    state = _fold(ev.WorkloadOnHoldChanged(time=T0 + 2, key="ns0/g", uid="u0", on_hold=True),
                  state=_awaiting_second_pass())
    wl = state.workloads["ns0/g"]
    assert on_hold(wl) and wl.admission is None
    assert "ns0/g" not in state.second_pass
    assert not [d for d in decide(state, now=T0 + 60_000) if getattr(d, "key", "") == "ns0/g"]


def test_the_enqueue_s_single_condition_scan_answers_as_the_two_lookups_do() -> None:
    """``held_by_conditions`` (one pass, on the fold's hot path) is ``waits_for_replacement_pods or on_hold`` for
    every list of up to three conditions of the types and values they read, a type repeated included (the first
    one counts)."""
    kinds = [o.Condition(type=t, status=s, reason=r, message="m")
             for t in ("QuotaReserved", WAITING_FOR_REPLACEMENT_PODS, "Evicted")
             for s in ("True", "False") for r in ("OnHold", "PodsFailed")]
    wl = _fold(upsert(workload("ns0", "g", uid="u0", cpu="1"), T0)).workloads["ns0/g"]
    checked = 0
    for n in range(4):
        for conditions in itertools.product(kinds, repeat=n):
            wl.conditions = conditions
            assert held_by_conditions(wl) == (waits_for_replacement_pods(wl) or on_hold(wl)), conditions
            checked += 1
    assert checked == 1 + 12 + 144 + 1728
