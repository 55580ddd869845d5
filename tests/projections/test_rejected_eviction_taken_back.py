"""A preemption or eviction the connector rejects (``DecisionRejected``: a 422, a webhook's 403, a conflict
that invalidated it) never happened: Kueue's ``workload.Evict`` is one status write, and when it fails the
Workload stays admitted, its Job keeps running, and a later cycle decides again. The fold puts the workload
back as it was before the decision, unless something was folded on it since, and decides no eviction of it
again until its next event (the watch showing it anew), so a writer that keeps refusing does not make the
scheduler decide it on every turn."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from fixtures.provflow import T0 as PROV_T0
from fixtures.provflow import Flow

from events import objects as o
from events import schema as ev
from kueue_es.scheduler import decide, next_deadline
from kueue_es.scheduler.config import SchedulerConfig, load_config
from projections import eviction_undo, snapshot
from projections.cluster import ClusterState
from projections.metrics import families
from tests.projections.test_proj_admitted_rejected import KQ, T0
from tests.projections.test_proj_admitted_rejected import OBJECTS as CHECKED


def _workload(name: str, priority: int, created: str) -> dict[str, Any]:
    return {"apiVersion": KQ, "kind": "Workload",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "creationTimestamp": created},
            "spec": {"queueName": "lq", "priority": priority, "podSets": [{
                "name": "main", "count": 1, "template": {
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}}]}}


OBJECTS = [
    # the Namespace ns, the ResourceFlavor f1, the AdmissionCheck approval (another controller's)
    *CHECKED[:3],
    {"apiVersion": KQ, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": {
        "namespaceSelector": {}, "preemption": {"withinClusterQueue": "LowerPriority"},
        "admissionChecksStrategy": {"admissionChecks": [{"name": "approval"}]},
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
            {"name": "f1", "resources": [{"name": "cpu", "nominalQuota": 2}]}]}]}},
    {"apiVersion": KQ, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "ns"},
     "spec": {"clusterQueue": "cq"}},
    _workload("low", 0, "2024-01-01T00:00:00Z"),
]
HIGH = _workload("high", 100, "2024-01-01T00:00:10Z")
CONFIG = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}


class Log:
    """Records folded as appended, at consecutive offsets."""

    def __init__(self) -> None:
        self.state = ClusterState()
        self.records: list[ev.Record] = []

    def append(self, *events: Any) -> int:
        for e in events:
            r = ev.Record(len(self.records), e)
            self.records.append(r)
            self.state.apply(r)
        return len(self.records) - 1


def _upsert(d: dict[str, Any], time: int) -> ev.ObjectUpserted:
    obj = msgspec.convert(d, o.KueueObject)
    return ev.ObjectUpserted(time=time, key=obj.key, obj=obj, uid=obj.metadata.uid)


def _settle(log: Log, config: SchedulerConfig, now: int) -> None:
    for _ in range(20):
        batch = decide(log.state, config, now=now)
        if not batch:
            return
        log.append(*batch)
    raise AssertionError("the scheduler does not settle")


def _low_admitted(config: SchedulerConfig) -> Log:
    """``ns/low`` holds all of cq's quota, its check Ready, admitted."""
    log = Log()
    log.append(*(_upsert(d, T0) for d in OBJECTS))
    _settle(log, config, T0)
    log.append(ev.AdmissionCheckStateChanged(time=T0 + 1000, key="ns/low", check="approval", state="Ready"))
    _settle(log, config, T0 + 1000)
    assert log.state.workloads["ns/low"].phase == "Admitted"
    return log


def _preempted(log: Log, config: SchedulerConfig) -> int:
    """``ns/high`` comes and preempts ``ns/low``: the preemption's offset."""
    log.append(_upsert(HIGH, T0 + 10_000))
    batch = decide(log.state, config, now=T0 + 10_000)
    assert [type(d).__name__ for d in batch] == ["WorkloadPreempted", "WorkloadPending"], batch
    first = len(log.records)
    log.append(*batch)
    assert log.state.workloads["ns/low"].evicted == "Preempted"
    return first


def _rejected(decision: int, time: int = T0 + 10_500) -> ev.DecisionRejected:
    return ev.DecisionRejected(time=time, key="ns/low", uid="uid-low", decision=decision, reason="Forbidden",
                               message='admission webhook "deny.example.com" denied the request')


def _normalized(state: ClusterState) -> bytes:
    """The state's snapshot without what counts the log's records (its offset, the events folded, the
    ClusterQueues' generations): a log with two more events is the same state otherwise."""
    snap = snapshot.take(state)
    snap = msgspec.structs.replace(snap, offset=0, changes=0, generations=[])
    return msgspec.msgpack.encode(snap)


def test_a_rejected_preemption_leaves_the_victim_as_if_it_had_never_been_decided() -> None:
    config = load_config(CONFIG)
    log = _low_admitted(config)
    before = msgspec.structs.replace(log.state.workloads["ns/low"])
    off = _preempted(log, config)
    evicted = log.state.workloads["ns/low"]
    assert evicted.check_states["approval"].state == "Pending"  # reset by the eviction
    log.append(_rejected(off, time=T0 + 10_000))
    low = log.state.workloads["ns/low"]
    assert low.phase == "Admitted" and not low.evicted
    assert low.conditions == before.conditions
    assert low.check_states == before.check_states
    assert low == before
    assert list(log.state.refused_evictions) == ["ns/low"]
    # a preemption is retried at the preemptor's next cycle: after Kueue's loop backoff, 1 ms at first
    assert log.state.refused_evictions["ns/low"] == eviction_undo.Refusal(off, 1, T0 + 10_001)
    assert log.state.unconfirmed_evictions == {}
    # the same state as a log where it was never decided (the preemptor still waits, as it did)
    without = Log()
    for r in log.records:
        if r.offset not in (off, len(log.records) - 1):
            without.append(r.event)
    # (the one thing the rejection leaves)
    without.state.refused_evictions = dict(log.state.refused_evictions)
    assert _normalized(log.state) == _normalized(without.state)
    assert families(log.state) == families(without.state)


@pytest.mark.parametrize("between", ["ns/low", "ns/high"], ids=["of-the-victim", "of-another-workload"])
def test_a_rejected_eviction_is_not_put_back_over_a_later_event_of_its_workload(between: str) -> None:
    """Only an event of the victim itself keeps the eviction (never restored over a later observed fact)."""
    config = load_config(CONFIG)
    log = _low_admitted(config)
    off = _preempted(log, config)
    log.append(ev.PodsReadyChanged(time=T0 + 10_200, key=between, ready=False, reason="WaitForStart"))
    log.append(_rejected(off))
    low = log.state.workloads["ns/low"]
    assert log.state.unconfirmed_evictions == {}
    if between == "ns/high":
        assert low.phase == "Admitted" and not low.evicted
        return
    assert low.evicted == "Preempted"
    assert low.check_states["approval"].state == "Pending"
    assert log.state.refused_evictions == {}


def test_an_applied_preemption_stays() -> None:
    config = load_config(CONFIG)
    log = _low_admitted(config)
    off = _preempted(log, config)
    log.append(ev.DecisionApplied(time=T0 + 10_500, key="ns/low", uid="uid-low", decision=off))
    # one outcome per decision: a stray second one changes nothing
    log.append(_rejected(off, time=T0 + 10_600))
    assert log.state.workloads["ns/low"].evicted == "Preempted"
    assert log.state.unconfirmed_evictions == {}


def test_a_rejection_for_a_recreated_workload_leaves_the_new_object_alone() -> None:
    config = load_config(CONFIG)
    log = _low_admitted(config)
    off = _preempted(log, config)
    again = dict(OBJECTS[-1], metadata={**OBJECTS[-1]["metadata"], "uid": "uid-again"})
    log.append(_upsert(again, T0 + 10_200))
    shown = msgspec.structs.replace(log.state.workloads["ns/low"])
    log.append(_rejected(off))
    assert log.state.workloads["ns/low"] == shown


def test_a_snapshot_at_every_cut_equals_the_full_fold() -> None:
    config = load_config(CONFIG)
    log = _low_admitted(config)
    off = _preempted(log, config)
    log.append(ev.ClockTicked(time=T0 + 10_100))
    log.append(_rejected(off))
    log.append(ev.ClockTicked(time=T0 + 11_000))
    full = snapshot.digest(log.state)
    for cut in range(len(log.records) + 1):
        state = snapshot.decode(snapshot.encode(_fold(log.records[:cut])))
        for r in log.records[cut:]:
            state.apply(r)
        assert snapshot.digest(state) == full, f"snapshot at {cut}"
    assert not log.state.workloads["ns/low"].evicted


def test_a_snapshot_older_than_version_64_remembers_no_eviction_to_take_back() -> None:
    config = load_config(CONFIG)
    log = _low_admitted(config)
    off = _preempted(log, config)
    taken = snapshot.take(log.state)
    assert [u.decision for u in taken.unconfirmed_evictions] == [off]
    old = msgspec.msgpack.encode(msgspec.structs.astuple(msgspec.structs.replace(taken, version=63))[:-3])
    # (version 63's layout: without the last three fields)
    restored = snapshot.decode(old)
    assert restored.unconfirmed_evictions == {}
    restored.apply(ev.Record(off + 2, _rejected(off)))
    assert restored.workloads["ns/low"].evicted == "Preempted"  # stays folded, as before version 64


def _fold(records: list[ev.Record]) -> ClusterState:
    state = ClusterState()
    for r in records:
        state.apply(r)
    return state


# --- no live loop -------------------------------------------------------------------------------------------


def _turns(log: Log, config: SchedulerConfig, now: int, turns: int) -> int:
    """``turns`` turns of the live loop with a writer that refuses every eviction: each turn decides a batch,
    appends it, and the writer rejects each preemption or eviction in it. How many evictions were decided."""
    decided = 0
    for _ in range(turns):
        batch = decide(log.state, config, now=now)
        if not batch:
            continue
        first = len(log.records)
        log.append(*batch)
        for i, d in enumerate(batch):
            if isinstance(d, (ev.WorkloadPreempted, ev.WorkloadEvicted)):
                decided += 1
                log.append(ev.DecisionRejected(time=now, key=d.key, uid=d.uid, decision=first + i,
                                               reason="Forbidden", message="denied"))
    return decided


def _ticks(log: Log, config: SchedulerConfig, start: int, end: int, step: int) -> int:
    """The live loop from ``start`` to ``end``, a clock tick every ``step`` ms, each tick followed by turns
    with a writer that refuses every eviction: how many evictions were decided."""
    decided = 0
    for now in range(start, end, step):
        log.append(ev.ClockTicked(time=now))
        decided += _turns(log, config, now, 5)
    return decided


def _preemptor_shows(log: Log) -> tuple[str, str]:
    """The end of the preemptor's QuotaReserved message and the requeue reason it was last pending for."""
    c = log.state.workloads["ns/high"].condition("QuotaReserved")
    last = next(r.event for r in reversed(log.records)
                if isinstance(r.event, ev.WorkloadPending) and r.event.key == "ns/high")
    assert c is not None and c.message == last.message
    return c.message.rsplit(". ", 1)[-1], last.requeue_reason


def test_a_preemption_refused_for_ever_is_decided_again_at_the_scheduling_loop_s_pace_not_on_every_turn(
) -> None:
    """Kueue requeues a preemptor whose preemption failed onto the heap (RequeueReasonPreemptionFailed, #7665)
    and shows "Preempting N workload(s) failed, will retry."; its next cycle comes after the scheduling loop's
    backoff (1 ms doubling while cycles admit nothing; to 100 ms there, to 10 s here, as each retry is kept in
    the log)."""
    config = load_config(CONFIG)
    log = _low_admitted(config)
    log.append(_upsert(HIGH, T0 + 10_000))
    assert _turns(log, config, T0 + 10_000, 50) == 1
    refusal = log.state.refused_evictions["ns/low"]
    assert (refusal.refusals, refusal.retry_at) == (1, T0 + 10_001)  # 1 ms after the rejection
    assert _preemptor_shows(log) == ("Preempting 1 workload(s) failed, will retry.", "PreemptionFailed")
    records = len(log.records)
    assert _turns(log, config, T0 + 10_000, 50) == 0
    assert len(log.records) == records  # quiet before the backoff ends: nothing more is appended
    assert log.state.workloads["ns/low"].phase == "Admitted"
    assert log.state.workloads["ns/high"].phase == "Pending"
    # with no event of the victim, decided again once the backoff ends, which doubles per rejection in a row
    # up to 10 s: at 1, 2, 4 ... 64 ms after each rejection (7 retries in the first 128 ms), then
    # 128 ms ... 8.192 s
    assert _ticks(log, config, T0 + 10_001, T0 + 10_128, 1) == 7
    assert log.state.refused_evictions["ns/low"].refusals == 8
    # due at 10.255, 10.514, 11.030, 12.062, 14.116, 18.214 s; seen at the next 10 ms tick
    assert _ticks(log, config, T0 + 10_128, T0 + 20_228, 10) == 6
    # then 8.192 s (due 26.410 s), and every 10 s after: one tick a second sees 27.228, 37.228, 47.228,
    # 57.228 s
    assert _ticks(log, config, T0 + 20_228, T0 + 60_228, 1_000) == 4
    assert log.state.refused_evictions["ns/low"].retry_at == T0 + 67_228
    assert _preemptor_shows(log) == ("Preempting 1 workload(s) failed, will retry.", "PreemptionFailed")
    # the watch shows the victim anew (the writer's block lifts): the preemption is decided at once
    low = msgspec.convert(OBJECTS[-1], o.Workload)
    now = T0 + 60_250
    log.append(ev.ObjectUpserted(time=now, key="ns/low", obj=msgspec.structs.replace(
        low, metadata=msgspec.structs.replace(low.metadata, resource_version="7")), uid="uid-low"))
    assert _turns(log, config, now, 50) == 1


def test_a_preemption_whose_refusal_lifts_goes_through_after_the_backoff_with_no_victim_event() -> None:
    config = load_config(CONFIG)
    log = _low_admitted(config)
    log.append(_upsert(HIGH, T0 + 10_000))
    assert _turns(log, config, T0 + 10_000, 50) == 1
    assert next_deadline(log.state, config) == T0 + 10_001  # the live loop is woken for it
    log.append(ev.ClockTicked(time=T0 + 10_001))
    batch = decide(log.state, config)
    assert [type(d).__name__ for d in batch] == ["WorkloadPreempted", "WorkloadPending"], batch
    first = len(log.records)
    log.append(*batch)
    assert _preemptor_shows(log) == ("Pending the preemption of 1 workload(s)", "PendingPreemption")
    log.append(ev.DecisionApplied(time=T0 + 10_100, key="ns/low", uid="uid-low", decision=first))
    assert log.state.workloads["ns/low"].evicted == "Preempted"
    assert "ns/low" not in log.state.refused_evictions


def test_a_pods_ready_timeout_eviction_refused_for_ever_is_not_decided_on_every_turn() -> None:
    config = load_config({**CONFIG, "waitForPodsReady": {"timeout": "1m"}})
    log = _low_admitted(config)  # its pods never ready
    log.append(ev.ClockTicked(time=T0 + 120_000))
    assert _turns(log, config, T0 + 120_000, 50) == 1
    assert log.state.workloads["ns/low"].phase == "Admitted" and not log.state.workloads["ns/low"].evicted
    # decided again after 1 s, then 2 s, 4 s ... (not on every turn)
    assert _ticks(log, config, T0 + 120_001, T0 + 180_000, 100) == 5
    assert log.state.refused_evictions["ns/low"].refusals == 6


def test_at_most_the_limit_of_evictions_awaiting_their_outcome_is_kept_the_oldest_going_first() -> None:
    """A log no connector carries out (a simulation) gets no outcomes: what the fold keeps stays bounded."""
    config = load_config(CONFIG)
    log = _low_admitted(config)
    wl = log.state.workloads["ns/low"]
    kept = eviction_undo.KeptEvictions()
    for decision in range(eviction_undo.UNDO_LIMIT + 2):
        kept.remember(eviction_undo.closed(eviction_undo.opened(decision, wl, None, False), wl))
    assert len(kept) == eviction_undo.UNDO_LIMIT
    assert min(kept) == 2 and max(kept) == eviction_undo.UNDO_LIMIT + 1
    assert kept.awaits_outcome("ns/low")
    for decision in range(2, eviction_undo.UNDO_LIMIT + 1):
        kept.pop(decision)
    assert kept.awaits_outcome("ns/low")  # its last one still kept
    kept.pop(eviction_undo.UNDO_LIMIT + 1)
    assert not kept.awaits_outcome("ns/low") and kept == {}


# --- acted on in the cluster before the outcome -------------------------------------------------------------


def test_an_eviction_whose_provisioning_request_was_deleted_meanwhile_is_not_taken_back() -> None:
    """With CleanupProvisioningRequestsOnEviction (on by default) the live loop's next turn deletes the
    evicted workload's requests before the eviction's outcome is in. That deletion cannot be taken back: a
    rejection then leaves the eviction folded (never a workload admitted with its Ready check's request
    gone)."""
    f = Flow("provisioning-happy-path.yaml")
    f.at(6, [f.request("default/job-a-prov-1", "Accepted")])
    f.at(7, [f.request("default/job-a-prov-1", "Provisioned", message="ready")])
    assert f.state.workloads["default/job-a"].phase == "Admitted"
    base = {"time": PROV_T0 + 8000, "cycle": f.state.last_cycle + 1, "input": len(f.records) - 1}
    off = len(f.records)
    f.append([ev.WorkloadEvicted(key="default/job-a", uid="uid-default/job-a", reason="PodsReadyTimeout",
                                 message="timed out", requeue_at=PROV_T0 + 68_000, requeue_count=1, **base)])
    decided = f.settle(PROV_T0 + 8000)  # the live loop's turn between the decision and its outcome
    assert [type(d).__name__ for d in decided] == ["ProvisioningRequestDeleted"]
    f.append([ev.DecisionRejected(time=PROV_T0 + 8500, key="default/job-a", uid="uid-default/job-a",
                                  decision=off, reason="Forbidden", message="denied")])
    wl = f.state.workloads["default/job-a"]
    assert wl.evicted == "PodsReadyTimeout" and wl.check_states["prov"].state != "Ready"
    assert "default/job-a" not in f.state.refused_evictions
    assert f.state.unconfirmed_evictions == {}


def test_an_event_of_the_victim_retries_its_refused_eviction_at_once_but_keeps_the_count() -> None:
    """controller-runtime forgets a key's failures only once its reconcile succeeds: an event requeues the
    workload at once, and a refused retry then backs off from where it was, not from 1 s again."""
    config = load_config({**CONFIG, "waitForPodsReady": {"timeout": "1m"}})
    log = _low_admitted(config)
    log.append(ev.ClockTicked(time=T0 + 120_000))
    assert _turns(log, config, T0 + 120_000, 50) == 1
    assert _ticks(log, config, T0 + 120_001, T0 + 140_000, 100) == 4  # at 121, 123, 127 and 135 s
    assert log.state.refused_evictions["ns/low"].refusals == 5  # next at 135 + 16 s
    now = T0 + 140_000
    log.append(ev.PodsReadyChanged(time=now, key="ns/low", ready=False, reason="WaitForStart"))
    assert log.state.refused_evictions["ns/low"].retry_at == now  # lifted at once ...
    assert _turns(log, config, now, 50) == 1
    refusal = log.state.refused_evictions["ns/low"]
    assert (refusal.refusals, refusal.retry_at) == (6, now + 32_000)  # ... and the count kept


def test_a_refusal_whose_retry_came_and_went_with_no_eviction_is_forgotten_at_the_next_event() -> None:
    """No eviction decided at its retry: that reconcile succeeded, and the count goes (as does the refusal of
    a workload that holds no quota any more)."""
    config = load_config(CONFIG)
    log = _low_admitted(config)
    off = _preempted(log, config)
    log.append(_rejected(off, time=T0 + 10_000))
    log.append(ev.ObjectDeleted(time=T0 + 10_000, key="ns/high", kind="Workload"))  # the preemptor goes
    assert decide(log.state, config, now=T0 + 10_001) == []
    log.append(ev.PodsReadyChanged(time=T0 + 10_002, key="ns/low", ready=True, reason="PodsReady"))
    assert "ns/low" not in log.state.refused_evictions


@pytest.mark.parametrize("source", ["preemption", "pods-ready-timeout"])
def test_a_scheduler_turn_between_an_eviction_and_its_rejection_still_takes_it_back(source: str) -> None:
    """Real runs decide again between a decision and its outcome (the writer's round trip): a turn that
    decides nothing about the victim leaves the eviction to be taken back, retried after the backoff of its
    kind. (A turn that acts in the cluster for it: the provisioning case below.)"""
    if source == "preemption":
        config = load_config(CONFIG)
        log = _low_admitted(config)
        now, wait = T0 + 10_000, 1
        log.append(_upsert(HIGH, now))
    else:
        config = load_config({**CONFIG, "waitForPodsReady": {"timeout": "1m"}})
        log = _low_admitted(config)
        now, wait = T0 + 120_000, 1000
        log.append(ev.ClockTicked(time=now))
    batch = decide(log.state, config, now=now)
    first = len(log.records)
    log.append(*batch)
    (off,) = [first + i for i, d in enumerate(batch)
              if isinstance(d, (ev.WorkloadPreempted, ev.WorkloadEvicted))]
    log.append(ev.ClockTicked(time=now + 100))
    assert decide(log.state, config, now=now + 100) == []  # the live loop's turn before the outcome
    assert log.state.unconfirmed_evictions.awaits_outcome("ns/low")
    log.append(_rejected(off, time=now + 200))
    low = log.state.workloads["ns/low"]
    assert low.phase == "Admitted" and not low.evicted
    assert not log.state.unconfirmed_evictions.awaits_outcome("ns/low")
    assert log.state.refused_evictions["ns/low"].retry_at == now + 200 + wait
    assert next_deadline(log.state, config) == now + 200 + wait
    log.append(ev.ClockTicked(time=now + 200 + wait))
    again = [d for d in decide(log.state, config)
             if isinstance(d, (ev.WorkloadPreempted, ev.WorkloadEvicted))]
    assert [d.key for d in again] == ["ns/low"]
